package demand

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/brokernet/brokernet/advisory"
	"github.com/brokernet/brokernet/destination"
)

// durableSub is a remote durable topic subscriber on prices.
func durableSub(id, name, selector string) advisory.Consumer {
	c := withSelector(plain(id, tPrices), selector)
	c.SubscriptionName = name
	return c
}

// destroyed is the advisory of a destroyed remote durable subscription.
func destroyed(name string) advisory.Event {
	return advisory.Event{Kind: advisory.DurableRemoved, Consumer: advisory.Consumer{SubscriptionName: name}, ConsumerCount: -1}
}

func TestDurableDemand(t *testing.T) {
	tests := []struct {
		name  string
		edit  func(*Options)
		steps []step
	}{
		{"the last durable going offline keeps the subscription; its return reactivates it", nil, []step{
			{ev: added(durableSub("d1", "s1", "")), action: Added, changes: subOnly},
			{ev: added(durableSub("d2", "s2", "")), action: Joined},
			{ev: removed("d1"), action: Left},
			{ev: removed("d2"), action: Removed, changes: []string{"-keep"}},
			{ev: added(durableSub("d3", "s1", "")), action: Added, changes: subOnly}, // s1 back with a new consumer id
			{ev: removed("d3"), action: Removed, changes: []string{"-keep"}},
		}},
		{"destroying the remote durables destroys the kept subscription", nil, []step{
			{ev: added(durableSub("d1", "s1", "")), action: Added, changes: subOnly},
			{ev: added(durableSub("d2", "s2", "")), action: Joined},
			{ev: destroyed("s1"), action: Ignored, reason: ReasonDurableActive},
			{ev: removed("d1"), action: Left},
			{ev: destroyed("s1"), action: Removed},                               // s2 is online and still needs it
			{ev: destroyed("s1"), action: Ignored, reason: ReasonUnknownDurable}, // idempotent
			{ev: removed("d2"), action: Removed, changes: []string{"-keep"}},
			{ev: destroyed("s2"), action: Removed, changes: []string{"-destroy"}},
			{ev: destroyed("s3"), action: Ignored, reason: ReasonUnknownDurable},
		}},
		{"with dynamicOnly the last durable going offline destroys it", func(o *Options) { o.DynamicOnly = true }, []step{
			{ev: added(durableSub("d1", "s1", "")), action: Added, changes: subOnly},
			{ev: added(durableSub("d2", "s2", "")), action: Joined},
			{ev: removed("d1"), action: Left},
			{ev: removed("d2"), action: Removed, changes: []string{"-destroy"}},
			{ev: destroyed("s1"), action: Ignored, reason: ReasonUnknownDurable},
		}},
		{"each durable selector has its own subscription, kept while its remote durable exists", nil, []step{
			{ev: added(durableSub("d1", "s1", "a = 1")), action: Added, changes: subOnly},
			{ev: added(durableSub("d2", "s2", "b = 2")), action: Added, changes: subOnly}, // a = 1 untouched
			{ev: removed("d2"), action: Removed, changes: []string{"-keep"}},              // s2 offline keeps b = 2
			{ev: destroyed("s2"), action: Removed, changes: []string{"-destroy"}},
			{ev: removed("d1"), action: Removed, changes: []string{"-keep"}},
		}},
		{"another selector coming and going never touches an offline durable's backlog", nil, []step{
			{ev: added(durableSub("d1", "s1", "a = 1")), action: Added, changes: subOnly},
			{ev: removed("d1"), action: Removed, changes: []string{"-keep"}},
			{ev: added(durableSub("d2", "s2", "b = 2")), action: Added, changes: subOnly},
			{ev: removed("d2"), action: Removed, changes: []string{"-keep"}},
			{ev: destroyed("s2"), action: Removed, changes: []string{"-destroy"}},
			{ev: added(durableSub("d3", "s1", "a = 1")), action: Added, changes: subOnly}, // reactivates a = 1
		}},
		{"durables with the same selector share one subscription", nil, []step{
			{ev: added(durableSub("d1", "s1", "a = 1")), action: Added, changes: subOnly},
			{ev: added(durableSub("d2", "s2", "a = 1")), action: Joined},
			{ev: removed("d1"), action: Left},
			{ev: destroyed("s1"), action: Removed}, // s2 still needs it
			{ev: removed("d2"), action: Removed, changes: []string{"-keep"}},
		}},
		{"a reconnecting durable subscriber with a new selector re-creates it", nil, []step{
			{ev: added(durableSub("d1", "s1", "a = 1")), action: Added, changes: subOnly},
			{ev: removed("d1"), action: Removed, changes: []string{"-keep"}},
			{ev: added(durableSub("d2", "s1", "c = 3")), action: Added, changes: []string{"+", "-destroy"}},
		}},
		{"without conduit each remote durable subscription has its own", func(o *Options) { o.Conduit = false }, []step{
			{ev: added(durableSub("d1", "s1", "")), action: Added, changes: subOnly},
			{ev: added(durableSub("d2", "s2", "")), action: Added, changes: subOnly},
			{ev: removed("d1"), action: Removed, changes: []string{"-keep"}},
			{ev: destroyed("s1"), action: Removed, changes: []string{"-destroy"}},
		}},
		{"a durable's priority change keeps its name", func(o *Options) { o.Conduit, o.DecreasePriority, o.DynamicOnly = false, false, true }, []step{
			{ev: added(durableSub("d1", "s1", "")), action: Added, changes: subOnly},
			{ev: added(func() advisory.Consumer { c := durableSub("d1", "s1", ""); c.Priority = 3; return c }()), action: Added, changes: []string{"-rkeep", "+r"}},
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

// TestDurableReactivationKeepsName checks that a returning durable
// subscriber, after a KeepDurable and after a Reset, gets the same
// DurableName with a new ID, and that ApplyLocal ignores durable removals.
func TestDurableReactivationKeepsName(t *testing.T) {
	tbl := New(opts())
	b := newBroker()
	ch, _ := tbl.Apply(added(durableSub("d1", "s1", "")))
	b.apply(t, ch)
	first := ch[0].Sub
	if first.DurableName != "bn_L_prices" {
		t.Fatalf("DurableName %q", first.DurableName)
	}
	reset := tbl.Reset()
	if len(reset) != 1 || !reset[0].KeepDurable {
		t.Fatalf("Reset returned %+v", reset)
	}
	b.apply(t, reset)
	b.check(t, tbl)
	if kept := tbl.InactiveDurables(); len(kept) != 1 || kept[0].ID != first.ID {
		t.Fatalf("InactiveDurables = %+v", kept)
	}
	ch, d := tbl.Apply(added(durableSub("d1", "s1", ""))) // replayed after the reconnect
	b.apply(t, ch)
	b.check(t, tbl)
	if d.Action != Added || len(ch) != 1 || ch[0].Sub.DurableName != first.DurableName || ch[0].Sub.ID == first.ID {
		t.Fatalf("reactivation: %+v, %+v", ch, d)
	}
	if ch, d := tbl.ApplyLocal(destroyed("s1")); len(ch) != 0 || d.Reason != ReasonNotLocal {
		t.Fatalf("ApplyLocal of a durable removal: %v %+v", ch, d)
	}
	// A new table, as after a bridge restart, derives the same name.
	if ch, _ := New(opts()).Apply(added(durableSub("x", "s9", ""))); ch[0].Sub.DurableName != first.DurableName || ch[0].Sub.Selector != first.Selector {
		t.Fatalf("after a restart: %+v, want %+v", ch[0].Sub, first)
	}
}

// TestDurableRemovedMatching checks which RemoveSubscriptionInfo events
// destroy which remote durable subscriptions.
func TestDurableRemovedMatching(t *testing.T) {
	withClient := func(c advisory.Consumer, id string) advisory.Consumer { c.ClientID = id; return c }
	ev := func(name, client string, dest destination.Destination) advisory.Event {
		return advisory.Event{Kind: advisory.DurableRemoved, Consumer: advisory.Consumer{SubscriptionName: name, ClientID: client, Destination: dest}}
	}
	tests := []struct {
		name     string
		consumer advisory.Consumer
		ev       advisory.Event
		want     Action
	}{
		{"name only", durableSub("d1", "s1", ""), ev("s1", "", destination.Destination{}), Removed},
		{"another name", durableSub("d1", "s1", ""), ev("s2", "", destination.Destination{}), Ignored},
		{"the advisory's topic", durableSub("d1", "s1", ""), ev("s1", "", tPrices), Removed},
		{"another topic", durableSub("d1", "s1", ""), ev("s1", "", tNewsEU), Ignored},
		{"a STOMP durable has no client id to compare", durableSub("d1", "s1", ""), ev("s1", "client-9", destination.Destination{}), Removed},
		{"an OpenWire durable's client id", withClient(durableSub("d1", "s1", ""), "cid"), ev("s1", "cid", destination.Destination{}), Removed},
		{"another client's durable", withClient(durableSub("d1", "s1", ""), "cid"), ev("s1", "other", destination.Destination{}), Ignored},
		{"STOMP 1.0 puts the name in clientId", withClient(durableSub("d1", "s1", ""), "cid"), ev("s1", "s1", destination.Destination{}), Removed},
		{"no name", durableSub("d1", "s1", ""), ev("", "", destination.Destination{}), Ignored},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tbl := New(opts())
			b := newBroker()
			ch, _ := tbl.Apply(added(tt.consumer))
			b.apply(t, ch)
			ch, _ = tbl.Apply(removed(tt.consumer.ID))
			b.apply(t, ch)
			ch, d := tbl.Apply(tt.ev)
			b.apply(t, ch)
			b.check(t, tbl)
			if d.Action != tt.want {
				t.Fatalf("decision %+v, want %v", d, tt.want)
			}
			if tt.want == Removed && (len(ch) != 1 || !ch[0].DestroyDurable || d.SubID != ch[0].Sub.ID || !strings.HasPrefix(d.ConsumerID, "durable:")) {
				t.Fatalf("changes %+v, decision %+v", ch, d)
			}
		})
	}
}

var durableNameSyntax = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)

func TestDurableNames(t *testing.T) {
	name := func(local string, dest string, sels ...string) string {
		o := opts()
		o.LocalID = local
		tbl := New(o)
		var out string
		for i, sel := range sels {
			c := withSelector(plain("d"+string(rune('0'+i)), destination.Destination{Kind: destination.Topic, Name: dest}), sel)
			c.SubscriptionName = "s" + string(rune('0'+i))
			ch, _ := tbl.Apply(added(c))
			for _, c := range ch {
				if c.Kind == Subscribe {
					out = c.Sub.DurableName
				}
			}
		}
		return out
	}
	long := strings.Repeat("very.long.topic.", 20)
	tests := []struct {
		name string
		got  string
		want string // "" to check only the syntax and bound
	}{
		{"plain names are readable", name("L", "prices", ""), "bn_L_prices"},
		{"broker ids are sanitized", name("ID:vm-1:2", "prices", ""), "bn_ID_vm-1_2_prices"},
		{"a selector adds a hash", name("L", "prices", "a = 1"), ""},
		{"an unsafe topic name adds a hash", name("L", "a b/c", ""), ""},
		{"long names are bounded", name(strings.Repeat("x", 100), long, ""), ""},
	}
	for _, tt := range tests {
		if tt.want != "" && tt.got != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, tt.got, tt.want)
		}
		if !durableNameSyntax.MatchString(tt.got) || len(tt.got) > 160 || !strings.HasPrefix(tt.got, "bn_") {
			t.Errorf("%s: %q is not a safe bounded name", tt.name, tt.got)
		}
	}
	if a, b := name("L", "prices", "a = 1"), name("L", "prices", "b = 2"); a == b || !strings.HasPrefix(a, "bn_L_prices_") {
		t.Errorf("selectors a = 1 and b = 2 give %q and %q", a, b)
	}
	if a, b := name("L", "prices", "a = 1"), name("L", "prices", "a = 1"); a != b {
		t.Errorf("the same selector gives %q and %q", a, b)
	}
	if a, b := name("L", "a b", ""), name("L", "a_b", ""); a == b {
		t.Errorf("topics %q and %q share the name %q", "a b", "a_b", a)
	}
	// A second selector gets its own subscription; the first keeps its name.
	tbl := New(opts())
	ch, _ := tbl.Apply(added(durableSub("d1", "s1", "a = 1")))
	first := ch[0].Sub.DurableName
	ch, _ = tbl.Apply(added(durableSub("d2", "s2", "b = 2")))
	if len(ch) != 1 || ch[0].Kind != Subscribe || ch[0].Sub.DurableName == first || ch[0].Replaces != "" {
		t.Errorf("a second durable selector gives %+v", ch)
	}
	if subs := tbl.Subscriptions(); len(subs) != 2 || subs[0].DurableName != first {
		t.Errorf("after a second selector: %+v, want %s kept", subs, first)
	}
}

