package demand

import (
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/go-stomp/stomp/v3/frame"

	"github.com/brokernet/brokernet/advisory"
	"github.com/brokernet/brokernet/destination"
)

// consumerAdvisory renders the ConsumerInfo advisory that ActiveMQ publishes
// on broker for a STOMP consumer, in the JSON shape of activemq-network.md
// §6.1, and parses it back as the bridge watching that broker would.
func consumerAdvisory(t *testing.T, broker, connection string, value int, d destination.Destination, selector string, priority, prefetch int) advisory.Event {
	t.Helper()
	class := map[destination.Kind]string{
		destination.Queue: "ActiveMQQueue", destination.Topic: "ActiveMQTopic",
		destination.TempQueue: "ActiveMQTempQueue", destination.TempTopic: "ActiveMQTempTopic",
	}[d.Kind]
	info := map[string]any{
		"commandId": 3, "responseRequired": true,
		"consumerId":   map[string]any{"connectionId": connection, "sessionId": -1, "value": value},
		"destination":  map[string]any{"@class": class, "string": d.Name, "null": ""},
		"prefetchSize": prefetch, "maximumPendingMessageLimit": 0, "browser": false, "dispatchAsync": true,
		"noLocal": false, "exclusive": false, "retroactive": false, "priority": priority,
		"optimizedAcknowledge": false, "noRangeAcks": false,
	}
	if selector != "" {
		info["selector"] = advisory.ConvertStringPrefix + selector
	}
	body, err := json.Marshal(map[string]any{"ConsumerInfo": info})
	if err != nil {
		t.Fatal(err)
	}
	h := frame.NewHeader("originBrokerId", broker, "originBrokerName", broker, "consumerCount", "1")
	ev, err := advisory.ParseActiveMQ(h, body)
	if err != nil {
		t.Fatalf("parsing %s: %v", body, err)
	}
	return ev
}

// subAdvisory is the advisory of a demand subscription that the bridge
// created on broker, as another bridge watching that broker sees it.
func subAdvisory(t *testing.T, broker string, s Subscription) advisory.Event {
	t.Helper()
	var n int
	fmt.Sscanf(strings.TrimPrefix(s.ID, subIDPrefix), "%d", &n)
	return consumerAdvisory(t, broker, "ID:bridge-on-"+broker+":1", n, s.Destination, s.Selector, s.Priority, s.Prefetch)
}

func bridgeOptions(local, remote string) Options {
	o := DefaultOptions()
	o.LocalID, o.RemoteID = local, remote
	return o
}

// TestDuplexPair: two bridges between A and B, one forwarding A->B (local A)
// and one B->A (local B). A consumer on B creates a demand subscription on A;
// the B->A bridge sees that subscription's advisory on A and must not treat
// it as demand, or the two bridges would feed each other's demand forever.
func TestDuplexPair(t *testing.T) {
	ab := New(bridgeOptions("A", "B")) // watches B, subscribes on A
	ba := New(bridgeOptions("B", "A")) // watches A, subscribes on B

	onB := consumerAdvisory(t, "B", "ID:client-b:1", 1, qOrders, "color = 'red'", 0, 1000)
	changes, d := ab.Apply(onB)
	if d.Action != Added || len(changes) != 1 {
		t.Fatalf("A->B bridge: %+v", d)
	}
	subOnA := changes[0].Sub

	seen := subAdvisory(t, "A", subOnA)
	if !seen.Consumer.Bridge || !slices.Equal(seen.Consumer.Path, []string{"B"}) || seen.Consumer.Selector != "color = 'red'" {
		t.Fatalf("the demand subscription's advisory parses as %+v", seen.Consumer)
	}
	if seen.Consumer.Origin != onB.Consumer.ID {
		t.Fatalf("origin %q, want %q", seen.Consumer.Origin, onB.Consumer.ID)
	}
	changes, d = ba.Apply(seen)
	if d.Action != Ignored || d.Reason != ReasonLoop || len(changes) != 0 || ba.Len() != 0 {
		t.Fatalf("B->A bridge took our demand subscription as demand: %+v, %v", d, changes)
	}

	// The same holds with unlimited consumerTTL, where only the loop check
	// protects the pair.
	o := bridgeOptions("B", "A")
	o.ConsumerTTL = -1
	if _, d := New(o).Apply(seen); d.Reason != ReasonLoop {
		t.Fatalf("with unlimited consumerTTL: %+v", d)
	}

	// A real consumer on A is demand for the B->A bridge.
	onA := consumerAdvisory(t, "A", "ID:client-a:1", 1, qOrders, "", 0, 1000)
	if _, d := ba.Apply(onA); d.Action != Added {
		t.Fatalf("B->A bridge ignored a real consumer: %+v", d)
	}
	// Its demand subscription on B is in turn ignored by the A->B bridge.
	s := ba.Subscriptions()[0]
	if _, d := ab.Apply(subAdvisory(t, "B", s)); d.Reason != ReasonLoop {
		t.Fatalf("A->B bridge took the B->A demand as demand: %+v", d)
	}
	if ab.Len() != 1 || ba.Len() != 1 {
		t.Fatalf("Len = %d, %d", ab.Len(), ba.Len())
	}
}

