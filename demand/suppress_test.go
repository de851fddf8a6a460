package demand

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/brokernet/brokernet/advisory"
	"github.com/brokernet/brokernet/destination"
	"github.com/brokernet/brokernet/hop"
)

// suppressOptions is a bridge L <- R that lets demand travel three hops and
// suppresses duplicate routes on queues and topics.
func suppressOptions() Options {
	o := opts()
	o.ConsumerTTL = 3
	o.SuppressQueues, o.SuppressTopics = true, true
	return o
}

// viaR is a brokernet demand subscription on the remote broker R for the
// origin consumer "o" on broker A, reached through path (A first).
func viaR(id string, path ...string) advisory.Consumer {
	c := plain(id, qOrders)
	c.Bridge, c.Origin, c.Path = true, "o", path
	return c
}

// foreign is another bridge's demand subscription on the local broker L
// for origin "o" on queue orders.
func foreign(id string, priority int, path ...string) advisory.Consumer {
	c := plain(id, qOrders)
	c.Bridge, c.Origin, c.Path, c.Priority = true, "o", path, priority
	return c
}

// TestSuppression walks competing routes to origin "o" on broker A. Ours
// comes through R: path [A R], priority -8 with decreased priority.
func TestSuppression(t *testing.T) {
	better := foreign("f1", -5, "A")         // A's own bridge into L: one hop
	betterTie := foreign("f3", -8, "A", "Q") // same length, "A|Q" < "A|R"
	worseTie := foreign("f2", -8, "A", "S")  // same length, "A|S" > "A|R"
	equal := foreign("f4", -8, "A", "R")     // the same route through another bridge process
	otherOrigin := foreign("f5", -5, "A")
	otherOrigin.Origin = "p"
	otherBroker := foreign("f6", -5, "B") // origin "o" of broker B is another consumer
	otherDest := foreign("f7", -5, "A")
	otherDest.Destination = qOther
	replaySub := foreign("f8", -5, "A")
	replaySub.Replay = true
	via := ReasonSuppressed + "|A|"

	tests := []struct {
		name  string
		edit  func(*Options)
		steps []step
	}{
		{"a better route appearing withdraws ours; its going brings ours back", nil, []step{
			{ev: added(viaR("n1", "A")), action: Added, changes: subOnly},
			{ev: added(better), local: true, action: Added, reason: via, changes: unsubOnly},
			{ev: added(better), local: true, action: Ignored, reason: ReasonDuplicate},
			{ev: removed("f1"), local: true, action: Removed, changes: subOnly},
		}},
		{"ours arriving after a better route is suppressed at once", nil, []step{
			{ev: added(better), local: true, action: Added},
			{ev: added(viaR("n1", "A")), action: Suppressed, reason: via},
			{ev: added(viaR("n1", "A")), action: Ignored, reason: ReasonDuplicate},
			{ev: removed("f1"), local: true, action: Removed, changes: subOnly},
			{ev: removed("n1"), action: Removed, changes: unsubOnly},
		}},
		{"a suppressed consumer that leaves needs no change", nil, []step{
			{ev: added(better), local: true, action: Added},
			{ev: added(viaR("n1", "A")), action: Suppressed, reason: via},
			{ev: removed("n1"), action: Removed},
			{ev: removed("f1"), local: true, action: Removed},
		}},
		{"the same length breaks ties by path", nil, []step{
			{ev: added(viaR("n1", "A")), action: Added, changes: subOnly},
			{ev: added(worseTie), local: true, action: Added},
			{ev: added(betterTie), local: true, action: Added, reason: ReasonSuppressed + "|A|Q|", changes: unsubOnly},
			{ev: removed("f2"), local: true, action: Removed},
			{ev: removed("f3"), local: true, action: Removed, changes: subOnly},
		}},
		{"three routes: ours comes back only when every better one is gone", nil, []step{
			{ev: added(viaR("n1", "A")), action: Added, changes: subOnly},
			{ev: added(betterTie), local: true, action: Added, reason: ReasonSuppressed + "|A|Q|", changes: unsubOnly},
			{ev: added(better), local: true, action: Added, reason: via},
			{ev: removed("f3"), local: true, action: Removed},
			{ev: removed("f1"), local: true, action: Removed, changes: subOnly},
		}},
		{"equal ranks keep both", nil, []step{
			{ev: added(viaR("n1", "A")), action: Added, changes: subOnly},
			{ev: added(equal), local: true, action: Added},
			{ev: removed("f4"), local: true, action: Removed},
		}},
		{"other origins, brokers and destinations do not compete", nil, []step{
			{ev: added(otherOrigin), local: true, action: Added},
			{ev: added(otherBroker), local: true, action: Added},
			{ev: added(otherDest), local: true, action: Added},
			{ev: added(viaR("n1", "A")), action: Added, changes: subOnly},
		}},
		{"replay subscriptions are not routes", nil, []step{
			{ev: added(replaySub), local: true, action: Ignored, reason: ReasonReplay},
			{ev: added(viaR("n1", "A")), action: Added, changes: subOnly},
		}},
		{"priority decides before length", func(o *Options) { o.DecreasePriority = false }, []step{
			{ev: added(viaR("n1", "A")), action: Added, changes: subOnly}, // inherits priority 0
			{ev: added(foreign("f9", 1, "A", "Q", "P")), local: true, action: Added, reason: ReasonSuppressed + "|A|Q|P|", changes: unsubOnly},
			{ev: added(foreign("f10", 0, "A")), local: true, action: Added, reason: via}, // better than ours too
			{ev: removed("f9"), local: true, action: Removed},                            // f10 is shorter at the same priority
			{ev: removed("f10"), local: true, action: Removed, changes: subOnly},
		}},
		{"no suppression for queues unless enabled", func(o *Options) { o.SuppressQueues = false }, []step{
			{ev: added(viaR("n1", "A")), action: Added, changes: subOnly},
			{ev: added(better), local: true, action: Added},
		}},
		{"a changed foreign route is re-evaluated", nil, []step{
			{ev: added(viaR("n1", "A")), action: Added, changes: subOnly},
			{ev: added(worseTie), local: true, action: Added},
			{ev: added(foreign("f2", -5, "A")), local: true, action: Added, reason: via, changes: unsubOnly},
			{ev: added(worseTie), local: true, action: Added, changes: subOnly},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := suppressOptions()
			if tt.edit != nil {
				tt.edit(&o)
			}
			runSteps(t, New(o), tt.steps)
		})
	}
}