// TestNetworkDurableIsNeverSuppressed checks that a network durable
// subscription gets its own durable demand that no better route withdraws,
// as ActiveMQ spares durables.
func TestNetworkDurableIsNeverSuppressed(t *testing.T) {
	c := durableSub("n1", "bn_R_prices", "")
	c.Bridge, c.Origin, c.Path = true, "o", []string{"A"}
	topic := foreign("f1", -5, "A")
	topic.Destination = tPrices
	tbl := New(suppressOptions())
	runSteps(t, tbl, []step{
		{ev: added(c), action: Added, changes: subOnly},
		{ev: added(topic), local: true, action: Added},
	})
	s := tbl.Subscriptions()[0]
	if s.DurableName == "" || s.DurableName == "bn_L_prices" {
		t.Fatalf("network durable demand %+v, want a name of its own", s)
	}
}

// TestRestoreAndStaleDurables follows a bridge restart: the remote durable
// subscriptions recorded before are restored as offline, a replayed one
// reactivates its demand under the same name, and only durable demand that
// no remote durable subscription wants is destroyed.
func TestRestoreAndStaleDurables(t *testing.T) {
	before := New(opts())
	b := newBroker()
	for _, ev := range []advisory.Event{
		added(durableSub("d1", "s1", "k = 'a'")), removed("d1"), // offline with a backlog
		added(durableSub("d2", "s2", "k = 'b'")), // online
		added(durableSub("d3", "s3", "k = 'c'")), removed("d3"),
	} {
		ch, _ := before.Apply(ev)
		b.apply(t, ch)
	}
	recs := before.Durables()
	if len(recs) != 3 || recs[0].Consumer.ID != "" || recs[0].Consumer.SubscriptionName != "s1" || recs[0].DemandName == "" {
		t.Fatalf("Durables() = %+v", recs)
	}
	names := map[string]string{} // subscription name -> demand name
	var held []Subscription
	for _, r := range recs {
		names[r.Consumer.SubscriptionName] = r.DemandName
		held = append(held, Subscription{Destination: r.Consumer.Destination, DurableName: r.DemandName})
	}
	// The bridge restarts: s3 was destroyed meanwhile (its removal missed)
	// and forgotten by the record; an older naming rule left one more name.
	held = append(held, Subscription{Destination: tPrices, DurableName: "bn_L_prices_0123456789ab"})
	after := New(opts())
	if skipped := after.Restore(recs[:2]); skipped != 0 {
		t.Fatalf("Restore skipped %d", skipped)
	}
	if ch, _ := after.Apply(advisory.Event{}); len(ch) != 0 {
		t.Fatalf("an invalid event after Restore changed %+v", ch)
	}
	kept := after.InactiveDurables()
	if len(kept) != 2 || kept[0].DurableName != names["s1"] || kept[1].DurableName != names["s2"] {
		t.Fatalf("restored %+v, want %s and %s kept", kept, names["s1"], names["s2"])
	}
	// The broker as the restarted bridge finds it.
	b = newBroker()
	for _, k := range kept {
		b.kept[k.DurableName] = k
	}
	runStepsOn(t, after, b, []step{
		{ev: added(durableSub("d4", "s2", "k = 'b'")), action: Added, changes: subOnly}, // replayed: reactivates
	})
	if s := after.Subscriptions(); len(s) != 1 || s[0].DurableName != names["s2"] {
		t.Fatalf("reactivated %+v, want %s", s, names["s2"])
	}
	stale := after.StaleDurables(held)
	var got []string
	for _, ch := range stale {
		if ch.Kind != Unsubscribe || !ch.DestroyDurable || ch.Sub.ID == "" || ch.Sub.Destination != tPrices {
			t.Fatalf("stale change %+v", ch)
		}
		got = append(got, ch.Sub.DurableName)
	}
	want := []string{"bn_L_prices_0123456789ab", names["s3"]}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("stale %q, want %q", got, want)
	}
	// A missed-then-seen destruction of a restored durable destroys it.
	runStepsOn(t, after, b, []step{
		{ev: destroyed("s1"), action: Removed, changes: []string{"-destroy"}},
	})
	if recs := after.Durables(); len(recs) != 1 || recs[0].DemandName != names["s2"] {
		t.Fatalf("Durables() after = %+v", recs)
	}
	// Restore ignores what it knows and what Apply would refuse.
	q := durableSub("", "sq", "")
	q.Destination = qOrders
	if skipped := after.Restore([]RemoteDurable{recs[0], {Consumer: q}, {Consumer: plain("", tPrices)}}); skipped != 2 {
		t.Fatalf("Restore skipped %d, want 2", skipped)
	}
}

