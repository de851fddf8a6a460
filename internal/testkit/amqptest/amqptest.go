// Package amqptest gives tests AMQP 1.0 producers and consumers for RabbitMQ,
// counting messages by their "seq" application property as stomptest does
// over STOMP.
//
// RabbitMQ 3.10 does not translate between its STOMP and AMQP 1.0 plugins
// faithfully (an AMQP 1.0 message reaches a STOMP consumer as raw sections, a
// STOMP message reaches an AMQP 1.0 consumer without its application headers;
// see the header mapping in docs/protocols.md), so a test of a bridge that speaks AMQP 1.0
// to RabbitMQ produces and consumes there over AMQP 1.0 too. Both are written
// on transport/amqp's Conn, which knows RabbitMQ 3.10's ways (manual link
// credit, durable queue terminus, Sync by round trip).
package amqptest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-stomp/stomp/v3/frame"

	"github.com/brokernet/brokernet/destination"
	"github.com/brokernet/brokernet/internal/testkit/stomptest"
	"github.com/brokernet/brokernet/rabbitmq"
	"github.com/brokernet/brokernet/transport"
	"github.com/brokernet/brokernet/transport/amqp"
	"github.com/brokernet/brokernet/transport/stomp"
)

// Dial opens an AMQP 1.0 connection to uri, aborted at cleanup.
func Dial(tb testing.TB, uri string) *amqp.Conn {
	tb.Helper()
	return dial(tb, uri, false)
}

// dial opens a connection; serverNamed makes its topic subscriptions
// third-party-like (amqp.URI.ServerNamedTopics).
func dial(tb testing.TB, uri string, serverNamed bool) *amqp.Conn {
	tb.Helper()
	u, err := amqp.ParseURI(uri)
	if err != nil {
		tb.Fatal(err)
	}
	u.ServerNamedTopics = serverNamed
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := amqp.DialConn(ctx, u)
	if err != nil {
		tb.Fatalf("dialling %s: %v", u, err)
	}
	tb.Cleanup(c.Abort)
	return c
}

