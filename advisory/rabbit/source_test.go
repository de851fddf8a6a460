package rabbit

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-stomp/stomp/v3/frame"
	"github.com/rs/zerolog"

	"github.com/brokernet/brokernet/advisory"
	"github.com/brokernet/brokernet/internal/stomptest"
	"github.com/brokernet/brokernet/internal/testbroker"
	"github.com/brokernet/brokernet/rabbitmq/mgmt"
	"github.com/brokernet/brokernet/transport/stomp"
)

// ---- model tests (no broker) ----------------------------------------------

// demandOf lists "kind:name" of a model's demand, sorted, one entry per consumer.
func demandOf(m *rabbitModel) []string {
	var out []string
	for _, c := range m.demand() {
		out = append(out, c.Destination.String())
	}
	sort.Strings(out)
	return out
}

func snapConsumer(queue, tag string) mgmt.Consumer {
	var c mgmt.Consumer
	c.Queue.Name, c.Queue.VHost, c.ConsumerTag = queue, "/", tag
	return c
}

func created(queue, tag, ch string) rabbitEvent {
	return rabbitEvent{name: "consumer.created", vhost: "/", queue: queue, tag: tag, channel: ch}
}

func deleted(queue, tag, ch string) rabbitEvent {
	return rabbitEvent{name: "consumer.deleted", vhost: "/", queue: queue, tag: tag, channel: ch}
}

func bindingEv(name, queue, key string) rabbitEvent {
	return rabbitEvent{name: name, vhost: "/", source: "amq.topic", destKind: "queue", queue: queue, key: key}
}

func equal(a, b []string) bool { return strings.Join(a, ",") == strings.Join(b, ",") }

func TestRabbitModelSnapshotThenEvents(t *testing.T) {
	m := newRabbitModel("/", 6*time.Second, zerolog.Nop())
	m.initial(rabbitSnapshot{
		consumers: []mgmt.Consumer{
			snapConsumer("orders", "T_1"), snapConsumer("orders", "T_1"), // two STOMP clients, same sub id
			snapConsumer("orders", "T_bn-d1"),           // the bridge itself
			snapConsumer("stomp-subscription-x", "T_2"), // a topic subscriber's queue
			snapConsumer("bn_s1.topics", "amq.ctag-1"),  // a bridge queue
			snapConsumer("invoices", "amq.ctag-Zx"),     // AMQP 0-9-1
		},
		bindings: []mgmt.Binding{
			{Source: "amq.topic", DestinationType: "queue", Destination: "stomp-subscription-x", RoutingKey: "prices.#"},
			{Source: "amq.topic", DestinationType: "queue", Destination: "bn_s1.topics", RoutingKey: "prices.eu"},
			{Source: "", DestinationType: "queue", Destination: "orders", RoutingKey: "orders"},
			{Source: "amq.direct", DestinationType: "queue", Destination: "q", RoutingKey: "k"},
		},
	})
	now := time.Now()
	m.apply(created("orders", "T_1", "<n.1.3.0>"), now) // after the snapshot: a third one
	m.apply(deleted("orders", "T_1", "<n.1.9.0>"), now) // unknown channel: one of the snapshot's
	m.apply(created("other", "T_1", "<n.1.4.0>"), now)
	m.apply(deleted("other", "T_1", "<n.1.4.0>"), now)
	m.apply(rabbitEvent{name: "consumer.created", vhost: "/other-vhost", queue: "orders", tag: "T_5", channel: "<n.1.5.0>"}, now)
	want := []string{"queue://invoices", "queue://orders", "queue://orders", "topic://prices.>"}
	if got := demandOf(m); !equal(got, want) {
		t.Fatalf("demand %v, want %v", got, want)
	}

	var evs []advisory.Event
	m.flush(func(e advisory.Event) { evs = append(evs, e) })
	if len(evs) != 4 || evs[0].Kind != advisory.ConsumerAdded {
		t.Fatalf("first flush: %v", evs)
	}
	evs = nil
	m.apply(rabbitEvent{name: "channel.closed", channel: "<n.1.3.0>"}, now) // without consumer.deleted
	m.apply(bindingEv("binding.deleted", "stomp-subscription-x", "prices.#"), now)
	m.flush(func(e advisory.Event) { evs = append(evs, e) })
	if len(evs) != 2 || evs[0].Kind != advisory.ConsumerRemoved || evs[1].Kind != advisory.ConsumerRemoved {
		t.Fatalf("after channel.closed and binding.deleted: %v", evs)
	}
	if got := demandOf(m); !equal(got, []string{"queue://invoices", "queue://orders"}) {
		t.Fatalf("demand %v", got)
	}
}