// TestOwnRoutesCompete checks that two network consumers on the remote
// broker for the same origin keep only the better subscription, and that the
// better one is subscribed before the worse one goes.
func TestOwnRoutesCompete(t *testing.T) {
	tbl := New(suppressOptions())
	b := runSteps(t, tbl, []step{
		{ev: added(viaR("n2", "A", "Q")), action: Added, changes: subOnly}, // path A Q R
		{ev: added(viaR("n1", "A")), action: Added, changes: []string{"+", "-"}},
		{ev: added(viaR("n3", "A", "P")), action: Suppressed, reason: ReasonSuppressed + "|A|R|"},
	})
	if subs := tbl.Subscriptions(); len(subs) != 1 || subs[0].Consumers[0] != "n1" {
		t.Fatalf("subscriptions %+v, want only n1's", subs)
	}
	runStepsOn(t, tbl, b, []step{
		{ev: removed("n1"), action: Removed, changes: []string{"+", "-"}}, // n3's A P R beats n2's A Q R
		{ev: removed("n3"), action: Removed, changes: []string{"+", "-"}},
	})
	if subs := tbl.Subscriptions(); len(subs) != 1 || subs[0].Consumers[0] != "n2" {
		t.Fatalf("subscriptions %+v, want only n2's", subs)
	}
}

// TestOwnSubscriptionFedBack checks that a table fed its own subscription
// as a foreign route is not disturbed: a route never beats itself.
func TestOwnSubscriptionFedBack(t *testing.T) {
	tbl := New(suppressOptions())
	changes, _ := tbl.Apply(added(viaR("n1", "A")))
	own := changes[0].Sub
	_, tag, _ := hop.ParseSelector(own.Selector)
	c := plain("mine", own.Destination)
	c.Bridge, c.Origin, c.Path, c.Priority = true, tag.Origin, tag.Path, own.Priority
	if changes, d := tbl.ApplyLocal(added(c)); len(changes) != 0 || d.Reason != "" {
		t.Fatalf("own subscription fed back: %v %+v", changes, d)
	}
}

// meshBroker is one broker of a simulated network: its consumers as their
// advisories would describe them.
type meshBroker struct {
	consumers map[string]advisory.Consumer
}

