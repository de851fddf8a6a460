package openwire

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/brokernet/brokernet/advisory"
	"github.com/brokernet/brokernet/destination"
	"github.com/brokernet/brokernet/internal/testkit/stomptest"
	"github.com/brokernet/brokernet/internal/testkit/testbroker"
	"github.com/brokernet/brokernet/transport"
	"github.com/brokernet/brokernet/transport/transporttest"
)

func TestMain(m *testing.M) { testbroker.Main(m) }

func startBroker(t *testing.T, opt testbroker.Options) *testbroker.ActiveMQ {
	t.Helper()
	if testing.Short() {
		t.Skip("needs ActiveMQ")
	}
	return testbroker.StartActiveMQ(t, opt)
}

func dial(t *testing.T, uri string) *Conn {
	t.Helper()
	u, err := ParseURI(uri)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Dial(ctx, u, stomptest.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Abort)
	return c
}

func TestConnectReportsBrokerIdentity(t *testing.T) {
	b := startBroker(t, testbroker.Options{ID: "ow-broker-17"})
	c := dial(t, b.OpenWireURI())
	id, err := c.BrokerID(context.Background())
	if err != nil || id != "ow-broker-17" {
		t.Fatalf("BrokerID = %q, %v; want ow-broker-17", id, err)
	}
	if c.BrokerName() != b.Name() {
		t.Errorf("BrokerName = %q, want %q", c.BrokerName(), b.Name())
	}
	info := c.Info()
	if info.Protocol != "openwire" || info.Flavour != transport.ActiveMQ || info.ConnectionID == "" {
		t.Errorf("Info = %+v", info)
	}
	t.Logf("server %q", info.Server)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, ok := <-c.Events(); ok {
		t.Error("events still open after Close")
	}
}

func TestSendBatchesConsumeAndAck(t *testing.T) {
	b := startBroker(t, testbroker.Options{})
	for _, tight := range []bool{true, false} {
		t.Run(fmt.Sprintf("tight=%v", tight), func(t *testing.T) {
			sendBatchesConsumeAndAck(t, b, fmt.Sprintf("%s?wireFormat.tightEncodingEnabled=%v", b.OpenWireURI(), tight), tight)
		})
	}
}

func sendBatchesConsumeAndAck(t *testing.T, b *testbroker.ActiveMQ, uri string, tight bool) {
	ctx := context.Background()
	p := dial(t, uri)
	if p.tight != tight {
		t.Fatalf("negotiated tight encoding %v, want %v", p.tight, tight)
	}
	q := destination.Destination{Kind: destination.Queue, Name: fmt.Sprintf("ow.batches.%v", tight)}

	// Ten batches of 50 with every commit in flight before any confirmation is read.
	const batches, per = 10, 50
	var toks []transport.Token
	for i := 0; i < batches; i++ {
		for j := 0; j < per; j++ {
			n := i*per + j
			m := &transport.Message{Destination: q, Persistent: true, Priority: -1,
				Body:  []byte(fmt.Sprintf("msg %d", n)),
				Props: []transport.Property{{Name: "n", Value: int32(n)}}}
			if err := p.Send(ctx, m); err != nil {
				t.Fatal(err)
			}
		}
		tok, err := p.Commit(ctx)
		if err != nil {
			t.Fatal(err)
		}
		toks = append(toks, tok)
	}
	for _, tok := range toks {
		if ev, _ := transporttest.WaitToken(t, p, tok); ev.Kind != transport.Confirmed {
			t.Fatalf("commit %d: %+v", tok, ev)
		}
	}

	c := dial(t, uri)
	tok, err := c.Subscribe(ctx, transport.Subscription{ID: "s1", Destination: q, Prefetch: 100})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int32]bool{}
	var refs []transport.Ref
	ev, early := transporttest.WaitToken(t, c, tok)
	if ev.Kind != transport.Confirmed {
		t.Fatalf("subscribe: %+v", ev)
	}
	handle := func(ev transport.Event) {
		if ev.Kind != transport.Delivery {
			t.Fatalf("unexpected event %+v", ev)
		}
		v, _ := ev.Msg.Prop("n")
		n, ok := v.(int32)
		if !ok || string(ev.Msg.Body) != fmt.Sprintf("msg %d", n) || !ev.Msg.Persistent || ev.Msg.Bytes {
			t.Fatalf("delivery %+v", ev.Msg)
		}
		seen[n] = true
		refs = append(refs, ev.Ref)
		if len(refs) == 25 {
			if err := c.Settle(ctx, "s1", refs, transport.Accepted); err != nil {
				t.Fatal(err)
			}
			refs = nil
		}
	}
	for _, ev := range early {
		handle(ev)
	}
	for len(seen) < batches*per {
		handle(transporttest.Next(t, c, 10*time.Second))
	}
	stok, err := c.Sync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ev, rest := transporttest.WaitToken(t, c, stok); ev.Kind != transport.Confirmed || len(rest) != 0 {
		t.Fatalf("sync: %+v, then %d more events", ev, len(rest))
	}
	queueDrained(t, b, q.Name, batches*per)
}

