package demand

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/brokernet/brokernet/advisory"
	"github.com/brokernet/brokernet/destination"
	"github.com/brokernet/brokernet/hop"
)

func staticOptions(t *testing.T, include []string, exclude ...string) Options {
	o := opts()
	for _, p := range include {
		o.StaticInclude = append(o.StaticInclude, mustPattern(t, p))
	}
	for _, p := range exclude {
		o.Filter.Exclude = append(o.Filter.Exclude, mustPattern(t, p))
	}
	return o
}

func TestStartStaticIncludes(t *testing.T) {
	tests := []struct {
		name    string
		include []string
		exclude []string
		want    []string // destinations subscribed, in order
	}{
		{"a queue pattern with a wildcard is subscribed as written", []string{"queue://a.>"}, nil, []string{"queue://a.>"}},
		{"a pattern without kind gives a queue and a topic", []string{"audit.*"}, nil, []string{"queue://audit.*", "topic://audit.*"}},
		{"the STOMP form works too", []string{"/topic/prices"}, nil, []string{"topic://prices"}},
		{"the same destination twice is subscribed once", []string{"queue://a", "a", "/queue/a"}, nil, []string{"queue://a", "topic://a"}},
		{"exclusion wins over a static include (AMQ-6331)", []string{"queue://a.>", "topic://b"}, []string{"queue://a.>"}, []string{"topic://b"}},
		{"a wider exclusion wins too", []string{"queue://a.b.>", "c"}, []string{">"}, nil},
		{"an exclusion of one kind leaves the other", []string{"x"}, []string{"topic://x"}, []string{"queue://x"}},
		{"a wildcard include an exclusion overlaps waits for its destinations", []string{"queue://a.>"}, []string{"queue://a.b"}, nil},
		{"an exclusion overlapping only some matches still narrows", []string{"queue://a.*"}, []string{"queue://*.secret.>"}, nil},
		{"an exclusion of one kind narrows only that kind", []string{"a.>"}, []string{"queue://a.secret"}, []string{"topic://a.>"}},
		{"an exclusion beside a wildcard include leaves it whole", []string{"queue://a.>"}, []string{"queue://b.>", "topic://a.x"}, []string{"queue://a.>"}},
		{"no static includes, no subscriptions", nil, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tbl := New(staticOptions(t, tt.include, tt.exclude...))
			b := newBroker()
			changes := tbl.Start()
			b.apply(t, changes)
			b.check(t, tbl)
			var got []string
			for _, ch := range changes {
				s := ch.Sub
				got = append(got, s.Destination.String())
				if ch.Kind != Subscribe || !s.Static || s.Replay || s.DurableName != "" || s.UserSelector != "" || len(s.Consumers) != 0 {
					t.Fatalf("change %+v", ch)
				}
				user, tag, ok := hop.ParseSelector(s.Selector)
				if !ok || user != "" || tag.Origin != StaticOrigin || !slices.Equal(tag.Path, []string{"R"}) {
					t.Fatalf("static selector %q parses as %q %+v %v", s.Selector, user, tag, ok)
				}
				if want := hop.Selector("", "R", 1, tag); s.Selector != want {
					t.Fatalf("static selector %q lacks the hop filter %q", s.Selector, want)
				}
				if s.Priority != -5 || s.Prefetch != DefaultPrefetch {
					t.Fatalf("static priority %d, prefetch %d", s.Priority, s.Prefetch)
				}
			}
			slices.Sort(got)
			want := slices.Clone(tt.want)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Fatalf("Start subscribed %q, want %q", got, want)
			}
			if again := tbl.Start(); len(again) != 0 {
				t.Fatalf("a second Start returned %v", again)
			}
		})
	}
}

// TestStaticSurvivesDemand checks that Apply never removes a static
// subscription, that plain conduit consumers of matching destinations join
// it, and that network consumers and durable subscribers do not.
func TestStaticSurvivesDemand(t *testing.T) {
	o := staticOptions(t, []string{"queue://jobs.>", "topic://news.>"})
	o.ConsumerTTL = 2
	tbl := New(o)
	b := newBroker()
	b.apply(t, tbl.Start())
	static := map[string]string{}
	for _, s := range tbl.Subscriptions() {
		static[s.Destination.String()] = s.ID
	}
	network := plain("n1", qJobsA)
	network.Path, network.Bridge, network.Origin = []string{"X"}, true, "o"
	durable := plain("d1", tNewsEU)
	durable.SubscriptionName = "s1"
	runStepsOn(t, tbl, b, []step{
		{ev: added(plain("c1", qJobsA)), action: Joined},                                                                            // served by queue://jobs.>
		{ev: added(withSelector(plain("c2", qJobsA), "a = 1")), action: Joined},                                                     // the static selects all anyway
		{ev: added(plain("c3", tNewsEU)), action: Joined},                                                                           // served by topic://news.>
		{ev: added(plain("c4", destination.Destination{Kind: destination.Topic, Name: "jobs.a"})), action: Added, changes: subOnly}, // kind must match
		{ev: added(network), action: Added, changes: subOnly},                                                                       // network consumers are never conduited
		{ev: added(durable), action: Added, changes: subOnly},                                                                       // durable demand needs its own
		{ev: removed("c1"), action: Left},
		{ev: removed("c2"), action: Left},
		{ev: removed("c3"), action: Left},
	})
	for dest, id := range static {
		s, ok := tbl.Lookup(id)
		if !ok || !s.Static || s.Destination.String() != dest || len(s.Consumers) != 0 {
			t.Fatalf("static %s: %+v, %v", dest, s, ok)
		}
	}
}

