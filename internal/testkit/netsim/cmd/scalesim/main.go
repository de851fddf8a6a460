// Command scalesim runs the netsim sweeps for issue 12 and writes their tables
// and plots into bench/SCALE.md (between its netsim markers) and bench/scale/.
//
//	go run ./internal/testkit/netsim/cmd/scalesim            # N = 100, 300, 1000
//	go run ./internal/testkit/netsim/cmd/scalesim -n 20,50   # a quick try
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

func main() {
	var o options
	flag.StringVar(&o.sizes, "n", "100,300,1000", "network sizes, comma-separated")
	flag.StringVar(&o.out, "out", "bench", "directory holding SCALE.md; plots and CSV go to its scale/ folder")
	flag.Int64Var(&o.budget, "budget", 2000, "advisories one measurement may deliver, per broker (at least 200,000 in all), before it counts as exploded")
	flag.StringVar(&o.meshSizes, "mesh-n", "10,20,50,100", "full mesh sizes, comma-separated (N×(N-1) bridges; one consumer costs ~N³ advisories beyond TTL 1)")
	flag.Uint64Var(&o.seed, "seed", 1, "seed of topologies, delays and workloads")
	flag.BoolVar(&o.verbose, "v", false, "print every result as it comes")
	replot := flag.Bool("replot", false, "only redraw the plots from OUT/scale/sim.csv and daemon.csv")
	flag.Parse()
	o.n, o.meshN = sizes("-n", o.sizes), sizes("-mesh-n", o.meshSizes)
	start := time.Now()
	if *replot {
		dir := filepath.Join(o.out, "scale")
		sw, err := readSweeps(filepath.Join(dir, "sim.csv"))
		if err == nil {
			err = errors.Join(o.plots(dir, sw), daemonPlot(dir))
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "scalesim:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "scalesim:", err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "scalesim: done in %s\n", time.Since(start).Round(time.Second))
}

func sizes(flagName, list string) []int {
	var out []int
	for _, f := range strings.Split(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 4 {
			fmt.Fprintf(os.Stderr, "scalesim: %s: %q is not a network size of at least 4\n", flagName, f)
			os.Exit(2)
		}
		out = append(out, n)
	}
	return out
}
