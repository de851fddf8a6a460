package bridge_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/brokernet/brokernet/bridge"
	"github.com/brokernet/brokernet/destination"
	"github.com/brokernet/brokernet/internal/testkit/stomptest"
	"github.com/brokernet/brokernet/internal/testkit/testbroker"
	"github.com/brokernet/brokernet/transport/stomp"
)

// Network semantics across several real brokers: multi-hop demand, TTLs, routes.

func withTTL(ttl int) func(*bridge.Config) {
	return func(c *bridge.Config) {
		c.Demand.ConsumerTTL, c.Demand.MessageTTL = ttl, ttl
	}
}

func chain(mods ...func(*bridge.Config)) func(*bridge.Config) {
	return func(c *bridge.Config) {
		for _, m := range mods {
			m(c)
		}
	}
}

// duplex starts bridges a->b and b->a.
func duplex(t *testing.T, a, b *testbroker.ActiveMQ, mod func(*bridge.Config)) (ab, ba *running) {
	return startBridge(t, a.StompURI(), b.StompURI(), mod), startBridge(t, b.StompURI(), a.StompURI(), mod)
}

// TestChainTTL: A→B→C with a consumer on C. With TTL 1 nothing sent on A reaches
// C; with TTL 2 all of it does.
func TestChainTTL(t *testing.T) {
	t.Parallel()
	bs := startBrokers(t, 3, false)
	a, b, c := bs[0], bs[1], bs[2]

	t.Run("ttl 1 stops at B", func(t *testing.T) {
		ab := startBridge(t, a.StompURI(), b.StompURI(), withTTL(1))
		bc := startBridge(t, b.StompURI(), c.StompURI(), withTTL(1))
		cons := stomptest.Subscribe(t, c.StompURI(), "/queue/chain1")
		waitDemand(t, bc, 1, 10*time.Second)
		// A→B has seen B's demand subscription (path [C]) and ignored it.
		stomptest.Eventually(t, 10*time.Second, func() error {
			if ab.Stats().Advisories.Load() < 1 {
				return fmt.Errorf("A->B has seen no advisory")
			}
			return nil
		})
		if n := ab.Stats().DemandSubs.Load() + ab.Stats().PendingSubs.Load(); n != 0 {
			t.Fatalf("A->B made %d demand subscriptions for a consumer two hops away with TTL 1", n)
		}
		stomptest.SendN(t, a.StompURI(), "/queue/chain1", 0, 100, false)
		if got := queueSize(t, a, "chain1"); got != 100 {
			t.Fatalf("A holds %d of 100", got)
		}
		if got := cons.Count(); got != 0 {
			t.Fatalf("C received %d messages with TTL 1", got)
		}
		ab.stop()
		bc.stop()
	})

	t.Run("ttl 2 reaches C", func(t *testing.T) {
		ab := startBridge(t, a.StompURI(), b.StompURI(), withTTL(2))
		bc := startBridge(t, b.StompURI(), c.StompURI(), withTTL(2))
		cons := stomptest.Subscribe(t, c.StompURI(), "/queue/chain2")
		waitDemand(t, bc, 1, 10*time.Second)
		waitDemand(t, ab, 1, 10*time.Second)
		stomptest.SendN(t, a.StompURI(), "/queue/chain2", 0, 100, false)
		cons.WaitDistinct(100, 30*time.Second)
		if d := cons.Duplicates(); d != 0 {
			t.Fatalf("%d duplicates", d)
		}
	})
}