// TestStaticResetAndRestart checks that Reset withdraws static
// subscriptions and Start brings them back with new ids.
func TestStaticResetAndRestart(t *testing.T) {
	tbl := New(staticOptions(t, []string{"queue://a", "topic://b"}))
	b := newBroker()
	first := tbl.Start()
	b.apply(t, first)
	ch, _ := tbl.Apply(added(plain("c1", qOrders)))
	b.apply(t, ch)
	changes := tbl.Reset()
	if len(changes) != 3 {
		t.Fatalf("Reset returned %d changes, want 3", len(changes))
	}
	b.apply(t, changes)
	b.check(t, tbl)
	second := tbl.Start()
	b.apply(t, second)
	b.check(t, tbl)
	if len(second) != 2 {
		t.Fatalf("Start after Reset returned %v", second)
	}
	for i := range second {
		if second[i].Sub.ID == first[i].Sub.ID || second[i].Sub.Destination != first[i].Sub.Destination {
			t.Fatalf("restart %d: %+v after %+v", i, second[i].Sub, first[i].Sub)
		}
	}
}

func TestPermits(t *testing.T) {
	o := staticOptions(t, []string{"queue://static.>"}, "queue://static.secret", "EXCL.>")
	o.Filter.Include = []destination.Pattern{mustPattern(t, "dyn.>")}
	tbl := New(o)
	tests := []struct {
		d    destination.Destination
		want bool
	}{
		{destination.Destination{Kind: destination.Queue, Name: "dyn.a"}, true},
		{destination.Destination{Kind: destination.Queue, Name: "other"}, false},
		{destination.Destination{Kind: destination.Queue, Name: "static.a"}, true}, // a static include lets it through the include list
		{destination.Destination{Kind: destination.Topic, Name: "static.a"}, false},
		{destination.Destination{Kind: destination.Queue, Name: "static.secret"}, false}, // exclusion first
		{destination.Destination{Kind: destination.Queue, Name: "EXCL.dyn"}, false},
		{destination.Destination{Kind: destination.TempQueue, Name: "other"}, true}, // bridgeTempDestinations alone decides
		{destination.Destination{Kind: destination.TempTopic, Name: "EXCL.x"}, true},
		{destination.Destination{Name: "dyn.a"}, false},
	}
	for _, tt := range tests {
		if got := tbl.Permits(tt.d); got != tt.want {
			t.Errorf("Permits(%v) = %v, want %v", tt.d, got, tt.want)
		}
	}
	o.BridgeTemp = false
	if New(o).Permits(destination.Destination{Kind: destination.TempQueue, Name: "dyn.a"}) {
		t.Errorf("Permits(a temporary queue) without BridgeTemp = true")
	}
	// Apply uses the same rule for remote consumers.
	if _, d := tbl.Apply(added(plain("c1", destination.Destination{Kind: destination.Queue, Name: "static.a"}))); d.Action != Added {
		t.Fatalf("consumer on a static destination: %+v", d)
	}
	if _, d := tbl.Apply(added(plain("c2", destination.Destination{Kind: destination.Queue, Name: "static.secret"}))); d.Reason != ReasonExcluded {
		t.Fatalf("consumer on an excluded destination: %+v", d)
	}
}

func dq(name string) destination.Destination {
	return destination.Destination{Kind: destination.Queue, Name: name}
}

func destAdded(d destination.Destination) advisory.DestinationEvent {
	return advisory.DestinationEvent{Destination: d}
}

func destRemoved(d destination.Destination) advisory.DestinationEvent {
	return advisory.DestinationEvent{Destination: d, Removed: true}
}

// staticSummary renders changes as "+dest" and "-dest".
func staticSummary(changes []Change) []string {
	var out []string
	for _, ch := range changes {
		s := "+"
		if ch.Kind == Unsubscribe {
			s = "-"
		}
		out = append(out, s+ch.Sub.Destination.String())
	}
	return out
}

