package main

import (
	"fmt"
	"os"
	"time"

	"github.com/brokernet/brokernet/internal/testkit/netsim"
)

type options struct {
	sizes, meshSizes string
	n, meshN         []int
	out              string
	budget           int64
	seed             uint64
	verbose          bool
}

// topo is one topology as the sweeps use it.
type topo struct {
	name   string
	t      netsim.Topology
	degree int
}

var topos = []topo{{"ring", netsim.Ring, 0}, {"tree", netsim.Tree, 0}, {"random-3", netsim.Random, 3}, {"mesh", netsim.Mesh, 0}}

func (o options) config(tp topo, n, ttl int, suppress, conduit bool) netsim.Config {
	c := netsim.DefaultConfig()
	c.Topology, c.Degree, c.Brokers, c.NetworkTTL = tp.t, tp.degree, n, ttl
	c.Suppress, c.Conduit, c.Seed, c.MaxDeliveries = suppress, conduit, o.seed, o.budgetFor(n)
	return c
}

// sweeps holds every result, by sweep.
type sweeps struct {
	// single: one consumer appears and leaves on an idle network, for every
	// N, topology, TTL 1–5 and suppression on/off.
	single []netsim.Result
	// load: background consumers and churn, for every N and topology, in
	// four variants (see variants).
	load []netsim.Result
}

// variants of the load sweep: the default-like one at TTL 1 and TTL 3, and at
// TTL 3 suppression off and conduit off.
var variants = []struct {
	name              string
	ttl               int
	suppress, conduit bool
}{
	{"ttl 1", 1, true, true},
	{"ttl 3", 3, true, true},
	{"ttl 3, no suppression", 3, false, true},
	{"ttl 3, no conduit", 3, true, false},
}

func (o options) log(r netsim.Result, took time.Duration) {
	if !o.verbose {
		return
	}
	status := ""
	if r.Err != nil {
		status = " ERR " + r.Err.Error()
	}
	fmt.Fprintf(os.Stderr, "%-45s appear subs %6d deliv %9d rounds %2d %8v | leave made %6d deliv %9d | bg subs %7d deliv %9d | churn settled %t (%s)%s\n",
		r.Config, r.Appear.Subs, r.Appear.Delivered, r.Appear.Rounds, r.Appear.Converged.Round(time.Millisecond),
		r.Leave.Subscribes, r.Leave.Delivered,
		r.Background.Subs, r.Background.Delivered, r.ChurnSettled, took.Round(time.Millisecond), status)
}

func (o options) sweep() (sweeps, error) {
	var sw sweeps
	for _, tp := range topos {
		for _, n := range o.sizesOf(tp) {
			for _, suppress := range []bool{true, false} {
				exploded := false
				for ttl := 1; ttl <= 5; ttl++ {
					c := o.config(tp, n, ttl, suppress, true)
					if exploded {
						// A higher TTL only adds paths: it explodes too.
						sw.single = append(sw.single, netsim.Result{Config: c, Err: fmt.Errorf("%s: %w (as at a lower TTL)", c, netsim.ErrBudget)})
						continue
					}
					t0 := time.Now()
					r := netsim.Run(c, netsim.Workload{SkipBackground: true})
					o.log(r, time.Since(t0))
					if r.Err != nil && !r.Exploded() {
						return sw, r.Err
					}
					exploded = r.Exploded()
					sw.single = append(sw.single, r)
				}
			}
			for _, v := range variants {
				c := o.config(tp, n, v.ttl, v.suppress, v.conduit)
				t0 := time.Now()
				r := netsim.Run(c, netsim.DefaultWorkload())
				o.log(r, time.Since(t0))
				if r.Err != nil && !r.Exploded() {
					return sw, r.Err
				}
				sw.load = append(sw.load, r)
			}
		}
	}
	return sw, nil
}

func run(o options) error {
	sw, err := o.sweep()
	if err != nil {
		return err
	}
	return o.write(sw)
}

// sizesOf returns the network sizes simulated for tp.
func (o options) sizesOf(tp topo) []int {
	if tp.t == netsim.Mesh {
		return o.meshN
	}
	return o.n
}

// budgetFor is the advisory budget of one measurement on n brokers.
func (o options) budgetFor(n int) int64 { return max(200_000, o.budget*int64(n)) }