// TestFullMeshDuplex: three brokers, duplex bridges between each pair, a consumer
// on each, 100 messages sent on each: exactly 300 received, no duplicates.
func TestFullMeshDuplex(t *testing.T) {
	t.Parallel()
	bs := startBrokers(t, 3, false)
	cases := []struct {
		name string
		mod  func(*bridge.Config)
	}{
		{"ttl 1", withTTL(1)},
		{"ttl 3 with suppression", chain(withTTL(3), func(c *bridge.Config) {
			c.Demand.DecreasePriority = true
			c.Demand.SuppressQueues, c.Demand.SuppressTopics = true, true
		})},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			q := "mesh" + strconv.Itoa(i)
			var bridges []*running
			for x := 0; x < 3; x++ {
				for y := x + 1; y < 3; y++ {
					ab, ba := duplex(t, bs[x], bs[y], tc.mod)
					bridges = append(bridges, ab, ba)
				}
			}
			cons := make([]*stomptest.Consumer, 3)
			for x := range bs {
				cons[x] = stomptest.Subscribe(t, bs[x].StompURI(), "/queue/"+q)
			}
			for _, br := range bridges {
				stomptest.Eventually(t, 15*time.Second, func() error {
					if br.Stats().DemandSubs.Load() < 1 {
						return fmt.Errorf("bridge %s has no demand yet", br.Name())
					}
					return nil
				})
			}
			var wg sync.WaitGroup
			for x := range bs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					c := stomptest.Dial(t, bs[x].StompURI())
					if err := stomptest.Send(context.Background(), c, "/queue/"+q, x*100, 100, false); err != nil {
						t.Error(err)
					}
				}()
			}
			wg.Wait()
			stomptest.Eventually(t, 30*time.Second, func() error {
				seen := map[int]int{}
				for _, c := range cons {
					for _, s := range c.Seqs() {
						seen[s]++
					}
				}
				if len(seen) != 300 {
					return fmt.Errorf("%d of 300 distinct messages", len(seen))
				}
				for s, k := range seen {
					if k > 1 {
						return fmt.Errorf("message %d received %d times", s, k)
					}
				}
				return nil
			})
			stomptest.Eventually(t, 10*time.Second, func() error {
				total := int64(0)
				for _, b := range bs {
					total += queueSize(t, b, q)
				}
				if total != 0 {
					return fmt.Errorf("%d messages still on queues", total)
				}
				return nil
			})
			if got := cons[0].Count() + cons[1].Count() + cons[2].Count(); got != 300 {
				t.Fatalf("%d deliveries for 300 messages", got)
			}
		})
	}
}

// TestShortestRouteAndFailover: brokers A–F with a one-hop route A–F and two
// three-hop routes A–B–C–F and A–D–E–F. With decreased priority and suppression,
// messages from A to a consumer on F take the direct link; when it is cut they
// flow over a three-hop route without loss.
func TestShortestRouteAndFailover(t *testing.T) {
	t.Parallel()
	bs := startBrokers(t, 6, false)
	A, B, C, D, E, F := bs[0], bs[1], bs[2], bs[3], bs[4], bs[5]
	mod := chain(withTTL(3), func(c *bridge.Config) {
		c.Demand.DecreasePriority = true
		c.Demand.SuppressQueues = true
	})
	af, fa := duplex(t, A, F, mod)
	ab, _ := duplex(t, A, B, mod)
	duplex(t, B, C, mod)
	duplex(t, C, F, mod)
	ad, _ := duplex(t, A, D, mod)
	duplex(t, D, E, mod)
	duplex(t, E, F, mod)

	cons := stomptest.Subscribe(t, F.StompURI(), "/queue/route")
	waitDemand(t, af, 1, 15*time.Second)
	// The longer routes' demand reaches A and is suppressed there.
	stomptest.Eventually(t, 15*time.Second, func() error {
		if n := ab.Stats().DemandSubs.Load() + ad.Stats().DemandSubs.Load(); n != 0 {
			return fmt.Errorf("A holds %d demand subscriptions over three-hop routes", n)
		}
		return nil
	})
	const n = 500
	stomptest.SendN(t, A.StompURI(), "/queue/route", 0, n, false)
	cons.WaitDistinct(n, 30*time.Second)
	// Forwarded counts a message once A confirmed its acknowledgement, which
	// may come after F's consumer has it.
	stomptest.Eventually(t, 15*time.Second, func() error {
		if got := af.Stats().Forwarded.Load(); got != n {
			return fmt.Errorf("A->F forwarded %d, want all %d", got, n)
		}
		return nil
	})
	if got := ab.Stats().Forwarded.Load() + ad.Stats().Forwarded.Load(); got != 0 {
		t.Fatalf("the three-hop routes carried %d messages", got)
	}

	// Cut A–F.
	if err := af.stop(); err != nil {
		t.Fatal(err)
	}
	fa.stop()
	stomptest.Eventually(t, 15*time.Second, func() error {
		if n := ab.Stats().DemandSubs.Load() + ad.Stats().DemandSubs.Load(); n != 1 {
			return fmt.Errorf("A holds %d demand subscriptions over the three-hop routes, want 1", n)
		}
		return nil
	})
	stomptest.SendN(t, A.StompURI(), "/queue/route", n, n, false)
	cons.WaitDistinct(2*n, 60*time.Second)
	if m := cons.Missing(0, 2*n); len(m) != 0 {
		t.Fatalf("missing %v", m)
	}
	if d := cons.Duplicates(); d != 0 {
		t.Fatalf("%d duplicates", d)
	}
	t.Logf("after the cut: A->B forwarded %d, A->D forwarded %d", ab.Stats().Forwarded.Load(), ad.Stats().Forwarded.Load())
}