// TestStaticNarrowed follows a wildcard static include that an exclusion
// overlaps: each permitted local destination it matches gets a static
// subscription of its own while it exists, the excluded one never does.
func TestStaticNarrowed(t *testing.T) {
	tbl := New(staticOptions(t, []string{"queue://orders.>", "topic://news"}, "queue://orders.secret.>"))
	b := newBroker()
	type op struct {
		name string
		do   func() []Change
		want []string
	}
	dest := func(d destination.Destination, removed bool) func() []Change {
		return func() []Change {
			if removed {
				return tbl.Destination(destRemoved(d))
			}
			return tbl.Destination(destAdded(d))
		}
	}
	remote := func(ev advisory.Event, action Action) func() []Change {
		return func() []Change {
			ch, d := tbl.Apply(ev)
			if d.Action != action {
				t.Fatalf("%v %s: %v, want %v", ev.Kind, ev.Consumer.ID, d, action)
			}
			return ch
		}
	}
	for _, o := range []op{
		{"a destination known before Start waits for it", dest(dq("orders.eu"), false), nil},
		{"Start subscribes the known permitted ones, not the wildcard", tbl.Start, []string{"+queue://orders.eu", "+topic://news"}},
		{"the excluded destination gets nothing", dest(dq("orders.secret"), false), nil},
		{"nor does one below it", dest(dq("orders.secret.x"), false), nil},
		{"nor one the include does not match", dest(dq("billing"), false), nil},
		{"nor a temporary queue", dest(destination.Destination{Kind: destination.TempQueue, Name: "orders.t"}, false), nil},
		{"a new queue gets its subscription", dest(dq("orders.us"), false), []string{"+queue://orders.us"}},
		{"its advisory replayed changes nothing", dest(dq("orders.us"), false), nil},
		{"the include's own name counts (\">\" matches zero words)", dest(dq("orders"), false), []string{"+queue://orders"}},
		{"a plain remote consumer joins the narrowed subscription", remote(added(plain("c1", dq("orders.us"))), Joined), nil},
		{"a destination that goes loses its subscription", dest(dq("orders.eu"), true), []string{"-queue://orders.eu"}},
		{"one that goes while it serves a consumer keeps it", dest(dq("orders.us"), true), nil},
		{"which takes no new consumers", remote(added(plain("c2", dq("orders.us"))), Added), []string{"+queue://orders.us"}},
		{"and goes with its last consumer", remote(removed("c1"), Removed), []string{"-queue://orders.us"}},
		{"the destination back gets a static subscription again", dest(dq("orders.us"), false), []string{"+queue://orders.us"}},
		{"an unknown destination going changes nothing", dest(dq("orders.zz"), true), nil},
		{"an excluded one going neither", dest(dq("orders.secret"), true), nil},
	} {
		changes := o.do()
		if got := staticSummary(changes); !slices.Equal(got, o.want) {
			t.Fatalf("%s: got %q, want %q", o.name, got, o.want)
		}
		b.apply(t, changes)
		b.check(t, tbl)
		for _, ch := range changes {
			if ch.Kind == Subscribe && ch.Sub.Destination.Kind == destination.Queue && !ch.Sub.Static && ch.Sub.Destination.Name != "orders.us" {
				t.Fatalf("%s: %+v is not static", o.name, ch.Sub)
			}
		}
	}

	// A reconnect: Reset withdraws everything, Start brings back the
	// destinations still known, and the remote consumer its own demand.
	changes := tbl.Reset()
	b.apply(t, changes)
	b.check(t, tbl)
	changes = tbl.Start()
	if got, want := staticSummary(changes), []string{"+queue://orders", "+queue://orders.us", "+topic://news"}; !slices.Equal(got, want) {
		t.Fatalf("Start after Reset: %q, want %q", got, want)
	}
	b.apply(t, changes)
	changes, d := tbl.Apply(added(plain("c2", dq("orders.us"))))
	if d.Action != Joined || len(changes) != 0 {
		t.Fatalf("replayed consumer after Reset: %v %q", d, staticSummary(changes))
	}
	b.check(t, tbl)
}