// meshBridge is one brokernet bridge local <- remote with what its two
// advisory subscriptions have delivered so far.
type meshBridge struct {
	name          string
	local, remote string
	tbl           *Table
	seenRemote    map[string]advisory.Consumer
	seenLocal     map[string]advisory.Consumer
	own           map[string]bool // consumer ids of its subscriptions on local
}

// subConsumer is the consumer advisory of a demand subscription as another
// bridge sees it.
func subConsumer(id string, s Subscription) advisory.Consumer {
	user, tag, ok := hop.ParseSelector(s.Selector)
	if !ok {
		panic("unparsable selector " + s.Selector)
	}
	return advisory.Consumer{
		ID: id, Destination: s.Destination, Selector: user, Priority: s.Priority, Prefetch: s.Prefetch,
		SubscriptionName: s.DurableName, Path: tag.Path, Origin: tag.Origin, Bridge: true, Replay: tag.Replay,
	}
}

// simulateMesh builds a bridge in each direction of every edge, starts a
// plain consumer on each of the consumer brokers, and delivers advisories
// one at a time in random order until nothing changes. It returns the
// brokers.
func simulateMesh(t *testing.T, ids []string, edges [][2]string, consumersOn []string, dest destination.Destination, seed uint64, ttl int) map[string]*meshBroker {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 7))
	brokers := map[string]*meshBroker{}
	for _, id := range ids {
		brokers[id] = &meshBroker{consumers: map[string]advisory.Consumer{}}
	}
	var bridges []*meshBridge
	for _, e := range edges {
		for _, dir := range [][2]string{{e[0], e[1]}, {e[1], e[0]}} {
			o := DefaultOptions()
			o.LocalID, o.RemoteID, o.ConsumerTTL = dir[0], dir[1], ttl
			o.SuppressQueues, o.SuppressTopics = true, true
			bridges = append(bridges, &meshBridge{
				name: dir[0] + "<-" + dir[1], local: dir[0], remote: dir[1], tbl: New(o),
				seenRemote: map[string]advisory.Consumer{}, seenLocal: map[string]advisory.Consumer{}, own: map[string]bool{},
			})
		}
	}
	for _, id := range consumersOn {
		brokers[id].consumers["app@"+id] = plain("app@"+id, dest)
	}
	apply := func(br *meshBridge, changes []Change) {
		for _, ch := range changes {
			cid := br.name + "/" + ch.Sub.ID
			if ch.Kind == Subscribe {
				brokers[br.local].consumers[cid] = subConsumer(cid, ch.Sub)
				br.own[cid] = true
			} else {
				delete(brokers[br.local].consumers, cid)
				delete(br.own, cid)
			}
		}
	}
	// pending returns the advisories a bridge has not seen yet: additions,
	// changes and removals, remote then local.
	type delivery struct {
		br    *meshBridge
		local bool
		ev    advisory.Event
	}
	pending := func() []delivery {
		var out []delivery
		for _, br := range bridges {
			for _, side := range []struct {
				local bool
				seen  map[string]advisory.Consumer
				now   map[string]advisory.Consumer
			}{{false, br.seenRemote, brokers[br.remote].consumers}, {true, br.seenLocal, brokers[br.local].consumers}} {
				for _, id := range slices.Sorted(maps.Keys(side.now)) {
					if side.local && br.own[id] {
						continue // the bridge filters its own subscriptions out
					}
					c := side.now[id]
					if old, ok := side.seen[id]; !ok || !slices.Equal(old.Path, c.Path) || old.Priority != c.Priority || old.Origin != c.Origin {
						out = append(out, delivery{br, side.local, added(c)})
					}
				}
				for _, id := range slices.Sorted(maps.Keys(side.seen)) {
					if _, ok := side.now[id]; !ok {
						out = append(out, delivery{br, side.local, removed(id)})
					}
				}
			}
		}
		return out
	}
	for round := 0; ; round++ {
		if round > 10000 {
			t.Fatal("the mesh does not settle")
		}
		todo := pending()
		if len(todo) == 0 {
			break
		}
		d := todo[rng.IntN(len(todo))]
		seen := d.br.seenRemote
		applyFn := d.br.tbl.Apply
		if d.local {
			seen, applyFn = d.br.seenLocal, d.br.tbl.ApplyLocal
		}
		if d.ev.Kind == advisory.ConsumerAdded {
			seen[d.ev.Consumer.ID] = d.ev.Consumer
		} else {
			delete(seen, d.ev.Consumer.ID)
		}
		changes, _ := applyFn(d.ev)
		apply(d.br, changes)
	}
	return brokers
}

