package demand

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/brokernet/brokernet/advisory"
	"github.com/brokernet/brokernet/destination"
	"github.com/brokernet/brokernet/hop"
)

var (
	qOrders = destination.Destination{Kind: destination.Queue, Name: "orders"}
	qOther  = destination.Destination{Kind: destination.Queue, Name: "other"}
	tPrices = destination.Destination{Kind: destination.Topic, Name: "prices"}
	tmpQ    = destination.Destination{Kind: destination.TempQueue, Name: "ID:h-1:1:1"}
)

// opts returns default options for a bridge from L (local) to R (remote).
func opts() Options {
	o := DefaultOptions()
	o.LocalID, o.RemoteID = "L", "R"
	return o
}

func added(c advisory.Consumer) advisory.Event {
	return advisory.Event{Kind: advisory.ConsumerAdded, Consumer: c, ConsumerCount: -1}
}

func removed(id string) advisory.Event {
	return advisory.Event{Kind: advisory.ConsumerRemoved, Consumer: advisory.Consumer{ID: id}, ConsumerCount: -1}
}

func plain(id string, d destination.Destination) advisory.Consumer {
	return advisory.Consumer{ID: id, Destination: d, Prefetch: 1000}
}

// broker applies Changes the way the bridge would, insisting that they are
// consistent: live subscriptions by ID, and durable subscriptions kept
// inactive by name.
type broker struct {
	live map[string]Subscription
	kept map[string]Subscription // by DurableName
}

func newBroker() *broker {
	return &broker{live: map[string]Subscription{}, kept: map[string]Subscription{}}
}

func (b *broker) apply(t testing.TB, changes []Change) {
	t.Helper()
	for i, ch := range changes {
		s := ch.Sub
		if ch.KeepDurable && ch.DestroyDurable {
			t.Fatalf("change %d keeps and destroys %s", i, s.ID)
		}
		if (ch.KeepDurable || ch.DestroyDurable) && (ch.Kind != Unsubscribe || s.DurableName == "") {
			t.Fatalf("change %d: durable flags on %v of non-durable %+v", i, ch.Kind, s)
		}
		switch ch.Kind {
		case Subscribe:
			if _, ok := b.live[s.ID]; ok {
				t.Fatalf("subscribe of existing %s", s.ID)
			}
			if ch.ReplacedBy != "" {
				t.Fatalf("subscribe %s with ReplacedBy", s.ID)
			}
			if ch.Replaces != "" {
				// The retirement of the replaced subscription follows at once,
				// or, for a durable subscription that keeps its name, comes
				// just before.
				next := i+1 < len(changes) && changes[i+1].Kind == Unsubscribe && changes[i+1].Sub.ID == ch.Replaces && changes[i+1].ReplacedBy == s.ID
				prev := i > 0 && changes[i-1].Kind == Unsubscribe && changes[i-1].Sub.ID == ch.Replaces && changes[i-1].ReplacedBy == s.ID &&
					changes[i-1].KeepDurable && changes[i-1].Sub.DurableName == s.DurableName && s.DurableName != ""
				if !next && !prev {
					t.Fatalf("subscribe %s replaces %s, but its retirement does not go with it: %+v", s.ID, ch.Replaces, changes)
				}
				if _, ok := b.live[ch.Replaces]; next && !ok && !b.isKept(ch.Replaces) {
					t.Fatalf("subscribe %s replaces unknown %s", s.ID, ch.Replaces)
				}
			}
			if s.DurableName != "" {
				for _, o := range b.live {
					if o.DurableName == s.DurableName {
						t.Fatalf("durable %s live twice (%s, %s)", s.DurableName, o.ID, s.ID)
					}
				}
				if k, ok := b.kept[s.DurableName]; ok {
					if k.Selector != s.Selector || k.Destination != s.Destination {
						t.Fatalf("reactivation of %s changes it: %+v -> %+v", s.DurableName, k, s)
					}
					delete(b.kept, s.DurableName)
				}
			}
			b.live[s.ID] = s
		case Unsubscribe:
			if ch.Replaces != "" {
				t.Fatalf("unsubscribe %s with Replaces", s.ID)
			}
			if _, ok := b.live[s.ID]; ok {
				delete(b.live, s.ID)
				if ch.KeepDurable {
					b.kept[s.DurableName] = s
				} else if s.DurableName != "" && !ch.DestroyDurable {
					t.Fatalf("durable %s unsubscribed without Keep or Destroy", s.ID)
				}
				continue
			}
			if k, ok := b.kept[s.DurableName]; ok && ch.DestroyDurable && s.DurableName != "" && k.ID == s.ID {
				delete(b.kept, s.DurableName)
				continue
			}
			t.Fatalf("unsubscribe of unknown %s (%+v)", s.ID, ch)
		default:
			t.Fatalf("bad change kind %v", ch.Kind)
		}
	}
}