// TestSelectorsUnderConduit: a consumer on B selects color='red', one on C (two
// hops, through B) color='blue': only red reaches B, only blue reaches C, and
// nothing else leaves A. Two consumers with different selectors on one broker
// share one demand subscription whose selector is their OR.
func TestSelectorsUnderConduit(t *testing.T) {
	t.Parallel()
	bs := startBrokers(t, 3, false)
	a, b, c := bs[0], bs[1], bs[2]
	ab := startBridge(t, a.StompURI(), b.StompURI(), withTTL(2))
	bc := startBridge(t, b.StompURI(), c.StompURI(), withTTL(2))
	red := stomptest.Subscribe(t, b.StompURI(), "/queue/paint", "selector", "color = 'red'")
	blue := stomptest.Subscribe(t, c.StompURI(), "/queue/paint", "selector", "color = 'blue'")
	waitDemand(t, bc, 1, 10*time.Second)
	waitDemand(t, ab, 2, 10*time.Second)
	for _, color := range []string{"red", "blue", "green"} {
		stomptest.SendN(t, a.StompURI(), "/queue/paint", 0, 50, false, "color", color)
	}
	red.WaitDistinct(50, 20*time.Second)
	blue.WaitDistinct(50, 20*time.Second)
	for _, f := range red.Frames() {
		if f.Header.Get("color") != "red" {
			t.Fatalf("B got a %s message", f.Header.Get("color"))
		}
	}
	for _, f := range blue.Frames() {
		if f.Header.Get("color") != "blue" {
			t.Fatalf("C got a %s message", f.Header.Get("color"))
		}
	}
	// The consumers have every red and blue message, but the bridge may not have
	// acknowledged the last ones on A yet (they count in A's queue size until it
	// does): wait for the condition, do not sample it.
	stomptest.Eventually(t, 10*time.Second, func() error {
		if got := queueSize(t, a, "paint"); got != 50 {
			return fmt.Errorf("A holds %d messages, want the 50 green ones", got)
		}
		if got := ab.Stats().Forwarded.Load(); got != 100 {
			return fmt.Errorf("A->B forwarded %d, want 100 (red and blue only)", got)
		}
		return nil
	})

	t.Run("conduit OR on one broker", func(t *testing.T) {
		r := stomptest.Subscribe(t, b.StompURI(), "/queue/mix", "selector", "color = 'red'")
		bl := stomptest.Subscribe(t, b.StompURI(), "/queue/mix", "selector", "color = 'blue'")
		stomptest.Eventually(t, 10*time.Second, func() error { return a.CheckQueueConsumers("mix", 1) })
		for _, color := range []string{"red", "blue", "green"} {
			stomptest.SendN(t, a.StompURI(), "/queue/mix", 0, 30, false, "color", color)
		}
		r.WaitDistinct(30, 20*time.Second)
		bl.WaitDistinct(30, 20*time.Second)
		stomptest.Eventually(t, 10*time.Second, func() error {
			if got := queueSize(t, a, "mix"); got != 30 {
				return fmt.Errorf("A holds %d, want the 30 green ones (in-flight ones are acknowledged soon after delivery)", got)
			}
			return nil
		})
		// The blue consumer leaves: the subscription is re-issued for red only,
		// and blue messages sent afterwards stay on A. Done means: the advisory
		// was applied and the new subscription is confirmed by A.
		before := ab.Stats().Advisories.Load()
		bl.Close()
		stomptest.Eventually(t, 10*time.Second, func() error {
			st := ab.Stats()
			if st.Advisories.Load() <= before || st.PendingSubs.Load() != 0 || st.DemandSubs.Load() != 3 {
				return fmt.Errorf("re-issue not done: %d advisories (was %d), %d pending, %d demand subscriptions",
					st.Advisories.Load(), before, st.PendingSubs.Load(), st.DemandSubs.Load())
			}
			return a.CheckQueueConsumers("mix", 1)
		})
		stomptest.SendN(t, a.StompURI(), "/queue/mix", 100, 30, false, "color", "red")
		stomptest.SendN(t, a.StompURI(), "/queue/mix", 200, 30, false, "color", "blue")
		r.WaitDistinct(60, 20*time.Second)
		stomptest.Eventually(t, 10*time.Second, func() error {
			if got := queueSize(t, a, "mix"); got != 60 {
				return fmt.Errorf("A holds %d, want 30 green + 30 blue", got)
			}
			return nil
		})
		if d := r.Duplicates(); d != 0 {
			t.Fatalf("%d duplicates across the re-issue", d)
		}
	})
}