// destinationOf reads a STOMP-spelt destination ("/queue/x", "/topic/x.*").
func destinationOf(tb testing.TB, d string) destination.Destination {
	tb.Helper()
	out, err := destination.FromStomp(d)
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

// Message is message seq as stomptest.SendN makes it: body "message SEQ",
// application property seq, and headers (key, value pairs in STOMP spelling:
// correlation-id, type, priority map to their AMQP 1.0 fields, the rest to
// application properties, as the bridge maps them).
func Message(d destination.Destination, seq int, persistent bool, headers ...string) *transport.Message {
	f := frame.New(frame.MESSAGE, frame.Destination, d.StompPath(), "seq", strconv.Itoa(seq),
		"persistent", strconv.FormatBool(persistent))
	for j := 0; j+1 < len(headers); j += 2 {
		f.Header.Add(headers[j], headers[j+1])
	}
	f.Body = []byte("message " + strconv.Itoa(seq))
	return stomp.MessageOf(f)
}

// SendN sends messages seq from … from+n-1 to dest (STOMP spelling) and waits
// until RabbitMQ accepted every one, failing the test otherwise.
func SendN(tb testing.TB, uri, dest string, from, n int, persistent bool, headers ...string) {
	tb.Helper()
	c := Dial(tb, uri)
	d := destinationOf(tb, dest)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const batch = 250
	pending := map[transport.Token]bool{}
	for i := from; i < from+n; {
		for j := 0; j < batch && i < from+n; j, i = j+1, i+1 {
			if err := c.Send(ctx, Message(d, i, persistent, headers...)); err != nil {
				tb.Fatalf("sending to %s: %v", dest, err)
			}
		}
		tok, err := c.Commit(ctx)
		if err != nil {
			tb.Fatalf("sending to %s: %v", dest, err)
		}
		pending[tok] = true
	}
	for len(pending) > 0 {
		select {
		case ev, ok := <-c.Events():
			if !ok {
				tb.Fatalf("sending to %s: connection ended: %v", dest, c.Err())
			}
			if !pending[ev.Token] {
				continue
			}
			if ev.Kind == transport.Refused {
				tb.Fatalf("sending to %s: refused: %v", dest, ev.Err)
			}
			if ev.Kind == transport.Confirmed {
				for k, o := range ev.Outcomes {
					if o.Outcome != transport.Accepted {
						tb.Fatalf("sending to %s: message %d of a batch not accepted: %+v", dest, k, o)
					}
				}
				delete(pending, ev.Token)
			}
		case <-ctx.Done():
			tb.Fatalf("sending to %s: %d batches unconfirmed: %v", dest, len(pending), ctx.Err())
		}
	}
	cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer ccancel()
	_ = c.Close(cctx)
}

// Consumer counts the messages it receives on one subscription by their seq
// property. It settles (accepts) each message only after counting it.
type Consumer struct {
	*stomptest.Counter[*transport.Message]
	tb   testing.TB
	conn *amqp.Conn

	mu      sync.Mutex
	closing bool
	done    chan struct{}

	mgmt   string
	queues []string // a topic subscriber's queue, deleted at Close
}

// topicQueues lists the server-named queues bound to amq.topic with key.
func topicQueues(tb testing.TB, mgmt, key string) map[string]bool {
	tb.Helper()
	var bs []struct {
		Source, Destination string
		RoutingKey          string `json:"routing_key"`
	}
	if err := json.Unmarshal(manage(tb, mgmt, "GET", "/api/bindings/%2F", ""), &bs); err != nil {
		tb.Fatalf("bindings: %v", err)
	}
	out := map[string]bool{}
	for _, b := range bs {
		if b.Source == "amq.topic" && b.RoutingKey == key && strings.HasPrefix(b.Destination, "amq.gen-") {
			out[b.Destination] = true
		}
	}
	return out
}

// manage makes one management API request and returns the response body,
// failing the test unless it succeeds.
func manage(tb testing.TB, mgmt, method, path, body string) []byte {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, mgmt+path, strings.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	req.SetBasicAuth("guest", "guest")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	msg, err := io.ReadAll(resp.Body)
	if method == "DELETE" && resp.StatusCode == http.StatusNotFound {
		return nil // gone already
	}
	if err != nil || resp.StatusCode/100 != 2 {
		tb.Fatalf("%s %s: %s: %s %v", method, path, resp.Status, msg, err)
	}
	return msg
}

// Subscribe opens a consumer on dest (STOMP spelling) with a prefetch of 100.
// It is closed at cleanup.
//
// A topic subscriber's source "/exchange/amq.topic/KEY" makes RabbitMQ 3.10
// declare a server-named queue (amq.gen-…) bound with KEY, which it deletes
// neither on detach nor on connection close (measured: not exclusive, not
// auto-delete): left alone it would stay bound, collecting messages, and look
// like a subscriber for ever. So the consumer finds its queue through the
// management API (mgmt, user guest) and deletes it at Close. (The bridge's
// own topic subscriptions use a queue of their connection instead, which the
// demand source does not count as demand; a test subscriber must count.)
func Subscribe(tb testing.TB, uri, mgmt, dest string) *Consumer {
	tb.Helper()
	c := &Consumer{Counter: stomptest.NewCounter(tb, Seq), tb: tb, conn: dial(tb, uri, true), done: make(chan struct{})}
	d := destinationOf(tb, dest)
	var key string
	var before map[string]bool
	if d.Kind == destination.Topic {
		k, err := rabbitmq.Address(d, rabbitmq.AMQP10)
		if err != nil {
			tb.Fatal(err)
		}
		key = strings.TrimPrefix(k, "/topic/")
		c.mgmt = mgmt
		before = topicQueues(tb, mgmt, key)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	tok, err := c.conn.Subscribe(ctx, transport.Subscription{
		ID: "test-sub", Destination: d, Prefetch: 100, Ack: transport.Individual,
	})
	if err != nil {
		tb.Fatalf("subscribing to %s: %v", dest, err)
	}
	// Deliveries may come before the subscription's confirmation.
	var early []transport.Event
	for confirmed := false; !confirmed; {
		select {
		case ev, ok := <-c.conn.Events():
			if !ok {
				tb.Fatalf("subscribing to %s: connection ended: %v", dest, c.conn.Err())
			}
			switch {
			case ev.Kind == transport.Delivery:
				early = append(early, ev)
			case ev.Token == tok && ev.Kind == transport.Refused:
				tb.Fatalf("subscribing to %s: refused: %v", dest, ev.Err)
			case ev.Token == tok && ev.Kind == transport.Confirmed:
				confirmed = true
			}
		case <-ctx.Done():
			tb.Fatalf("subscribing to %s: not confirmed: %v", dest, ctx.Err())
		}
	}
	if key != "" {
		for q := range topicQueues(tb, mgmt, key) {
			if !before[q] {
				c.queues = append(c.queues, q)
			}
		}
	}
	for _, ev := range early {
		c.deliver(ev)
	}
	go c.run()
	tb.Cleanup(c.Close)
	return c
}

func (c *Consumer) run() {
	defer close(c.done)
	for ev := range c.conn.Events() {
		if ev.Kind == transport.Delivery {
			c.deliver(ev)
		}
	}
}

func (c *Consumer) deliver(ev transport.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closing {
		// Not settled: the broker takes it back; it does not count.
		return
	}
	c.Add(ev.Msg)
	// Settled under the lock, so Close (which round-trips before closing)
	// cannot come between counting and settling.
	_ = c.conn.Settle(context.Background(), ev.Sub, []transport.Ref{ev.Ref}, transport.Accepted)
}

// Seq is m's seq property.
func Seq(m *transport.Message) (int, bool) {
	for _, p := range m.Props {
		if p.Name == "seq" {
			s, err := strconv.Atoi(fmt.Sprint(p.Value))
			return s, err == nil
		}
	}
	return 0, false
}

// Close closes the connection after a round trip (its unsettled messages go
// back to the broker).
func (c *Consumer) Close() {
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		<-c.done
		return
	}
	c.closing = true
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = c.conn.Close(ctx)
	<-c.done
	for _, q := range c.queues {
		manage(c.tb, c.mgmt, "DELETE", "/api/queues/%2F/"+url.PathEscape(q), "")
	}
}

// Messages returns what was received, in order.
func (c *Consumer) Messages() []*transport.Message { return c.Received() }
