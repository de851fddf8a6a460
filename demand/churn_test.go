package demand

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/brokernet/brokernet/advisory"
	"github.com/brokernet/brokernet/destination"
)

// churn generates random remote and local consumers over a small world, so
// that ids, origins and durable names collide often.
type churn struct {
	rng *rand.Rand
}

var (
	qJobsA   = destination.Destination{Kind: destination.Queue, Name: "jobs.a"}
	tNewsEU  = destination.Destination{Kind: destination.Topic, Name: "news.eu"}
	qExcl    = destination.Destination{Kind: destination.Queue, Name: "EXCL.secret"}
	qAnyWord = destination.Destination{Kind: destination.Queue, Name: "*"}
	qJobsAll = destination.Destination{Kind: destination.Queue, Name: "jobs.>"}
)

func (g churn) pick(n int) int { return g.rng.IntN(n) }

// remote returns a random remote consumer with the given id.
func (g churn) remote(id string) advisory.Consumer {
	dests := []destination.Destination{qOrders, qOrders, qOther, tPrices, tPrices, tmpQ, qExcl, qJobsA, tNewsEU}
	selectors := []string{"", "", "a = 1", "b = 'x'", " "}
	paths := [][]string{nil, nil, nil, {"X"}, {"Y"}, {"L"}, {"X", "Y"}, {"Y", "L"}, {"X", "Y", "Z"}}
	c := advisory.Consumer{
		ID:          id,
		Destination: dests[g.pick(len(dests))],
		Selector:    selectors[g.pick(len(selectors))],
		Priority:    []int{0, 4, -3}[g.pick(3)],
		Prefetch:    g.pick(2) * 1000,
		Browser:     g.pick(12) == 0,
		Path:        paths[g.pick(len(paths))],
		Exclusive:   g.pick(4) == 0,
		Retroactive: g.pick(4) == 0,
	}
	if len(c.Path) > 0 {
		if g.pick(2) == 0 {
			c.Bridge, c.Origin = true, []string{"o1", "o2", "orig-" + id}[g.pick(3)]
			c.Replay = g.pick(15) == 0
		} else {
			c.Native = true
		}
	}
	if g.pick(3) == 0 {
		c.SubscriptionName = []string{"s1", "s2"}[g.pick(2)]
		c.ClientID = []string{"", "", "cid"}[g.pick(3)]
	}
	return c
}

// local returns a random consumer on the local broker.
func (g churn) local(id string) advisory.Consumer {
	c := advisory.Consumer{ID: id, Destination: []destination.Destination{qOrders, qOther, qJobsA, tPrices, qAnyWord, qJobsAll}[g.pick(6)]}
	switch g.pick(6) {
	case 0, 1: // another bridge's demand subscription
		c.Destination = []destination.Destination{qOrders, tPrices}[g.pick(2)]
		c.Bridge, c.Origin = true, []string{"o1", "o2"}[g.pick(2)]
		c.Path = [][]string{{"X"}, {"Y"}, {"X", "Q"}, {"Y", "Q", "P"}}[g.pick(4)]
		c.Priority = []int{-5, -8, -9, 0}[g.pick(4)]
		c.Replay = g.pick(10) == 0
	case 2:
		c.Native, c.Path = true, []string{"N"}
	case 3:
		c.Browser = g.pick(2) == 0
	}
	return c
}

// durableRemoval returns a random RemoveSubscriptionInfo event.
func (g churn) durableRemoval() advisory.Event {
	name := []string{"s1", "s2", "s3"}[g.pick(3)]
	c := advisory.Consumer{SubscriptionName: name, ClientID: []string{"", name, "cid", "other"}[g.pick(4)]}
	if g.pick(2) == 0 {
		c.Destination = []destination.Destination{tPrices, tNewsEU}[g.pick(2)]
	}
	return advisory.Event{Kind: advisory.DurableRemoved, Consumer: c, ConsumerCount: -1}
}