// TestStuckMessagesReplay: messages forwarded A→B whose consumer then leaves B,
// while a consumer now waits on A: with replay on they come back and are all
// consumed on A; with replay off they stay on B.
func TestStuckMessagesReplay(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		replay bool
		rate   int
	}{{true, 0}, {true, 500}, {false, 0}} {
		replay := tc.replay
		t.Run(fmt.Sprintf("replay %v rate limit %d", tc.replay, tc.rate), func(t *testing.T) {
			bs := startBrokers(t, 2, false)
			a, b := bs[0], bs[1]
			mod := func(c *bridge.Config) {
				c.Demand.ReplayWhenNoConsumers = replay
				c.ReplayRateLimit = tc.rate
				c.StuckInterval = 500 * time.Millisecond
			}
			ab, ba := duplex(t, a, b, mod)
			const n = 1000
			// A consumer on B that takes one message and never acknowledges
			// it (prefetch 1), so that everything forwarded waits on B's
			// queue. (One that consumed, however slowly, took all 1,000
			// before it left in a full run: nothing was left to be stuck.)
			hold := stomptest.Dial(t, b.StompURI())
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			if err := hold.Subscribe(ctx, "hold", "/queue/stuck", "client-individual", "activemq.prefetchSize", "1"); err != nil {
				t.Fatal(err)
			}
			// With replay, A->B also holds a replay subscription on A (A has no
			// consumer of its own), so wait for the demand itself on A.
			stomptest.Eventually(t, 10*time.Second, func() error { return a.CheckQueueConsumers("stuck", map[bool]int64{true: 2, false: 1}[replay]) })
			stomptest.SendN(t, a.StompURI(), "/queue/stuck", 0, n, false)
			stomptest.Eventually(t, 30*time.Second, func() error {
				if f := ab.Stats().Forwarded.Load(); f != n {
					return fmt.Errorf("A->B forwarded %d of %d", f, n)
				}
				return nil
			})
			if err := hold.Close(ctx); err != nil { // its one message goes back
				t.Fatal(err)
			}
			started := time.Now()
			ca := stomptest.Subscribe(t, a.StompURI(), "/queue/stuck")
			if replay {
				ca.WaitDistinct(n, 30*time.Second)
				if d := ca.Duplicates(); d != 0 {
					t.Fatalf("%d duplicates", d)
				}
				t.Logf("A consumed all %d via replay from B in %s (B->A forwarded %d)",
					ca.Distinct(), time.Since(started).Round(time.Millisecond), ba.Stats().Forwarded.Load())
				// Replayed, nothing is left stuck on B.
				stomptest.Eventually(t, 10*time.Second, func() error {
					if list, measured := ba.Stuck(); !measured || len(list) != 0 {
						return fmt.Errorf("B->A stuck %v (measured %v), want none measured", list, measured)
					}
					return nil
				})
			} else {
				waitDemand(t, ba, 1, 10*time.Second)
				const want = int64(n)
				stomptest.Eventually(t, 10*time.Second, func() error {
					if got := queueSize(t, b, "stuck"); got != want {
						return fmt.Errorf("B holds %d, want %d", got, want)
					}
					return nil
				})
				if got := ba.Stats().Forwarded.Load(); got != 0 {
					t.Fatalf("B->A forwarded %d stuck messages without replay", got)
				}
				// B->A sees them: demanded from A, withheld from its demand
				// (they visited A), taken by nobody on B.
				var history []string // what was seen, for a failure's message
				stomptest.Eventually(t, 15*time.Second, func() error {
					list, measured := ba.Stuck()
					if h := fmt.Sprintf("%v/%v", list, measured); len(history) == 0 || history[len(history)-1] != h {
						history = append(history, h)
					}
					if !measured || len(list) != 1 || list[0].Destination != "queue://stuck" || list[0].Messages != want {
						return fmt.Errorf("B->A stuck %v (measured %v), want %d on queue://stuck; seen in turn: %v", list, measured, want, history)
					}
					if got := ba.Stats().Stuck.Load(); got != want {
						return fmt.Errorf("stuck gauge %d, want %d", got, want)
					}
					return nil
				})
				// A->B: nothing demanded from B any more, nothing stuck on A.
				if list, measured := ab.Stuck(); !measured || len(list) != 0 {
					t.Errorf("A->B stuck %v (measured %v), want none measured", list, measured)
				}
				// A consumer on B takes them: none stuck any more.
				cb2 := stomptest.Subscribe(t, b.StompURI(), "/queue/stuck")
				cb2.WaitDistinct(int(want), 20*time.Second)
				stomptest.Eventually(t, 10*time.Second, func() error {
					if list, _ := ba.Stuck(); len(list) != 0 {
						return fmt.Errorf("B->A stuck %v after B's consumer took them", list)
					}
					return nil
				})
				t.Logf("stuck on B measured: %d", want)
			}
		})
	}
}