func TestRedeliveryAfterAbort(t *testing.T) {
	b := startBroker(t, testbroker.Options{})
	ctx := context.Background()
	q := destination.Destination{Kind: destination.Queue, Name: "ow.redeliver"}
	p := dial(t, b.OpenWireURI())
	for i := 0; i < 5; i++ {
		if err := p.Send(ctx, &transport.Message{Destination: q, Persistent: true, Priority: -1, Body: []byte("x")}); err != nil {
			t.Fatal(err)
		}
	}
	tok, _ := p.Commit(ctx)
	if ev, _ := transporttest.WaitToken(t, p, tok); ev.Kind != transport.Confirmed {
		t.Fatalf("commit: %+v", ev)
	}
	c1 := dial(t, b.OpenWireURI())
	c1.Subscribe(ctx, transport.Subscription{ID: "a", Destination: q, Prefetch: 10})
	got := 0
	for got < 5 {
		if ev := transporttest.Next(t, c1, 10*time.Second); ev.Kind == transport.Delivery {
			if ev.Msg.Redelivered {
				t.Fatal("first delivery marked redelivered")
			}
			got++
		}
	}
	c1.Abort()
	c2 := dial(t, b.OpenWireURI())
	c2.Subscribe(ctx, transport.Subscription{ID: "b", Destination: q, Prefetch: 10, Ack: transport.Individual})
	var refs []transport.Ref
	for len(refs) < 5 {
		if ev := transporttest.Next(t, c2, 10*time.Second); ev.Kind == transport.Delivery {
			if !ev.Msg.Redelivered {
				t.Fatalf("redelivery not marked: %+v", ev.Msg)
			}
			refs = append(refs, ev.Ref)
		}
	}
	if err := c2.Settle(ctx, "b", refs, transport.Accepted); err != nil {
		t.Fatal(err)
	}
	stok, _ := c2.Sync(ctx)
	transporttest.WaitToken(t, c2, stok)
	queueDrained(t, b, q.Name, 5)
}

func TestAdvisoriesOfStompConsumers(t *testing.T) {
	b := startBroker(t, testbroker.Options{ID: "adv-id"})
	ctx := context.Background()
	c := dial(t, b.OpenWireURI())
	if err := c.WatchConsumers(ctx); err != nil {
		t.Fatal(err)
	}
	sc := stomptest.Subscribe(t, b.StompURI(), "/queue/ow.adv", "selector", "color = 'red'", "activemq.priority", "-3")
	var added advisory.Event
	for {
		ev := transporttest.Next(t, c, 10*time.Second)
		if ev.Kind == transport.BadConsumer {
			t.Fatalf("bad consumer: %v", ev.Err)
		}
		if ev.Kind == transport.Consumer && ev.Consumer.Consumer.Destination.Name == "ow.adv" {
			added = ev.Consumer
			break
		}
	}
	if added.Kind != advisory.ConsumerAdded || added.Consumer.Selector != "color = 'red'" ||
		added.Consumer.Priority != -3 || added.OriginBrokerID != "adv-id" || added.ConsumerCount != 1 ||
		added.Consumer.Destination.Kind != destination.Queue || c.OwnConsumer(added.Consumer.ID) {
		t.Fatalf("added: %+v", added)
	}
	sc.Close()
	for {
		ev := transporttest.Next(t, c, 10*time.Second)
		if ev.Kind == transport.Consumer && ev.Consumer.Kind == advisory.ConsumerRemoved {
			if ev.Consumer.Consumer.ID != added.Consumer.ID {
				t.Fatalf("removed %q, want %q", ev.Consumer.Consumer.ID, added.Consumer.ID)
			}
			break
		}
	}
	// Our own subscription shows up as our own.
	own := destination.Destination{Kind: destination.Topic, Name: "ow.own"}
	c.Subscribe(ctx, transport.Subscription{ID: "own", Destination: own})
	for {
		ev := transporttest.Next(t, c, 10*time.Second)
		if ev.Kind == transport.Consumer && ev.Consumer.Consumer.Destination == own {
			if !c.OwnConsumer(ev.Consumer.Consumer.ID) {
				t.Fatalf("own consumer %q not recognised", ev.Consumer.Consumer.ID)
			}
			break
		}
	}
}