func churnOptions(conduit, decrease, dynamicOnly bool, t testing.TB) Options {
	o := bridgeOptions("L", "R")
	o.Conduit, o.DecreasePriority, o.DynamicOnly, o.ConsumerTTL = conduit, decrease, dynamicOnly, 3
	// Temporary destinations make demand in half of the runs.
	o.BridgeTemp = decrease
	o.SuppressQueues, o.SuppressTopics, o.ReplayWhenNoConsumers = true, true, true
	o.Filter.Exclude = []destination.Pattern{mustPattern(t, "EXCL.>")}
	o.StaticInclude = []destination.Pattern{mustPattern(t, "topic://news.>"), mustPattern(t, "queue://jobs.>"), mustPattern(t, "EXCL.x")}
	return o
}

// TestRandomChurn feeds thousands of random remote and local events,
// duplicates, replays, durable removals, resets and starts to a Table and
// checks after every event that the Changes keep a simulated broker equal
// to Subscriptions and InactiveDurables, and at intervals that the
// subscriptions are exactly those an independent model expects. At the end
// everything is removed, and nothing may remain.
func TestRandomChurn(t *testing.T) {
	events := 6000
	if testing.Short() {
		events = 1500 // make unit stays under a minute with -race; make test runs all
	}
	for _, conduit := range []bool{true, false} {
		for _, decrease := range []bool{true, false} {
			for _, dynamicOnly := range []bool{false, true} {
				name := fmt.Sprintf("conduit=%v decreasePriority=%v dynamicOnly=%v", conduit, decrease, dynamicOnly)
				t.Run(name, func(t *testing.T) {
					runChurn(t, churnOptions(conduit, decrease, dynamicOnly, t), uint64(len(name)), events)
				})
			}
		}
	}
}