func (b *broker) isKept(id string) bool {
	for _, k := range b.kept {
		if k.ID == id {
			return true
		}
	}
	return false
}

// check asserts that the broker holds exactly the table's subscriptions,
// ignoring Consumers lists, and its inactive durables.
func (b *broker) check(t testing.TB, tbl *Table) {
	t.Helper()
	subs := tbl.Subscriptions()
	if len(subs) != len(b.live) || tbl.Len() != len(b.live) {
		t.Fatalf("broker has %d subscriptions, table %d (Len %d)", len(b.live), len(subs), tbl.Len())
	}
	for _, s := range subs {
		got, ok := b.live[s.ID]
		if !ok {
			t.Fatalf("table subscription %s missing on broker", s.ID)
		}
		got.Consumers, s.Consumers = nil, nil
		if !reflect.DeepEqual(got, s) {
			t.Fatalf("broker has %+v, table %+v", got, s)
		}
	}
	kept := tbl.InactiveDurables()
	if len(kept) != len(b.kept) {
		t.Fatalf("broker keeps %d durables, table %d", len(b.kept), len(kept))
	}
	for _, s := range kept {
		got, ok := b.kept[s.DurableName]
		if !ok || got.ID != s.ID || got.Selector != s.Selector {
			t.Fatalf("table keeps %+v, broker %+v", s, got)
		}
	}
}

// size is the number of subscriptions the broker holds, live or kept.
func (b *broker) size() int { return len(b.live) + len(b.kept) }