func TestRabbitModelReconcile(t *testing.T) {
	window := 6 * time.Second
	m := newRabbitModel("/", window, zerolog.Nop())
	t0 := time.Now()
	m.initial(rabbitSnapshot{}) // the first snapshot missed a consumer (statistics lag)
	m.apply(created("busy", "T_1", "<c1>"), t0)
	m.apply(created("stale", "T_1", "<c2>"), t0)
	m.apply(bindingEv("binding.created", "amq.gen-1", "a.*"), t0)

	// A snapshot taken a window later is exact for quiet groups.
	later := t0.Add(window + time.Second)
	m.apply(created("busy", "T_2", "<c3>"), later) // recent: left alone
	m.reconcile(rabbitSnapshot{
		consumers: []mgmt.Consumer{snapConsumer("early", "T_0"), snapConsumer("busy", "T_1")},
		bindings:  []mgmt.Binding{{Source: "amq.topic", DestinationType: "queue", Destination: "amq.gen-2", RoutingKey: "b"}},
	}, later)
	// early: added; stale: its consumer.deleted was lost, removed; busy T_2:
	// recent, kept although the snapshot does not show it yet; binding a.*
	// gone, binding b found.
	want := []string{"queue://busy", "queue://busy", "queue://early", "topic://b"}
	if got := demandOf(m); !equal(got, want) {
		t.Fatalf("demand %v, want %v", got, want)
	}
	// A consumer.deleted for a snapshot-only consumer.
	m.apply(deleted("early", "T_0", "<unknown>"), later)
	if got := demandOf(m); !equal(got, []string{"queue://busy", "queue://busy", "topic://b"}) {
		t.Fatalf("demand %v", got)
	}
}

// A consumer that appears while the first snapshot is taken is counted by
// the snapshot and by its consumer.created event. Once it is gone, the
// resynchronisation after that must drop the snapshot's copy: the demand
// must not linger until the next ResyncInterval (seen in CI as a bridge
// keeping a demand subscription 20 s after its only consumer left).
func TestRabbitModelCreatedDuringFirstSnapshot(t *testing.T) {
	window := 6 * time.Second
	m := newRabbitModel("/", window, zerolog.Nop())
	t0 := time.Now()
	m.initial(rabbitSnapshot{consumers: []mgmt.Consumer{snapConsumer("q", "ctag-1")}})
	m.apply(created("q", "ctag-1", "<c1>"), t0)
	left := t0.Add(2 * time.Second)
	m.apply(deleted("q", "ctag-1", "<c1>"), left)
	if got := demandOf(m); !equal(got, []string{"queue://q"}) {
		t.Fatalf("before a resynchronisation: demand %v, want the snapshot's copy", got)
	}

	// The first resynchronisation: the group was touched within the
	// window, so it is left alone, and a retry is asked for.
	first := t0.Add(window)
	retry := m.reconcile(rabbitSnapshot{}, first)
	if got := demandOf(m); !equal(got, []string{"queue://q"}) {
		t.Fatalf("first resynchronisation changed a recently touched group: %v", got)
	}
	if !retry.After(left.Add(window)) || retry.After(left.Add(window+time.Second)) {
		t.Fatalf("retry at %v, want just after %v", retry.Sub(t0), left.Add(window).Sub(t0))
	}
	if again := m.reconcile(rabbitSnapshot{}, retry); !again.IsZero() {
		t.Fatalf("second resynchronisation asks for another at %v", again.Sub(t0))
	}
	if got := demandOf(m); len(got) != 0 {
		t.Fatalf("after the retry: demand %v, want none", got)
	}
	// Agreement within the window needs no retry, nor a snapshot that only
	// lags behind the events.
	m.apply(created("q", "ctag-2", "<c2>"), retry)
	m.apply(created("q", "ctag-3", "<c3>"), retry)
	if r := m.reconcile(rabbitSnapshot{consumers: []mgmt.Consumer{snapConsumer("q", "ctag-2")}}, retry.Add(time.Second)); !r.IsZero() {
		t.Fatalf("retry asked for groups without snapshot-only consumers: %v", r.Sub(t0))
	}
	if got := demandOf(m); !equal(got, []string{"queue://q", "queue://q"}) {
		t.Fatalf("demand %v, want the two consumers the events reported", got)
	}
}

