package bench

// BenchmarkForwarding compares ways of getting 1 KiB messages from a producer
// to a consumer, in the same run on the same machine:
//
//	direct              producer and consumer on one broker (baseline)
//	native              producer on A, consumer on B, A has ActiveMQ's <networkConnector> to B
//	brokernet           producer on A, consumer on B, `brokernet bridge stomp://A stomp://B` as a subprocess
//	brokernet-openwire  the same with `brokernet bridge tcp://A tcp://B` (the OpenWire transport)
//
// each with memory brokers (non-persistent messages) and KahaDB brokers
// (persistent:true messages), on fresh brokers per path and mode. The brokers'
// transport connectors have Debian's default settings (no tcpNoDelay), as users
// run them; -bench.tuned adds a second table on brokers with
// transport.tcpNoDelay=true. On the paths named by -bench.minimal a producer and
// consumer written directly on go-stomp also run a full-speed phase (see
// Minimal): the harness must move at least as many messages as they do, or the
// load generator, not the path, is what the table shows.
//
// One run of a path on this 2-core machine spreads more than the effects
// measured (bench/RESULTS.md), so every mode×path runs -bench.repeat times, in
// interleaved rounds: round 1 runs each mode×path once, then round 2, and so on,
// so that a slow drift of the machine hits every path alike. The per-run table
// labels each row with its round ("brokernet #2"); a summary table then gives
// per mode×path the median and range (min–max) over the rounds, and the
// targets are judged on the medians, ratios (brokernet/native, the generator
// check) taken within each round first. A failed run is shown but left out of
// the medians (rounds_test.go).
//
// Run it with `make bench`; flags after -args (or in BENCHFLAGS):
//
//	-bench.repeat=3            rounds: each mode×path runs this many times, interleaved (1: one run, no summary)
//	-bench.n=150000            messages of the full-speed phase, non-persistent (10–19 s per path here: long enough for the JVMs to reach steady state)
//	-bench.npersistent=5000    the same, persistent
//	-bench.paths=direct,native,brokernet   (also: brokernet-openwire)
//	-bench.modes=non-persistent,persistent
//	-bench.minimal=direct      paths that also run the go-stomp pair ("" for none; non-persistent only)
//	-bench.tuned               also run everything on brokers with transport.tcpNoDelay=true
//	-bench.rate=2000 -bench.steady=15s  the paced phase (30,000 messages; their p99 is the 300th slowest)
//	-bench.warmup=60000        messages sent at full speed (and awaited) before measuring: the brokers' JIT compilers
//	                           still ran 17–28 µs per message through a 150,000-message phase after 5,000
//	-bench.inflight=1000 -bench.receiptevery=100   non-persistent producer: unconfirmed bound, SENDs per receipt
//	-bench.consumerprefetch=5000   activemq.prefetchSize of the harness's consumer
//	-bench.window=0 -bench.prefetch=0   brokernet --window/--prefetch (0: its default)
//	-bench.bin=PATH            a prebuilt brokernet (default: go build ./cmd/brokernet once)
//	-bench.bridgeflags="..."   more brokernet bridge flags (e.g. "--stuck-interval 0")
//	-bench.quietwait=60s       before each path, wait up to this long for an idle machine
//	-bench.damon=pause         stop the kernel's DAMON kdamonds for the run (keep: leave them running; damon.go)
//	-bench.size=1024           body size
//
// The tables go to stdout at the end; each path (of each round) also reports
// metrics, as sub-benchmark .../roundK/MODE/PATH when there are several rounds.

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/brokernet/brokernet/internal/testkit/testbroker"
)