// TestChurn: 200 consumers on B created and closed at random over four queues
// and two topics; the demand table follows them, and afterwards no demand
// subscription is left anywhere. Meanwhile a stream of messages flows A→B to a
// fifth queue whose consumer on B is replaced again and again: every message
// arrives, duplicates (if any) are reported.
func TestChurn(t *testing.T) {
	t.Parallel()
	bs := startBrokers(t, 2, false)
	a, b := bs[0], bs[1]
	br := startBridge(t, a.StompURI(), b.StompURI(), nil)
	dests := []string{"/queue/churn0", "/queue/churn1", "/queue/churn2", "/queue/churn3", "/topic/churn4", "/topic/churn5"}
	rng := rand.New(rand.NewPCG(1, 2))
	type live struct {
		conn *stomp.Conn
		dest string
	}
	var open []live
	ctx := context.Background()
	const stream = "/queue/churn.stream"
	streams := []*stomptest.Consumer{stomptest.Subscribe(t, b.StompURI(), stream)}
	producer := stomptest.Dial(t, a.StompURI())
	sent, iteration := 0, 0
	check := func() {
		t.Helper()
		want := map[string]bool{stream: true}
		for _, l := range open {
			want[l.dest] = true
		}
		stomptest.Eventually(t, 15*time.Second, func() error {
			if got := br.Stats().DemandSubs.Load(); got != int64(len(want)) || br.Stats().PendingSubs.Load() != 0 {
				return fmt.Errorf("bridge holds %d demand subscriptions (%d pending), consumers on B cover %d destinations",
					got, br.Stats().PendingSubs.Load(), len(want))
			}
			return nil
		})
	}
	created := 0
	for created < 200 || len(open) > 0 {
		if created < 200 && (len(open) == 0 || rng.IntN(3) > 0) {
			c := stomptest.Dial(t, b.StompURI())
			d := dests[rng.IntN(len(dests))]
			if err := c.Subscribe(ctx, "churn", d, "auto"); err != nil {
				t.Fatal(err)
			}
			open = append(open, live{c, d})
			created++
		} else {
			i := rng.IntN(len(open))
			open[i].conn.Close(ctx)
			open = append(open[:i], open[i+1:]...)
		}
		// The stream: a few messages each step, its consumer replaced every 25 steps.
		stomptest.SendOn(t, producer, stream, sent, 5, false)
		sent += 5
		if iteration++; iteration%25 == 0 {
			streams[len(streams)-1].Close()
			streams = append(streams, stomptest.Subscribe(t, b.StompURI(), stream))
		}
		if created%40 == 0 && created > 0 {
			check()
		}
	}
	check()
	stomptest.Eventually(t, 30*time.Second, func() error {
		seen := map[int]int{}
		for _, c := range streams {
			for _, s := range c.Seqs() {
				seen[s]++
			}
		}
		if len(seen) != sent {
			return fmt.Errorf("stream: %d of %d messages arrived across %d consumers", len(seen), sent, len(streams))
		}
		dups := 0
		for _, k := range seen {
			dups += k - 1
		}
		t.Logf("stream: all %d messages arrived across %d consumers, %d duplicates", sent, len(streams), dups)
		return nil
	})
	for _, d := range dests[:4] {
		if err := a.CheckQueueConsumers(d[len("/queue/"):], 0); err != nil {
			t.Fatal(err)
		}
	}
}