// TestStaleDurablesKeepsWantedNames checks that nothing the table holds,
// live or kept, is ever stale.
func TestStaleDurablesKeepsWantedNames(t *testing.T) {
	tbl := New(opts())
	b := runSteps(t, tbl, []step{
		{ev: added(durableSub("d1", "s1", "")), action: Added, changes: subOnly},
		{ev: added(durableSub("d2", "s2", "x = 1")), action: Added, changes: subOnly},
		{ev: removed("d2"), action: Removed, changes: []string{"-keep"}},
	})
	var held []Subscription
	for _, s := range b.live {
		held = append(held, s)
	}
	for _, s := range b.kept {
		held = append(held, s, s) // duplicates too
	}
	if stale := tbl.StaleDurables(held); len(stale) != 0 {
		t.Fatalf("stale %+v", stale)
	}
}

// TestForgetOfflineDurable checks that only an offline remote durable
// subscription is forgotten, and that its demand goes only with the last
// subscription that needs it.
func TestForgetOfflineDurable(t *testing.T) {
	tbl := New(opts())
	b := runSteps(t, tbl, []step{
		{ev: added(durableSub("d1", "s1", "")), action: Added, changes: subOnly},
		{ev: added(durableSub("d2", "s2", "")), action: Joined},
		{ev: removed("d2"), action: Left},
	})
	if recs := tbl.Durables(); len(recs) != 2 || !recs[0].Online || recs[1].Online {
		t.Fatalf("Durables() = %+v", recs)
	}
	if _, ok := tbl.Forget(durableSub("", "s1", "")); ok {
		t.Fatal("forgot an online durable subscription")
	}
	ch, ok := tbl.Forget(durableSub("", "s2", ""))
	if !ok || len(ch) != 0 {
		t.Fatalf("forgetting s2 while s1 shares the demand: %v %+v", ok, ch)
	}
	b.apply(t, ch)
	runStepsOn(t, tbl, b, []step{{ev: removed("d1"), action: Removed, changes: []string{"-keep"}}})
	ch, ok = tbl.Forget(durableSub("", "s1", ""))
	if !ok || !slices.Equal(summary(ch), []string{"-destroy"}) {
		t.Fatalf("forgetting the last: %v %q", ok, summary(ch))
	}
	b.apply(t, ch)
	b.check(t, tbl)
	if _, ok := tbl.Forget(durableSub("", "s1", "")); ok {
		t.Fatal("forgot s1 twice")
	}
}