func TestDurableSubscription(t *testing.T) {
	b := startBroker(t, testbroker.Options{})
	ctx := context.Background()
	topic := destination.Destination{Kind: destination.Topic, Name: "ow.durable"}
	uri := b.OpenWireURI() + "?clientId=bn-durable"
	sub := transport.Subscription{ID: "d", Destination: topic, DurableName: "demand", Prefetch: 10}

	c := dial(t, uri)
	watch := dial(t, b.OpenWireURI())
	if err := watch.WatchConsumers(ctx); err != nil {
		t.Fatal(err)
	}
	tok, _ := c.Subscribe(ctx, sub)
	if ev, _ := transporttest.WaitToken(t, c, tok); ev.Kind != transport.Confirmed {
		t.Fatalf("durable subscribe: %+v", ev)
	}
	for {
		ev := transporttest.Next(t, watch, 10*time.Second)
		if ev.Kind == transport.Consumer && ev.Consumer.Consumer.Destination == topic {
			if ev.Consumer.Consumer.SubscriptionName != "demand" || ev.Consumer.Consumer.ClientID != "bn-durable" {
				t.Fatalf("durable advisory: %+v", ev.Consumer)
			}
			break
		}
	}
	if err := c.Unsubscribe(ctx, "d"); err != nil {
		t.Fatal(err)
	}
	// Offline: messages are retained for the subscription.
	p := dial(t, b.OpenWireURI())
	p.Send(ctx, &transport.Message{Destination: topic, Persistent: true, Priority: -1, Body: []byte("kept")})
	ptok, _ := p.Commit(ctx)
	transporttest.WaitToken(t, p, ptok)
	tok, _ = c.Subscribe(ctx, sub)
	got := false
	for !got {
		ev := transporttest.Next(t, c, 10*time.Second)
		if ev.Kind == transport.Delivery && string(ev.Msg.Body) == "kept" {
			got = true
			c.Settle(ctx, "d", []transport.Ref{ev.Ref}, transport.Accepted)
		}
	}
	c.Unsubscribe(ctx, "d")
	stok, _ := c.Sync(ctx)
	transporttest.WaitToken(t, c, stok)
	if err := c.DestroyDurable(ctx, sub); err != nil {
		t.Fatalf("DestroyDurable: %v", err)
	}
	for {
		ev := transporttest.Next(t, watch, 10*time.Second)
		if ev.Kind == transport.Consumer && ev.Consumer.Kind == advisory.DurableRemoved {
			if ev.Consumer.Consumer.SubscriptionName != "demand" || ev.Consumer.Consumer.Destination != topic {
				t.Fatalf("durable removed: %+v", ev.Consumer)
			}
			break
		}
	}
	if err := c.DestroyDurable(ctx, sub); err == nil {
		t.Fatal("destroying a missing durable subscription succeeded")
	}
}

// queueDrained waits until queue holds nothing and n messages were dequeued.
func queueDrained(t *testing.T, b *testbroker.ActiveMQ, queue string, n int64) {
	t.Helper()
	stomptest.Eventually(t, 10*time.Second, func() error {
		st, err := b.QueueStats(context.Background(), queue)
		if err != nil {
			return err
		}
		if st.Size != 0 || st.DequeueCount != n {
			return fmt.Errorf("queue %s: %+v, want size 0 and %d dequeued", queue, st, n)
		}
		return nil
	})
}

