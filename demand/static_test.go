package demand

import (
	"slices"
	"testing"

	"github.com/brokernet/brokernet/advisory"
	"github.com/brokernet/brokernet/destination"
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
		{"an exclusion of a narrower name does not stop a wildcard include", []string{"queue://a.>"}, []string{"queue://a.b"}, []string{"queue://a.>"}},
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
				user, tag, ok := advisory.ParseSelector(s.Selector)
				if !ok || user != "" || tag.Origin != StaticOrigin || !slices.Equal(tag.Path, []string{"R"}) {
					t.Fatalf("static selector %q parses as %q %+v %v", s.Selector, user, tag, ok)
				}
				if want := advisory.Selector("", "R", 1, tag); s.Selector != want {
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
		{destination.Destination{Kind: destination.TempQueue, Name: "dyn.a"}, false},
		{destination.Destination{Name: "dyn.a"}, false},
	}
	for _, tt := range tests {
		if got := tbl.Permits(tt.d); got != tt.want {
			t.Errorf("Permits(%v) = %v, want %v", tt.d, got, tt.want)
		}
	}
	// Apply uses the same rule for remote consumers.
	if _, d := tbl.Apply(added(plain("c1", destination.Destination{Kind: destination.Queue, Name: "static.a"}))); d.Action != Added {
		t.Fatalf("consumer on a static destination: %+v", d)
	}
	if _, d := tbl.Apply(added(plain("c2", destination.Destination{Kind: destination.Queue, Name: "static.secret"}))); d.Reason != ReasonExcluded {
		t.Fatalf("consumer on an excluded destination: %+v", d)
	}
}
