package bench

// BenchmarkForwarding compares three ways of getting 1 KiB messages from a
// producer to a consumer, in the same run on the same machine:
//
//	direct     producer and consumer on one broker (baseline)
//	native     producer on A, consumer on B, A has ActiveMQ's <networkConnector> to B
//	brokernet  producer on A, consumer on B, `brokernet bridge A B` as a subprocess
//
// each with memory brokers (non-persistent messages) and KahaDB brokers
// (persistent:true messages), on fresh brokers per path and mode. Run it with
// `make bench`; flags after -args:
//
//	-bench.n=20000             messages of the full-speed phase, non-persistent
//	-bench.npersistent=5000    the same, persistent
//	-bench.paths=direct,native,brokernet
//	-bench.modes=non-persistent,persistent
//	-bench.rate=2000 -bench.steady=5s   the paced phase
//	-bench.warmup=1000         messages sent (and awaited) before measuring
//	-bench.window=0 -bench.prefetch=0   brokernet --window/--prefetch (0: its default)
//	-bench.bin=PATH            a prebuilt brokernet (default: go build ./cmd/brokernet once)
//	-bench.quietwait=60s       before each path, wait up to this long for an idle machine
//	-bench.size=1024           body size
//
// The table goes to stdout at the end; each path also reports metrics.

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/brokernet/brokernet/internal/testbroker"
)

var (
	flagN           = flag.Int("bench.n", 20000, "messages in the full-speed phase, non-persistent")
	flagNPersistent = flag.Int("bench.npersistent", 5000, "messages in the full-speed phase, persistent")
	flagPaths       = flag.String("bench.paths", "direct,native,brokernet", "paths to measure")
	flagModes       = flag.String("bench.modes", "non-persistent,persistent", "modes to measure")
	flagRate        = flag.Float64("bench.rate", 2000, "messages per second of the paced phase")
	flagSteady      = flag.Duration("bench.steady", 5*time.Second, "duration of the paced phase")
	flagWarmup      = flag.Int("bench.warmup", 1000, "warm-up messages before measuring")
	flagWindow      = flag.Int("bench.window", 0, "brokernet --window (0: its default)")
	flagPrefetch    = flag.Int("bench.prefetch", 0, "brokernet --prefetch (0: its default)")
	flagBodySize    = flag.Int("bench.size", 1024, "message body size in bytes")
	flagBin         = flag.String("bench.bin", "", "use this brokernet binary instead of building ./cmd/brokernet")
	flagQuietWait   = flag.Duration("bench.quietwait", 60*time.Second, "before each path, wait up to this long for the machine to be idle (<25% busy); 0 disables")
)

const (
	modeNonPersistent = "non-persistent"
	modePersistent    = "persistent"
	dest              = "/queue/bench.forward"
	stallTimeout      = 30 * time.Second // no progress for this long: the rest is lost
)

var (
	buildOnce sync.Once
	buildDir  string
	buildBin  string
	buildErr  error
)

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

func brokernetBinary(b *testing.B) string {
	b.Helper()
	buildOnce.Do(func() {
		if *flagBin != "" {
			buildBin, buildErr = filepath.Abs(*flagBin)
			if buildErr == nil {
				_, buildErr = os.Stat(buildBin)
			}
			return
		}
		buildDir, buildErr = os.MkdirTemp("", "brokernet-bench-")
		if buildErr != nil {
			return
		}
		t0 := time.Now()
		buildBin, buildErr = BuildBrokernet(buildDir)
		if buildErr == nil {
			fmt.Printf("built %s in %s\n", buildBin, time.Since(t0).Round(time.Millisecond))
		}
	})
	if buildErr != nil {
		b.Fatal(buildErr)
	}
	return buildBin
}

