package demand

import (
	"testing"

	"github.com/brokernet/brokernet/advisory"
)

func exclusive(c advisory.Consumer) advisory.Consumer   { c.Exclusive = true; return c }
func retroactive(c advisory.Consumer) advisory.Consumer { c.Retroactive = true; return c }

// TestExclusiveQueueDemand walks a queue conduit through exclusive and plain
// consumers: the subscription is exclusive while any consumer it serves is,
// whatever order they came in, and a change of that is a replacement (the new
// subscription first, so the queue is never without demand).
func TestExclusiveQueueDemand(t *testing.T) {
	ex := func(id string) advisory.Consumer { return exclusive(plain(id, qOrders)) }
	tests := []struct {
		name  string
		steps []step
		want  []bool // the live subscription's Exclusive after each step
	}{
		{"an exclusive consumer makes an exclusive subscription", []step{
			{ev: added(ex("c1")), action: Added, changes: subOnly},
			{ev: removed("c1"), action: Removed, changes: unsubOnly},
		}, []bool{true, false}},
		{"an exclusive consumer joining a plain conduit makes it exclusive", []step{
			{ev: added(plain("c1", qOrders)), action: Added, changes: subOnly},
			{ev: added(ex("c2")), action: Joined, changes: replace},
			{ev: added(plain("c3", qOrders)), action: Joined},
			{ev: removed("c2"), action: Left, changes: replace},
		}, []bool{false, true, true, false}},
		{"a plain consumer joining an exclusive one keeps it exclusive", []step{
			{ev: added(ex("c1")), action: Added, changes: subOnly},
			{ev: added(plain("c2", qOrders)), action: Joined},
			{ev: removed("c1"), action: Left, changes: replace},
		}, []bool{true, true, false}},
		{"a consumer re-advised as exclusive replaces the subscription", []step{
			{ev: added(plain("c1", qOrders)), action: Added, changes: subOnly},
			{ev: added(ex("c1")), action: Added, changes: replace},
		}, []bool{false, true}},
		{"exclusive means nothing on a topic", []step{
			{ev: added(exclusive(plain("c1", tPrices))), action: Added, changes: subOnly},
		}, []bool{false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tbl := New(opts())
			b := newBroker()
			for i, st := range tt.steps {
				runStepsOn(t, tbl, b, []step{st})
				subs := tbl.Subscriptions()
				if len(subs) > 1 {
					t.Fatalf("step %d: %d subscriptions", i, len(subs))
				}
				got := len(subs) == 1 && subs[0].Exclusive
				if got != tt.want[i] {
					t.Fatalf("step %d: exclusive %v, want %v (%+v)", i, got, tt.want[i], subs)
				}
			}
		})
	}
}

// TestExclusiveWithoutConduit: each consumer has its own subscription, with
// its own flag.
func TestExclusiveWithoutConduit(t *testing.T) {
	o := opts()
	o.Conduit = false
	tbl := New(o)
	runSteps(t, tbl, []step{
		{ev: added(exclusive(plain("c1", qOrders))), action: Added, changes: subOnly},
		{ev: added(plain("c2", qOrders)), action: Added, changes: subOnly},
	})
	subs := tbl.Subscriptions()
	if len(subs) != 2 || !subs[0].Exclusive || subs[1].Exclusive {
		t.Fatalf("subscriptions %+v, want c1's exclusive and c2's not", subs)
	}
}

// TestRetroactiveTopicDemand: a topic subscription is retroactive when the
// consumer that made it is; a retroactive consumer joining later changes
// nothing (topic subscriptions are never replaced while they serve someone),
// and queues and durable subscriptions never are.
func TestRetroactiveTopicDemand(t *testing.T) {
	t.Run("the first consumer's flag decides", func(t *testing.T) {
		tbl := New(opts())
		runSteps(t, tbl, []step{
			{ev: added(retroactive(plain("c1", tPrices))), action: Added, changes: subOnly},
			{ev: added(plain("c2", tPrices)), action: Joined},
			{ev: removed("c1"), action: Left},
		})
		if subs := tbl.Subscriptions(); len(subs) != 1 || !subs[0].Retroactive {
			t.Fatalf("subscriptions %+v, want one retroactive", subs)
		}
	})
	t.Run("a retroactive consumer joining is served by what exists", func(t *testing.T) {
		tbl := New(opts())
		runSteps(t, tbl, []step{
			{ev: added(plain("c1", tPrices)), action: Added, changes: subOnly},
			{ev: added(retroactive(plain("c2", tPrices))), action: Joined},
		})
		if subs := tbl.Subscriptions(); len(subs) != 1 || subs[0].Retroactive {
			t.Fatalf("subscriptions %+v, want one, not retroactive", subs)
		}
	})
	t.Run("queues and durable subscriptions are never retroactive", func(t *testing.T) {
		tbl := New(opts())
		d := retroactive(plain("c2", tPrices))
		d.SubscriptionName, d.ClientID = "s1", "cid"
		runSteps(t, tbl, []step{
			{ev: added(retroactive(plain("c1", qOrders))), action: Added, changes: subOnly},
			{ev: added(d), action: Added, changes: subOnly},
		})
		for _, s := range tbl.Subscriptions() {
			if s.Retroactive {
				t.Fatalf("subscription %+v is retroactive", s)
			}
		}
	})
}
