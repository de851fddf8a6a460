package events

import (
	"context"
	"errors"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/go-stomp/stomp/v3/frame"
	"github.com/rs/zerolog"

	"github.com/brokernet/brokernet/advisory"
	"github.com/brokernet/brokernet/rabbitmq/mgmt"
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

// TestNoExchangeKeepsTheBrokersWords: a refused Subscribe marked NoExchange
// is ErrNoExchange and still the broker's error, with its message unchanged.
func TestNoExchangeKeepsTheBrokersWords(t *testing.T) {
	refused := errors.New("ERROR: not_found: no exchange 'amq.rabbitmq.event' in vhost '/'")
	err := NoExchange(refused)
	if !errors.Is(err, ErrNoExchange) || !errors.Is(err, refused) || err.Error() != refused.Error() {
		t.Fatalf("NoExchange(%v) = %v", refused, err)
	}
}

// TestNewSourceNeedsHostAndDialer: a Config without a host or a STOMP dialer
// is refused before anything connects.
func TestNewSourceNeedsHostAndDialer(t *testing.T) {
	dial := func(context.Context, string) (Feed, error) { return nil, errors.New("unused") }
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"no host", Config{Dial: dial}, "no host"},
		{"no dialer", Config{Host: "h"}, "no STOMP dialer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := NewSource(tc.cfg, zerolog.Nop()); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("NewSource = %v, want an error saying %q", err, tc.want)
			}
		})
	}
	if _, err := NewSource(Config{Host: "h", Dial: dial}, zerolog.Nop()); err != nil {
		t.Fatalf("NewSource with a host and a dialer: %v", err)
	}
}