// TestChain propagates demand along R1 <- R2 <- R3 <- R4 (each bridge local
// on the left, remote on the right) and checks the hop limit and the
// priorities ActiveMQ documents: -5, -8, -9.
func TestChain(t *testing.T) {
	tests := []struct {
		name          string
		consumerTTL   int
		wantPriority  []int // of the demand subscriptions on R2, R3, R4; missing = none
		wantLastPaths []string
	}{
		{"consumerTTL 1 stops after one hop", 1, []int{-5}, []string{"R1"}},
		{"consumerTTL 2 reaches two hops", 2, []int{-5, -8}, []string{"R1", "R2"}},
		{"consumerTTL 3 reaches three hops", 3, []int{-5, -8, -9}, []string{"R1", "R2", "R3"}},
		{"unlimited consumerTTL", -1, []int{-5, -8, -9}, []string{"R1", "R2", "R3"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			brokers := []string{"R1", "R2", "R3", "R4"}
			ev := consumerAdvisory(t, "R1", "ID:client:1", 1, tPrices, "", 0, 1000)
			var priorities []int
			var lastPath []string
			for i := 1; i < len(brokers); i++ {
				o := bridgeOptions(brokers[i], brokers[i-1])
				o.ConsumerTTL = tt.consumerTTL
				tbl := New(o)
				changes, d := tbl.Apply(ev)
				if d.Action != Added {
					if d.Reason != ReasonConsumerTTL {
						t.Fatalf("bridge %s<-%s: %+v", brokers[i], brokers[i-1], d)
					}
					break
				}
				s := changes[0].Sub
				priorities = append(priorities, s.Priority)
				_, tag, _ := advisory.ParseSelector(s.Selector)
				lastPath = tag.Path
				if tag.Origin != "ID:client:1:-1:1" {
					t.Fatalf("origin %q lost along the chain", tag.Origin)
				}
				ev = subAdvisory(t, brokers[i], s)
			}
			if !slices.Equal(priorities, tt.wantPriority) || !slices.Equal(lastPath, tt.wantLastPaths) {
				t.Fatalf("priorities %v, last path %v; want %v, %v", priorities, lastPath, tt.wantPriority, tt.wantLastPaths)
			}
		})
	}
}

// modelAccepts is the churn test's independent statement of the rules.
func modelAccepts(o Options, c advisory.Consumer) bool {
	if c.Browser || c.Destination.IsTemp() {
		return false
	}
	for _, p := range c.Path {
		if p == o.LocalID {
			return false
		}
	}
	if o.ConsumerTTL >= 0 && len(c.Path) >= o.ConsumerTTL {
		return false
	}
	return o.Filter.Allows(c.Destination)
}