// TestDurableDemandSurvivesRestart: a durable subscriber on B gets a durable
// demand subscription on A; messages published while the bridge is down are
// forwarded when it is back.
func TestDurableDemandSurvivesRestart(t *testing.T) {
	t.Parallel()
	bs := startBrokers(t, 2, false)
	a, b := bs[0], bs[1]
	br := startBridge(t, a.StompURI(), b.StompURI(), nil)
	sub := stomptest.Subscribe(t, b.StompURI()+"?clientId=durable-consumer", "/topic/news",
		"activemq.subscriptionName", "reader")
	waitDemand(t, br, 1, 10*time.Second)
	stomptest.SendN(t, a.StompURI(), "/topic/news", 0, 100, true)
	sub.WaitDistinct(100, 20*time.Second)

	if err := br.stop(); err != nil {
		t.Fatal(err)
	}
	// Published while no bridge runs: kept by the durable demand subscription on A.
	stomptest.SendN(t, a.StompURI(), "/topic/news", 100, 100, true)
	startBridge(t, a.StompURI(), b.StompURI(), nil)
	sub.WaitDistinct(200, 30*time.Second)
	if d := sub.Duplicates(); d != 0 {
		t.Fatalf("%d duplicates", d)
	}
}

// TestTopicsExactlyOnce: topic subscribers on every broker of a chain and of a
// looped full mesh each get every message published anywhere exactly once.
func TestTopicsExactlyOnce(t *testing.T) {
	t.Parallel()
	bs := startBrokers(t, 3, false)
	mod := chain(withTTL(3), func(c *bridge.Config) {
		c.Demand.DecreasePriority = true
		c.Demand.SuppressQueues, c.Demand.SuppressTopics = true, true
	})
	// want is the number of demand subscriptions each bridge (x->y, y->x per
	// link, in order) holds once suppression has settled: in the chain, A->B
	// serves B's subscriber and C's through B; in the triangle every broker
	// reaches every other directly.
	cases := []struct {
		name  string
		links [][2]int
		want  []int64
	}{
		{"chain", [][2]int{{0, 1}, {1, 2}}, []int64{2, 1, 1, 2}},
		{"triangle", [][2]int{{0, 1}, {1, 2}, {0, 2}}, []int64{1, 1, 1, 1, 1, 1}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			topic := "/topic/once" + strconv.Itoa(i)
			var bridges []*running
			for _, l := range tc.links {
				x, y := duplex(t, bs[l[0]], bs[l[1]], mod)
				bridges = append(bridges, x, y)
			}
			subs := make([]*stomptest.Consumer, 3)
			for x := range bs {
				subs[x] = stomptest.Subscribe(t, bs[x].StompURI(), topic)
			}
			// Settled: every bridge holds the expected demand, and no advisory has
			// arrived anywhere for three polls in a row.
			var lastAdv int64 = -1
			quiet := 0
			stomptest.Eventually(t, 20*time.Second, func() error {
				var adv int64
				for i, br := range bridges {
					adv += br.Stats().Advisories.Load()
					if got := br.Stats().DemandSubs.Load(); got != tc.want[i] || br.Stats().PendingSubs.Load() != 0 {
						quiet = 0
						return fmt.Errorf("bridge %s holds %d demand subscriptions, want %d", br.Name(), got, tc.want[i])
					}
				}
				if adv != lastAdv {
					lastAdv, quiet = adv, 0
					return fmt.Errorf("advisories still arriving")
				}
				if quiet++; quiet < 3 {
					return fmt.Errorf("waiting for quiet")
				}
				return nil
			})
			for x := range bs {
				stomptest.SendN(t, bs[x].StompURI(), topic, x*100, 100, false)
			}
			for x, s := range subs {
				s.WaitDistinct(300, 30*time.Second)
				stomptest.Eventually(t, 5*time.Second, func() error {
					if d := s.Duplicates(); d != 0 {
						return fmt.Errorf("subscriber on broker %d got %d duplicates", x, d)
					}
					return nil
				})
			}
		})
	}
}