var (
	flagN            = flag.Int("bench.n", 150000, "messages in the full-speed phase, non-persistent")
	flagNPersistent  = flag.Int("bench.npersistent", 5000, "messages in the full-speed phase, persistent")
	flagPaths        = flag.String("bench.paths", "direct,native,brokernet", "paths to measure: direct, native, brokernet, brokernet-openwire")
	flagModes        = flag.String("bench.modes", "non-persistent,persistent", "modes to measure")
	flagMinimal      = flag.String("bench.minimal", "direct", "paths on which a plain go-stomp producer/consumer pair also runs full-speed phases, one right before the harness's two and one right after (non-persistent mode only); empty for none")
	flagTuned        = flag.Bool("bench.tuned", false, "after the main table, run the same on brokers with transport.tcpNoDelay=true as a second table")
	flagRate         = flag.Float64("bench.rate", 2000, "messages per second of the paced phase")
	flagSteady       = flag.Duration("bench.steady", 15*time.Second, "duration of the paced phase (at 2,000 msg/s 15 s make a p99 of 30,000 latencies, which one stall of a few dozen messages does not decide)")
	flagWarmup       = flag.Int("bench.warmup", 60000, "warm-up messages, sent at full speed before measuring, so that the brokers' JIT compilers are done (after 5,000 they still ran 17–28 µs per message through the full-speed phase)")
	flagInFlight     = flag.Int("bench.inflight", 1000, "non-persistent producer: most messages sent but not confirmed by a receipt")
	flagReceiptEvery = flag.Int("bench.receiptevery", 100, "non-persistent producer: one SEND in this many asks for a receipt")
	flagConsPrefetch = flag.Int("bench.consumerprefetch", 5000, "activemq.prefetchSize of the benchmark's consumer (0: broker default)")
	flagWindow       = flag.Int("bench.window", 0, "brokernet --window (0: its default)")
	flagPrefetch     = flag.Int("bench.prefetch", 0, "brokernet --prefetch (0: its default)")
	flagBodySize     = flag.Int("bench.size", 1024, "message body size in bytes")
	flagBridgeFlags  = flag.String("bench.bridgeflags", "", "more flags for brokernet bridge, space-separated (e.g. \"--stuck-interval 0\" to compare a setting)")
	flagBin          = flag.String("bench.bin", "", "use this brokernet binary instead of building ./cmd/brokernet")
	flagRepeat       = flag.Int("bench.repeat", 3, "rounds: each mode×path runs this many times, interleaved, and the summary gives median and range (1: a single run, no summary)")
	flagBrokers      = flag.String("bench.brokers", "debian", "how the ActiveMQ brokers run: debian (as Debian's package runs them: persistent KahaDB, -Xms512M -Xmx512M, the JVM's default collector, ActiveMQ's default memory limits) or test (the test brokers' profile: non-persistent unless the mode is persistent, 256 MB heap, serial collector, 64 MB memory limit)")
	flagLatencies    = flag.String("bench.latencies", "", "write the paced phase's latency of every message (by sequence number, with the phase's start and the brokers' pids) into this folder, one file per mode, path and round")
	flagGCBefore     = flag.Bool("bench.gcbeforepaced", false, "before the paced phase, run a full garbage collection in each broker JVM (jcmd PID GC.run), to tell what the full-speed phase left in their heaps from the paced phase's own costs (an experiment, not how users run brokers)")
	flagQuietWait    = flag.Duration("bench.quietwait", 60*time.Second, "before each path, wait up to this long for the machine to be idle (<25% busy); 0 disables")
	flagDAMON        = flag.String("bench.damon", "pause", "pause: stop the kernel's running DAMON kdamonds for the run and start them again at the end (their sampling stalls every process; damon.go); keep: leave them running")
)

// damonNote says in the tables' header what became of DAMON (checkFlags).
var damonNote string

const (
	modeNonPersistent = "non-persistent"
	modePersistent    = "persistent"
	dest              = "/queue/bench.forward"
	minimalDest       = "/queue/bench.minimal"
	stallTimeout      = 30 * time.Second // no progress for this long: the rest is lost

	// The persistent producer keeps its historical shape (RESULTS.md):
	// transactions of 100, at most 500 messages unconfirmed.
	persistentBatch    = 100
	persistentInFlight = 500
)

// brokerSettings is one transport configuration of the brokers under test.
type brokerSettings struct {
	name string // sub-benchmark name
	desc string // for the table header
	opts string // testbroker StompOptions and OpenWireOptions
}

var (
	defaultSettings = brokerSettings{"default", "Debian's default transport settings (no transport.tcpNoDelay)", ""}
	tunedSettings   = brokerSettings{"tcpNoDelay", "transport.tcpNoDelay=true on their STOMP and OpenWire connectors", "transport.tcpNoDelay=true"}
)

// A path is how messages get from the producer's broker to the consumer's.
var knownPaths = map[string]bool{"direct": true, "native": true, "brokernet": true, "brokernet-openwire": true}

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