func runChurn(t *testing.T, o Options, seed uint64, events int) {
	tbl := New(o)
	m := newModel(o)
	g := churn{rng: rand.New(rand.NewPCG(1, seed))}
	b := newBroker()
	seen := map[string]int{} // actions, reasons and change shapes, to show the test is not vacuous
	record := func(changes []Change, d Decision) {
		seen[d.Action.String()]++
		seen[d.Reason]++
		if d.Replaced {
			seen["replaced"]++
		}
		for i, s := range summary(changes) {
			seen[s]++
			if changes[i].Sub.Replay {
				seen["replay"+s]++
			}
		}
		b.apply(t, changes)
		b.check(t, tbl)
	}
	apply := func(ev advisory.Event) Decision {
		changes, d := tbl.Apply(ev)
		record(changes, d)
		return d
	}
	applyLocal := func(ev advisory.Event) Decision {
		changes, d := tbl.ApplyLocal(ev)
		record(changes, d)
		return d
	}
	start := func() {
		changes := tbl.Start()
		m.started = true
		record(changes, Decision{Action: Added})
	}
	start()
	for i := range events {
		id := fmt.Sprintf("ID:c-%d:1:-1:%d", g.pick(3), g.pick(15))
		lid := fmt.Sprintf("ID:l-%d:1:-1:%d", g.pick(2), g.pick(8))
		switch r := g.pick(100); {
		case r < 30: // a new or changed remote consumer
			c := g.remote(id)
			m.addRemote(c)
			apply(added(c))
		case r < 38: // a duplicate of a live consumer (prefetch may differ)
			if c, ok := m.remote[id]; ok {
				c.Prefetch = g.pick(2) * 1000
				if d := apply(added(c)); d.Action != Ignored {
					t.Fatalf("duplicate of %s: %+v", id, d)
				}
			}
		case r < 58: // a remote removal, of a live consumer or not
			_, known := m.remote[id]
			m.removeRemote(id)
			if d := apply(removed(id)); !known && d.Action != Ignored {
				t.Fatalf("removal of unknown %s: %+v", id, d)
			}
		case r < 62: // a durable subscription destroyed
			ev := g.durableRemoval()
			m.durableRemoved(ev.Consumer)
			apply(ev)
		case r < 78: // a new or changed local consumer
			c := g.local(lid)
			m.local[lid] = c
			applyLocal(added(c))
		case r < 94: // a local removal
			delete(m.local, lid)
			applyLocal(removed(lid))
		case r < 97: // a replay of every live remote and local consumer
			for _, id := range slices.Sorted(maps.Keys(m.remote)) {
				if d := apply(added(m.remote[id])); d.Action != Ignored || d.Reason != ReasonDuplicate && d.Reason != m.rejectReason(m.remote[id]) {
					t.Fatalf("replay of %s changed the table: %+v", id, d)
				}
			}
			for _, id := range slices.Sorted(maps.Keys(m.local)) {
				if d := applyLocal(added(m.local[id])); d.Action != Ignored {
					t.Fatalf("replay of local %s changed the table: %+v", id, d)
				}
			}
		default: // the remote side reconnects (or the bridge restarts): reset, start, then the replay
			live := maps.Clone(m.remote)
			changes := tbl.Reset()
			m.reset()
			record(changes, Decision{Action: Removed})
			if tbl.Len() != 0 || len(b.live) != 0 {
				t.Fatalf("Reset left %d subscriptions", tbl.Len())
			}
			if r == 99 {
				restart(t, &tbl, o, b)
				seen["restart"]++
				// The new table learns the local broker's consumers from its replay.
				for _, id := range slices.Sorted(maps.Keys(m.local)) {
					applyLocal(added(m.local[id]))
				}
			}
			if g.pick(2) == 0 {
				start()
			}
			for _, id := range slices.Sorted(maps.Keys(live)) {
				m.addRemote(live[id])
				apply(added(live[id]))
			}
		}
		if i%50 == 0 {
			m.check(t, tbl)
		}
	}
	m.check(t, tbl)
	mustSee := []string{"added", "removed", "left", "suppressed", "replaced", "+r", "-r", "replay+", "replay-", "restart",
		ReasonBrowser, ReasonLoop, ReasonConsumerTTL, ReasonReplay, ReasonExcluded,
		ReasonDuplicate, ReasonUnknownConsumer, ReasonUnknownDurable}
	if !o.BridgeTemp {
		mustSee = append(mustSee, ReasonTemporary)
	}
	if o.Conduit {
		mustSee = append(mustSee, "joined")
	}
	if o.DynamicOnly {
		mustSee = append(mustSee, "-destroy")
	} else {
		mustSee = append(mustSee, "-keep", "-destroy", ReasonDurableActive)
	}
	for _, k := range mustSee {
		if seen[k] == 0 && events >= 6000 {
			t.Errorf("the random events never produced %q", k)
		}
	}
	t.Logf("decisions and changes: %v", seen)

	// Remove everything: remote consumers, durable subscriptions, local
	// consumers; then the static includes by Reset.
	for _, id := range slices.Sorted(maps.Keys(m.remote)) {
		m.removeRemote(id)
		apply(removed(id))
	}
	for _, name := range []string{"s1", "s2", "s3"} {
		ev := advisory.Event{Kind: advisory.DurableRemoved, Consumer: advisory.Consumer{SubscriptionName: name}}
		m.durableRemoved(ev.Consumer)
		apply(ev)
	}
	for _, id := range slices.Sorted(maps.Keys(m.local)) {
		delete(m.local, id)
		applyLocal(removed(id))
	}
	m.check(t, tbl)
	for _, s := range tbl.Subscriptions() {
		if !s.Static {
			t.Fatalf("after removing everything, %+v remains", s)
		}
	}
	record(tbl.Reset(), Decision{Action: Removed})
	if tbl.Len() != 0 || b.size() != 0 || len(tbl.InactiveDurables()) != 0 || len(tbl.slots) != 0 || len(tbl.durables) != 0 {
		t.Fatalf("final Reset left %d subscriptions, %d kept, %d slots, %d durables", tbl.Len(), len(tbl.InactiveDurables()), len(tbl.slots), len(tbl.durables))
	}
}

// rejectReason restates why the table ignores a replayed consumer it did
// not accept ("" if it accepts it).
func (m *model) rejectReason(c advisory.Consumer) string {
	if m.accepts(c) {
		return ""
	}
	return New(m.o).reject(normalize(c))
}

