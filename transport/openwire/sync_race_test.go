package openwire

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/brokernet/brokernet/destination"
	"github.com/brokernet/brokernet/internal/testbroker"
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

	const flood = 30000
	prod := dial(t, b.OpenWireURI())
	prodDone := make(chan error, 1)
	go func() {
		for i := 0; i < flood; i++ {
			if err := prod.Send(ctx, &transport.Message{Destination: in, Body: body, Priority: -1}); err != nil {
				prodDone <- err
				return
			}
			if i%200 == 199 {
				if _, err := prod.Commit(ctx); err != nil {
					prodDone <- err
					return
				}
			}
		}
		_, err := prod.Commit(ctx)
		prodDone <- err
	}()
	go func() {
		for range prod.Events() {
		}
	}()

	c := dial(t, b.OpenWireURI())
	if _, err := c.Subscribe(ctx, transport.Subscription{ID: "in", Destination: in, Prefetch: 1000}); err != nil {
		t.Fatal(err)
	}
	received, commits := 0, 0
	var pending []transport.Ref
	tok, err := c.Commit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for received < flood {
		select {
		case ev, ok := <-c.Events():
			if !ok {
				t.Fatalf("connection ended after %d deliveries and %d commits: %v", received, commits, c.Err())
			}
			switch ev.Kind {
			case transport.Delivery:
				received++
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
			t.Fatalf("%d of %d deliveries, %d commits: %v", received, flood, commits, ctx.Err())
		}
	}
	if err := <-prodDone; err != nil {
		t.Fatal(err)
	}
	t.Logf("%d deliveries, %d confirmed commits after a flush, connection up", received, commits)
	if commits < 100 {
		t.Fatalf("only %d commits confirmed", commits)
	}
}