// TestStaticInclude: a statically included destination is forwarded with no
// consumer anywhere; exclusion still wins over it.
func TestStaticInclude(t *testing.T) {
	t.Parallel()
	bs := startBrokers(t, 2, false)
	a, b := bs[0], bs[1]
	always, err := destination.ParsePattern("queue://always.>")
	if err != nil {
		t.Fatal(err)
	}
	never, err := destination.ParsePattern("queue://always.secret")
	if err != nil {
		t.Fatal(err)
	}
	br := startBridge(t, a.StompURI(), b.StompURI(), func(c *bridge.Config) {
		c.Demand.StaticInclude = []destination.Pattern{always}
		c.Demand.Filter.Exclude = []destination.Pattern{never}
	})
	stomptest.Eventually(t, 10*time.Second, func() error {
		if !br.Up() {
			return fmt.Errorf("bridge not up")
		}
		return nil
	})
	// The exclusion narrows the include to the queues as they appear.
	stomptest.SendN(t, a.StompURI(), "/queue/always.orders", 0, 50, false)
	stomptest.SendN(t, a.StompURI(), "/queue/always.secret", 0, 20, false)
	stomptest.Eventually(t, 20*time.Second, func() error {
		if got := queueSize(t, b, "always.orders"); got != 50 {
			return fmt.Errorf("B holds %d of the 50 statically forwarded messages", got)
		}
		return nil
	})
	waitDemand(t, br, 1, 10*time.Second)
	if got := queueSize(t, a, "always.secret"); got != 20 {
		t.Fatalf("A holds %d of the 20 excluded messages", got)
	}
	if got := queueSize(t, b, "always.secret"); got != 0 {
		t.Fatalf("an excluded destination reached B (%d messages)", got)
	}
}

// TestStaticIncludeExcludedStayAvailable: under a wildcard static include, the
// excluded queue's messages must stay on A available to local consumers:
// queued, not dispatched to the bridge and left unacknowledged (queue size
// counts both; inflightCount tells them apart), and more of them than the
// prefetch must not stall the included queues, whether those existed before
// the bridge started or were created after.
func TestStaticIncludeExcludedStayAvailable(t *testing.T) {
	t.Parallel()
	bs := startBrokers(t, 2, false)
	a, b := bs[0], bs[1]
	always, err := destination.ParsePattern("queue://always.>")
	if err != nil {
		t.Fatal(err)
	}
	never, err := destination.ParsePattern("queue://always.secret")
	if err != nil {
		t.Fatal(err)
	}
	// Queues that exist before the bridge starts.
	stomptest.SendN(t, a.StompURI(), "/queue/always.early", 0, 30, false)
	stomptest.SendN(t, a.StompURI(), "/queue/always.secret", 0, 40, false) // two prefetches
	br := startBridge(t, a.StompURI(), b.StompURI(), func(c *bridge.Config) {
		c.Demand.StaticInclude = []destination.Pattern{always}
		c.Demand.Filter.Exclude = []destination.Pattern{never}
		c.Demand.Prefetch = 20
	})
	waitDemand(t, br, 1, 10*time.Second) // always.early; not always.secret
	stomptest.Eventually(t, 20*time.Second, func() error {
		if got := queueSize(t, b, "always.early"); got != 30 {
			return fmt.Errorf("B holds %d of the 30 messages queued before the bridge started", got)
		}
		return nil
	})
	// More excluded messages, and a queue created after the bridge started.
	stomptest.SendN(t, a.StompURI(), "/queue/always.secret", 40, 100, false) // five prefetches
	stomptest.SendN(t, a.StompURI(), "/queue/always.orders", 0, 50, false)
	stomptest.Eventually(t, 20*time.Second, func() error {
		if got := queueSize(t, b, "always.orders"); got != 50 {
			return fmt.Errorf("B holds %d of the 50 statically forwarded messages", got)
		}
		return nil
	})
	waitDemand(t, br, 2, 10*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := a.QueueStats(ctx, "always.secret")
	if err != nil {
		t.Fatal(err)
	}
	if st.Size != 140 || st.InflightCount != 0 || st.ConsumerCount != 0 {
		t.Fatalf("A's excluded queue: size %d, in flight %d, %d consumers; want 140 queued, none dispatched, no consumer (the bridge took excluded messages)",
			st.Size, st.InflightCount, st.ConsumerCount)
	}
	if got := queueSize(t, b, "always.secret"); got != 0 {
		t.Fatalf("an excluded destination reached B (%d messages)", got)
	}
	local := stomptest.Subscribe(t, a.StompURI(), "/queue/always.secret")
	local.WaitDistinct(140, 20*time.Second)
}