// TestRandomChurn feeds thousands of random additions, removals, duplicates,
// replays and resets to a Table and checks after every event that the
// Changes keep a simulated broker equal to Subscriptions, and at intervals
// that the subscriptions serve exactly the consumers a simple model expects.
func TestRandomChurn(t *testing.T) {
	excl, err := destination.ParsePattern("EXCL.>")
	if err != nil {
		t.Fatal(err)
	}
	dests := []destination.Destination{
		qOrders, qOther, tPrices, tmpQ,
		{Kind: destination.Queue, Name: "EXCL.secret"},
	}
	selectors := []string{"", "", "a = 1", "b = 'x'", " "}
	paths := [][]string{nil, nil, nil, {"X"}, {"L"}, {"X", "Y"}, {"Y", "L"}}
	priorities := []int{0, 4, -3}

	for _, conduit := range []bool{true, false} {
		for _, decrease := range []bool{true, false} {
			name := fmt.Sprintf("conduit=%v decreasePriority=%v", conduit, decrease)
			t.Run(name, func(t *testing.T) {
				o := bridgeOptions("L", "R")
				o.Conduit, o.DecreasePriority, o.ConsumerTTL = conduit, decrease, 2
				o.Filter.Exclude = []destination.Pattern{excl}
				tbl := New(o)
				rng := rand.New(rand.NewPCG(1, uint64(len(name))))
				live := map[string]advisory.Consumer{}
				b := broker{}
				random := func(id string) advisory.Consumer {
					c := advisory.Consumer{
						ID:          id,
						Destination: dests[rng.IntN(len(dests))],
						Selector:    selectors[rng.IntN(len(selectors))],
						Priority:    priorities[rng.IntN(len(priorities))],
						Prefetch:    rng.IntN(2) * 1000,
						Browser:     rng.IntN(10) == 0,
						Path:        paths[rng.IntN(len(paths))],
					}
					if len(c.Path) > 0 {
						if rng.IntN(2) == 0 {
							c.Bridge, c.Origin = true, "orig-"+id
						} else {
							c.Native = true
						}
					}
					return c
				}
				seen := map[string]int{} // actions and reasons, to show the test is not vacuous
				apply := func(ev advisory.Event) Decision {
					changes, d := tbl.Apply(ev)
					seen[d.Action.String()]++
					seen[d.Reason]++
					if d.Replaced {
						seen["replaced"]++
					}
					b.apply(t, changes)
					b.check(t, tbl)
					return d
				}
				for i := range 6000 {
					id := fmt.Sprintf("ID:c-%d:1:-1:%d", rng.IntN(3), rng.IntN(15))
					switch r := rng.IntN(100); {
					case r < 45: // a new or changed consumer
						c := random(id)
						live[id] = c
						apply(added(c))
					case r < 60: // a duplicate of a live consumer (prefetch may differ)
						if c, ok := live[id]; ok {
							c.Prefetch = rng.IntN(2) * 1000
							if d := apply(added(c)); d.Action != Ignored {
								t.Fatalf("duplicate of %s: %+v", id, d)
							}
						}
					case r < 95: // a removal, of a live consumer or not
						_, known := live[id]
						delete(live, id)
						d := apply(removed(id))
						if !known && d.Action != Ignored {
							t.Fatalf("removal of unknown %s: %+v", id, d)
						}
					case r < 98: // a replay of every live consumer
						for _, id := range slices.Sorted(maps.Keys(live)) {
							if d := apply(added(live[id])); d.Action != Ignored {
								t.Fatalf("replay of %s changed the table: %+v", id, d)
							}
						}
					default: // the remote side reconnects: reset, then the replay
						b.apply(t, tbl.Reset())
						if tbl.Len() != 0 || len(b) != 0 {
							t.Fatalf("Reset left %d subscriptions", tbl.Len())
						}
						for _, id := range slices.Sorted(maps.Keys(live)) {
							apply(added(live[id]))
						}
					}
					if i%100 == 0 {
						checkModel(t, tbl, o, live)
					}
				}
				checkModel(t, tbl, o, live)
				mustSee := []string{"added", "removed", "replaced", ReasonBrowser, ReasonLoop, ReasonConsumerTTL,
					ReasonTemporary, ReasonExcluded, ReasonDuplicate, ReasonUnknownConsumer}
				if conduit {
					mustSee = append(mustSee, "joined", "left")
				}
				for _, k := range mustSee {
					if seen[k] == 0 {
						t.Errorf("the random events never produced %q", k)
					}
				}
				t.Logf("decisions: %v", seen)
				b.apply(t, tbl.Reset())
				if tbl.Len() != 0 || len(b) != 0 || len(tbl.Subscriptions()) != 0 {
					t.Fatalf("final Reset left %d subscriptions", tbl.Len())
				}
			})
		}
	}
}