// phaseStats is what one measured phase moved and what it cost.
type phaseStats struct {
	n   int
	cpu CPUUse
}

// result is one row of the table.
type result struct {
	settings   brokerSettings
	mode, path string
	round      int // 1, 2, ... (-bench.repeat)
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

	full, steady phaseStats
	idleBefore   float64 // machine busy share just before the path started

	// Where the go-stomp pair runs, the harness runs a second full-speed
	// phase right after its first, so that each side has one run early and
	// one late in the path's life: rateAgain and fullAgain (0 otherwise).
	rateAgain float64
	fullAgain phaseStats

	// The go-stomp pair (-bench.minimal): its full-speed phases, one right
	// before the harness's first and one right after its second.
	minRuns              []minimalRun
	minLost, minDups     int
	minBad, minForeign   int
	minFailed            string
	minSent              int // messages the pair sent, for the bridge's count
	minimalWanted        bool
	minimalSkippedReason string

	// brokernet only: whole life of the process.
	bridgeCPU  time.Duration
	bridgeMsgs int
	bridgeRSS  int64 // KiB
	bridgeExit int

	failed string
}

// minimalRun is one full-speed phase of the go-stomp pair.
type minimalRun struct {
	when     string // "before" or "after" the harness's full-speed phase
	stats    phaseStats
	rate     float64
	p50, p99 time.Duration
}

// bestHarness is the harness's faster full-speed phase, the one held to the
// pair's faster (generatorChecks): its rate and what it cost.
func (r *result) bestHarness() (float64, phaseStats) {
	if r.rateAgain > r.rate {
		return r.rateAgain, r.fullAgain
	}
	return r.rate, r.full
}

// bestMinimal is the pair's faster full-speed phase, the one the harness is
// held to; nil if none ran.
func (r *result) bestMinimal() *minimalRun {
	var best *minimalRun
	for i := range r.minRuns {
		if best == nil || r.minRuns[i].rate > best.rate {
			best = &r.minRuns[i]
		}
	}
	return best
}

func (r *result) bridged() bool { return strings.HasPrefix(r.path, "brokernet") }

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
	modes, paths := splitList(*flagModes), splitList(*flagPaths)
	for _, mode := range modes {
		if mode != modeNonPersistent && mode != modePersistent {
			b.Fatalf("-bench.modes: unknown mode %q (want %s or %s)", mode, modeNonPersistent, modePersistent)
		}
	}
	minimalOn := map[string]bool{}
	for _, p := range append(append([]string{}, paths...), splitList(*flagMinimal)...) {
		if !knownPaths[p] {
			b.Fatalf("unknown path %q in -bench.paths or -bench.minimal (want direct, native, brokernet or brokernet-openwire)", p)
		}
	}
	for _, p := range splitList(*flagMinimal) {
		minimalOn[p] = true
	}
	rounds := checkFlags(b)
	settings := []brokerSettings{defaultSettings}
	if *flagTuned {
		settings = append(settings, tunedSettings)
	}
	var tables [][]*result
	for _, set := range settings {
		var results []*result
		b.Run(set.name, func(b *testing.B) {
			results = runRounds(b, rounds, modes, paths, func(mode, path string) *result {
				return &result{settings: set, mode: mode, path: path, minimalWanted: minimalOn[path]}
			}, runPath)
		})
		tables = append(tables, results)
	}
	for _, results := range tables {
		printTable(os.Stdout, results, rounds)
	}
}

// checkFlags checks the flags every benchmark shares and returns the rounds
// to run (-bench.repeat).
func checkFlags(b *testing.B) int {
	if *flagRepeat < 1 {
		b.Fatalf("-bench.repeat=%d: want at least 1 round", *flagRepeat)
	}
	if p := *flagBrokers; p != "debian" && p != "test" {
		b.Fatalf("-bench.brokers=%q: want debian or test", p)
	}
	switch *flagDAMON {
	case "pause":
		paused, restart, err := PauseDAMON(damonAdmin)
		b.Cleanup(func() {
			if err := restart(); err != nil {
				b.Errorf("-bench.damon=pause: %v", err)
			}
		})
		switch {
		case err != nil:
			damonNote = fmt.Sprintf("DAMON left running (%v): expect stalls of tens of ms in every path", err)
		case len(paused) > 0:
			damonNote = "DAMON kdamond " + strings.Join(paused, ", ") + " stopped for the run"
		}
	case "keep":
		if running := RunningDAMON(damonAdmin); len(running) > 0 {
			damonNote = "DAMON kdamond " + strings.Join(running, ", ") + " kept running (-bench.damon=keep)"
		}
	default:
		b.Fatalf("-bench.damon=%q: want pause or keep", *flagDAMON)
	}
	if damonNote != "" {
		b.Log(damonNote)
	}
	return *flagRepeat
}