// result is one row of the table.
type result struct {
	mode, path string
	n          int

	rate     float64 // full speed: n / (first send .. last receive)
	sendRate float64 // full speed: n / (first send .. last receipt)
	p50, p99 time.Duration

	steadyN      int
	steadyRate   float64 // achieved send rate of the paced phase
	sp50, sp99   time.Duration
	sMax         time.Duration
	lost, dups   int
	foreign, bad int

	// CPU during the full-speed phase.
	fullWall                       time.Duration
	cpuA, cpuB, cpuBridge, cpuSelf time.Duration
	cpuMachine                     time.Duration

	idleBefore float64 // machine busy share just before the path started

	// brokernet only: whole life of the process.
	bridgeCPU  time.Duration
	bridgeMsgs int
	bridgeRSS  int64 // KiB
	bridgeExit int

	failed string
}

func (r *result) bridgeCPUPerMsg() time.Duration {
	if r.bridgeMsgs == 0 {
		return 0
	}
	return r.bridgeCPU / time.Duration(r.bridgeMsgs)
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func BenchmarkForwarding(b *testing.B) {
	testbroker.Require(b)
	var results []*result
	for _, mode := range splitList(*flagModes) {
		if mode != modeNonPersistent && mode != modePersistent {
			b.Fatalf("-bench.modes: unknown mode %q", mode)
		}
		b.Run(mode, func(b *testing.B) {
			for _, path := range splitList(*flagPaths) {
				switch path {
				case "direct", "native", "brokernet":
				default:
					b.Fatalf("-bench.paths: unknown path %q", path)
				}
				r := &result{mode: mode, path: path}
				results = append(results, r)
				b.Run(path, func(b *testing.B) {
					defer func() {
						if b.Failed() && r.failed == "" {
							r.failed = "FAILED"
						}
						report(b, r)
					}()
					runPath(b, r)
				})
			}
		})
	}
	printTable(results)
}

func report(b *testing.B, r *result) {
	if r.rate == 0 {
		return
	}
	b.ReportMetric(r.rate, "msgs/s")
	b.ReportMetric(ms(r.p50), "p50-ms")
	b.ReportMetric(ms(r.p99), "p99-ms")
	b.ReportMetric(ms(r.sp50), "p50@2k-ms")
	b.ReportMetric(ms(r.sp99), "p99@2k-ms")
	b.ReportMetric(float64(r.lost), "lost")
	b.ReportMetric(float64(r.dups), "dup")
	if r.path == "brokernet" {
		b.ReportMetric(float64(r.bridgeCPUPerMsg())/1e3, "bridgeCPU-µs/msg")
		b.ReportMetric(float64(r.bridgeRSS)/1024, "bridgeRSS-MiB")
	}
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

func startBroker(b *testing.B, name string, persistent bool, connectors ...string) *testbroker.ActiveMQ {
	b.Helper()
	t0 := time.Now()
	x := testbroker.StartActiveMQ(b, testbroker.Options{
		Name:              name,
		ID:                name + "-id",
		Persistent:        persistent,
		NetworkConnectors: connectors,
	})
	b.Logf("broker %s up in %s (stomp %s, openwire %s)", name, time.Since(t0).Round(time.Millisecond), x.StompURI(), x.OpenWireURI())
	return x
}

func runPath(b *testing.B, r *result) {
	ctx := context.Background()
	persistent := r.mode == modePersistent
	r.n = *flagN
	short := "np"
	if persistent {
		r.n = *flagNPersistent
		short = "p"
	}
	prefix := "bench-" + short + "-" + r.path
	if *flagQuietWait > 0 {
		busy, waited := WaitQuiet(*flagQuietWait, 0.25, runtime.NumCPU())
		r.idleBefore = busy
		b.Logf("machine %.0f%% busy before start (waited %s)", 100*busy, waited.Round(time.Second))
	}

	var prodURI, consURI string
	var pidA, pidB int
	var br *Bridge
	switch r.path {
	case "direct":
		x := startBroker(b, prefix, persistent)
		prodURI, consURI, pidA = x.StompURI(), x.StompURI(), x.Pid()
	case "native":
		bb := startBroker(b, prefix+"-B", persistent)
		a := startBroker(b, prefix+"-A", persistent, bb.OpenWireURI())
		prodURI, consURI, pidA, pidB = a.StompURI(), bb.StompURI(), a.Pid(), bb.Pid()
	case "brokernet":
		bin := brokernetBinary(b)
		a := startBroker(b, prefix+"-A", persistent)
		bb := startBroker(b, prefix+"-B", persistent)
		prodURI, consURI, pidA, pidB = a.StompURI(), bb.StompURI(), a.Pid(), bb.Pid()
		args := []string{"bridge", "--log-level", "warn", "--log-format", "json"}
		if *flagWindow > 0 {
			args = append(args, "--window", fmt.Sprint(*flagWindow))
		}
		if *flagPrefetch > 0 {
			args = append(args, "--prefetch", fmt.Sprint(*flagPrefetch))
		}
		args = append(args, prodURI, consURI)
		var err error
		if br, err = StartBridge(bin, args...); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() {
			br.Kill()
			if b.Failed() {
				b.Logf("brokernet output:\n%s", br.Output())
			}
		})
	}

	cons, err := Subscribe(ctx, consURI, dest)
	if err != nil {
		b.Fatal(err)
	}
	defer cons.Close()
	prod, err := Dial(ctx, prodURI)
	if err != nil {
		b.Fatal(err)
	}
	defer prod.Abort()
	body := Body(*flagBodySize)
	send := func(p Phase, n int, rate float64) SendStats {
		b.Helper()
		cons.Expect(p, n)
		st, err := Send(ctx, prod, SendOptions{Dest: dest, Phase: p, N: n, Persistent: persistent, Body: body, Rate: rate})
		if err != nil {
			b.Fatalf("%s phase: sending: %v", p, err)
		}
		return st
	}
	bridgeAlive := func() {
		if br == nil {
			return
		}
		select {
		case <-br.Exited():
			b.Fatalf("brokernet exited early:\n%s", br.Output())
		default:
		}
	}

	// Warm-up: proves the path forwards (demand has propagated, the bridge or
	// network connector is up) and lets the JVMs compile the hot paths.
	t0 := time.Now()
	send(Warmup, *flagWarmup, 0)
	wctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	ok := cons.Wait(wctx, Warmup, 60*time.Second)
	cancel()
	bridgeAlive()
	if !ok {
		w := cons.Result(Warmup)
		b.Fatalf("warm-up: only %d of %d messages arrived on the consumer within %s", w.Distinct, w.N, time.Since(t0).Round(time.Millisecond))
	}
	b.Logf("warm-up: %d messages through in %s", *flagWarmup, time.Since(t0).Round(time.Millisecond))

	// Full speed.
	pidBridge := 0
	if br != nil {
		pidBridge = br.Pid()
	}
	cA, cB, cBr, cSelf, cM := ProcCPU(pidA), ProcCPU(pidB), ProcCPU(pidBridge), SelfCPU(), MachineCPU()
	st := send(Full, r.n, 0)
	if !cons.Wait(ctx, Full, stallTimeout) {
		b.Errorf("full-speed phase: messages missing after %s without progress", stallTimeout)
	}
	full := cons.Result(Full)
	end := full.Last
	r.fullWall = end.Sub(st.Start)
	r.cpuA, r.cpuB, r.cpuBridge = ProcCPU(pidA)-cA, ProcCPU(pidB)-cB, ProcCPU(pidBridge)-cBr
	r.cpuSelf, r.cpuMachine = SelfCPU()-cSelf, MachineCPU()-cM
	if full.Distinct > 0 && r.fullWall > 0 {
		r.rate = float64(full.Distinct) / r.fullWall.Seconds()
	}
	if d := st.End.Sub(st.Start); d > 0 {
		r.sendRate = float64(r.n) / d.Seconds()
	}
	r.p50, r.p99 = full.P50, full.P99
	bridgeAlive()

	// Paced.
	r.steadyN = int(*flagRate * flagSteady.Seconds())
	sst := send(Steady, r.steadyN, *flagRate)
	if d := sst.End.Sub(sst.Start); d > 0 {
		r.steadyRate = float64(r.steadyN) / d.Seconds()
	}
	if !cons.Wait(ctx, Steady, stallTimeout) {
		b.Errorf("steady phase: messages missing after %s without progress", stallTimeout)
	}
	// Give late duplicates a moment.
	time.Sleep(500 * time.Millisecond)
	steady := cons.Result(Steady)
	r.sp50, r.sp99, r.sMax = steady.P50, steady.P99, steady.Max

	for p := range NumPhases {
		pr := cons.Result(p)
		r.lost += pr.Lost
		r.dups += pr.Dups
		r.bad += pr.Bad
	}
	r.foreign = cons.Foreign()
	if r.lost > 0 || r.dups > 0 || r.bad > 0 || r.foreign > 0 {
		b.Errorf("LOSS CHECK FAILED on %s/%s: lost %d, duplicates %d, bad seq %d, foreign %d", r.mode, r.path, r.lost, r.dups, r.bad, r.foreign)
	}

	if br != nil {
		u, err := br.Stop(45 * time.Second)
		r.bridgeCPU, r.bridgeRSS, r.bridgeExit = u.CPU, u.MaxRSS, u.ExitCode
		r.bridgeMsgs = *flagWarmup + r.n + r.steadyN
		if err != nil {
			b.Errorf("stopping brokernet: %v\n%s", err, br.Output())
		} else if u.ExitCode != 0 {
			b.Errorf("brokernet exit code %d\n%s", u.ExitCode, br.Output())
		}
		if out := strings.TrimSpace(br.Output()); out != "" {
			b.Logf("brokernet output (warn and above):\n%s", out)
		}
	}
	b.Logf("%s/%s: %d msgs full speed %.0f msg/s (producer %.0f msg/s), p50 %s p99 %s; paced %d at %.0f msg/s p50 %s p99 %s max %s",
		r.mode, r.path, r.n, r.rate, r.sendRate, r.p50, r.p99, r.steadyN, r.steadyRate, r.sp50, r.sp99, r.sMax)
}

func fmtDur(d time.Duration) string {
	switch {
	case d == 0:
		return "-"
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.2fms", ms(d))
	case d < time.Second:
		return fmt.Sprintf("%.1fms", ms(d))
	default:
		return fmt.Sprintf("%.2fs", d.Seconds())
	}
}

func passMiss(ok bool) string {
	if ok {
		return "PASS"
	}
	return "MISS"
}

func perMsg(d time.Duration, n int) string {
	if n == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f", float64(d)/1e3/float64(n))
}

func printTable(results []*result) {
	w := os.Stdout
	fmt.Fprintln(w)
	nagle := "with transport.tcpNoDelay=true (testdata/activemq.xml.tmpl)"
	fmt.Fprintf(w, "brokernet bench: %d B bodies; full speed %d (non-persistent) / %d (persistent) msgs, at most 500 unconfirmed, persistent producer in transactions of 100; paced %.0f msg/s for %s; warm-up %d; brokers %s\n",
		*flagBodySize, *flagN, *flagNPersistent, *flagRate, *flagSteady, *flagWarmup, nagle)
	fmt.Fprintf(w, "%-15s %-10s %8s %10s %10s %8s %8s %8s %5s %4s %14s %10s\n",
		"mode", "path", "msgs/s", "p50(full)", "p99(full)", "p50@2k", "p99@2k", "rate@2k", "lost", "dup", "bridgeCPU/msg", "bridgeRSS")
	for _, r := range results {
		cpu, rss := "-", "-"
		if r.path == "brokernet" && r.bridgeMsgs > 0 {
			cpu = fmt.Sprintf("%.1fµs", float64(r.bridgeCPUPerMsg())/1e3)
			rss = fmt.Sprintf("%.1fMiB", float64(r.bridgeRSS)/1024)
		}
		line := fmt.Sprintf("%-15s %-10s %8.0f %10s %10s %8s %8s %8.0f %5d %4d %14s %10s",
			r.mode, r.path, r.rate, fmtDur(r.p50), fmtDur(r.p99), fmtDur(r.sp50), fmtDur(r.sp99), r.steadyRate, r.lost, r.dups, cpu, rss)
		if r.failed != "" {
			line += "  " + r.failed
		}
		fmt.Fprintln(w, line)
	}

	fmt.Fprintln(w)
	fmt.Fprintf(w, "CPU during the full-speed phase, µs per message (from /proc; 10 ms resolution); other = everything else on the machine, incl. kernel I/O threads (KahaDB fsync) and other sessions; busy%% of %d cores; busyBefore = machine busy share just before the path started:\n", runtime.NumCPU())
	fmt.Fprintf(w, "%-15s %-10s %8s %8s %8s %8s %8s %8s %8s %6s %11s\n", "mode", "path", "wall", "brokerA", "brokerB", "bridge", "bench", "other", "machine", "busy%", "busyBefore")
	for _, r := range results {
		if r.rate == 0 {
			continue
		}
		n := r.n
		b, br := perMsg(r.cpuB, n), perMsg(r.cpuBridge, n)
		if r.path == "direct" {
			b = "-"
		}
		if r.path != "brokernet" {
			br = "-"
		}
		busy := 0.0
		if r.fullWall > 0 {
			busy = 100 * r.cpuMachine.Seconds() / (float64(runtime.NumCPU()) * r.fullWall.Seconds())
		}
		other := max(0, r.cpuMachine-r.cpuA-r.cpuB-r.cpuBridge-r.cpuSelf)
		fmt.Fprintf(w, "%-15s %-10s %8s %8s %8s %8s %8s %8s %8s %5.0f%% %10.0f%%\n", r.mode, r.path, fmtDur(r.fullWall),
			perMsg(r.cpuA, n), b, br, perMsg(r.cpuSelf, n), perMsg(other, n), perMsg(r.cpuMachine, n), busy, 100*r.idleBefore)
	}

	fmt.Fprintln(w)
	find := func(mode, path string) *result {
		for _, r := range results {
			if r.mode == mode && r.path == path && r.rate > 0 {
				return r
			}
		}
		return nil
	}
	var ratios []string
	targets := []struct {
		mode string
		min  float64
	}{{modeNonPersistent, 0.8}, {modePersistent, 1.5}}
	var targetLines []string
	for _, t := range targets {
		bn, nat := find(t.mode, "brokernet"), find(t.mode, "native")
		if bn == nil || nat == nil {
			continue
		}
		ratio := bn.rate / nat.rate
		ratios = append(ratios, fmt.Sprintf("%s %.2f", t.mode, ratio))
		targetLines = append(targetLines, fmt.Sprintf("target %s brokernet/native >= %.1f: %.2f %s", t.mode, t.min, ratio, passMiss(ratio >= t.min)))
	}
	if len(ratios) > 0 {
		fmt.Fprintln(w, "ratio brokernet/native: "+strings.Join(ratios, ", "))
	}
	for _, l := range targetLines {
		fmt.Fprintln(w, l)
	}
	for _, r := range results {
		if r.path == "brokernet" && r.rate > 0 {
			fmt.Fprintf(w, "target %s brokernet p50 at %.0f msg/s < 5ms: %s %s\n", r.mode, *flagRate, fmtDur(r.sp50), passMiss(r.sp50 < 5*time.Millisecond))
		}
	}
	lossOK := true
	var bad []string
	for _, r := range results {
		if r.lost > 0 || r.dups > 0 || r.bad > 0 || r.foreign > 0 || r.rate == 0 {
			lossOK = false
			bad = append(bad, fmt.Sprintf("%s/%s(lost %d dup %d)", r.mode, r.path, r.lost, r.dups))
		}
	}
	if lossOK {
		fmt.Fprintln(w, "target zero loss, no duplicates (all paths): PASS")
	} else {
		fmt.Fprintln(w, "target zero loss, no duplicates: MISS *** "+strings.Join(bad, ", ")+" ***")
	}
	fmt.Fprintln(w)
}