func TestParseRabbitEventMalformed(t *testing.T) {
	f := frame.New("MESSAGE", "destination", "/exchange/amq.rabbitmq.event/consumer.created", "queue", "q")
	if _, err := parseRabbitEvent(f); err == nil {
		t.Error("consumer.created without channel accepted")
	}
	m := newRabbitModel("/", time.Second, zerolog.Nop())
	m.applyFrame(f) // logged and skipped
	if len(m.demand()) != 0 {
		t.Error("malformed event became demand")
	}
	ok := frame.New("MESSAGE", "destination", "/exchange/amq.rabbitmq.event/consumer.created",
		"queue", "q", "vhost", "/", "consumer_tag", "T_1", "channel", "<n.1.2.0>", "prefetch_count", "10")
	ev, err := parseRabbitEvent(ok)
	if err != nil || ev.prefetch != 10 || ev.channel != "<n.1.2.0>" {
		t.Errorf("parse: %+v, %v", ev, err)
	}
}

// ---- against real RabbitMQ nodes ------------------------------------------

// demandView applies a source's events the way a bridge would.
type demandView struct {
	mu        sync.Mutex
	cur       map[string]advisory.Consumer
	pending   map[string]bool // during a snapshot: not yet re-added
	snapshots int
	brokerID  string
	inSnap    bool
	err       error
}

func (v *demandView) emit(e advisory.Event) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if e.OriginBrokerID != "" {
		v.brokerID = e.OriginBrokerID
	}
	switch e.Kind {
	case advisory.SnapshotStart:
		v.inSnap = true
		v.pending = map[string]bool{}
		for id := range v.cur {
			v.pending[id] = true
		}
	case advisory.SnapshotDone:
		for id := range v.pending {
			delete(v.cur, id)
		}
		v.inSnap = false
		v.snapshots++
	case advisory.ConsumerAdded:
		if _, dup := v.cur[e.Consumer.ID]; dup && !v.inSnap {
			v.err = fmt.Errorf("consumer %s added twice", e.Consumer.ID)
		}
		v.cur[e.Consumer.ID] = e.Consumer
		delete(v.pending, e.Consumer.ID)
	case advisory.ConsumerRemoved:
		if _, ok := v.cur[e.Consumer.ID]; !ok {
			v.err = fmt.Errorf("consumer %s removed but not known", e.Consumer.ID)
		}
		delete(v.cur, e.Consumer.ID)
	default:
		v.err = fmt.Errorf("unexpected event %v", e.Kind)
	}
}

// want checks that the demand is exactly the given destinations (URI forms,
// repeated per consumer) after at least minSnaps snapshots.
func (v *demandView) want(minSnaps int, dests ...string) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.err != nil {
		return v.err
	}
	if v.snapshots < minSnaps {
		return fmt.Errorf("%d snapshots, want %d", v.snapshots, minSnaps)
	}
	var got []string
	for _, c := range v.cur {
		got = append(got, c.Destination.String())
	}
	sort.Strings(got)
	sort.Strings(dests)
	if !equal(got, dests) {
		return fmt.Errorf("demand %v, want %v", got, dests)
	}
	return nil
}