func TestDefaultOptions(t *testing.T) {
	o := DefaultOptions()
	want := Options{Conduit: true, ConsumerTTL: 1, MessageTTL: 1, DecreasePriority: true, PriorityBase: -5, Prefetch: 1000, SuppressTopics: true, BridgeTemp: true}
	if !reflect.DeepEqual(o, want) {
		t.Fatalf("DefaultOptions() = %+v", o)
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name    string
		edit    func(*Options)
		wantErr []string
	}{
		{"defaults with ids are valid", func(*Options) {}, nil},
		{"unlimited TTLs are valid", func(o *Options) { o.ConsumerTTL, o.MessageTTL = -1, -1 }, nil},
		{"missing ids", func(o *Options) { o.LocalID, o.RemoteID = "", "" }, []string{"LocalID is empty", "RemoteID is empty"}},
		{"same ids", func(o *Options) { o.RemoteID = "L" }, []string{`both "L"`}},
		{"bad TTLs", func(o *Options) { o.ConsumerTTL, o.MessageTTL = -2, -3 }, []string{"ConsumerTTL -2", "MessageTTL -3"}},
		{"bad priority base", func(o *Options) { o.PriorityBase = -129 }, []string{"PriorityBase -129"}},
		{"static includes are valid", func(o *Options) {
			o.StaticInclude = []destination.Pattern{mustPattern(t, "queue://a.>"), mustPattern(t, "b")}
		}, nil},
		{"bad static includes", func(o *Options) {
			o.StaticInclude = []destination.Pattern{{}, mustPattern(t, "temp-queue://x")}
		}, []string{"StaticInclude[0] is empty", "StaticInclude[1] \"temp-queue://x\": temporary"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := opts()
			tt.edit(&o)
			err := o.Validate()
			if len(tt.wantErr) == 0 {
				if err != nil {
					t.Fatalf("Validate() = %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("Validate() = nil")
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate() = %v, want it to mention %q", err, w)
				}
			}
		})
	}
}

func TestApplySingleEvent(t *testing.T) {
	type want struct {
		action   Action
		reason   string
		nChanges int
	}
	tests := []struct {
		name string
		edit func(*Options)
		c    advisory.Consumer
		want want
	}{
		{"a plain queue consumer creates demand", nil, plain("c1", qOrders), want{Added, "", 1}},
		{"a plain topic consumer creates demand", nil, plain("c1", tPrices), want{Added, "", 1}},
		{"a browser never creates demand", nil, func() advisory.Consumer { c := plain("c1", qOrders); c.Browser = true; return c }(), want{Ignored, ReasonBrowser, 0}},
		{"a consumer whose path contains the local broker is a loop", func(o *Options) { o.ConsumerTTL = -1 },
			func() advisory.Consumer { c := plain("c1", qOrders); c.Path = []string{"X", "L"}; return c }(), want{Ignored, ReasonLoop, 0}},
		{"consumerTTL 1 stops demand that already made a hop", nil,
			func() advisory.Consumer { c := plain("c1", qOrders); c.Path = []string{"X"}; return c }(), want{Ignored, ReasonConsumerTTL, 0}},
		{"consumerTTL 2 admits one earlier hop", func(o *Options) { o.ConsumerTTL = 2 },
			func() advisory.Consumer { c := plain("c1", qOrders); c.Path = []string{"X"}; return c }(), want{Added, "", 1}},
		{"unlimited consumerTTL admits long paths", func(o *Options) { o.ConsumerTTL = -1 },
			func() advisory.Consumer { c := plain("c1", qOrders); c.Path = []string{"X", "Y", "Z", "W"}; return c }(), want{Added, "", 1}},
		{"consumerTTL 0 admits nothing", func(o *Options) { o.ConsumerTTL = 0 }, plain("c1", qOrders), want{Ignored, ReasonConsumerTTL, 0}},
		{"a temporary queue's consumer creates demand (bridgeTempDestinations)", nil, plain("c1", tmpQ), want{Added, "", 1}},
		{"a temporary queue passes an include list that does not name it, as in ActiveMQ", func(o *Options) {
			o.Filter.Include = []destination.Pattern{mustPattern(t, "topic://>")}
		}, plain("c1", tmpQ), want{Added, "", 1}},
		{"without BridgeTemp a temporary destination creates no demand", func(o *Options) { o.BridgeTemp = false }, plain("c1", tmpQ), want{Ignored, ReasonTemporary, 0}},
		{"excluded destinations create no demand", func(o *Options) {
			o.Filter.Exclude = []destination.Pattern{mustPattern(t, "orders")}
		}, plain("c1", qOrders), want{Ignored, ReasonExcluded, 0}},
		{"destinations outside the include list create no demand", func(o *Options) {
			o.Filter.Include = []destination.Pattern{mustPattern(t, "topic://>")}
		}, plain("c1", qOrders), want{Ignored, ReasonExcluded, 0}},
		{"a composite destination is never one subscription", nil, plain("c1", destination.Destination{Kind: destination.Queue, Name: "orders,audit"}), want{Ignored, ReasonComposite, 0}},
		{"an invalid destination is ignored", nil, plain("c1", destination.Destination{Name: "x"}), want{Ignored, ReasonInvalid + ": invalid destination", 0}},
		{"an event without id is ignored", nil, plain("", qOrders), want{Ignored, ReasonInvalid + ": missing consumer id", 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := opts()
			if tt.edit != nil {
				tt.edit(&o)
			}
			tbl := New(o)
			changes, d := tbl.Apply(added(tt.c))
			if d.Action != tt.want.action || d.Reason != tt.want.reason || len(changes) != tt.want.nChanges {
				t.Fatalf("Apply = %d changes, %+v; want %+v", len(changes), d, tt.want)
			}
			if d.ConsumerID != tt.c.ID {
				t.Errorf("Decision.ConsumerID = %q", d.ConsumerID)
			}
			if tt.want.action == Added {
				s := changes[0].Sub
				if changes[0].Kind != Subscribe || s.ID != d.SubID || !slices.Equal(s.Consumers, []string{tt.c.ID}) {
					t.Fatalf("change = %+v, decision %+v", changes[0], d)
				}
			}
		})
	}
}

func mustPattern(t testing.TB, s string) destination.Pattern {
	t.Helper()
	p, err := destination.ParsePattern(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestApplyUnknownEventKind(t *testing.T) {
	tbl := New(opts())
	changes, d := tbl.Apply(advisory.Event{Consumer: plain("c1", qOrders)})
	if len(changes) != 0 || d.Action != Ignored || !strings.HasPrefix(d.Reason, ReasonInvalid) {
		t.Fatalf("Apply = %v, %+v", changes, d)
	}
}

func TestSubscriptionFields(t *testing.T) {
	tests := []struct {
		name         string
		edit         func(*Options)
		c            advisory.Consumer
		wantPriority int
		wantPath     []string
		wantOrigin   string
		wantHops     string // substring of the selector
	}{
		{
			name: "decreased priority for a direct consumer",
			c:    advisory.Consumer{ID: "c1", Destination: qOrders, Priority: 4, Selector: "a = 1"},
			// newPath [R]: PriorityBase; a conduit's origin names the group.
			wantPriority: -5, wantPath: []string{"R"}, wantOrigin: "conduit:R:queue://orders", wantHops: "BrokernetHops < 1)",
		},
		{
			name:         "a plain consumer without conduit keeps its own id as origin",
			edit:         func(o *Options) { o.Conduit = false },
			c:            advisory.Consumer{ID: "c1", Destination: qOrders, Priority: 4, Selector: "a = 1"},
			wantPriority: -5, wantPath: []string{"R"}, wantOrigin: "c1", wantHops: "BrokernetHops < 1)",
		},
		{
			name:         "decreased priority two hops out",
			edit:         func(o *Options) { o.ConsumerTTL = 3 },
			c:            advisory.Consumer{ID: "c1", Destination: qOrders, Path: []string{"X"}, Native: true},
			wantPriority: -8, wantPath: []string{"X", "R"}, wantOrigin: "c1", wantHops: "BrokernetHops < 1)",
		},
		{
			name:         "decreased priority three hops out keeps the original consumer",
			edit:         func(o *Options) { o.ConsumerTTL, o.MessageTTL = 3, 3 },
			c:            advisory.Consumer{ID: "c9", Destination: qOrders, Path: []string{"X", "Y"}, Bridge: true, Origin: "c1"},
			wantPriority: -9, wantPath: []string{"X", "Y", "R"}, wantOrigin: "c1", wantHops: "BrokernetHops < 3)",
		},
		{
			name:         "inherited priority without decreaseNetworkConsumerPriority",
			edit:         func(o *Options) { o.DecreasePriority = false },
			c:            advisory.Consumer{ID: "c1", Destination: qOrders, Priority: 4},
			wantPriority: 4, wantPath: []string{"R"}, wantOrigin: "conduit:R:queue://orders", wantHops: "BrokernetHops < 1)",
		},
		{
			name:         "priority is clamped to a Java byte",
			edit:         func(o *Options) { o.PriorityBase = -127; o.ConsumerTTL = -1 },
			c:            advisory.Consumer{ID: "c1", Destination: qOrders, Path: []string{"X", "Y"}},
			wantPriority: -128, wantPath: []string{"X", "Y", "R"}, wantOrigin: "c1", wantHops: "BrokernetHops < 1)",
		},
		{
			name:         "inherited priority is clamped too",
			edit:         func(o *Options) { o.DecreasePriority = false },
			c:            advisory.Consumer{ID: "c1", Destination: qOrders, Priority: 300},
			wantPriority: 127, wantPath: []string{"R"}, wantOrigin: "conduit:R:queue://orders", wantHops: "BrokernetHops < 1)",
		},
		{
			name:         "unlimited message TTL omits the hops clause",
			edit:         func(o *Options) { o.MessageTTL = -1 },
			c:            advisory.Consumer{ID: "c1", Destination: qOrders},
			wantPriority: -5, wantPath: []string{"R"}, wantOrigin: "conduit:R:queue://orders", wantHops: "",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := opts()
			o.Prefetch = 77
			if tt.edit != nil {
				tt.edit(&o)
			}
			tbl := New(o)
			changes, d := tbl.Apply(added(tt.c))
			if d.Action != Added {
				t.Fatalf("Apply: %+v", d)
			}
			s := changes[0].Sub
			if s.Priority != tt.wantPriority || s.Prefetch != 77 || s.Destination != tt.c.Destination || s.UserSelector != tt.c.Selector {
				t.Fatalf("subscription %+v", s)
			}
			user, tag, ok := hop.ParseSelector(s.Selector)
			if !ok || user != tt.c.Selector || !slices.Equal(tag.Path, tt.wantPath) || tag.Origin != tt.wantOrigin {
				t.Fatalf("selector %q parses as %q, %+v, %v", s.Selector, user, tag, ok)
			}
			if want := hop.Selector(tt.c.Selector, "R", max(o.MessageTTL, -1), tag); s.Selector != want {
				t.Fatalf("selector %q, want %q", s.Selector, want)
			}
			if !strings.Contains(s.Selector, "NOT LIKE '%|R|%'") {
				t.Errorf("selector %q does not filter messages that visited R", s.Selector)
			}
			if tt.wantHops == "" && strings.Contains(s.Selector, "BrokernetHops") || tt.wantHops != "" && !strings.Contains(s.Selector, tt.wantHops) {
				t.Errorf("selector %q, want hops clause %q", s.Selector, tt.wantHops)
			}
			if got, ok := tbl.Lookup(s.ID); !ok || !reflect.DeepEqual(got, s) {
				t.Errorf("Lookup(%q) = %+v, %v", s.ID, got, ok)
			}
		})
	}
}

func TestNonPositivePrefetchMeansDefault(t *testing.T) {
	o := opts()
	o.Prefetch = 0
	changes, _ := New(o).Apply(added(plain("c1", qOrders)))
	if changes[0].Sub.Prefetch != DefaultPrefetch {
		t.Fatalf("Prefetch = %d", changes[0].Sub.Prefetch)
	}
}

// summary renders Changes compactly for scripted tests: "+" subscribe, "-"
// unsubscribe, "r" for a replacement pair, "keep" and "destroy" for the
// durable flags.
func summary(changes []Change) []string {
	var out []string
	for _, ch := range changes {
		s := "+"
		if ch.Kind == Unsubscribe {
			s = "-"
		}
		if ch.Replaces != "" || ch.ReplacedBy != "" {
			s += "r"
		}
		if ch.KeepDurable {
			s += "keep"
		}
		if ch.DestroyDurable {
			s += "destroy"
		}
		out = append(out, s)
	}
	return out
}

// step is one event of a scripted scenario and what it must produce. A
// local step goes to ApplyLocal.
type step struct {
	ev      advisory.Event
	action  Action
	reason  string
	changes []string // as summary renders them
	local   bool
}

// runSteps feeds the steps to tbl, checking each against its expectation
// and the broker model.
func runSteps(t *testing.T, tbl *Table, steps []step) *broker {
	t.Helper()
	return runStepsOn(t, tbl, newBroker(), steps)
}

func runStepsOn(t *testing.T, tbl *Table, b *broker, steps []step) *broker {
	t.Helper()
	for i, st := range steps {
		apply := tbl.Apply
		if st.local {
			apply = tbl.ApplyLocal
		}
		changes, d := apply(st.ev)
		got := summary(changes)
		if d.Action != st.action || d.Reason != st.reason || !slices.Equal(got, st.changes) || d.Local != st.local {
			t.Fatalf("step %d (%v %s): got %q %v, want %v %q %q", i, st.ev.Kind, st.ev.Consumer.ID, got, d, st.action, st.reason, st.changes)
		}
		b.apply(t, changes)
		b.check(t, tbl)
	}
	return b
}

var (
	subOnly   = []string{"+"}
	unsubOnly = []string{"-"}
	replace   = []string{"+r", "-r"}
)

func withSelector(c advisory.Consumer, sel string) advisory.Consumer { c.Selector = sel; return c }

func TestConduit(t *testing.T) {
	red := func(id string) advisory.Consumer { return withSelector(plain(id, qOrders), "color = 'red'") }
	native := func(id string, path ...string) advisory.Consumer {
		c := plain(id, qOrders)
		c.Path, c.Native = path, true
		return c
	}
	o := opts()
	o.ConsumerTTL = 3
	tbl := New(o)
	runSteps(t, tbl, []step{
		{ev: added(plain("c1", qOrders)), action: Added, changes: subOnly}, // bn-d1
		{ev: added(plain("c2", qOrders)), action: Joined},                  // shares bn-d1
		{ev: added(red("c3")), action: Joined},                             // a selector joins too; the OR stays ""
		{ev: added(plain("c4", qOther)), action: Added, changes: subOnly},  // bn-d2, another destination
		{ev: added(native("n1", "X")), action: Added, changes: subOnly},    // bn-d3: network consumers are not conduited ...
		{ev: added(native("n2", "X")), action: Added, changes: subOnly},    // bn-d4: ... not even with each other
		{ev: added(plain("c1", qOrders)), action: Ignored, reason: ReasonDuplicate},
		{ev: removed("c1"), action: Left},
		{ev: removed("c1"), action: Ignored, reason: ReasonUnknownConsumer},
		{ev: removed("c2"), action: Left, changes: replace},                 // bn-d5 selects red only
		{ev: added(plain("c5", qOrders)), action: Joined, changes: replace}, // bn-d6 selects everything again
		{ev: removed("n1"), action: Removed, changes: unsubOnly},
	})
	var got []string
	for _, s := range tbl.Subscriptions() {
		got = append(got, s.ID+"="+strings.Join(s.Consumers, ",")+"/"+s.UserSelector)
	}
	want := []string{"bn-d2=c4/", "bn-d4=n2/", "bn-d6=c3,c5/"}
	if !slices.Equal(got, want) {
		t.Fatalf("subscriptions %q, want %q", got, want)
	}
}

func TestConduitTag(t *testing.T) {
	o := opts()
	o.DecreasePriority = false
	tbl := New(o)
	c1, c2 := plain("c1", qOrders), plain("c2", qOrders)
	c1.Priority, c2.Priority = 3, 9
	changes, _ := tbl.Apply(added(c1))
	tbl.Apply(added(c2))
	tbl.Apply(removed("c1"))
	s, ok := tbl.Lookup(changes[0].Sub.ID)
	if !ok || s.Priority != 3 || !slices.Equal(s.Consumers, []string{"c2"}) {
		t.Fatalf("Lookup = %+v, %v; want the first consumer's priority", s, ok)
	}
	if _, tag, _ := hop.ParseSelector(s.Selector); tag.Origin != "conduit:R:queue://orders" || !slices.Equal(tag.Path, []string{"R"}) {
		t.Fatalf("tag %+v, want the group's origin", tag)
	}
	// Once the group is empty, the next first consumer sets the priority.
	tbl.Apply(removed("c2"))
	changes, _ = tbl.Apply(added(c2))
	if changes[0].Sub.Priority != 9 {
		t.Fatalf("priority %d after the group emptied", changes[0].Sub.Priority)
	}
}

func TestNonConduit(t *testing.T) {
	o := opts()
	o.Conduit = false
	tbl := New(o)
	runSteps(t, tbl, []step{
		{ev: added(plain("c1", qOrders)), action: Added, changes: subOnly},
		{ev: added(plain("c2", qOrders)), action: Added, changes: subOnly},
		{ev: added(plain("c2", qOrders)), action: Ignored, reason: ReasonDuplicate},
		{ev: removed("c1"), action: Removed, changes: unsubOnly},
		{ev: removed("c2"), action: Removed, changes: unsubOnly},
		{ev: removed("c2"), action: Ignored, reason: ReasonUnknownConsumer},
	})
	if tbl.Len() != 0 {
		t.Fatalf("Len() = %d", tbl.Len())
	}
}

func TestChangedConsumerIsReplaced(t *testing.T) {
	withPrefetch := func(c advisory.Consumer, p int) advisory.Consumer { c.Prefetch = p; return c }
	withPriority := func(c advisory.Consumer, p int) advisory.Consumer { c.Priority = p; return c }
	withBrowser := func(c advisory.Consumer) advisory.Consumer { c.Browser = true; return c }
	withDest := func(c advisory.Consumer, d destination.Destination) advisory.Consumer { c.Destination = d; return c }
	c1 := plain("c1", qOrders)
	tests := []struct {
		name  string
		edit  func(*Options)
		steps []step
	}{
		{"a new prefetch is not a change (receipt quirk)", nil, []step{
			{ev: added(withPrefetch(c1, 0)), action: Added, changes: subOnly},
			{ev: added(withPrefetch(c1, 1000)), action: Ignored, reason: ReasonDuplicate},
		}},
		{"a blank selector equals none", nil, []step{
			{ev: added(c1), action: Added, changes: subOnly},
			{ev: added(withSelector(c1, "  ")), action: Ignored, reason: ReasonDuplicate},
		}},
		{"a new selector re-issues the only consumer's subscription without a gap", nil, []step{
			{ev: added(c1), action: Added, changes: subOnly},
			{ev: added(withSelector(c1, "a = 1")), action: Added, changes: replace},
		}},
		{"a new selector of one of two conduit consumers changes nothing while the other selects all", nil, []step{
			{ev: added(c1), action: Added, changes: subOnly},
			{ev: added(plain("c2", qOrders)), action: Joined},
			{ev: added(withSelector(c1, "a = 1")), action: Joined},
			{ev: added(withSelector(plain("c2", qOrders), "a = 1")), action: Joined, changes: replace},
		}},
		{"a new selector without conduit is a replacement too", func(o *Options) { o.Conduit = false }, []step{
			{ev: added(c1), action: Added, changes: subOnly},
			{ev: added(withSelector(c1, "a = 1")), action: Added, changes: replace},
		}},
		{"a new destination is a new subscription", nil, []step{
			{ev: added(c1), action: Added, changes: subOnly},
			{ev: added(withDest(c1, qOther)), action: Added, changes: []string{"+", "-"}},
		}},
		{"a new priority matters only without decreased priority", func(o *Options) { o.DecreasePriority = false }, []step{
			{ev: added(c1), action: Added, changes: subOnly},
			{ev: added(withPriority(c1, 5)), action: Added, changes: replace},
		}},
		{"a new priority does not matter with decreased priority", nil, []step{
			{ev: added(c1), action: Added, changes: subOnly},
			{ev: added(withPriority(c1, 5)), action: Ignored, reason: ReasonDuplicate},
		}},
		{"a consumer that becomes a browser loses its demand", nil, []step{
			{ev: added(c1), action: Added, changes: subOnly},
			{ev: added(withBrowser(c1)), action: Ignored, reason: ReasonBrowser, changes: unsubOnly},
			{ev: removed("c1"), action: Ignored, reason: ReasonUnknownConsumer},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := opts()
			if tt.edit != nil {
				tt.edit(&o)
			}
			runSteps(t, New(o), tt.steps)
		})
	}
}

func TestReplacedDecision(t *testing.T) {
	tbl := New(opts())
	_, d1 := tbl.Apply(added(plain("c1", qOrders)))
	c := plain("c1", qOrders)
	c.Selector = "x = 1"
	_, d2 := tbl.Apply(added(c))
	if !d2.Replaced || d2.PreviousSubID != d1.SubID || d2.SubID == d1.SubID || d2.Action != Added {
		t.Fatalf("decision %+v after %+v", d2, d1)
	}
	if s := d2.String(); !strings.Contains(s, "replaced") || !strings.Contains(s, d1.SubID) {
		t.Errorf("String() = %q", s)
	}
}

func TestDecisionString(t *testing.T) {
	tests := []struct {
		d    Decision
		want string
	}{
		{Decision{Action: Added, ConsumerID: "c1", SubID: "bn-d1"}, "added consumer c1 sub bn-d1"},
		{Decision{Action: Ignored, ConsumerID: "c1", Reason: ReasonBrowser}, "ignored consumer c1: browser"},
		{Decision{Action: Ignored, ConsumerID: "c1", Reason: ReasonBrowser, Replaced: true, PreviousSubID: "bn-d4"}, "ignored consumer c1: browser (replaced changed consumer, left bn-d4)"},
		{Decision{Action: Suppressed, ConsumerID: "c1", Reason: ReasonSuppressed + "|A|B|"}, "suppressed consumer c1: suppressed: better route via |A|B|"},
		{Decision{Action: Added, ConsumerID: "l1", Local: true}, "added local consumer l1"},
	}
	for _, tt := range tests {
		if got := tt.d.String(); got != tt.want {
			t.Errorf("String() = %q, want %q", got, tt.want)
		}
	}
	for a, want := range map[Action]string{Ignored: "ignored", Added: "added", Joined: "joined", Left: "left", Removed: "removed", Suppressed: "suppressed", 0: "Action(0)"} {
		if got := a.String(); got != want {
			t.Errorf("Action %d String() = %q", a, got)
		}
	}
	for k, want := range map[ChangeKind]string{Subscribe: "subscribe", Unsubscribe: "unsubscribe", 0: "ChangeKind(0)"} {
		if got := k.String(); got != want {
			t.Errorf("ChangeKind %d String() = %q", k, got)
		}
	}
}

func TestReset(t *testing.T) {
	tbl := New(opts())
	b := newBroker()
	for _, c := range []advisory.Consumer{plain("c1", qOrders), plain("c2", qOrders), plain("c3", tPrices), plain("c4", qOther)} {
		ch, _ := tbl.Apply(added(c))
		b.apply(t, ch)
	}
	before := tbl.Subscriptions()
	changes := tbl.Reset()
	if len(changes) != len(before) {
		t.Fatalf("Reset returned %d changes for %d subscriptions", len(changes), len(before))
	}
	for i, ch := range changes {
		if ch.Kind != Unsubscribe || !reflect.DeepEqual(ch.Sub, before[i]) {
			t.Fatalf("change %d = %+v, want unsubscribe of %+v", i, ch, before[i])
		}
	}
	b.apply(t, changes)
	b.check(t, tbl)
	if tbl.Len() != 0 || b.size() != 0 {
		t.Fatalf("after Reset: Len %d, broker %d", tbl.Len(), b.size())
	}
	// Rebuilding from the replay never reuses an id.
	ch, d := tbl.Apply(added(plain("c1", qOrders)))
	if d.Action != Added || ch[0].Sub.ID != "bn-d4" {
		t.Fatalf("after Reset: %+v, %+v", ch, d)
	}
	if _, d := tbl.Apply(removed("c2")); d.Reason != ReasonUnknownConsumer {
		t.Fatalf("Reset kept consumer c2: %+v", d)
	}
	if len(New(opts()).Reset()) != 0 {
		t.Fatal("Reset of an empty table returned changes")
	}
}

func TestSubscriptionsAreSortedByID(t *testing.T) {
	o := opts()
	o.Conduit = false
	tbl := New(o)
	for i := range 12 {
		tbl.Apply(added(plain("c"+string(rune('a'+i)), qOrders)))
	}
	subs := tbl.Subscriptions()
	if !slices.IsSortedFunc(subs, func(a, b Subscription) int { return strings.Compare(a.ID, b.ID) }) {
		t.Fatalf("not sorted: %v", subs)
	}
	if _, ok := tbl.Lookup("bn-d99"); ok {
		t.Fatal("Lookup of an unknown id succeeded")
	}
	subs[0].Consumers[0] = "mutated"
	if s, _ := tbl.Lookup(subs[0].ID); s.Consumers[0] == "mutated" {
		t.Fatal("Subscriptions shares its Consumers slices")
	}
}

func TestConsumerPathIsCopied(t *testing.T) {
	o := opts()
	o.ConsumerTTL = -1
	tbl := New(o)
	c := plain("c1", qOrders)
	c.Path = []string{"X"}
	tbl.Apply(added(c))
	c.Path[0] = "L" // the caller reuses its slice
	again := plain("c1", qOrders)
	again.Path = []string{"X"}
	if _, d := tbl.Apply(added(again)); d.Reason != ReasonDuplicate {
		t.Fatalf("decision %+v: the table aliased the caller's Path", d)
	}
}

func TestTempGone(t *testing.T) {
	o := DefaultOptions()
	o.LocalID, o.RemoteID = "L", "R"
	tbl := New(o)
	tbl.Start()
	other := destination.Destination{Kind: destination.TempQueue, Name: "ID:h-1:1:2"}
	for _, c := range []advisory.Consumer{plain("c1", tmpQ), plain("c2", tmpQ), plain("c3", other)} {
		if ch, _ := tbl.Apply(added(c)); len(ch) > 1 {
			t.Fatalf("adding %s: %d changes", c.ID, len(ch))
		}
	}
	t.Run("the demand of every consumer of a removed temporary destination goes", func(t *testing.T) {
		ch := tbl.TempGone(tmpQ)
		if len(ch) != 1 || ch[0].Kind != Unsubscribe || ch[0].Sub.Destination != tmpQ {
			t.Fatalf("TempGone = %+v, want one Unsubscribe of %v", ch, tmpQ)
		}
		if tbl.Len() != 1 {
			t.Fatalf("%d subscriptions left, want the other temporary queue's", tbl.Len())
		}
	})
	t.Run("a later RemoveInfo of its consumers changes nothing", func(t *testing.T) {
		if ch, d := tbl.Apply(removed("c1")); len(ch) != 0 || d.Reason != ReasonUnknownConsumer {
			t.Fatalf("Apply(removed c1) = %+v, %v", ch, d)
		}
	})
	t.Run("a destination nobody consumes, or not temporary, changes nothing", func(t *testing.T) {
		if ch := tbl.TempGone(destination.Destination{Kind: destination.TempTopic, Name: "x:1"}); ch != nil {
			t.Fatalf("TempGone(unknown) = %+v", ch)
		}
		if ch := tbl.TempGone(qOrders); ch != nil {
			t.Fatalf("TempGone(queue) = %+v", ch)
		}
	})
}
