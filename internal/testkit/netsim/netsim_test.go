package netsim

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/brokernet/brokernet/destination"
)

// cfgOf is a network of n brokers with a fixed advisory delay D, so that
// rounds and times below can be derived by hand.
func cfgOf(topo Topology, n, ttl int, suppress, conduit bool) Config {
	c := DefaultConfig()
	c.Topology, c.Brokers, c.NetworkTTL, c.Suppress, c.Conduit = topo, n, ttl, suppress, conduit
	c.Delay, c.Jitter = D, 0
	return c
}

// D is the advisory delay of the hand-derived cases.
const D = 10 * time.Millisecond

func newSim(t *testing.T, c Config) *Sim {
	t.Helper()
	s, err := New(c)
	if err != nil {
		t.Fatalf("New(%s): %v", c, err)
	}
	return s
}

func measure(t *testing.T, s *Sim, do func()) Phase {
	t.Helper()
	p, err := s.Measure(do)
	if err != nil {
		t.Fatalf("%s: %v", s.Config(), err)
	}
	return p
}

// TestOneConsumerAppears derives each case from the demand rules by hand, for
// one topic consumer on B0 (ring 0-1-2-3-0, unless said otherwise):
//
//   - Demand with networkTTL t reaches every broker along every simple path of
//     at most t links from B0 (a bridge ignores demand whose path holds its
//     local broker, or already t brokers long), one subscription per path.
//     Ring 4: t=1 gives B1[0], B3[0]; t=2 adds B2[0,1], B2[0,3]; t=3 adds
//     B3[0,1,2], B1[0,3,2]; t=4 adds nothing (every path of 4 links returns to
//     B0).
//   - Every broker publishes one advisory per subscription (plus the
//     consumer's own) and each goes to the 2 bridges whose remote it is, and
//     with suppression also to the 2 bridges whose local broker it is.
//   - With suppression and t=3: B2's routes [0,1] and [0,3] rank equal in
//     priority (-8) and length, so the smaller path "B0|B1" wins and B2<-B3
//     withdraws [0,3] when B2[0,1]'s advisory reaches it (3D); B3<-B2 and
//     B1<-B2 never subscribe [0,1,2] and [0,3,2], since B3[0] and B1[0]
//     (priority -5) were already known to them (2D). 3 subscriptions remain.
func TestOneConsumerAppears(t *testing.T) {
	tests := []struct {
		name                 string
		cfg                  Config
		subs, subscribes     int
		published, delivered int64
		rounds               int
		converged            time.Duration
	}{
		{"ring of 4, ttl 1", cfgOf(Ring, 4, 1, false, true), 2, 2, 3, 6, 1, D},
		{"ring of 4, ttl 1, suppression (local advisories too)", cfgOf(Ring, 4, 1, true, true), 2, 2, 3, 12, 1, D},
		{"ring of 4, ttl 2", cfgOf(Ring, 4, 2, false, true), 4, 4, 5, 10, 2, 2 * D},
		{"ring of 4, ttl 3", cfgOf(Ring, 4, 3, false, true), 6, 6, 7, 14, 3, 3 * D},
		{"ring of 4, ttl 4 adds no path", cfgOf(Ring, 4, 4, false, true), 6, 6, 7, 14, 3, 3 * D},
		{"ring of 4, unlimited ttl", cfgOf(Ring, 4, -1, false, true), 6, 6, 7, 14, 3, 3 * D},
		// 4 subscribes + 1 unsubscribe = 6 advisories with the consumer's;
		// 4 bridges watch each broker (2 remote, 2 local).
		{"ring of 4, ttl 3, suppression keeps the best route to B2", cfgOf(Ring, 4, 3, true, true), 3, 4, 6, 24, 3, 3 * D},
		// Binary tree 0-(1,2), 1-(3,4), 2-(5,6): one path to each broker.
		{"tree of 7, ttl 1", cfgOf(Tree, 7, 1, false, true), 2, 2, 3, 2 + 3 + 3, 1, D},
		{"tree of 7, ttl 2", cfgOf(Tree, 7, 2, false, true), 6, 6, 7, 2 + 2*3 + 4*1, 2, 2 * D},
		// Mesh of 4, ttl 2: 3 one-link paths and 3×2 two-link paths.
		{"mesh of 4, ttl 1", cfgOf(Mesh, 4, 1, false, true), 3, 3, 4, 12, 1, D},
		{"mesh of 4, ttl 2", cfgOf(Mesh, 4, 2, false, true), 9, 9, 10, 30, 2, 2 * D},
		// With suppression the direct routes (-5) beat every two-link one
		// (-8), but a bridge learns of the better route only from its local
		// broker's advisory, which races with the remote one: all arrive at
		// 2D, in publication order (B1[0], B2[0], B3[0]). So B2<-B1, B3<-B1
		// and B3<-B2 see the remote route first, subscribe it and withdraw
		// it at once; B1<-B2, B1<-B3 and B2<-B3 withhold it. 6 subscribes,
		// 3 unsubscribes, 10 advisories, each to 3 remote and 3 local
		// watchers.
		{"mesh of 4, ttl 2, suppression", cfgOf(Mesh, 4, 2, true, true), 3, 6, 10, 60, 2, 2 * D},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newSim(t, tt.cfg)
			p := measure(t, s, func() { s.AddConsumer(0, "prices") })
			if p.Subs != tt.subs || p.Subscribes != int64(tt.subscribes) || p.Published != tt.published ||
				p.Delivered != tt.delivered || p.Rounds != tt.rounds || p.Converged != tt.converged {
				t.Fatalf("got subs %d subscribes %d published %d delivered %d rounds %d converged %v\n"+
					"want subs %d subscribes %d published %d delivered %d rounds %d converged %v",
					p.Subs, p.Subscribes, p.Published, p.Delivered, p.Rounds, p.Converged,
					tt.subs, tt.subscribes, tt.published, tt.delivered, tt.rounds, tt.converged)
			}
			if p.Unsubscribes != int64(tt.subscribes-tt.subs) {
				t.Fatalf("unsubscribes %d, want %d", p.Unsubscribes, tt.subscribes-tt.subs)
			}
		})
	}
}