// checkModel compares the table with the demand the live consumers imply.
func checkModel(t *testing.T, tbl *Table, o Options, live map[string]advisory.Consumer) {
	t.Helper()
	type group struct {
		dest     destination.Destination
		selector string
		members  string
	}
	// Expected groups: conduit shares plain consumers by (destination,
	// selector); everything else is alone.
	byKey := map[string][]string{}
	keyOf := map[string]group{}
	for id, c := range live {
		if !modelAccepts(o, c) {
			continue
		}
		sel := c.Selector
		if strings.TrimSpace(sel) == "" {
			sel = "" // a blank selector is no selector
		}
		k := "solo " + id
		if o.Conduit && len(c.Path) == 0 {
			k = "shared " + c.Destination.String() + " " + sel
		}
		byKey[k] = append(byKey[k], id)
		keyOf[k] = group{dest: c.Destination, selector: sel}
	}
	var want []group
	for k, ids := range byKey {
		slices.Sort(ids)
		g := keyOf[k]
		g.members = strings.Join(ids, ",")
		want = append(want, g)
	}
	var got []group
	for _, s := range tbl.Subscriptions() {
		got = append(got, group{dest: s.Destination, selector: s.UserSelector, members: strings.Join(s.Consumers, ",")})
		first := live[s.Consumers[0]]
		_, tag, ok := advisory.ParseSelector(s.Selector)
		wantPath := append(slices.Clone(first.Path), o.RemoteID)
		if !ok || !slices.Equal(tag.Path, wantPath) {
			t.Fatalf("subscription %s: tag %+v (ok %v), want path %v", s.ID, tag, ok, wantPath)
		}
		if len(s.Consumers) == 1 && len(first.Path) > 0 {
			wantOrigin := first.ID
			if first.Bridge {
				wantOrigin = first.Origin
			}
			if tag.Origin != wantOrigin {
				t.Fatalf("subscription %s: origin %q, want %q", s.ID, tag.Origin, wantOrigin)
			}
		}
		if o.DecreasePriority {
			wantPriority := o.PriorityBase
			if len(wantPath) > 1 {
				wantPriority -= len(wantPath) + 1
			}
			if s.Priority != wantPriority {
				t.Fatalf("subscription %s: priority %d, want %d", s.ID, s.Priority, wantPriority)
			}
		} else if !o.Conduit && s.Priority != first.Priority {
			t.Fatalf("subscription %s: priority %d, want the consumer's %d", s.ID, s.Priority, first.Priority)
		}
	}
	cmp := func(a, b group) int {
		return strings.Compare(a.dest.String()+"\x00"+a.selector+"\x00"+a.members, b.dest.String()+"\x00"+b.selector+"\x00"+b.members)
	}
	slices.SortFunc(want, cmp)
	slices.SortFunc(got, cmp)
	if !slices.Equal(want, got) {
		t.Fatalf("table serves\n%v\nmodel expects\n%v", got, want)
	}
}

// FuzzTable interprets the input as a sequence of events and checks that the
// Changes always keep a simulated broker equal to Subscriptions, that every
// subscription serves at least one consumer, and that Reset empties it.
func FuzzTable(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15})
	f.Add([]byte{0x00, 0x10, 0x80, 0x90, 0x00, 0xf0})
	f.Fuzz(func(t *testing.T, ops []byte) {
		dests := []destination.Destination{qOrders, tPrices, tmpQ}
		paths := [][]string{nil, {"X"}, {"L"}, {"X", "Y"}}
		for _, conduit := range []bool{true, false} {
			o := bridgeOptions("L", "R")
			o.Conduit, o.ConsumerTTL = conduit, 2
			tbl := New(o)
			b := broker{}
			for _, op := range ops {
				id := fmt.Sprintf("c%d", op&7)
				var ev advisory.Event
				switch op >> 6 {
				case 0, 1:
					c := plain(id, dests[int(op>>3&3)%len(dests)])
					c.Path = paths[int(op>>5&1)*2+int(op>>4&1)]
					c.Selector = []string{"", "a = 1"}[op>>3&1]
					ev = added(c)
				case 2:
					ev = removed(id)
				default:
					b.apply(t, tbl.Reset())
					b.check(t, tbl)
					continue
				}
				changes, _ := tbl.Apply(ev)
				b.apply(t, changes)
				b.check(t, tbl)
				for _, s := range tbl.Subscriptions() {
					if len(s.Consumers) == 0 {
						t.Fatalf("subscription %s serves nobody", s.ID)
					}
				}
			}
			b.apply(t, tbl.Reset())
			if tbl.Len() != 0 || len(b) != 0 {
				t.Fatalf("Reset left %d subscriptions", tbl.Len())
			}
		}
	})
}
