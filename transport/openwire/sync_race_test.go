package openwire

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/brokernet/brokernet/destination"
	"github.com/brokernet/brokernet/internal/testkit/testbroker"
	"github.com/brokernet/brokernet/transport"
)

// TestConfirmationsWhileTheBrokerDispatches confirms batches of
// non-persistent messages (Send, Flush, Commit) on a connection to which the
// broker keeps dispatching a stream of messages, as a bridge's local
// connection does. ActiveMQ 5.17 answers a KeepAliveInfo that asks for a
// response from its reader thread, below the MutexTransport that orders its
// other writes (AbstractInactivityMonitor.onCommand): such an echo could
// interleave with a dispatch and desynchronise the stream (a frame size read
// from the middle of a frame). The connection must stay up and every
// commit be confirmed.
func TestConfirmationsWhileTheBrokerDispatches(t *testing.T) {
	b := startBroker(t, testbroker.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	in := destination.Destination{Kind: destination.Queue, Name: "ow.race.in"}
	out := destination.Destination{Kind: destination.Queue, Name: "ow.race.out"}
	body := make([]byte, 1024)

	// The producer floods until the commits are done (at most maxFlood),
	// at most maxAhead messages ahead of the consumer: a backlog that fills
	// the broker's memory (64 MB) would block the consumer connection's own
	// transacted send (producer flow control), and with it its acks.
	const commitsWanted, maxFlood, maxAhead = 200, 1000000, 20000
	var received atomic.Int64
	prod := dial(t, b.OpenWireURI())
	prodDone := make(chan error, 1)
	stop := make(chan struct{})
	go func() {
		for i := 0; i < maxFlood; i++ {
			select {
			case <-stop:
				prodDone <- nil
				return
			default:
			}
			if err := prod.Send(ctx, &transport.Message{Destination: in, Body: body, Priority: -1}); err != nil {
				prodDone <- err
				return
			}
			for int64(i)-received.Load() > maxAhead {
				select {
				case <-stop:
					prodDone <- nil
					return
				case <-time.After(time.Millisecond):
				}
			}
			if i%200 == 199 {
				// Each batch waits for its confirmation: the flood is
				// paced by the broker, not by the test's CPU.
				tok, err := prod.Commit(ctx)
				if err == nil {
					err = waitConfirmed(ctx, prod, tok)
				}
				if err != nil {
					prodDone <- err
					return
				}
			}
		}
		prodDone <- nil
	}()

	c := dial(t, b.OpenWireURI())
	if _, err := c.Subscribe(ctx, transport.Subscription{ID: "in", Destination: in, Prefetch: 1000}); err != nil {
		t.Fatal(err)
	}
	commits := 0
	var pending []transport.Ref
	tok, err := c.Commit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for commits < commitsWanted {
		select {
		case ev, ok := <-c.Events():
			if !ok {
				t.Fatalf("connection ended after %d deliveries and %d commits: %v", received.Load(), commits, c.Err())
			}
			switch ev.Kind {
			case transport.Delivery:
				received.Add(1)
				pending = append(pending, ev.Ref)
				if len(pending) >= 100 {
					if err := c.Settle(ctx, "in", pending, transport.Accepted); err != nil {
						t.Fatal(err)
					}
					pending = pending[:0]
				}
			case transport.Confirmed, transport.Refused:
				if ev.Token != tok {
					continue
				}
				if ev.Kind != transport.Confirmed {
					t.Fatalf("commit %d: %+v", commits, ev)
				}
				commits++
				// One message, written out, then confirmed by the next Commit.
				if err := c.Send(ctx, &transport.Message{Destination: out, Body: []byte(fmt.Sprint(commits)), Priority: -1}); err != nil {
					t.Fatal(err)
				}
				if err := c.Flush(ctx); err != nil {
					t.Fatal(err)
				}
				if tok, err = c.Commit(ctx); err != nil {
					t.Fatal(err)
				}
			}
		case <-ctx.Done():
			t.Fatalf("%d deliveries, %d of %d commits: %v", received.Load(), commits, commitsWanted, ctx.Err())
		}
	}
	close(stop)
	if err := <-prodDone; err != nil {
		t.Fatal(err)
	}
	t.Logf("%d deliveries while %d commits after a flush were confirmed, connection up", received.Load(), commits)
	if received.Load() == 0 {
		t.Fatal("the broker dispatched nothing meanwhile")
	}
}

// waitConfirmed reads c's events until tok is confirmed.
func waitConfirmed(ctx context.Context, c *Conn, tok transport.Token) error {
	for {
		select {
		case ev, ok := <-c.Events():
			if !ok {
				return c.Err()
			}
			if ev.Token == tok && (ev.Kind == transport.Confirmed || ev.Kind == transport.Refused) {
				if ev.Kind == transport.Refused {
					return fmt.Errorf("refused: %v", ev.Err)
				}
				return nil
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