func TestSuppressedRoutes(t *testing.T) {
	s := newSim(t, cfgOf(Ring, 4, 3, true, true))
	measure(t, s, func() { s.AddConsumer(0, "prices") })
	var got []string
	for _, r := range s.Routes() {
		got = append(got, r.Broker+r.Path)
	}
	want := []string{"B1|B0|", "B2|B0|B1|", "B3|B0|"}
	if !slices.Equal(got, want) {
		t.Fatalf("routes %v, want %v", got, want)
	}
}

// TestConduit: two consumers of one topic on B0 share one subscription per
// neighbour under conduit, and get one each without.
func TestConduit(t *testing.T) {
	for _, tt := range []struct {
		conduit bool
		subs    int
	}{{true, 2}, {false, 4}} {
		t.Run(fmt.Sprintf("conduit %t", tt.conduit), func(t *testing.T) {
			s := newSim(t, cfgOf(Ring, 4, 1, false, tt.conduit))
			var a, b string
			p := measure(t, s, func() { a, b = s.AddConsumer(0, "prices"), s.AddConsumer(0, "prices") })
			if p.Subs != tt.subs {
				t.Fatalf("subs %d, want %d", p.Subs, tt.subs)
			}
			// The first one leaving keeps the conduit's subscriptions.
			p = measure(t, s, func() { s.RemoveConsumer(0, a) })
			if p.Subs != 2 {
				t.Fatalf("after one left: subs %d, want 2", p.Subs)
			}
			p = measure(t, s, func() { s.RemoveConsumer(0, b) })
			if p.Subs != 0 {
				t.Fatalf("after both left: subs %d, want 0", p.Subs)
			}
		})
	}
}

// TestLeaveRemovesEverything: a consumer leaving takes all its demand along,
// in as many rounds as it took to build.
func TestLeaveRemovesEverything(t *testing.T) {
	for _, c := range []Config{
		cfgOf(Ring, 4, 3, false, true), cfgOf(Ring, 4, 3, true, true),
		cfgOf(Mesh, 5, 3, true, true), cfgOf(Tree, 15, -1, false, false),
	} {
		t.Run(c.String(), func(t *testing.T) {
			s := newSim(t, c)
			var id string
			up := measure(t, s, func() { id = s.AddConsumer(1, "prices") })
			down := measure(t, s, func() { s.RemoveConsumer(1, id) })
			if down.Subs != 0 || s.Subs() != 0 {
				t.Fatalf("%d subscriptions left after the consumer went", down.Subs)
			}
			// A withheld route comes back when the better one goes, until
			// the consumer's removal reaches it too: each such return is
			// one more subscribe and unsubscribe.
			if down.Unsubscribes-down.Subscribes != int64(up.Subs) {
				t.Fatalf("unsubscribes %d - subscribes %d, want the %d the consumer had", down.Unsubscribes, down.Subscribes, up.Subs)
			}
		})
	}
}

