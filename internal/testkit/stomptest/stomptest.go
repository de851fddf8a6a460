// Package stomptest provides producers and counting consumers for tests that run
// against real brokers.
package stomptest

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/go-stomp/stomp/v3/frame"
	"github.com/rs/zerolog"

	"github.com/brokernet/brokernet/transport/stomp"
	"github.com/brokernet/brokernet/transport/transporttest"
)

// URI parses s or fails the test.
func URI(tb testing.TB, s string) stomp.URI {
	tb.Helper()
	u, err := stomp.ParseURI(s)
	if err != nil {
		tb.Fatal(err)
	}
	return u
}

// Dial connects to uri or fails the test; the connection is closed at cleanup.
func Dial(tb testing.TB, uri string) *stomp.Conn {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	c, err := stomp.Dial(ctx, URI(tb, uri), stomp.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(c.Abort)
	return c
}

// Message describes one message to send.
type Message struct {
	Headers []string // key, value pairs
	Body    []byte
}

// SendN sends n messages to dest (a STOMP path such as /queue/q) with headers
// seq=from..from+n-1, and waits until the broker confirmed each.
func SendN(tb testing.TB, uri, dest string, from, n int, persistent bool, headers ...string) {
	tb.Helper()
	c := Dial(tb, uri)
	SendOn(tb, c, dest, from, n, persistent, headers...)
	c.Close(context.Background())
}

// SendOn is SendN on an existing connection.
func SendOn(tb testing.TB, c *stomp.Conn, dest string, from, n int, persistent bool, headers ...string) {
	tb.Helper()
	if err := Send(context.Background(), c, dest, from, n, persistent, headers...); err != nil {
		tb.Fatal(err)
	}
}

// Send is the error-returning form of SendOn, for goroutines.
func Send(ctx context.Context, c *stomp.Conn, dest string, from, n int, persistent bool, headers ...string) error {
	return SendBody(ctx, c, dest, from, n, persistent, nil, headers...)
}

// SendBody is Send with body as every message's body (nil: "message SEQ").
func SendBody(ctx context.Context, c *stomp.Conn, dest string, from, n int, persistent bool, body []byte, headers ...string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	sem := make(chan struct{}, 500)
	errs := make(chan error, 500)
	for i := from; i < from+n; i++ {
		b := body
		if b == nil {
			b = []byte("message " + strconv.Itoa(i))
		}
		f := frame.New(frame.SEND, frame.Destination, dest, "seq", strconv.Itoa(i),
			"persistent", strconv.FormatBool(persistent))
		for j := 0; j+1 < len(headers); j += 2 {
			f.Header.Add(headers[j], headers[j+1])
		}
		f.Body = b
		select {
		case sem <- struct{}{}:
		case err := <-errs:
			return err
		case <-ctx.Done():
			return fmt.Errorf("sending: %w", ctx.Err())
		}
		if err := c.WriteReceipt(ctx, f, func(err error) {
			if err != nil {
				errs <- err
			}
			<-sem
		}); err != nil {
			return err
		}
	}
	for i := 0; i < cap(sem); i++ {
		select {
		case sem <- struct{}{}:
		case err := <-errs:
			return err
		case <-ctx.Done():
			return fmt.Errorf("waiting for receipts: %w", ctx.Err())
		}
	}
	return nil
}

// Consumer counts the messages it receives on one subscription. It acknowledges
// each message (ack mode client-individual) after recording it.
type Consumer struct {
	*Counter[*frame.Frame]
	conn    *stomp.Conn
	confirm bool // ACK with a receipt

	// dmu, not mu: a receipt's callback may run on the connection's
	// goroutine while run holds mu, waiting on that connection.
	dmu   sync.Mutex
	doubt map[int]int // seq → messages counted whose ACK is not confirmed

	mu      sync.Mutex
	closing bool
	done    chan struct{}
}

// frameSeq is a frame's seq header.
func frameSeq(f *frame.Frame) (int, bool) {
	s, err := strconv.Atoi(f.Header.Get("seq"))
	return s, err == nil
}

// Subscribe opens a consumer on dest with extra SUBSCRIBE headers (key, value pairs).
// It is closed at cleanup.
func Subscribe(tb testing.TB, uri, dest string, headers ...string) *Consumer {
	tb.Helper()
	return subscribe(tb, uri, dest, false, headers...)
}

// SubscribeConfirmed is Subscribe for a consumer that asks a receipt for each ACK,
// so that a test that kills the broker knows which messages the consumer holds
// in doubt (Redelivered): the broker's successor may hand those out again.
func SubscribeConfirmed(tb testing.TB, uri, dest string, headers ...string) *Consumer {
	tb.Helper()
	return subscribe(tb, uri, dest, true, headers...)
}

func subscribe(tb testing.TB, uri, dest string, confirm bool, headers ...string) *Consumer {
	tb.Helper()
	c := &Consumer{Counter: NewCounter(tb, frameSeq), conn: Dial(tb, uri), confirm: confirm, doubt: map[int]int{}, done: make(chan struct{})}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := c.conn.Subscribe(ctx, "test-sub", dest, "client-individual", headers...); err != nil {
		tb.Fatal(err)
	}
	go c.run()
	tb.Cleanup(c.Close)
	return c
}

func (c *Consumer) run() {
	defer close(c.done)
	for f := range c.conn.Deliveries() {
		c.mu.Lock()
		if c.closing {
			// Not acknowledged: the broker takes it back; it does not count.
			c.mu.Unlock()
			continue
		}
		// The ACK is queued before the message counts, and before any DISCONNECT
		// of Close: a counted message is consumed for good.
		ack := frame.New(frame.ACK, frame.Id, f.Header.Get(frame.Ack))
		if seq, ok := frameSeq(f); c.confirm && ok {
			c.dmu.Lock()
			c.doubt[seq]++
			c.dmu.Unlock()
			c.conn.WriteReceipt(context.Background(), ack, func(err error) {
				if err == nil {
					c.dmu.Lock()
					if c.doubt[seq]--; c.doubt[seq] == 0 {
						delete(c.doubt, seq)
					}
					c.dmu.Unlock()
				}
			})
		} else {
			c.conn.Write(context.Background(), ack)
		}
		c.Add(f)
		c.mu.Unlock()
	}
}

// Close disconnects the consumer (its unacknowledged messages go back to the broker).
func (c *Consumer) Close() {
	c.mu.Lock()
	c.closing = true
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c.conn.Close(ctx)
	<-c.done
}

// Redelivered counts the seqs that c held in doubt when its broker died
// (SubscribeConfirmed: received, the ACK not confirmed) and that appear in
// seqs, each once: the copies the broker's successor delivered again on its
// own.
func (c *Consumer) Redelivered(seqs []int) int {
	c.dmu.Lock()
	doubt := maps.Clone(c.doubt)
	c.dmu.Unlock()
	n := 0
	for _, s := range seqs {
		if doubt[s] > 0 {
			doubt[s] = 0
			n++
		}
	}
	return n
}

// Frames returns a copy of what was received, in order.
func (c *Consumer) Frames() []*frame.Frame { return c.Received() }

// DestroyDurable removes ActiveMQ durable subscription name of client
// clientID on the broker at uri (a STOMP UNSUBSCRIBE with
// activemq.subscriptionName, awaited by its receipt), as a subscriber that
// ends its subscription for good does.
func DestroyDurable(tb testing.TB, uri, clientID, name string) {
	tb.Helper()
	c := Dial(tb, uri+"?clientId="+clientID)
	defer c.Close(context.Background())
	done := make(chan error, 1)
	if err := c.WriteReceipt(context.Background(), frame.New(frame.UNSUBSCRIBE, frame.Id, "x",
		"activemq.subscriptionName", name), func(err error) { done <- err }); err != nil {
		tb.Fatal(err)
	}
	if err := <-done; err != nil {
		tb.Fatal(err)
	}
}

// Eventually polls cond until it returns nil, failing the test with its last
// error at the deadline: transporttest.Eventually, kept here for the tests
// that use this package's producers and consumers.
func Eventually(tb testing.TB, timeout time.Duration, cond func() error) {
	tb.Helper()
	transporttest.Eventually(tb, timeout, cond)
}

// Logger returns a zerolog logger that writes into the test's log, so that a
// failing test shows what the bridge said.
func Logger(t *testing.T) zerolog.Logger {
	w := zerolog.ConsoleWriter{Out: zerolog.TestWriter{T: t, Frame: 6}, NoColor: true, TimeFormat: "15:04:05.000"}
	return zerolog.New(w).Level(zerolog.InfoLevel).With().Timestamp().Logger()
}
