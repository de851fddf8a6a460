package demand

import (
	"slices"
	"testing"

	"github.com/brokernet/brokernet/advisory"
	"github.com/brokernet/brokernet/hop"
)

func TestOrSelectors(t *testing.T) {
	tests := []struct {
		name string
		in   []string
		want string
	}{
		{"no consumers select nothing special", nil, ""},
		{"one selector is kept as is", []string{"a = 1"}, "a = 1"},
		{"equal selectors collapse", []string{"a = 1", "a = 1"}, "a = 1"},
		{"distinct selectors are OR-ed in sorted order", []string{"b = 2", "a = 1"}, "(a = 1) OR (b = 2)"},
		{"duplicates are dropped", []string{"b = 2", "a = 1", "b = 2", "c = 3"}, "(a = 1) OR (b = 2) OR (c = 3)"},
		{"a consumer without selector wants everything", []string{"a = 1", "", "b = 2"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := orSelectors(tt.in); got != tt.want {
				t.Fatalf("orSelectors(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

// TestConduitSelectorReplacement walks the OR of a queue conduit
// subscription's selectors through joins and leaves (topics keep one
// subscription per selector instead, see TestTopicConduitPerSelector),
// checking each replacement: the new
// subscription comes first and names the old, the old one's retirement
// follows and names the new.
func TestConduitSelectorReplacement(t *testing.T) {
	sel := func(id, s string) advisory.Consumer { return withSelector(plain(id, qOrders), s) }
	type want struct {
		action  Action
		changes []string
		user    string // the live subscription's user selector afterwards
	}
	tests := []struct {
		name  string
		steps []advisory.Event
		want  []want
	}{
		{
			name:  "a consumer with a new selector widens the OR",
			steps: []advisory.Event{added(sel("c1", "a = 1")), added(sel("c2", "b = 2"))},
			want:  []want{{Added, subOnly, "a = 1"}, {Joined, replace, "(a = 1) OR (b = 2)"}},
		},
		{
			name:  "a consumer with a selector already present changes nothing",
			steps: []advisory.Event{added(sel("c1", "a = 1")), added(sel("c2", "a = 1")), removed("c1")},
			want:  []want{{Added, subOnly, "a = 1"}, {Joined, nil, "a = 1"}, {Left, nil, "a = 1"}},
		},
		{
			name:  "the last consumer with a selector leaving narrows the OR",
			steps: []advisory.Event{added(sel("c1", "a = 1")), added(sel("c2", "b = 2")), added(sel("c3", "b = 2")), removed("c2"), removed("c3")},
			want: []want{{Added, subOnly, "a = 1"}, {Joined, replace, "(a = 1) OR (b = 2)"}, {Joined, nil, "(a = 1) OR (b = 2)"},
				{Left, nil, "(a = 1) OR (b = 2)"}, {Left, replace, "a = 1"}},
		},
		{
			name:  "a consumer without selector collapses the OR to none",
			steps: []advisory.Event{added(sel("c1", "a = 1")), added(sel("c2", "b = 2")), added(plain("c3", qOrders)), added(sel("c4", "c = 3"))},
			want:  []want{{Added, subOnly, "a = 1"}, {Joined, replace, "(a = 1) OR (b = 2)"}, {Joined, replace, ""}, {Joined, nil, ""}},
		},
		{
			name:  "the consumer without selector leaving restores the OR",
			steps: []advisory.Event{added(plain("c1", qOrders)), added(sel("c2", "b = 2")), added(sel("c3", "a = 1")), removed("c1")},
			want:  []want{{Added, subOnly, ""}, {Joined, nil, ""}, {Joined, nil, ""}, {Left, replace, "(a = 1) OR (b = 2)"}},
		},
		{
			name:  "a consumer changing its selector re-issues the OR once",
			steps: []advisory.Event{added(sel("c1", "a = 1")), added(sel("c2", "b = 2")), added(sel("c2", "c = 3"))},
			want:  []want{{Added, subOnly, "a = 1"}, {Joined, replace, "(a = 1) OR (b = 2)"}, {Joined, replace, "(a = 1) OR (c = 3)"}},
		},
		{
			name:  "the last consumer leaving removes the subscription without replacement",
			steps: []advisory.Event{added(sel("c1", "a = 1")), added(sel("c2", "b = 2")), removed("c1"), removed("c2")},
			want:  []want{{Added, subOnly, "a = 1"}, {Joined, replace, "(a = 1) OR (b = 2)"}, {Left, replace, "b = 2"}, {Removed, unsubOnly, ""}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tbl := New(opts())
			b := newBroker()
			for i, ev := range tt.steps {
				before := tbl.Subscriptions()
				changes, d := tbl.Apply(ev)
				w := tt.want[i]
				if d.Action != w.action || !slices.Equal(summary(changes), w.changes) {
					t.Fatalf("step %d: %q %v, want %q %v", i, summary(changes), d, w.changes, w.action)
				}
				b.apply(t, changes)
				b.check(t, tbl)
				subs := tbl.Subscriptions()
				if len(subs) > 1 {
					t.Fatalf("step %d: %d subscriptions for one conduit", i, len(subs))
				}
				if len(subs) == 1 && subs[0].UserSelector != w.user {
					t.Fatalf("step %d: user selector %q, want %q", i, subs[0].UserSelector, w.user)
				}
				if slices.Equal(w.changes, replace) {
					nw, old := changes[0], changes[1]
					if nw.Replaces != before[0].ID || old.Sub.ID != before[0].ID || old.ReplacedBy != nw.Sub.ID || nw.Sub.ID == old.Sub.ID {
						t.Fatalf("step %d: replacement %+v", i, changes)
					}
					// A joining consumer is served by the new subscription; a
					// leaving one left the old.
					if wantID := map[Action]string{Joined: nw.Sub.ID, Left: old.Sub.ID}[d.Action]; d.SubID != wantID {
						t.Fatalf("step %d: decision names %s, want %s", i, d.SubID, wantID)
					}
					if u, _, _ := hop.ParseSelector(nw.Sub.Selector); u != w.user {
						t.Fatalf("step %d: new selector %q carries user %q", i, nw.Sub.Selector, u)
					}
				}
			}
		})
	}
}

// TestTopicConduitPerSelector checks the topic conduit rule: one
// subscription per distinct user selector, shared by the consumers with that
// selector, created and removed without ever replacing a subscription that
// still serves a consumer (its pending topic messages would be lost).
func TestTopicConduitPerSelector(t *testing.T) {
	sel := func(id, s string) advisory.Consumer { return withSelector(plain(id, tPrices), s) }
	tests := []struct {
		name  string
		steps []step
		users []string // the live subscriptions' user selectors afterwards, sorted
	}{
		{"a second selector joining and leaving leaves the first alone", []step{
			{ev: added(sel("c1", "a = 1")), action: Added, changes: subOnly},
			{ev: added(sel("c2", "b = 2")), action: Added, changes: subOnly},
			{ev: removed("c2"), action: Removed, changes: unsubOnly},
			{ev: added(sel("c3", "b = 2")), action: Added, changes: subOnly},
			{ev: removed("c3"), action: Removed, changes: unsubOnly},
		}, []string{"a = 1"}},
		{"the same selector shares a subscription until its last consumer leaves", []step{
			{ev: added(sel("c1", "a = 1")), action: Added, changes: subOnly},
			{ev: added(sel("c2", "a = 1")), action: Joined},
			{ev: removed("c1"), action: Left},
			{ev: added(sel("c3", "b = 2")), action: Added, changes: subOnly},
			{ev: removed("c2"), action: Removed, changes: unsubOnly},
		}, []string{"b = 2"}},
		{"a consumer without selector gets its own and narrows nothing", []step{
			{ev: added(sel("c1", "a = 1")), action: Added, changes: subOnly},
			{ev: added(plain("c2", tPrices)), action: Added, changes: subOnly},
			{ev: added(sel("c3", "  ")), action: Joined}, // a blank selector is none
			{ev: removed("c2"), action: Left},
			{ev: removed("c3"), action: Removed, changes: unsubOnly},
		}, []string{"a = 1"}},
		{"a consumer changing its selector moves between subscriptions", []step{
			{ev: added(sel("c1", "a = 1")), action: Added, changes: subOnly},
			{ev: added(sel("c2", "a = 1")), action: Joined},
			{ev: added(sel("c2", "b = 2")), action: Added, changes: subOnly},
			{ev: added(sel("c1", "b = 2")), action: Joined, changes: unsubOnly},
		}, []string{"b = 2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tbl := New(opts())
			runSteps(t, tbl, tt.steps)
			var users []string
			for _, s := range tbl.Subscriptions() {
				users = append(users, s.UserSelector)
				if s.Replay || s.Static || s.DurableName != "" {
					t.Fatalf("unexpected subscription %+v", s)
				}
			}
			slices.Sort(users)
			if !slices.Equal(users, tt.users) {
				t.Fatalf("user selectors %q, want %q", users, tt.users)
			}
		})
	}
}

// TestConduitKeysByDurability checks that durable and non-durable consumers
// of one topic get separate conduit subscriptions, and that queues ignore a
// subscription name.
func TestConduitKeysByDurability(t *testing.T) {
	durable := func(id, name string) advisory.Consumer {
		c := plain(id, tPrices)
		c.SubscriptionName = name
		return c
	}
	queueNamed := plain("q1", qOrders)
	queueNamed.SubscriptionName = "ignored"
	tbl := New(opts())
	runSteps(t, tbl, []step{
		{ev: added(plain("c1", tPrices)), action: Added, changes: subOnly},
		{ev: added(durable("d1", "s1")), action: Added, changes: subOnly},
		{ev: added(durable("d2", "s2")), action: Joined},
		{ev: added(plain("c2", tPrices)), action: Joined},
		{ev: added(queueNamed), action: Added, changes: subOnly},
	})
	var kinds []string
	for _, s := range tbl.Subscriptions() {
		kinds = append(kinds, s.Destination.String()+"|"+s.DurableName+"|"+s.Consumers[0])
	}
	want := []string{"topic://prices||c1", "topic://prices|bn_L_prices|d1", "queue://orders||q1"}
	if !slices.Equal(kinds, want) {
		t.Fatalf("subscriptions %q, want %q", kinds, want)
	}
}

// TestNonConduitKeepsSelectors checks that without conduit every consumer
// keeps its own subscription with its own selector.
func TestNonConduitKeepsSelectors(t *testing.T) {
	o := opts()
	o.Conduit = false
	tbl := New(o)
	for _, c := range []advisory.Consumer{withSelector(plain("c1", qOrders), "a = 1"), withSelector(plain("c2", qOrders), "b = 2"), plain("c3", qOrders)} {
		if _, d := tbl.Apply(added(c)); d.Action != Added {
			t.Fatalf("%s: %+v", c.ID, d)
		}
	}
	var got []string
	for _, s := range tbl.Subscriptions() {
		got = append(got, s.Consumers[0]+"="+s.UserSelector)
	}
	if want := []string{"c1=a = 1", "c2=b = 2", "c3="}; !slices.Equal(got, want) {
		t.Fatalf("subscriptions %q, want %q", got, want)
	}
}
