package amqp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	goamqp "github.com/Azure/go-amqp"
	"github.com/go-stomp/stomp/v3"

	"github.com/brokernet/brokernet/destination"
	"github.com/brokernet/brokernet/internal/testkit/stomptest"
	"github.com/brokernet/brokernet/internal/testkit/testbroker"
	"github.com/brokernet/brokernet/transport"
	"github.com/brokernet/brokernet/transport/transporttest"
)

// One RabbitMQ node is shared by the tests that do not stop it.
var shared struct {
	once sync.Once
	node *testbroker.RabbitMQ
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.node != nil {
		shared.node.Close()
	}
	os.Exit(code)
}

func sharedRabbit(t *testing.T) *testbroker.RabbitMQ {
	t.Helper()
	if testing.Short() {
		t.Skip("needs RabbitMQ (skipped under -short)")
	}
	shared.once.Do(func() {
		dir, err := os.MkdirTemp("", "amqp-rabbit-")
		if err != nil {
			shared.err = err
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), testbroker.DefaultRabbitStartTimeout)
		defer cancel()
		shared.node, shared.err = testbroker.StartRabbit(ctx, dir, testbroker.RabbitOptions{Name: "amqpt" + strconv.Itoa(os.Getpid())})
	})
	if shared.err != nil {
		t.Fatalf("starting RabbitMQ: %v", shared.err)
	}
	return shared.node
}

func dial(t *testing.T, uri string) *Conn {
	t.Helper()
	u, err := ParseURI(uri)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := DialConn(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Abort)
	return c
}

func queue(name string) destination.Destination {
	return destination.Destination{Kind: destination.Queue, Name: name}
}

func textMsg(d destination.Destination, body string) *transport.Message {
	return &transport.Message{Destination: d, Persistent: true, Priority: -1, Body: []byte(body),
		Props: []transport.Property{{Name: "n", Value: body}}}
}

// queueDepth is the queue's messages (ready + unacknowledged) per rabbitmqctl.
func queueDepth(t *testing.T, r *testbroker.RabbitMQ, name string) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := r.Ctl(ctx, "list_queues", "-q", "--no-table-headers", "name", "messages")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) == 2 && f[0] == name {
			return strconv.Atoi(f[1])
		}
	}
	return 0, fmt.Errorf("queue %s not listed in %q", name, out)
}