func startSource(t *testing.T, r *testbroker.RabbitMQ) (*demandView, func() error) {
	t.Helper()
	u := stomptest.URI(t, r.StompURI()+"?initialReconnectDelay=200&maxReconnectDelay=1000&management="+url.QueryEscape(r.ManagementURL()))
	src, err := NewSource(Config{URI: u, ResyncInterval: 10 * time.Second}, stomptest.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	v := &demandView{cur: map[string]advisory.Consumer{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- src.Run(ctx, v.emit) }()
	stop := func() error {
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(10 * time.Second):
			return errors.New("Run did not return after cancel")
		}
	}
	t.Cleanup(func() { stop() })
	return v, stop
}

func subscribe(t *testing.T, c *stomp.Conn, id, dest string, headers ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Subscribe(ctx, id, dest, "client-individual", headers...); err != nil {
		t.Fatal(err)
	}
}

// TestSourceDemand runs the source against a real node: consumers
// from before and after its start, a consumer leaving, a topic subscriber,
// the bridge's own consumers, a connection closed abruptly, and a node
// restart after which the snapshot reconciles what changed meanwhile.
func TestSourceDemand(t *testing.T) {
	r := testbroker.StartRabbitMQ(t, testbroker.RabbitOptions{})
	uri := r.StompURI()

	before := stomptest.Dial(t, uri)
	subscribe(t, before, "1", "/queue/orders")
	subscribe(t, before, "2", "/queue/orders")

	v, stop := startSource(t, r)
	// The first snapshot may miss these (statistics lag); the resync a
	// window later finds them.
	stomptest.Eventually(t, 20*time.Second, func() error { return v.want(1, "queue://orders", "queue://orders") })

	after := stomptest.Dial(t, uri)
	subscribe(t, after, "1", "/queue/orders") // the same tag T_1 as an existing one
	subscribe(t, after, "2", "/queue/invoices")
	subscribe(t, after, "3", "/topic/prices.*")
	subscribe(t, after, "4", "/topic/news.#") // STOMP on RabbitMQ: # is a RabbitMQ wildcard
	// The bridge's own: never demand.
	subscribe(t, after, advisory.BridgeTagPrefix+"d1", "/queue/orders")
	subscribe(t, after, advisory.BridgeTagPrefix+"d2", "/topic/prices.eu", "x-queue-name", advisory.BridgeQueuePrefix+"t.1")
	subscribe(t, after, advisory.BridgeTagPrefix+"d3", "/topic/rates.eu")
	all := []string{"queue://orders", "queue://orders", "queue://orders", "queue://invoices", "topic://prices.*", "topic://news.>"}
	stomptest.Eventually(t, 10*time.Second, func() error { return v.want(1, all...) })

	// A consumer leaves.
	ctx := context.Background()
	if err := after.Unsubscribe(ctx, "2"); err != nil {
		t.Fatal(err)
	}
	all = []string{"queue://orders", "queue://orders", "queue://orders", "topic://prices.*", "topic://news.>"}
	stomptest.Eventually(t, 10*time.Second, func() error { return v.want(1, all...) })

	// A connection that goes away abruptly takes its consumers along.
	before.Abort()
	all = []string{"queue://orders", "topic://prices.*", "topic://news.>"}
	stomptest.Eventually(t, 10*time.Second, func() error { return v.want(1, all...) })

	// The node restarts: the source reconnects, and the new snapshot holds
	// what exists now (the old clients are gone with the node).
	after.Abort()
	rctx, cancel := context.WithTimeout(ctx, testbroker.DefaultRabbitStartTimeout)
	defer cancel()
	if err := r.Restart(rctx); err != nil {
		t.Fatal(err)
	}
	again := stomptest.Dial(t, uri)
	subscribe(t, again, "1", "/queue/payments")
	subscribe(t, again, "2", "/topic/prices.eu")
	stomptest.Eventually(t, 30*time.Second, func() error { return v.want(2, "queue://payments", "topic://prices.eu") })
	v.mu.Lock()
	id := v.brokerID
	v.mu.Unlock()
	if !strings.HasPrefix(id, r.Name()+"@") {
		t.Errorf("OriginBrokerID %q, want the cluster name of %s", id, r.Node())
	}
	if err := stop(); err != nil {
		t.Errorf("Run: %v", err)
	}
}

// TestSourceStatsDisabled: one clear error naming the setting.
func TestSourceStatsDisabled(t *testing.T) {
	r := testbroker.StartRabbitMQ(t, testbroker.RabbitOptions{Conf: []string{"management_agent.disable_metrics_collector = true"}})
	u := stomptest.URI(t, r.StompURI()+"?management="+url.QueryEscape(r.ManagementURL()))
	src, err := NewSource(Config{URI: u}, stomptest.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err = src.Run(ctx, func(advisory.Event) {})
	if !errors.Is(err, mgmt.ErrSetup) || !strings.Contains(err.Error(), "disable_metrics_collector") {
		t.Fatalf("Run = %v, want a setup error naming the setting", err)
	}

	// No management API where it is looked for: the plugin is named, after
	// a few tries (a restarting node opens STOMP before management).
	nowhere := fmt.Sprintf("http://127.0.0.1:%d", testbroker.FreePort(t))
	u = stomptest.URI(t, r.StompURI()+"?initialReconnectDelay=50&maxReconnectDelay=100&management="+url.QueryEscape(nowhere))
	if src, err = NewSource(Config{URI: u}, stomptest.Logger(t)); err != nil {
		t.Fatal(err)
	}
	err = src.Run(ctx, func(advisory.Event) {})
	if !errors.Is(err, mgmt.ErrSetup) || !strings.Contains(err.Error(), "rabbitmq_management plugin") || !strings.Contains(err.Error(), nowhere) {
		t.Fatalf("Run = %v, want a setup error naming the plugin and the URL", err)
	}
}

// mgmtPut sends a management API PUT with a JSON body.
func mgmtPut(t *testing.T, r *testbroker.RabbitMQ, path, body string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPut, r.ManagementURL()+path, strings.NewReader(body))
	req.SetBasicAuth("guest", "guest")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Fatalf("PUT %s: HTTP %d", path, resp.StatusCode)
	}
}