// TestStaticNarrowedLeavesOtherStatics checks that a destination another
// static include already receives gets no second static subscription, and
// that its going never removes that include.
func TestStaticNarrowedLeavesOtherStatics(t *testing.T) {
	tbl := New(staticOptions(t, []string{"queue://orders.>", "queue://orders.eu", "queue://orders.us.>"}, "queue://orders.secret"))
	b := newBroker()
	changes := tbl.Start()
	if got, want := staticSummary(changes), []string{"+queue://orders.eu", "+queue://orders.us.>"}; !slices.Equal(got, want) {
		t.Fatalf("Start: %q, want %q", got, want)
	}
	b.apply(t, changes)
	for _, ev := range []advisory.DestinationEvent{
		destAdded(dq("orders.eu")), destAdded(dq("orders.us")), destAdded(dq("orders.us.x")),
		destRemoved(dq("orders.eu")), destRemoved(dq("orders.us.x")),
	} {
		if changes := tbl.Destination(ev); len(changes) != 0 {
			t.Fatalf("%+v: %q", ev, staticSummary(changes))
		}
	}
	b.check(t, tbl)
	if got := tbl.Len(); got != 2 {
		t.Fatalf("%d subscriptions, want the 2 configured", got)
	}
}

// TestStaticNarrowingKeepsTheRules drives a Table with random local
// destinations appearing and going, remote consumers, resets and starts.
// After every step: no static subscription can receive an excluded
// destination's messages (a wildcard one overlaps no exclusion, a concrete
// one is permitted), and every known permitted destination a static include
// matches is received by exactly one static subscription, and every
// permitted remote consumer is served by exactly one subscription.
func TestStaticNarrowingKeepsTheRules(t *testing.T) {
	includes := []string{"queue://orders.>", "queue://orders.eu.>", "*.x", "topic://news.>"}
	excludes := []string{"queue://orders.secret.>", "queue://*.hidden", "topic://news.secret"}
	o := staticOptions(t, includes, excludes...)
	names := []string{"orders", "orders.eu", "orders.eu.x", "orders.secret", "orders.secret.k", "orders.hidden", "orders.us", "a.x", "a.hidden", "news.secret", "news.a", "other"}
	var dests []destination.Destination
	for _, n := range names {
		dests = append(dests, dq(n), destination.Destination{Kind: destination.Topic, Name: n})
	}
	exclusions := destination.Filter{Exclude: o.Filter.Exclude}
	r := rand.New(rand.NewPCG(3, 5))
	tbl := New(o)
	b := newBroker()
	known := map[destination.Destination]bool{}
	consumers := map[string]destination.Destination{}
	seen := map[string]int{}
	for i := range 4000 {
		var changes []Change
		switch n := r.IntN(20); {
		case n < 10:
			d := dests[r.IntN(len(dests))]
			removed := r.IntN(3) == 0
			known[d] = !removed
			changes = tbl.Destination(advisory.DestinationEvent{Destination: d, Removed: removed})
		case n < 14:
			id := fmt.Sprintf("c%d", r.IntN(8))
			d := dests[r.IntN(len(dests))]
			changes, _ = tbl.Apply(added(plain(id, d)))
			consumers[id] = d
		case n < 18:
			id := fmt.Sprintf("c%d", r.IntN(8))
			changes, _ = tbl.Apply(removed(id))
			delete(consumers, id)
		case n < 19:
			changes = tbl.Reset()
			clear(consumers)
		default:
			changes = tbl.Start()
		}
		for _, s := range staticSummary(changes) {
			seen[s[:1]]++
		}
		b.apply(t, changes)
		b.check(t, tbl)
		var statics []Subscription
		served := map[string]int{}
		for _, s := range tbl.Subscriptions() {
			for _, id := range s.Consumers {
				served[id]++
			}
			if !s.Static {
				continue
			}
			statics = append(statics, s)
			if s.Destination.IsWildcard() && !exclusions.AllowsAll(destination.PatternOf(s.Destination)) {
				t.Fatalf("step %d: static %s reaches excluded destinations", i, s.Destination)
			}
			if !s.Destination.IsWildcard() && !tbl.Permits(s.Destination) {
				t.Fatalf("step %d: static subscription for forbidden %s", i, s.Destination)
			}
		}
		for id, d := range consumers {
			if want := map[bool]int{true: 1}[tbl.Permits(d)]; served[id] != want {
				t.Fatalf("step %d: consumer %s of %s is served by %d subscriptions, want %d", i, id, d, served[id], want)
			}
		}
		if !tbl.started {
			continue
		}
		for d, ok := range known {
			if !ok || !tbl.Permits(d) || !slices.ContainsFunc(o.StaticInclude, func(p destination.Pattern) bool { return p.Match(d) }) {
				continue
			}
			n := 0
			for _, s := range statics {
				if destination.PatternOf(s.Destination).Match(d) {
					n++
				}
			}
			if n != 1 {
				t.Fatalf("step %d: %s is received by %d static subscriptions, want 1: %+v", i, d, n, statics)
			}
		}
	}
	if seen["+"] < 50 || seen["-"] < 50 {
		t.Fatalf("the random steps rarely changed statics: %v", seen)
	}
}