// runRounds measures every mode×path rounds times, interleaved: round 1 runs
// each once, then round 2, and so on, so that a slow drift of the machine
// hits every path alike. Each run is the sub-benchmark MODE/PATH, under
// roundK when there are several rounds (a single run keeps the names it
// always had); newResult makes its result, run measures it. The results come
// back in the order they ran.
func runRounds(b *testing.B, rounds int, modes, paths []string, newResult func(mode, path string) *result, run func(*testing.B, *result)) []*result {
	var results []*result
	for round := 1; round <= rounds; round++ {
		runRound := func(b *testing.B) {
			for _, mode := range modes {
				b.Run(mode, func(b *testing.B) {
					for _, path := range paths {
						r := newResult(mode, path)
						r.round = round
						results = append(results, r)
						b.Run(path, func(b *testing.B) {
							defer func() {
								if b.Failed() && r.failed == "" {
									r.failed = "FAILED (see the log above)"
								}
								report(b, r)
							}()
							if rounds > 1 {
								b.Logf("round %d of %d", round, rounds)
							}
							run(b, r)
						})
					}
				})
			}
		}
		if rounds == 1 {
			runRound(b)
		} else {
			b.Run(fmt.Sprintf("round%d", round), runRound)
		}
	}
	return results
}

func report(b *testing.B, r *result) {
	if r.rate == 0 {
		return
	}
	b.ReportMetric(r.rate, "msgs/s")
	b.ReportMetric(ms(r.p50), "p50-ms")
	b.ReportMetric(ms(r.p99), "p99-ms")
	b.ReportMetric(ms(r.sp50), "p50@rate-ms")
	b.ReportMetric(ms(r.sp99), "p99@rate-ms")
	b.ReportMetric(float64(r.lost), "lost")
	b.ReportMetric(float64(r.dups), "dup")
	b.ReportMetric(usPerMsg(r.full.cpu.Bench, r.full.n), "benchCPU-µs/msg")
	b.ReportMetric(usPerMsg(r.full.cpu.BrokerA+r.full.cpu.BrokerB, r.full.n), "brokersCPU-µs/msg")
	if m := r.bestMinimal(); m != nil {
		b.ReportMetric(m.rate, "gostomp-msgs/s")
	}
	if r.bridged() {
		b.ReportMetric(float64(r.bridgeCPUPerMsg())/1e3, "bridgeCPU-µs/msg")
		b.ReportMetric(float64(r.bridgeRSS)/1024, "bridgeRSS-MiB")
	}
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

func usPerMsg(d time.Duration, n int) float64 {
	if n == 0 {
		return 0
	}
	return float64(d) / 1e3 / float64(n)
}

func startBroker(b *testing.B, set brokerSettings, name string, persistent bool, connectors ...string) *testbroker.ActiveMQ {
	b.Helper()
	t0 := time.Now()
	debian := *flagBrokers == "debian"
	x := testbroker.StartActiveMQ(b, testbroker.Options{
		Name:              name,
		ID:                name + "-id",
		Persistent:        persistent || debian,
		DebianDefaults:    debian,
		NetworkConnectors: connectors,
		StompOptions:      set.opts,
		OpenWireOptions:   set.opts,
		FullJIT:           true,
	})
	b.Logf("broker %s up in %s (stomp %s, openwire %s, options %q)", name, time.Since(t0).Round(time.Millisecond), x.StompURI(), x.OpenWireURI(), set.opts)
	return x
}

// brokerProfileDesc says how the brokers ran, for the table header.
func brokerProfileDesc() string {
	if *flagBrokers == "debian" {
		return "as Debian's package runs them (persistent KahaDB, non-persistent messages included; -Xms512M -Xmx512M, the JVM's default collector, UseDedicatedTaskRunner=true, ActiveMQ's default memory limits)"
	}
	return "the test brokers' profile (KahaDB only in persistent mode; 256 MB heap, serial collector, 64 MB memory limit)"
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
	if r.settings.opts != "" {
		prefix += "-tuned"
	}
	waitQuiet(b, r)

	var prodAddr, consAddr string
	var pidA, pidB int
	var br *Bridge
	switch r.path {
	case "direct":
		x := startBroker(b, r.settings, prefix, persistent)
		prodAddr, consAddr, pidA = x.StompAddr(), x.StompAddr(), x.Pid()
	case "native":
		bb := startBroker(b, r.settings, prefix+"-B", persistent)
		a := startBroker(b, r.settings, prefix+"-A", persistent, bb.OpenWireURI())
		prodAddr, consAddr, pidA, pidB = a.StompAddr(), bb.StompAddr(), a.Pid(), bb.Pid()
	case "brokernet", "brokernet-openwire":
		a := startBroker(b, r.settings, prefix+"-A", persistent)
		bb := startBroker(b, r.settings, prefix+"-B", persistent)
		prodAddr, consAddr, pidA, pidB = a.StompAddr(), bb.StompAddr(), a.Pid(), bb.Pid()
		if r.path == "brokernet-openwire" {
			br = startBenchBridge(b, r, a.OpenWireURI(), bb.OpenWireURI())
		} else {
			br = startBenchBridge(b, r, a.StompURI(), bb.StompURI())
		}
	}
	pidBridge := 0
	if br != nil {
		pidBridge = br.Pid()
	}
	sample := func() CPUSample { return TakeCPU(pidA, pidB, pidBridge) }

	cons, err := Subscribe(ctx, "stomp://"+consAddr, dest, *flagConsPrefetch)
	if err != nil {
		b.Fatal(err)
	}
	defer cons.Close()
	prod, err := Dial(ctx, "stomp://"+prodAddr)
	if err != nil {
		b.Fatal(err)
	}
	defer prod.Abort()
	body := Body(*flagBodySize)
	run := &pathRun{rec: &cons.Recorder, wait: cons.Wait, sample: sample, br: br, pids: [3]int{pidA, pidB, pidBridge},
		send: func(ctx context.Context, p Phase, n int, rate float64) (SendStats, error) {
			o := SendOptions{Dest: dest, Phase: p, N: n, Persistent: persistent, Body: body, Rate: rate,
				InFlight: *flagInFlight, ReceiptEvery: *flagReceiptEvery}
			if persistent {
				o.InFlight, o.Batch = persistentInFlight, persistentBatch
			}
			return Send(ctx, prod, o)
		}}

	// The go-stomp pair, on its own queue, runs one full-speed phase right
	// before the harness's two and one right after (pair, harness, harness,
	// pair), so that neither side profits from a warmer JVM (JIT) alone.
	switch {
	case !r.minimalWanted:
	case persistent:
		r.minimalSkippedReason = "non-persistent mode only"
	default:
		var pair *Minimal
		defer func() {
			if pair != nil {
				pair.Close() // after a failure; stopMinimal closes it first otherwise
			}
		}()
		run.beforeFull = func(ctx context.Context) {
			if pair = startMinimal(b, ctx, r, prodAddr, consAddr, body); pair != nil {
				runMinimal(b, ctx, r, pair, Full, "before", body, sample)
			}
		}
		run.afterFull = func(ctx context.Context) {
			if pair != nil {
				runMinimal(b, ctx, r, pair, Repeat, "after", body, sample)
				stopMinimal(b, r, pair)
			}
		}
	}
	run.measure(b, ctx, r)
}

// startMinimal connects the go-stomp pair and runs its warm-up (which also
// proves the demand for its queue reached the path). A failure is recorded in r
// and reported as an error, and returns nil; the harness's phases go on.
func startMinimal(b *testing.B, ctx context.Context, r *result, prodAddr, consAddr string, body []byte) *Minimal {
	m, err := DialMinimal(prodAddr, consAddr, minimalDest)
	if err != nil {
		r.minFailed = err.Error()
		b.Errorf("go-stomp pair: %s", r.minFailed)
		return nil
	}
	m.Expect(Warmup, *flagWarmup)
	_, err = m.Send(Warmup, *flagWarmup, body)
	r.minSent += *flagWarmup
	ok := false
	if err == nil {
		wctx, cancel := context.WithTimeout(ctx, 90*time.Second)
		ok = m.Wait(wctx, Warmup, 60*time.Second)
		cancel()
	}
	if !ok {
		w := m.Result(Warmup)
		r.minFailed = fmt.Sprintf("warm-up: only %d of %d messages arrived", w.Distinct, w.N)
		if err != nil {
			r.minFailed = "warm-up: " + err.Error()
		}
		b.Errorf("go-stomp pair: %s", r.minFailed)
		m.Close()
		return nil
	}
	return m
}

// runMinimal runs one full-speed phase of the go-stomp pair as phase p and
// records it in r.
func runMinimal(b *testing.B, ctx context.Context, r *result, m *Minimal, p Phase, when string, body []byte, sample func() CPUSample) {
	n := r.n
	m.Expect(p, n)
	c0 := sample()
	start, err := m.Send(p, n, body)
	r.minSent += n
	if err != nil {
		r.minFailed = fmt.Sprintf("full speed (%s): %v", when, err)
		b.Errorf("go-stomp pair: %s", r.minFailed)
		return
	}
	if !m.Wait(ctx, p, stallTimeout) {
		b.Errorf("go-stomp pair: full-speed phase (%s): messages missing after %s without progress", when, stallTimeout)
	}
	run := minimalRun{when: when, stats: phaseStats{n: n, cpu: sample().Sub(c0)}}
	res := m.Result(p)
	if wall := res.Last.Sub(start); res.Distinct > 0 && wall > 0 {
		run.rate = float64(res.Distinct) / wall.Seconds()
	}
	run.p50, run.p99 = res.P50, res.P99
	r.minRuns = append(r.minRuns, run)
	b.Logf("%s/%s go-stomp pair (%s the harness): %d msgs full speed %.0f msg/s, p50 %s p99 %s", r.mode, r.path, when, n, run.rate, run.p50, run.p99)
}

// stopMinimal disconnects the pair and counts what it lost or got twice.
func stopMinimal(b *testing.B, r *result, m *Minimal) {
	if err := m.Close(); err != nil {
		b.Logf("go-stomp pair: closing: %v", err)
	}
	for p := range NumPhases {
		pr := m.Result(p)
		r.minLost += pr.Lost
		r.minDups += pr.Dups
		r.minBad += pr.Bad
	}
	r.minForeign = m.Foreign()
	if r.minLost > 0 || r.minDups > 0 || r.minBad > 0 || r.minForeign > 0 {
		b.Errorf("LOSS CHECK FAILED on %s/%s (go-stomp pair): lost %d, duplicates %d, bad seq %d, foreign %d", r.mode, r.path, r.minLost, r.minDups, r.minBad, r.minForeign)
	}
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

// generatorMinRatio is how close to the go-stomp pair the harness must come on
// the same path to count as not being the bottleneck: run-to-run noise on this
// 2-core machine is a few per cent.
const generatorMinRatio = 0.95

// printTable writes one broker setting's results: the per-run table, CPU by
// phase, with several rounds the summary table, then the generator checks and
// the targets (judged on the medians over the rounds).
func printTable(w io.Writer, results []*result, rounds int) {
	if len(results) == 0 {
		return
	}
	set := results[0].settings
	rows := groupRounds(results)
	fmt.Fprintln(w)
	fmt.Fprintf(w, "brokernet bench, brokers with %s: %d B bodies; full speed %d (non-persistent) / %d (persistent) msgs; non-persistent producer streams SENDs with a receipt every %d, at most %d unconfirmed; persistent producer in transactions of %d, at most %d unconfirmed; consumer ack auto, prefetch %d; paced %.0f msg/s for %s; warm-up %d",
		set.desc+"; "+brokerProfileDesc(), *flagBodySize, *flagN, *flagNPersistent, *flagReceiptEvery, *flagInFlight, persistentBatch, persistentInFlight, *flagConsPrefetch, *flagRate, *flagSteady, *flagWarmup)
	if rounds > 1 {
		fmt.Fprintf(w, "; %d interleaved rounds, fresh brokers for every run (#k: round k)", rounds)
	}
	if damonNote != "" {
		fmt.Fprintf(w, "; %s", damonNote)
	}
	if *flagBridgeFlags != "" {
		fmt.Fprintf(w, "; brokernet bridge %s", *flagBridgeFlags)
	}
	if *flagGCBefore {
		fmt.Fprint(w, "; a full collection in each broker JVM before the paced phase (-bench.gcbeforepaced)")
	}
	fmt.Fprintln(w)
	rateCol := fmt.Sprintf("@%.0f", *flagRate)
	if *flagRate >= 1000 && int(*flagRate)%1000 == 0 {
		rateCol = fmt.Sprintf("@%dk", int(*flagRate)/1000)
	}
	fmt.Fprintf(w, "%-15s %-28s %8s %10s %10s %8s %8s %8s %5s %4s %14s %10s\n",
		"mode", "path", "msgs/s", "p50(full)", "p99(full)", "p50"+rateCol, "p99"+rateCol, "rate"+rateCol, "lost", "dup", "bridgeCPU/msg", "bridgeRSS")
	for _, g := range rows {
		for _, r := range g.runs {
			label := r.label(rounds)
			if r.rate == 0 && r.failed != "" {
				fmt.Fprintf(w, "%-15s %-28s %s\n", r.mode, label, r.failed)
				continue
			}
			cpu, rss := "-", "-"
			if r.bridged() && r.bridgeMsgs > 0 {
				cpu = fmt.Sprintf("%.1fµs", float64(r.bridgeCPUPerMsg())/1e3)
				rss = fmt.Sprintf("%.1fMiB", float64(r.bridgeRSS)/1024)
			}
			line := fmt.Sprintf("%-15s %-28s %8.0f %10s %10s %8s %8s %8.0f %5d %4d %14s %10s",
				r.mode, label, r.rate, fmtDur(r.p50), fmtDur(r.p99), fmtDur(r.sp50), fmtDur(r.sp99), r.steadyRate, r.lost, r.dups, cpu, rss)
			if r.failed != "" {
				line += "  " + r.failed
			}
			fmt.Fprintln(w, line)
			for _, m := range r.minRuns {
				fmt.Fprintf(w, "%-15s %-28s %8.0f %10s %10s %8s %8s %8s %5s %4s\n",
					r.mode, label+" (go-stomp "+m.when+")", m.rate, fmtDur(m.p50), fmtDur(m.p99), "-", "-", "-", "", "")
			}
			if r.minRuns != nil || r.minFailed != "" {
				line := fmt.Sprintf("%-15s %-28s %8s %10s %10s %8s %8s %8s %5d %4d", r.mode, label+" (go-stomp, all)", "", "", "", "", "", "", r.minLost, r.minDups)
				if r.minFailed != "" {
					line += "  FAILED: " + r.minFailed
				}
				fmt.Fprintln(w, line)
			}
		}
	}

	fmt.Fprintln(w)
	fmt.Fprintf(w, "CPU per message by phase, µs (JVMs and bridge from /proc/PID/stat, 10 ms resolution; bench = this process, producer and consumer, getrusage); other = everything else on the machine, incl. kernel I/O threads (KahaDB fsync) and other sessions; busy%% of %d cores; busyBefore = machine busy share just before the path started:\n", runtime.NumCPU())
	fmt.Fprintf(w, "%-15s %-28s %-10s %7s %8s %8s %8s %8s %8s %8s %8s %8s %6s %11s\n",
		"mode", "path", "phase", "msgs", "wall", "brokerA", "brokerB", "brokers", "bridge", "bench", "other", "machine", "busy%", "busyBefore")
	for _, g := range rows {
		for _, r := range g.runs {
			if r.rate == 0 {
				continue
			}
			label := r.label(rounds)
			row := func(label, phase string, p phaseStats) {
				u, n := p.cpu, p.n
				b, br := perMsg(u.BrokerB, n), perMsg(u.Bridge, n)
				if r.path == "direct" {
					b = "-"
				}
				if !r.bridged() {
					br = "-"
				}
				busy := 0.0
				if u.Wall > 0 {
					busy = 100 * u.Machine.Seconds() / (float64(runtime.NumCPU()) * u.Wall.Seconds())
				}
				fmt.Fprintf(w, "%-15s %-28s %-10s %7d %8s %8s %8s %8s %8s %8s %8s %8s %5.0f%% %10.0f%%\n", r.mode, label, phase, n, fmtDur(u.Wall),
					perMsg(u.BrokerA, n), b, perMsg(u.BrokerA+u.BrokerB, n), br, perMsg(u.Bench, n), perMsg(u.Other(), n), perMsg(u.Machine, n), busy, 100*r.idleBefore)
			}
			row(label, "full", r.full)
			for _, m := range r.minRuns {
				row(label+" (go-stomp "+m.when+")", "full", m.stats)
			}
			if r.steady.n > 0 {
				row(label, "paced", r.steady)
			}
		}
	}
	printIOCalls(w, rows, rounds)
	printJVMThreads(w, rows, rounds)

	if rounds > 1 {
		fmt.Fprintln(w)
		printSummary(w, rows, rounds, rateCol)
	}
	fmt.Fprintln(w)
	for _, v := range generatorChecks(rows, rounds) {
		fmt.Fprintln(w, v.line)
	}
	for _, v := range judgeTargets(rows, rounds, *flagRate) {
		fmt.Fprintln(w, v.line)
	}
	fmt.Fprintln(w)
}

func firstNonEmpty(s ...string) string {
	for _, x := range s {
		if x != "" {
			return x
		}
	}
	return ""
}

// printIOCalls prints the read and write system calls per 100 messages each
// process made in each phase of the bridged and native paths: how many
// segments and wake-ups a message costs the brokers and the bridge.
func printIOCalls(w io.Writer, rows []*rowRounds, rounds int) {
	fmt.Fprintln(w)
	fmt.Fprintln(w, "I/O system calls per 100 messages by phase, reads/writes (/proc/PID/io syscr, syscw):")
	fmt.Fprintf(w, "%-15s %-28s %-10s %7s %13s %13s %13s\n", "mode", "path", "phase", "msgs", "brokerA", "brokerB", "bridge")
	per100 := func(c IOCalls, n int) string {
		if n == 0 {
			return "-"
		}
		return fmt.Sprintf("%.1f/%.1f", 100*float64(c.Reads)/float64(n), 100*float64(c.Writes)/float64(n))
	}
	eachPhase(rows, func(r *result) bool { return r.path != "direct" }, func(r *result, phase string, p phaseStats) {
		br := per100(p.cpu.IOBridge, p.n)
		if !r.bridged() {
			br = "-"
		}
		fmt.Fprintf(w, "%-15s %-28s %-10s %7d %13s %13s %13s\n", r.mode, r.label(rounds), phase, p.n,
			per100(p.cpu.IOA, p.n), per100(p.cpu.IOB, p.n), br)
	})
}

// eachPhase calls row for the full-speed and, if it ran, the paced phase of
// every counted run that keep accepts, in table order.
func eachPhase(rows []*rowRounds, keep func(*result) bool, row func(r *result, phase string, p phaseStats)) {
	for _, g := range rows {
		for _, r := range g.runs {
			if r.rate == 0 || !keep(r) {
				continue
			}
			row(r, "full", r.full)
			if r.steady.n > 0 {
				row(r, "paced", r.steady)
			}
		}
	}
}

// printJVMThreads prints the brokers' CPU per message by thread kind in each
// phase: garbage collection (collector workers and the VM thread that runs
// their pauses), JIT compilers, and the rest (ActiveMQ's own threads).
func printJVMThreads(w io.Writer, rows []*rowRounds, rounds int) {
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Brokers' CPU per message by thread kind, µs, gc/jit/rest (/proc/PID/task/*: gc = GC workers and the VM thread, jit = compilers, rest = ActiveMQ's threads, exited ones included):")
	fmt.Fprintf(w, "%-15s %-28s %-10s %7s %14s %14s\n", "mode", "path", "phase", "msgs", "brokerA", "brokerB")
	split := func(total time.Duration, t JVMThreads, n int) string {
		if n == 0 || total == 0 {
			return "-"
		}
		return perMsg(t.GC, n) + "/" + perMsg(t.JIT, n) + "/" + perMsg(max(0, total-t.GC-t.JIT), n)
	}
	eachPhase(rows, func(*result) bool { return true }, func(r *result, phase string, p phaseStats) {
		fmt.Fprintf(w, "%-15s %-28s %-10s %7d %14s %14s\n", r.mode, r.label(rounds), phase, p.n,
			split(p.cpu.BrokerA, p.cpu.JVMA, p.n), split(p.cpu.BrokerB, p.cpu.JVMB, p.n))
	})
}