func TestAdvisoryOfNativeNetworkConsumer(t *testing.T) {
	b := startBroker(t, testbroker.Options{ID: "net-b"})
	a := startBroker(t, testbroker.Options{ID: "net-a", NetworkConnectors: []string{b.OpenWireURI()}})
	ctx := context.Background()
	c := dial(t, a.OpenWireURI())
	if err := c.WatchConsumers(ctx); err != nil {
		t.Fatal(err)
	}
	stomptest.Subscribe(t, b.StompURI(), "/queue/ow.net")
	for {
		ev := transporttest.Next(t, c, 20*time.Second)
		if ev.Kind == transport.BadConsumer {
			t.Fatalf("bad consumer: %v", ev.Err)
		}
		if ev.Kind == transport.Consumer && ev.Consumer.Consumer.Destination.Name == "ow.net" {
			cons := ev.Consumer.Consumer
			if !cons.Native || len(cons.Path) != 1 || cons.Path[0] != "net-b" || cons.Bridge {
				t.Fatalf("network consumer: %+v", cons)
			}
			return
		}
	}
}

func TestBadSelectorIsRefused(t *testing.T) {
	b := startBroker(t, testbroker.Options{})
	c := dial(t, b.OpenWireURI())
	ctx := context.Background()
	q := destination.Destination{Kind: destination.Queue, Name: "ow.refused"}
	tok, err := c.Subscribe(ctx, transport.Subscription{ID: "x", Destination: q, Selector: "intProp >"})
	if err != nil {
		t.Fatal(err)
	}
	ev, _ := transporttest.WaitToken(t, c, tok)
	if ev.Kind != transport.Refused || ev.Err == nil || !strings.Contains(ev.Err.Error(), "InvalidSelector") {
		t.Fatalf("bad selector: %+v", ev)
	}
	// The connection stays usable and the id is free again.
	tok, _ = c.Subscribe(ctx, transport.Subscription{ID: "x", Destination: q, Selector: "intProp > 1"})
	if ev, _ := transporttest.WaitToken(t, c, tok); ev.Kind != transport.Confirmed {
		t.Fatalf("good selector after a bad one: %+v", ev)
	}
}

func TestKeepAliveHoldsAnIdleConnection(t *testing.T) {
	b := startBroker(t, testbroker.Options{})
	c := dial(t, b.OpenWireURI()+"?wireFormat.maxInactivityDuration=1000")
	if c.inactivity != time.Second {
		t.Fatalf("negotiated inactivity %s, want 1s", c.inactivity)
	}
	select {
	case <-c.Done():
		t.Fatalf("idle connection ended: %v", c.Err())
	case <-time.After(4 * time.Second):
	}
	tok, err := c.Sync(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if ev, _ := transporttest.WaitToken(t, c, tok); ev.Kind != transport.Confirmed {
		t.Fatalf("sync after idling: %+v", ev)
	}
}

// TestSelectorComparesStringHeadersAsNumbers: a message sent over STOMP
// carries its headers as strings; a selector of an OpenWire subscription
// compares them with numbers as a STOMP subscriber's does.
func TestSelectorComparesStringHeadersAsNumbers(t *testing.T) {
	b := startBroker(t, testbroker.Options{})
	stomptest.SendN(t, b.StompURI(), "/queue/ow.strhops", 0, 1, true, "BrokernetHops", "1")
	stomptest.SendN(t, b.StompURI(), "/queue/ow.strhops", 1, 1, true, "BrokernetHops", "5")
	c := dial(t, b.OpenWireURI())
	ctx := context.Background()
	q := destination.Destination{Kind: destination.Queue, Name: "ow.strhops"}
	tok, err := c.Subscribe(ctx, transport.Subscription{ID: "h", Destination: q, Prefetch: 10,
		Selector: "BrokernetHops IS NULL OR BrokernetHops < 3"})
	if err != nil {
		t.Fatal(err)
	}
	// The delivery may come before the subscription's confirmation.
	first, early := transporttest.WaitToken(t, c, tok)
	if first.Kind != transport.Confirmed {
		t.Fatalf("subscribe: %+v", first)
	}
	var ev transport.Event
	found := false
	for _, e := range early {
		if e.Kind == transport.Delivery {
			ev, found = e, true
			break
		}
	}
	for !found {
		ev = transporttest.Next(t, c, 10*time.Second)
		found = ev.Kind == transport.Delivery
	}
	if hops := propString(ev.Msg, "BrokernetHops"); hops != "1" {
		t.Fatalf("delivered the message with BrokernetHops %q, want the one with 1", hops)
	}
}

func propString(m *transport.Message, name string) string {
	for _, p := range m.Props {
		if p.Name == name {
			return fmt.Sprint(p.Value)
		}
	}
	return ""
}