// TestSendReceiveSettle sends 5,000 persistent messages in batches with all
// transfers in flight, checks every batch is confirmed accepted, then receives
// them with credit = prefetch, accepts them, and checks none is lost, none
// left on the queue after Sync.
func TestSendReceiveSettle(t *testing.T) {
	r := sharedRabbit(t)
	c := dial(t, r.AMQPURI())
	if c.Info().Flavour != transport.RabbitMQ || c.Info().Selectors {
		t.Fatalf("info = %+v, want RabbitMQ without selectors", c.Info())
	}
	if id, err := c.BrokerID(context.Background()); err != nil || id == "" {
		t.Fatalf("BrokerID = %q, %v", id, err)
	}
	ctx := context.Background()
	q := queue("amqp.send5000")
	const total, batch = 5000, 500
	var toks []transport.Token
	start := time.Now()
	for i := 0; i < total; i++ {
		if err := c.Send(ctx, textMsg(q, strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
		if (i+1)%batch == 0 {
			tok, err := c.Commit(ctx)
			if err != nil {
				t.Fatal(err)
			}
			toks = append(toks, tok)
		}
	}
	for _, tok := range toks {
		ev, _ := transporttest.WaitToken(t, c, tok)
		if ev.Kind != transport.Confirmed || ev.Outcomes != nil {
			t.Fatalf("batch %d: %+v", tok, ev)
		}
	}
	t.Logf("sent and confirmed %d in %s", total, time.Since(start))

	start = time.Now()
	sub, err := c.Subscribe(ctx, transport.Subscription{ID: "s1", Destination: q, Prefetch: 200})
	if err != nil {
		t.Fatal(err)
	}
	ev, _ := transporttest.WaitToken(t, c, sub)
	if ev.Kind != transport.Confirmed {
		t.Fatalf("subscribe: %+v", ev)
	}
	seen := map[string]bool{}
	var refs []transport.Ref
	for len(seen) < total {
		ev := transporttest.Next(t, c, 10*time.Second)
		if ev.Kind != transport.Delivery {
			t.Fatalf("unexpected %+v", ev)
		}
		if got := ev.Msg.PropString("n"); got != string(ev.Msg.Body) || !ev.Msg.Persistent || ev.Msg.Bytes {
			t.Fatalf("message %q: prop n=%q persistent=%v bytes=%v", ev.Msg.Body, got, ev.Msg.Persistent, ev.Msg.Bytes)
		}
		seen[string(ev.Msg.Body)] = true
		refs = append(refs, ev.Ref)
		if len(refs) == 50 {
			if err := c.Settle(ctx, "s1", refs, transport.Accepted); err != nil {
				t.Fatal(err)
			}
			refs = nil
		}
	}
	if err := c.Settle(ctx, "s1", refs, transport.Accepted); err != nil {
		t.Fatal(err)
	}
	tok, err := c.Sync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ev, _ := transporttest.WaitToken(t, c, tok); ev.Kind != transport.Confirmed {
		t.Fatalf("sync: %+v", ev)
	}
	t.Logf("received and accepted %d in %s", total, time.Since(start))
	if n, err := queueDepth(t, r, q.Name); err != nil || n != 0 {
		t.Fatalf("after Sync the queue holds %d (%v), want 0", n, err)
	}
	if err := c.Unsubscribe(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := c.Close(cctx); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(c.Err(), transport.ErrClosed) {
		t.Fatalf("Err after Close = %v", c.Err())
	}
}

// TestReleaseRedelivers releases deliveries and gets them again, marked redelivered.
func TestReleaseRedelivers(t *testing.T) {
	r := sharedRabbit(t)
	c := dial(t, r.AMQPURI())
	ctx := context.Background()
	q := queue("amqp.release")
	for i := 0; i < 10; i++ {
		if err := c.Send(ctx, textMsg(q, strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
	}
	tok, _ := c.Commit(ctx)
	if ev, _ := transporttest.WaitToken(t, c, tok); ev.Kind != transport.Confirmed || ev.Outcomes != nil {
		t.Fatalf("commit: %+v", ev)
	}
	sub, _ := c.Subscribe(ctx, transport.Subscription{ID: "r", Destination: q, Prefetch: 10})
	transporttest.WaitToken(t, c, sub)
	released := 0
	accepted := map[string]bool{}
	redelivered := 0
	for len(accepted) < 10 {
		ev := transporttest.Next(t, c, 10*time.Second)
		if ev.Kind != transport.Delivery {
			continue
		}
		if ev.Msg.Redelivered {
			redelivered++
		}
		if released < 5 && !ev.Msg.Redelivered {
			released++
			if err := c.Settle(ctx, "r", []transport.Ref{ev.Ref}, transport.Released); err != nil {
				t.Fatal(err)
			}
			continue
		}
		accepted[string(ev.Msg.Body)] = true
		if err := c.Settle(ctx, "r", []transport.Ref{ev.Ref}, transport.Accepted); err != nil {
			t.Fatal(err)
		}
	}
	if redelivered != 5 {
		t.Fatalf("%d redelivered deliveries, want the 5 released", redelivered)
	}
	stok, _ := c.Sync(ctx)
	transporttest.WaitToken(t, c, stok)
	if n, err := queueDepth(t, r, q.Name); err != nil || n != 0 {
		t.Fatalf("queue holds %d (%v), want 0", n, err)
	}
}

// TestUnsubscribeReturnsUnsettled checks that deliveries handed out and not
// settled go back to the queue when the subscription closes, though the
// connection stays.
func TestUnsubscribeReturnsUnsettled(t *testing.T) {
	r := sharedRabbit(t)
	c := dial(t, r.AMQPURI())
	ctx := context.Background()
	q := queue("amqp.unsub")
	for i := 0; i < 20; i++ {
		_ = c.Send(ctx, textMsg(q, strconv.Itoa(i)))
	}
	tok, _ := c.Commit(ctx)
	transporttest.WaitToken(t, c, tok)
	sub, _ := c.Subscribe(ctx, transport.Subscription{ID: "u", Destination: q, Prefetch: 5})
	transporttest.WaitToken(t, c, sub)
	var held []transport.Ref
	for len(held) < 5 {
		if ev := transporttest.Next(t, c, 10*time.Second); ev.Kind == transport.Delivery {
			held = append(held, ev.Ref)
		}
	}
	if err := c.Unsubscribe(ctx, "u"); err != nil {
		t.Fatal(err)
	}
	// Settling what Unsubscribe gave back is harmless.
	if err := c.Settle(ctx, "u", held, transport.Accepted); err != nil {
		t.Fatalf("settling deliveries of a closed subscription: %v", err)
	}
	other := dial(t, r.AMQPURI())
	sub2, _ := other.Subscribe(ctx, transport.Subscription{ID: "u2", Destination: q, Prefetch: 100})
	transporttest.WaitToken(t, other, sub2)
	seen := map[string]bool{}
	for len(seen) < 20 {
		ev := transporttest.Next(t, other, 10*time.Second)
		if ev.Kind == transport.Delivery {
			seen[string(ev.Msg.Body)] = true
			_ = other.Settle(ctx, "u2", []transport.Ref{ev.Ref}, transport.Accepted)
		}
	}
}

// TestSelectorRefused: RabbitMQ 3.10 has no selectors over AMQP 1.0.
func TestSelectorRefused(t *testing.T) {
	r := sharedRabbit(t)
	c := dial(t, r.AMQPURI())
	_, err := c.Subscribe(context.Background(), transport.Subscription{ID: "x", Destination: queue("amqp.sel"), Selector: "color = 'red'"})
	if !errors.Is(err, transport.ErrUnsupported) || !strings.Contains(err.Error(), "color = 'red'") {
		t.Fatalf("err = %v", err)
	}
	if err := c.WatchConsumers(context.Background()); !errors.Is(err, transport.ErrUnsupported) {
		t.Fatalf("WatchConsumers: %v", err)
	}
}

// TestRefusedSendIsNotSuccess sends more than a reject-publish queue takes:
// the overflowing messages must never be confirmed as accepted. (RabbitMQ
// 3.10's AMQP 1.0 session has no handler for the publisher nack and ends: the
// connection then ends with the batch unconfirmed.)
func TestRefusedSendIsNotSuccess(t *testing.T) {
	r := sharedRabbit(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if out, err := r.Ctl(ctx, "set_policy", "--apply-to", "queues", "amqplimit", "^amqp\\.limited$",
		`{"max-length":2,"overflow":"reject-publish"}`); err != nil {
		t.Fatalf("set_policy: %v %s", err, out)
	}
	c := dial(t, r.AMQPURI())
	q := queue("amqp.limited")
	for i := 0; i < 5; i++ {
		if err := c.Send(ctx, textMsg(q, strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
	}
	tok, _ := c.Commit(ctx)
	for {
		select {
		case ev, ok := <-c.Events():
			if !ok {
				t.Logf("connection ended unconfirmed: %v", c.Err())
				return
			}
			if ev.Token != tok {
				continue
			}
			if ev.Kind == transport.Confirmed && ev.Outcomes == nil {
				t.Fatal("5 messages to a queue of max-length 2 (reject-publish) all confirmed as accepted")
			}
			t.Logf("outcome: %+v", ev)
			return
		case <-ctx.Done():
			t.Fatal("no outcome")
		}
	}
}

// TestNodeStopped stops the broker under a connection with unsettled
// deliveries and an unconfirmed batch: Events closes, Err says why, and the
// messages that were not confirmed were not acknowledged.
func TestNodeStopped(t *testing.T) {
	if testing.Short() {
		t.Skip("needs RabbitMQ")
	}
	r := testbroker.StartRabbitMQ(t, testbroker.RabbitOptions{})
	c := dial(t, r.AMQPURI()+"?idleTimeout=5s")
	ctx := context.Background()
	q := queue("amqp.kill")
	for i := 0; i < 10; i++ {
		_ = c.Send(ctx, textMsg(q, strconv.Itoa(i)))
	}
	tok, _ := c.Commit(ctx)
	transporttest.WaitToken(t, c, tok)
	sub, _ := c.Subscribe(ctx, transport.Subscription{ID: "k", Destination: q, Prefetch: 10})
	transporttest.WaitToken(t, c, sub)
	for got := 0; got < 10; {
		if ev := transporttest.Next(t, c, 10*time.Second); ev.Kind == transport.Delivery {
			got++
		}
	}
	// The queue is durable (not the exclusive queue RabbitMQ 3.10 declares for
	// a non-durable terminus) and holds the 10 unacknowledged messages.
	if out, err := r.Ctl(ctx, "list_queues", "-q", "--no-table-headers", "name", "durable", "exclusive", "messages"); err != nil ||
		!strings.Contains(out, "amqp.kill\ttrue\tfalse\t10") {
		t.Fatalf("before the kill: %q %v", out, err)
	}
	mark := r.LogSize()
	if err := r.Kill(); err != nil {
		t.Fatal(err)
	}
	stomptest.Eventually(t, 30*time.Second, func() error {
		select {
		case <-c.Done():
			return nil
		default:
			return errors.New("connection still up")
		}
	})
	for range c.Events() {
	}
	if c.Err() == nil {
		t.Fatal("Err is nil after the node died")
	}
	if err := c.Settle(ctx, "k", nil, transport.Accepted); err == nil {
		t.Fatal("Settle after the end succeeded")
	}
	if _, err := c.Commit(ctx); !errors.Is(err, transport.ErrClosed) {
		t.Fatalf("Commit after the end: %v", err)
	}
	t.Logf("ended with: %v", c.Err())
	// Nothing was settled: after a restart the 10 persistent messages are all there.
	rctx, cancel := context.WithTimeout(ctx, testbroker.DefaultRabbitStartTimeout)
	defer cancel()
	if err := r.Restart(rctx); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		n, err := queueDepth(t, r, q.Name)
		if err == nil && n == 10 {
			return
		}
		if time.Now().After(deadline) {
			// RabbitMQ 3.10 now and then comes back from a SIGKILL without a
			// durable classic queue it listed right before (the bridge's fault
			// tests met it too). If its log says it recovered none, the broker
			// lost the queue, which says nothing about the transport.
			if line, recovered, ok := testbroker.ClassicRecovery(r.LogSince(mark)); ok && recovered == 0 {
				t.Skipf("RabbitMQ lost the durable queue across the SIGKILL (%q, queue: %v)", line, err)
			}
			t.Fatalf("after 30s: queue holds %d (%v), want 10", n, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestHeadersThroughRabbitMQ sends each mapping case over AMQP 1.0 through
// RabbitMQ and reads it back over AMQP 1.0.
func TestHeadersThroughRabbitMQ(t *testing.T) {
	r := sharedRabbit(t)
	c := dial(t, r.AMQPURI())
	ctx := context.Background()
	q := queue("amqp.headers")
	// The table's fixed times are in the past here: RabbitMQ would expire them.
	expires := time.Now().Add(time.Hour).Truncate(time.Millisecond).UTC()
	for _, tc := range mappingCases {
		m := tc.m
		m.Destination = q
		if !m.Expires.IsZero() {
			m.Expires = expires
		}
		if m.ReplyTo != "" {
			m.ReplyTo = "/queue/replies"
		}
		if err := c.Send(ctx, &m); err != nil {
			t.Fatal(err)
		}
	}
	tok, _ := c.Commit(ctx)
	if ev, _ := transporttest.WaitToken(t, c, tok); ev.Kind != transport.Confirmed || ev.Outcomes != nil {
		t.Fatalf("commit: %+v", ev)
	}
	sub, _ := c.Subscribe(ctx, transport.Subscription{ID: "h", Destination: q, Prefetch: 10})
	transporttest.WaitToken(t, c, sub)
	for _, tc := range mappingCases {
		ev := transporttest.Next(t, c, 20*time.Second)
		if ev.Kind != transport.Delivery {
			t.Fatalf("%s: %+v", tc.name, ev)
		}
		_ = c.Settle(ctx, "h", []transport.Ref{ev.Ref}, transport.Accepted)
		got, want := ev.Msg, tc.m
		want.Destination = q
		if want.ReplyTo != "" {
			want.ReplyTo = "/queue/replies"
		}
		if !want.Expires.IsZero() {
			want.Expires = expires
		}
		if !got.Expires.IsZero() {
			got.Expires = got.Expires.UTC()
		}
		if !got.Timestamp.IsZero() {
			got.Timestamp = got.Timestamp.UTC()
		}
		if want.Priority < 0 {
			want.Priority = 4 // RabbitMQ always sends a header; AMQP's default priority is 4
		}
		if !reflect.DeepEqual(*got, want) {
			t.Errorf("%s: through RabbitMQ:\n got %s\nwant %s", tc.name, show(got), show(&want))
		}
	}
}

// TestFromRabbitMQStomp pins what an AMQP 1.0 receiver gets from RabbitMQ 3.10
// for a message published over STOMP (docs/protocols.md's header table relies on it):
// 0-9-1 properties survive, STOMP's application headers do not.
func TestFromRabbitMQStomp(t *testing.T) {
	r := sharedRabbit(t)
	sc, err := stomp.Dial("tcp", r.StompAddr(), stomp.ConnOpt.Login("guest", "guest"), stomp.ConnOpt.Host("/"))
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Disconnect()
	err = sc.Send("/queue/amqp.fromstomp", "text/plain", []byte("héllo"), stomp.SendOpt.Receipt,
		stomp.SendOpt.Header("persistent", "true"), stomp.SendOpt.Header("priority", "6"),
		stomp.SendOpt.Header("correlation-id", "c-1"), stomp.SendOpt.Header("reply-to", "/queue/answers"),
		stomp.SendOpt.Header("expiration", "600000"), stomp.SendOpt.Header("type", "Greeting"),
		stomp.SendOpt.Header("color", "red"), stomp.SendOpt.Header("BrokernetPath", "|A|"))
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, r.AMQPURI())
	ctx := context.Background()
	sub, _ := c.Subscribe(ctx, transport.Subscription{ID: "fs", Destination: queue("amqp.fromstomp"), Prefetch: 1})
	transporttest.WaitToken(t, c, sub)
	ev := transporttest.Next(t, c, 20*time.Second)
	if ev.Kind != transport.Delivery {
		t.Fatalf("%+v", ev)
	}
	m := ev.Msg
	t.Logf("from STOMP: %s", show(m))
	if !m.Persistent || m.Priority != 6 || m.CorrelationID != "c-1" || m.ReplyTo != "/queue/answers" ||
		m.ContentType != "text/plain" || string(m.Body) != "héllo" || !m.Bytes || m.Expires.IsZero() {
		t.Errorf("0-9-1 properties did not survive: %s", show(m))
	}
	if m.Type != "" {
		t.Errorf("RabbitMQ 3.10 now carries the 0-9-1 type (%q): update the header table in docs/protocols.md", m.Type)
	}
	if len(m.Props) != 0 {
		t.Errorf("RabbitMQ 3.10 now maps STOMP headers to application-properties (%v): update the header table in docs/protocols.md", m.Props)
	}
	_ = c.Settle(ctx, "fs", []transport.Ref{ev.Ref}, transport.Accepted)
}

// TestConnectionIDNamesConsumers: Info().ConnectionID is the connection name
// RabbitMQ's management API shows on this connection's consumers, the way to
// tell the bridge's own AMQP 1.0 consumers from others.
func TestConnectionIDNamesConsumers(t *testing.T) {
	r := sharedRabbit(t)
	c := dial(t, r.AMQPURI())
	ctx := context.Background()
	tok, _ := c.Subscribe(ctx, transport.Subscription{ID: "own", Destination: queue("amqp.own"), Prefetch: 1})
	transporttest.WaitToken(t, c, tok)
	id := c.Info().ConnectionID
	if !strings.Contains(id, " -> ") {
		t.Fatalf("ConnectionID = %q", id)
	}
	stomptest.Eventually(t, 30*time.Second, func() error {
		req, _ := http.NewRequest("GET", r.ManagementURL()+"/api/consumers", nil)
		req.SetBasicAuth("guest", "guest")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		var cs []struct {
			Queue          struct{ Name string }
			ConsumerTag    string `json:"consumer_tag"`
			ChannelDetails struct {
				ConnectionName string `json:"connection_name"`
			} `json:"channel_details"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&cs); err != nil {
			return err
		}
		for _, cn := range cs {
			if cn.Queue.Name == "amqp.own" && cn.ChannelDetails.ConnectionName == id && strings.HasPrefix(cn.ConsumerTag, "ctag-") {
				return nil
			}
		}
		return fmt.Errorf("no consumer of amqp.own on connection %q in %+v", id, cs)
	})
}

// TestRefusedAttachIsRejected: a queue the broker will not let us publish to
// (here another connection's exclusive queue) refuses the sender link; the
// message is Rejected in its batch with the broker's reason, and the
// connection stays usable.
func TestRefusedAttachIsRejected(t *testing.T) {
	r := sharedRabbit(t)
	owner := dial(t, r.AMQPURI())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// A non-durable terminus makes RabbitMQ 3.10 declare the queue exclusive.
	sess, err := owner.conn.NewSession(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sess.NewReceiver(ctx, "/queue/amqp.exclusive", &goamqp.ReceiverOptions{Credit: -1}); err != nil {
		t.Fatal(err)
	}
	c := dial(t, r.AMQPURI())
	if err := c.Send(ctx, textMsg(queue("amqp.exclusive"), "x")); err != nil {
		t.Fatal(err)
	}
	if err := c.Send(ctx, textMsg(queue("amqp.open"), "y")); err != nil {
		t.Fatal(err)
	}
	tok, _ := c.Commit(ctx)
	ev, _ := transporttest.WaitToken(t, c, tok)
	if ev.Kind != transport.Confirmed || len(ev.Outcomes) != 2 ||
		ev.Outcomes[0].Outcome != transport.Rejected || ev.Outcomes[0].Err == nil || ev.Outcomes[1].Outcome != transport.Accepted {
		t.Fatalf("event %+v, want the first rejected, the second accepted", ev)
	}
	t.Logf("rejected: %v", ev.Outcomes[0].Err)

	// A refused subscription leaves the others (and Sync) working.
	good, _ := c.Subscribe(ctx, transport.Subscription{ID: "good", Destination: queue("amqp.open"), Prefetch: 1})
	bad, _ := c.Subscribe(ctx, transport.Subscription{ID: "bad", Destination: queue("amqp.exclusive"), Prefetch: 1})
	var d transport.Event
	for got := 0; got < 3; got++ {
		ev := transporttest.Next(t, c, 20*time.Second)
		switch {
		case ev.Token == good && ev.Kind == transport.Confirmed:
		case ev.Token == bad && ev.Kind == transport.Refused && ev.Err != nil:
			t.Logf("refused: %v", ev.Err)
		case ev.Kind == transport.Delivery && ev.Sub == "good":
			d = ev
		default:
			t.Fatalf("unexpected %+v", ev)
		}
	}
	if d.Kind != transport.Delivery || string(d.Msg.Body) != "y" {
		t.Fatalf("delivery %+v", d)
	}
	if err := c.Settle(ctx, "good", []transport.Ref{d.Ref}, transport.Accepted); err != nil {
		t.Fatal(err)
	}
	st, _ := c.Sync(ctx)
	if ev, _ := transporttest.WaitToken(t, c, st); ev.Kind != transport.Confirmed {
		t.Fatalf("sync after a refusal: %+v", ev)
	}
	if n, err := queueDepth(t, r, "amqp.open"); err != nil || n != 0 {
		t.Fatalf("amqp.open holds %d (%v) after Sync, want 0", n, err)
	}
}

// TestUnsubscribeReleasesPrefetched: a subscription closed while its link
// holds deliveries nobody took yet (closed while attaching, or right after)
// gives them all back, on the same connection. Before, RabbitMQ 3.10 kept
// them unacknowledged on the receivers' session until the connection ended:
// a second subscription to the queue on the same connection got none.
func TestUnsubscribeReleasesPrefetched(t *testing.T) {
	r := sharedRabbit(t)
	c := dial(t, r.AMQPURI())
	ctx := context.Background()
	const n = 50
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(r.LogTail(120))
		}
	})
	for _, tc := range []struct {
		name string
		wait bool // for the subscription's confirmation before unsubscribing
	}{{"while attaching", false}, {"once attached", true}} {
		t.Log(tc.name)
		q := queue("amqp.unsub.prefetched." + strings.ReplaceAll(tc.name, " ", "-"))
		for i := 0; i < n; i++ {
			if err := c.Send(ctx, textMsg(q, strconv.Itoa(i))); err != nil {
				t.Fatal(err)
			}
		}
		tok, _ := c.Commit(ctx)
		transporttest.WaitToken(t, c, tok)
		first := "p1-" + strconv.FormatBool(tc.wait)
		sub, err := c.Subscribe(ctx, transport.Subscription{ID: first, Destination: q, Prefetch: 100})
		if err != nil {
			t.Fatal(err)
		}
		if tc.wait {
			transporttest.WaitToken(t, c, sub)
		}
		if err := c.Unsubscribe(ctx, first); err != nil {
			t.Fatal(err)
		}
		second := "p2-" + strconv.FormatBool(tc.wait)
		sub2, err := c.Subscribe(ctx, transport.Subscription{ID: second, Destination: q, Prefetch: 100})
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		deadline := time.After(30 * time.Second)
		for len(seen) < n {
			select {
			case ev, ok := <-c.Events():
				if !ok {
					t.Fatalf("%s: events closed: %v\n%s", tc.name, c.Err(), r.LogTail(40))
				}
				if ev.Token == sub2 && ev.Kind == transport.Refused {
					t.Fatalf("%s: %v", tc.name, ev.Err)
				}
				if ev.Kind == transport.Delivery && ev.Sub == second {
					seen[string(ev.Msg.Body)] = true
					if err := c.Settle(ctx, second, []transport.Ref{ev.Ref}, transport.Accepted); err != nil {
						t.Fatal(err)
					}
				}
			case <-deadline:
				t.Fatalf("%s: the second subscription got %d of %d", tc.name, len(seen), n)
			}
		}
		if err := c.Unsubscribe(ctx, second); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCreditNotExceeded: a queue of 20,000 messages read with a prefetch of
// 100 while another goroutine settles them one at a time, as the bridge and
// the test consumers do. RabbitMQ 3.10 over-delivered beyond the link credit
// in every such run when credit was granted per settlement, which wrapped
// go-amqp's credit count (credit.go): the link then streamed the whole queue
// or stalled for good. Every message must arrive, none beyond the credit.
func TestCreditNotExceeded(t *testing.T) {
	r := sharedRabbit(t)
	ctx := context.Background()
	const n, prefetch = 20000, 100
	q := queue("amqp.credit.exceeded")
	pc := dial(t, r.AMQPURI())
	for i := 0; i < n; i++ {
		if err := pc.Send(ctx, textMsg(q, strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
		if i%1000 == 999 {
			tok, err := pc.Commit(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if ev, _ := transporttest.WaitToken(t, pc, tok); ev.Kind != transport.Confirmed {
				t.Fatalf("sending: %v", ev.Err)
			}
		}
	}
	c := dial(t, r.AMQPURI())
	const id = "credit"
	tok, err := c.Subscribe(ctx, transport.Subscription{ID: id, Destination: q, Prefetch: prefetch})
	if err != nil {
		t.Fatal(err)
	}
	refs := make(chan transport.Ref, n)
	settled := make(chan error, 1)
	go func() {
		for range n {
			if err := c.Settle(ctx, id, []transport.Ref{<-refs}, transport.Accepted); err != nil {
				settled <- err
				return
			}
		}
		settled <- nil
	}()
	seen := map[string]bool{}
	deadline := time.After(90 * time.Second)
	for len(seen) < n {
		select {
		case ev, ok := <-c.Events():
			if !ok {
				t.Fatalf("events closed: %v", c.Err())
			}
			if ev.Token == tok && ev.Kind == transport.Refused {
				t.Fatal(ev.Err)
			}
			if ev.Kind == transport.Delivery && ev.Sub == id {
				seen[string(ev.Msg.Body)] = true
				refs <- ev.Ref
			}
		case <-deadline:
			t.Fatalf("received %d of %d", len(seen), n)
		}
	}
	if err := <-settled; err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	over := c.subs[id].credit.over
	c.mu.Unlock()
	if over != 0 {
		t.Errorf("the broker sent up to %d deliveries beyond the link credit", over)
	}
}