// TestSourceOtherVHost watches vhost "prod": the events come through the
// exchange in "/", and only prod's consumers are demand.
func TestSourceOtherVHost(t *testing.T) {
	r := testbroker.StartRabbitMQ(t, testbroker.RabbitOptions{})
	mgmtPut(t, r, "/api/vhosts/prod", "{}")
	mgmtPut(t, r, "/api/permissions/prod/guest", `{"configure":".*","write":".*","read":".*"}`)
	prod := r.StompURI() + "?vhost=prod"

	u := stomptest.URI(t, prod+"&management="+url.QueryEscape(r.ManagementURL()))
	src, err := NewSource(Config{URI: u}, stomptest.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	v := &demandView{cur: map[string]advisory.Consumer{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- src.Run(ctx, v.emit) }()
	defer func() {
		cancel()
		<-done
	}()
	stomptest.Eventually(t, 20*time.Second, func() error { return v.want(1) })

	subscribe(t, stomptest.Dial(t, prod), "1", "/queue/orders")
	subscribe(t, stomptest.Dial(t, r.StompURI()), "1", "/queue/orders")   // vhost "/"
	subscribe(t, stomptest.Dial(t, r.StompURI()), "2", "/queue/invoices") // vhost "/"
	subscribe(t, stomptest.Dial(t, prod), "2", "/topic/prices.*")
	stomptest.Eventually(t, 10*time.Second, func() error { return v.want(1, "queue://orders", "topic://prices.*") })
}