// TestChurnEndsWhereAFreshNetworkStarts: after random consumers came and went
// with random delays, the network settles on exactly the demand a fresh
// network builds for the consumers that remain.
func TestChurnEndsWhereAFreshNetworkStarts(t *testing.T) {
	churnN := 120
	if testing.Short() {
		churnN = 50 // make unit runs under -race
	}
	for _, c := range []Config{
		{Topology: Ring, Brokers: 12, NetworkTTL: 3, Suppress: true, Conduit: true},
		{Topology: Ring, Brokers: 12, NetworkTTL: 3, Suppress: false, Conduit: false},
		{Topology: Random, Degree: 3, Brokers: 20, NetworkTTL: 3, Suppress: true, Conduit: true},
		{Topology: Mesh, Brokers: 5, NetworkTTL: 2, Suppress: true, Conduit: false},
		{Topology: Tree, Brokers: 15, NetworkTTL: -1, Suppress: true, Conduit: true},
	} {
		c.DecreasePriority, c.Kind, c.Delay, c.Jitter, c.Seed = true, destination.Topic, time.Millisecond, 5*time.Millisecond, 7
		t.Run(c.String(), func(t *testing.T) {
			s := newSim(t, c)
			p, err := s.Measure(func() {
				Populate(s, 1, 4)
				Churn(s, churnN, 500, 100*time.Millisecond, 4)
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%+v", p)
			fresh := newSim(t, c)
			measure(t, fresh, func() {
				for i, dests := range s.PlainConsumers() {
					for _, d := range dests {
						fresh.AddConsumer(i, d)
					}
				}
			})
			got, want := s.Routes(), fresh.Routes()
			if !slices.Equal(got, want) {
				t.Fatalf("after churn %d routes, fresh %d\nchurned: %v\nfresh:   %v", len(got), len(want), got, want)
			}
			if len(got) == 0 {
				t.Fatal("no demand left to compare: the churn removed every consumer")
			}
		})
	}
}

func TestDeterministic(t *testing.T) {
	c := DefaultConfig()
	c.Topology, c.Brokers, c.NetworkTTL = Random, 30, 3
	run := func() (Phase, []Route) {
		s := newSim(t, c)
		p := measure(t, s, func() { Churn(s, 100, 200, 50*time.Millisecond, 3) })
		return p, s.Routes()
	}
	p1, r1 := run()
	p2, r2 := run()
	if p1 != p2 || !slices.Equal(r1, r2) {
		t.Fatalf("two runs with seed %d differ: %+v / %+v", c.Seed, p1, p2)
	}
}

func TestTopologies(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tt := range []struct {
		topo        Topology
		n, k, edges int
	}{
		{Ring, 2, 0, 1}, {Ring, 10, 0, 10}, {Tree, 10, 0, 9}, {Mesh, 10, 0, 45},
		{Random, 10, 3, 15}, {Random, 1000, 3, 1500}, {Random, 100, 4, 200},
	} {
		e, err := Edges(tt.topo, tt.n, tt.k, rng)
		if err != nil {
			t.Fatalf("%s %d: %v", tt.topo, tt.n, err)
		}
		deg := make([]int, tt.n)
		for _, x := range e {
			deg[x.A]++
			deg[x.B]++
		}
		if len(e) != tt.edges || !connected(tt.n, e) {
			t.Fatalf("%s %d: %d edges (want %d), connected %t", tt.topo, tt.n, len(e), tt.edges, connected(tt.n, e))
		}
		if tt.topo == Random && (slices.Min(deg) != tt.k || slices.Max(deg) != tt.k) {
			t.Fatalf("random-%d: degrees %d..%d", tt.k, slices.Min(deg), slices.Max(deg))
		}
	}
	for _, bad := range []struct {
		topo Topology
		n, k int
		want string
	}{
		{Random, 5, 3, "brokers × degree must be even"}, {Random, 4, 4, "want 1 ≤ degree < brokers"},
		{Ring, 1, 0, "at least 2"}, {"star", 5, 0, `unknown topology "star"`},
	} {
		if _, err := Edges(bad.topo, bad.n, bad.k, rng); err == nil || !contains(err.Error(), bad.want) {
			t.Fatalf("%s %d %d: error %v, want %q", bad.topo, bad.n, bad.k, err, bad.want)
		}
	}
	if _, _, err := ParseTopology("random-x"); err == nil || !contains(err.Error(), `"random-x"`) {
		t.Fatalf("ParseTopology(random-x): %v", err)
	}
}

func contains(s, sub string) bool {
	return len(sub) == 0 || len(s) >= len(sub) && (s[:len(sub)] == sub || contains(s[1:], sub))
}

func TestBudget(t *testing.T) {
	c := cfgOf(Mesh, 8, -1, false, true)
	c.MaxDeliveries = 1000
	s := newSim(t, c)
	if _, err := s.Measure(func() { s.AddConsumer(0, "prices") }); err == nil || !contains(err.Error(), "budget") {
		t.Fatalf("an unlimited TTL on a mesh of 8 without suppression stayed within 1000 advisories: %v", err)
	}
}

// TestRun: the sweep's scenario on a ring of 20 with TTL 2 — one consumer is
// 4 subscriptions (2 per direction) and leaves none behind; churn settles
// exactly; a mesh beyond the budget reports ErrBudget.
func TestRun(t *testing.T) {
	c := DefaultConfig()
	c.Brokers, c.NetworkTTL = 20, 2
	w := DefaultWorkload()
	w.ChurnFor = 2 * time.Second
	r := Run(c, w)
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	if r.Bridges != 40 || r.Distance != 10 || r.Appear.Subs != 4 || r.Leave.Subs != 0 || !r.ChurnSettled || r.Background.Subs == 0 {
		t.Fatalf("bridges %d distance %d appear %d leave %d settled %t background %d", r.Bridges, r.Distance,
			r.Appear.Subs, r.Leave.Subs, r.ChurnSettled, r.Background.Subs)
	}
	c = cfgOf(Mesh, 8, 4, false, true)
	c.MaxDeliveries = 500
	if r := Run(c, w); !r.Exploded() {
		t.Fatalf("a mesh of 8 with TTL 4 and no suppression stayed within 500 advisories: %v", r.Err)
	}
}