// FuzzTable interprets the input as a sequence of remote, local and durable
// events and checks that the Changes always keep a simulated broker equal
// to Subscriptions and InactiveDurables, that every demand subscription
// serves at least one consumer, and that removing everything and a Reset
// leave nothing.
func FuzzTable(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}, uint8(0))
	f.Add([]byte{0x00, 0x10, 0x80, 0x90, 0x00, 0xf0, 0x41, 0xc3, 0xe1}, uint8(7))
	f.Add([]byte{0x08, 0x48, 0xc8, 0x88, 0xe8, 0x48}, uint8(3))
	f.Fuzz(func(t *testing.T, ops []byte, flags uint8) {
		o := churnOptions(flags&1 != 0, flags&2 != 0, flags&4 != 0, t)
		dests := []destination.Destination{qOrders, tPrices, tmpQ, qJobsA}
		paths := [][]string{nil, {"X"}, {"L"}, {"X", "Y"}}
		tbl := New(o)
		b := newBroker()
		run := func(changes []Change, _ Decision) {
			b.apply(t, changes)
			b.check(t, tbl)
		}
		run(tbl.Start(), Decision{})
		remote, local := map[string]bool{}, map[string]bool{}
		for _, op := range ops {
			id := fmt.Sprintf("c%d", op&7)
			switch op >> 6 {
			case 0: // a remote consumer
				c := plain(id, dests[int(op>>3&3)])
				c.Path = paths[int(op>>5&1)*2+int(op>>4&1)]
				if len(c.Path) > 0 {
					c.Bridge, c.Origin = true, "o"
				}
				c.Selector = []string{"", "a = 1"}[op>>3&1]
				if c.Destination == tPrices && op&1 != 0 {
					c.SubscriptionName = "s"
				}
				remote[id] = true
				run(tbl.Apply(added(c)))
			case 1: // a local consumer: plain or another bridge's route
				c := plain("l"+id, dests[int(op>>3&3)])
				if op&0x20 != 0 {
					c.Bridge, c.Origin, c.Path, c.Priority = true, "o", paths[1+int(op>>4&1)*2], -5
				}
				local["l"+id] = true
				run(tbl.ApplyLocal(added(c)))
			case 2:
				if op&0x20 != 0 {
					delete(local, "l"+id)
					run(tbl.ApplyLocal(removed("l" + id)))
				} else {
					delete(remote, id)
					run(tbl.Apply(removed(id)))
				}
			default:
				if op&0x20 != 0 {
					run(tbl.Apply(advisory.Event{Kind: advisory.DurableRemoved, Consumer: advisory.Consumer{SubscriptionName: "s"}}))
					continue
				}
				run(tbl.Reset(), Decision{})
				clear(remote)
				run(tbl.Start(), Decision{})
			}
			for _, s := range tbl.Subscriptions() {
				if len(s.Consumers) == 0 && !s.Static && !s.Replay {
					t.Fatalf("subscription %s serves nobody", s.ID)
				}
			}
		}
		for _, id := range slices.Sorted(maps.Keys(remote)) {
			run(tbl.Apply(removed(id)))
		}
		run(tbl.Apply(advisory.Event{Kind: advisory.DurableRemoved, Consumer: advisory.Consumer{SubscriptionName: "s"}}))
		for _, id := range slices.Sorted(maps.Keys(local)) {
			run(tbl.ApplyLocal(removed(id)))
		}
		run(tbl.Reset(), Decision{})
		if tbl.Len() != 0 || b.size() != 0 || len(tbl.slots) != 0 {
			t.Fatalf("Reset left %d subscriptions, %d on the broker, %d slots", tbl.Len(), b.size(), len(tbl.slots))
		}
	})
}

// restart replaces *tbl by a new table restored from its Durables, as a
// restarted bridge does from its ledger, and checks that the new table keeps
// exactly the durable subscriptions the broker keeps, under the same names,
// with none of them stale. The broker's kept subscriptions take the new IDs.
func restart(t *testing.T, tbl **Table, o Options, b *broker) {
	t.Helper()
	recs := (*tbl).Durables()
	nt := New(o)
	if skipped := nt.Restore(recs); skipped != 0 {
		t.Fatalf("Restore skipped %d of %+v", skipped, recs)
	}
	kept := nt.InactiveDurables()
	if len(kept) != len(b.kept) {
		t.Fatalf("restored %d kept durables, broker keeps %d", len(kept), len(b.kept))
	}
	for _, k := range kept {
		old, ok := b.kept[k.DurableName]
		if !ok || old.Selector != k.Selector || old.Destination != k.Destination {
			t.Fatalf("restored %+v, broker keeps %+v", k, old)
		}
		b.kept[k.DurableName] = k
	}
	var held []Subscription
	for _, k := range b.kept {
		held = append(held, k)
	}
	if stale := nt.StaleDurables(held); len(stale) != 0 {
		t.Fatalf("after a restart, stale %+v", stale)
	}
	*tbl = nt
	b.check(t, nt)
}
