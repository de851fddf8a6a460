package amqp

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"testing"
	"time"

	goamqp "github.com/Azure/go-amqp"

	"github.com/brokernet/brokernet/destination"
	"github.com/brokernet/brokernet/internal/testkit/stomptest"
	"github.com/brokernet/brokernet/internal/testkit/testbroker"
	"github.com/brokernet/brokernet/rabbitmq"
	"github.com/brokernet/brokernet/rabbitmq/mgmt"
	"github.com/brokernet/brokernet/transport"
	"github.com/brokernet/brokernet/transport/transporttest"
)

func topic(name string) destination.Destination {
	return destination.Destination{Kind: destination.Topic, Name: name}
}

// mgmtURI is r's AMQP URI with its management URL.
func mgmtURI(r *testbroker.RabbitMQ) string {
	return r.AMQPURI() + "?management=" + url.QueryEscape(r.ManagementURL())
}

func mgmtClient(t *testing.T, r *testbroker.RabbitMQ) *mgmt.Client {
	t.Helper()
	mc, err := mgmt.New(r.ManagementURL(), "guest", "guest", nil)
	if err != nil {
		t.Fatal(err)
	}
	return mc
}

// bound lists the routing keys binding queue q to amq.topic, and every queue
// bound to amq.topic with one of keys.
func bound(t *testing.T, mc *mgmt.Client, q string, keys ...string) (qKeys []string, others []string) {
	t.Helper()
	bs, err := mc.Bindings(context.Background(), "/")
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bs {
		if b.Source != rabbitmq.TopicExchange {
			continue
		}
		if b.Destination == q {
			qKeys = append(qKeys, b.RoutingKey)
		} else if slices.Contains(keys, b.RoutingKey) {
			others = append(others, b.Destination)
		}
	}
	slices.Sort(qKeys)
	return qKeys, others
}

