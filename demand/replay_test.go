package demand

import (
	"slices"
	"testing"

	"github.com/brokernet/brokernet/advisory"
	"github.com/brokernet/brokernet/destination"
	"github.com/brokernet/brokernet/hop"
)

func replayOptions() Options {
	o := suppressOptions()
	o.ReplayWhenNoConsumers = true
	return o
}

// replaySubs returns the table's replay subscriptions.
func replaySubs(tbl *Table) []Subscription {
	var out []Subscription
	for _, s := range tbl.Subscriptions() {
		if s.Replay {
			out = append(out, s)
		}
	}
	return out
}

func TestReplaySubscription(t *testing.T) {
	localPlain := plain("l1", qOrders)
	localWild := plain("l2", destination.Destination{Kind: destination.Queue, Name: "*"})
	localOtherWild := plain("l3", destination.Destination{Kind: destination.Queue, Name: "jobs.>"})
	localBrowser := plain("l4", qOrders)
	localBrowser.Browser = true
	localNative := plain("l5", qOrders)
	localNative.Native, localNative.Path = true, []string{"N"}
	localRoute := foreign("l6", -5, "Z")
	localReplay := foreign("l7", -5, "Z")
	localReplay.Replay = true
	betterRoute := foreign("l8", -5, "A")
	both := []string{"+", "+"} // the demand subscription, then the replay one

	tests := []struct {
		name  string
		edit  func(*Options)
		steps []step
	}{
		{"remote demand without local consumers gets a replay subscription", nil, []step{
			{ev: added(plain("c1", qOrders)), action: Added, changes: both},
			{ev: added(plain("c2", qOrders)), action: Joined},
			{ev: removed("c1"), action: Left},
			{ev: removed("c2"), action: Removed, changes: []string{"-", "-"}},
		}},
		{"a local consumer withdraws it and its leaving brings it back", nil, []step{
			{ev: added(plain("c1", qOrders)), action: Added, changes: both},
			{ev: added(localPlain), local: true, action: Added, changes: unsubOnly},
			{ev: added(localPlain), local: true, action: Ignored, reason: ReasonDuplicate},
			{ev: removed("l1"), local: true, action: Removed, changes: subOnly},
			{ev: removed("l1"), local: true, action: Ignored, reason: ReasonUnknownConsumer},
		}},
		{"local consumers present first prevent it", nil, []step{
			{ev: added(localPlain), local: true, action: Added},
			{ev: added(plain("c1", qOrders)), action: Added, changes: subOnly},
			{ev: removed("l1"), local: true, action: Removed, changes: subOnly},
		}},
		{"wildcard local consumers count for the queues they match", nil, []step{
			{ev: added(localWild), local: true, action: Added},
			{ev: added(localOtherWild), local: true, action: Added},
			{ev: added(plain("c1", qOrders)), action: Added, changes: subOnly},
			{ev: removed("l2"), local: true, action: Removed, changes: subOnly},
			{ev: added(localWild), local: true, action: Added, changes: unsubOnly},
		}},
		{"browsers, network consumers and other bridges do not count", nil, []step{
			{ev: added(localBrowser), local: true, action: Ignored, reason: ReasonBrowser},
			{ev: added(localNative), local: true, action: Added},
			{ev: added(localRoute), local: true, action: Added},
			{ev: added(localReplay), local: true, action: Ignored, reason: ReasonReplay},
			{ev: added(plain("c1", qOrders)), action: Added, changes: both},
		}},
		{"a suppressed route is not demand", nil, []step{
			{ev: added(betterRoute), local: true, action: Added},
			{ev: added(viaR("n1", "A")), action: Suppressed, reason: ReasonSuppressed + "|A|"},
			{ev: removed("l8"), local: true, action: Removed, changes: both},
			{ev: added(betterRoute), local: true, action: Added, reason: ReasonSuppressed + "|A|", changes: []string{"-", "-"}},
		}},
		{"topics never get one", nil, []step{
			{ev: added(plain("c1", tPrices)), action: Added, changes: subOnly},
		}},
		{"nothing without ReplayWhenNoConsumers", func(o *Options) { o.ReplayWhenNoConsumers = false }, []step{
			{ev: added(plain("c1", qOrders)), action: Added, changes: subOnly},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := replayOptions()
			if tt.edit != nil {
				tt.edit(&o)
			}
			runSteps(t, New(o), tt.steps)
		})
	}
}

// TestReplaySelectorFollowsDemand checks the replay subscription's fields
// and that its user selector is the OR of the queue's demand, re-issued as
// a replacement when that changes.
func TestReplaySelectorFollowsDemand(t *testing.T) {
	o := replayOptions()
	o.Conduit = false
	tbl := New(o)
	b := newBroker()
	apply := func(ev advisory.Event, want []string) {
		t.Helper()
		changes, d := tbl.Apply(ev)
		if got := summary(changes); !slices.Equal(got, want) {
			t.Fatalf("%v: changes %q, want %q (%v)", ev.Consumer.ID, got, want, d)
		}
		b.apply(t, changes)
		b.check(t, tbl)
	}
	apply(added(withSelector(plain("c1", qOrders), "a = 1")), []string{"+", "+"})
	r := replaySubs(tbl)
	if len(r) != 1 {
		t.Fatalf("replay subscriptions %+v", r)
	}
	tag := hop.Tag{Path: []string{"R"}, Origin: "replay", Replay: true}
	if s := r[0]; s.UserSelector != "a = 1" || s.Selector != hop.ReplaySelector("a = 1", "R", 0, tag) ||
		s.Priority != -5 || s.Prefetch != DefaultPrefetch || s.Static || s.DurableName != "" || len(s.Consumers) != 0 {
		t.Fatalf("replay subscription %+v", s)
	}
	apply(added(withSelector(plain("c2", qOrders), "b = 2")), []string{"+", "+r", "-r"})
	if r := replaySubs(tbl); r[0].UserSelector != "(a = 1) OR (b = 2)" {
		t.Fatalf("replay user selector %q", r[0].UserSelector)
	}
	apply(added(plain("c3", qOrders)), []string{"+", "+r", "-r"})
	if r := replaySubs(tbl); r[0].UserSelector != "" {
		t.Fatalf("replay user selector %q", r[0].UserSelector)
	}
	apply(removed("c3"), []string{"+r", "-r", "-"})
	apply(removed("c1"), []string{"+r", "-r", "-"})
	apply(removed("c2"), []string{"-", "-"})
	if tbl.Len() != 0 {
		t.Fatalf("left %+v", tbl.Subscriptions())
	}
}

// TestReplayIsNotDemand checks that a bridge ignores replay subscriptions
// in its remote broker's advisories.
func TestReplayIsNotDemand(t *testing.T) {
	tbl := New(replayOptions())
	changes, _ := tbl.Apply(added(plain("c1", qOrders)))
	var replay Subscription
	for _, ch := range changes {
		if ch.Sub.Replay {
			replay = ch.Sub
		}
	}
	seen := subAdvisory(t, "L", replay)
	if !seen.Consumer.Replay || !seen.Consumer.Bridge {
		t.Fatalf("replay subscription parses as %+v", seen.Consumer)
	}
	o := bridgeOptions("M", "L")
	o.ConsumerTTL = -1
	if changes, d := New(o).Apply(seen); len(changes) != 0 || d.Reason != ReasonReplay {
		t.Fatalf("another bridge took a replay subscription as demand: %v %+v", changes, d)
	}
}