// bestRoutes computes, independently of the tables, the route every broker
// must end with for the consumers on origin: best(origin) is the empty
// path, and best(L) is the best of best(N)+[N] over L's neighbours N whose
// best path has fewer than ttl entries and does not pass through L, by
// priority (-5, -8, -9... by length), length and joined path.
func bestRoutes(ids []string, edges [][2]string, origin string, ttl int) map[string][]string {
	neighbours := map[string][]string{}
	for _, e := range edges {
		neighbours[e[0]] = append(neighbours[e[0]], e[1])
		neighbours[e[1]] = append(neighbours[e[1]], e[0])
	}
	best := map[string][]string{origin: {}}
	for changed := true; changed; {
		changed = false
		for _, l := range ids {
			if l == origin {
				continue
			}
			var b []string
			for _, n := range neighbours[l] {
				bn, ok := best[n]
				if !ok || len(bn) >= ttl || slices.Contains(bn, l) {
					continue
				}
				cand := append(slices.Clone(bn), n)
				if b == nil || betterRank(rank{priority: meshPriority(cand), path: cand}, rank{priority: meshPriority(b), path: b}) {
					b = cand
				}
			}
			if b != nil && !slices.Equal(b, best[l]) {
				best[l] = b
				changed = true
			}
		}
	}
	return best
}

// meshPriority is the decreased network priority of a demand path.
func meshPriority(path []string) int {
	if len(path) > 1 {
		return DefaultPriorityBase - len(path) - 1
	}
	return DefaultPriorityBase
}

// TestMeshSettlesOnBestRoutes simulates networks of bridges attached to
// shared brokers, feeding each bridge its remote broker's consumers and the
// other bridges' subscriptions on its local broker in random orders, and
// checks that every broker ends with exactly the best route to each origin.
func TestMeshSettlesOnBestRoutes(t *testing.T) {
	ring := [][2]string{{"A", "B"}, {"B", "C"}, {"C", "D"}, {"D", "E"}, {"E", "A"}}
	full := [][2]string{{"A", "B"}, {"A", "C"}, {"A", "D"}, {"B", "C"}, {"B", "D"}, {"C", "D"}}
	ladder := [][2]string{{"A", "B"}, {"A", "C"}, {"B", "D"}, {"C", "D"}, {"D", "E"}, {"B", "E"}}
	tests := []struct {
		name      string
		ids       []string
		edges     [][2]string
		consumers []string
		dest      destination.Destination
		ttl       int
	}{
		{"a ring of five, topic", []string{"A", "B", "C", "D", "E"}, ring, []string{"A"}, tPrices, 4},
		{"a ring of five, queue", []string{"A", "B", "C", "D", "E"}, ring, []string{"A"}, qOrders, 4},
		{"a full mesh of four", []string{"A", "B", "C", "D"}, full, []string{"A"}, tPrices, 3},
		{"a ladder with two consumers", []string{"A", "B", "C", "D", "E"}, ladder, []string{"A", "E"}, tPrices, 4},
		{"a ring with a short TTL", []string{"A", "B", "C", "D", "E"}, ring, []string{"A"}, tPrices, 2},
	}
	for _, tt := range tests {
		for seed := range uint64(12) {
			t.Run(fmt.Sprintf("%s seed %d", tt.name, seed), func(t *testing.T) {
				brokers := simulateMesh(t, tt.ids, tt.edges, tt.consumers, tt.dest, seed, tt.ttl)
				for _, origin := range tt.consumers {
					want := bestRoutes(tt.ids, tt.edges, origin, tt.ttl)
					for _, l := range tt.ids {
						var got []string
						for _, c := range brokers[l].consumers {
							if c.Bridge && len(c.Path) > 0 && c.Path[0] == origin {
								got = append(got, strings.Join(c.Path, ","))
							}
						}
						w, reachable := want[l]
						switch {
						case l == origin:
							if len(got) != 0 {
								t.Errorf("broker %s holds routes to its own consumers: %q", l, got)
							}
						case !reachable:
							if len(got) != 0 {
								t.Errorf("broker %s beyond the TTL holds %q", l, got)
							}
						case len(got) != 1 || got[0] != strings.Join(w, ","):
							t.Errorf("broker %s holds routes %q to %s, want exactly %q", l, got, origin, strings.Join(w, ","))
						}
					}
				}
			})
		}
	}
}