func queueExists(t *testing.T, mc *mgmt.Client, name string) bool {
	t.Helper()
	ok, err := mc.QueueExists(context.Background(), "/", name)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// TestTopicQueueGoesWithSubscriptions: topic subscriptions of a connection
// share one queue, bound once per key, that goes with the last subscription
// and with the connection; a message matching two subscriptions arrives once,
// with its own topic. Before, RabbitMQ 3.10 left an amq.gen queue per topic
// subscription, bound and filling, after unsubscribe and close.
func TestTopicQueueGoesWithSubscriptions(t *testing.T) {
	r := sharedRabbit(t)
	mc := mgmtClient(t, r)
	c := dial(t, mgmtURI(r))
	ctx := context.Background()
	q := c.topics.name
	for _, sub := range [][2]string{{"ta", "tq.a"}, {"tw", "tq.*"}} {
		tok, err := c.Subscribe(ctx, transport.Subscription{ID: sub[0], Destination: topic(sub[1]), Prefetch: 100})
		if err != nil {
			t.Fatal(err)
		}
		if ev, _ := transporttest.WaitToken(t, c, tok); ev.Kind != transport.Confirmed {
			t.Fatalf("subscription %s: %v", sub[0], ev.Err)
		}
	}
	keys, others := bound(t, mc, q, "tq.a", "tq.*")
	if !slices.Equal(keys, []string{"tq.*", "tq.a"}) || len(others) > 0 {
		t.Fatalf("after subscribing: %s bound with %q, other queues bound with our keys: %q", q, keys, others)
	}

	// 10 on tq.a (both subscriptions match), 5 on tq.b; and one published by
	// a plain AMQP 1.0 client without a properties section, whose topic
	// RabbitMQ puts in subject.
	p := dial(t, r.AMQPURI())
	for i := 0; i < 15; i++ {
		d := "tq.a"
		if i >= 10 {
			d = "tq.b"
		}
		if err := p.Send(ctx, textMsg(topic(d), strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
	}
	tok, _ := p.Commit(ctx)
	if ev, _ := transporttest.WaitToken(t, p, tok); ev.Kind != transport.Confirmed || ev.Outcomes != nil {
		t.Fatalf("sending: %+v", ev)
	}
	raw := rawConn(t, r)
	rs, err := raw.NewSession(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	snd, err := rs.NewSender(ctx, "/exchange/amq.topic/tq.b", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := snd.Send(ctx, goamqp.NewMessage([]byte("plain")), nil); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{} // body -> topic
	for len(got) < 16 {
		ev := transporttest.Next(t, c, 30*time.Second)
		if ev.Kind != transport.Delivery {
			continue
		}
		body := string(ev.Msg.Body)
		if prev, dup := got[body]; dup {
			t.Fatalf("message %q delivered twice (%s, then %s on %s)", body, prev, ev.Msg.Destination, ev.Sub)
		}
		got[body] = ev.Msg.Destination.String()
		if err := c.Settle(ctx, ev.Sub, []transport.Ref{ev.Ref}, transport.Accepted); err != nil {
			t.Fatal(err)
		}
	}
	for body, d := range got {
		want := "topic://tq.a"
		if n, err := strconv.Atoi(body); err != nil || n >= 10 {
			want = "topic://tq.b"
		}
		if d != want {
			t.Errorf("message %q read as on %s, want %s", body, d, want)
		}
	}
	// Nothing more (no copy) within a round trip of the other subscription.
	stok, _ := c.Sync(ctx)
	if _, extra := transporttest.WaitToken(t, c, stok); len(extra) > 0 {
		t.Fatalf("%d more events after all 16 messages: %+v", len(extra), extra[0])
	}

	if err := c.Unsubscribe(ctx, "ta"); err != nil {
		t.Fatal(err)
	}
	stomptest.Eventually(t, 20*time.Second, func() error {
		if keys, _ := bound(t, mc, q); !slices.Equal(keys, []string{"tq.*"}) {
			return fmt.Errorf("after unsubscribing tq.a, %s is bound with %q", q, keys)
		}
		return nil
	})
	if err := c.Unsubscribe(ctx, "tw"); err != nil {
		t.Fatal(err)
	}
	stomptest.Eventually(t, 20*time.Second, func() error {
		if queueExists(t, mc, q) {
			return fmt.Errorf("%s still exists after its last subscription ended", q)
		}
		return nil
	})

	// Subscribed again: the queue comes back, and goes with Close.
	tok, err = c.Subscribe(ctx, transport.Subscription{ID: "tc", Destination: topic("tq.c"), Prefetch: 10})
	if err != nil {
		t.Fatal(err)
	}
	if ev, _ := transporttest.WaitToken(t, c, tok); ev.Kind != transport.Confirmed {
		t.Fatalf("subscription tc: %v", ev.Err)
	}
	if keys, _ := bound(t, mc, q); !slices.Equal(keys, []string{"tq.c"}) {
		t.Fatalf("resubscribed: %s bound with %q", q, keys)
	}
	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := c.Close(cctx); err != nil {
		t.Fatal(err)
	}
	if queueExists(t, mc, q) {
		t.Fatalf("%s still exists after Close", q)
	}
	if _, others := bound(t, mc, "", "tq.a", "tq.*", "tq.c"); len(others) > 0 {
		t.Fatalf("queues left bound with our keys: %q", others)
	}
}

// rawConn is a plain go-amqp connection to r, closed at cleanup.
func rawConn(t *testing.T, r *testbroker.RabbitMQ) *goamqp.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	raw, err := goamqp.Dial(ctx, "amqp://"+r.AMQPAddr(), &goamqp.ConnOptions{SASLType: goamqp.SASLTypePlain("guest", "guest")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close() })
	return raw
}

// TestTopicQueueSweep: a connection deletes at dial the topic queues that
// earlier runs left without consumers (a crash), and only those: a topic
// queue with a consumer and other queues stay.
func TestTopicQueueSweep(t *testing.T) {
	r := sharedRabbit(t)
	mc := mgmtClient(t, r)
	ctx := context.Background()
	const (
		left  = topicQueuePrefix + "0000dead" + topicQueueSuffix
		live  = topicQueuePrefix + "00001ive" + topicQueueSuffix
		other = "amqp.sweep.other"
	)
	// A crashed run's queue: declared by its link, which is then gone
	// without the queue being deleted.
	crashed := rawConn(t, r)
	s, err := crashed.NewSession(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{left, other} {
		if _, err := s.NewReceiver(ctx, "/queue/"+q, &goamqp.ReceiverOptions{Credit: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if err := mc.Bind(ctx, "/", rabbitmq.TopicExchange, left, "sweep.k"); err != nil {
		t.Fatal(err)
	}
	crashed.Close()
	// A live one: its consumer stays.
	s2, err := rawConn(t, r).NewSession(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s2.NewReceiver(ctx, "/queue/"+live, &goamqp.ReceiverOptions{Credit: 1}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, q := range []string{live, other} {
			_, _ = mc.DeleteQueue(context.Background(), "/", q, false)
		}
	})
	for _, q := range []string{left, live, other} {
		if !queueExists(t, mc, q) {
			t.Fatalf("setup: %s missing", q)
		}
	}

	dial(t, mgmtURI(r))
	stomptest.Eventually(t, 30*time.Second, func() error {
		if queueExists(t, mc, left) {
			return fmt.Errorf("%s, left without consumer, not swept", left)
		}
		return nil
	})
	for _, q := range []string{live, other} {
		if !queueExists(t, mc, q) {
			t.Errorf("%s was deleted by the sweep", q)
		}
	}
}

// TestTopicQueueGoesWithALostConnection: a connection that ends otherwise than
// by Close (Abort, a lost socket) still deletes its topic queue, in the
// background.
func TestTopicQueueGoesWithALostConnection(t *testing.T) {
	r := sharedRabbit(t)
	mc := mgmtClient(t, r)
	ctx := context.Background()
	for _, end := range []string{"abort", "socket lost"} {
		c := dial(t, mgmtURI(r))
		tok, err := c.Subscribe(ctx, transport.Subscription{ID: "tl", Destination: topic("tl.x"), Prefetch: 10})
		if err != nil {
			t.Fatal(err)
		}
		if ev, _ := transporttest.WaitToken(t, c, tok); ev.Kind != transport.Confirmed {
			t.Fatalf("%s: subscription: %v", end, ev.Err)
		}
		q := c.topics.name
		if !queueExists(t, mc, q) {
			t.Fatalf("%s: %s missing while subscribed", end, q)
		}
		if end == "abort" {
			c.Abort()
		} else {
			c.conn.Close() // as if the socket died: go-amqp's connection ends under the Conn
		}
		<-c.Done()
		stomptest.Eventually(t, 20*time.Second, func() error {
			if queueExists(t, mc, q) {
				return fmt.Errorf("%s: %s still exists after the connection ended", end, q)
			}
			return nil
		})
	}
}
