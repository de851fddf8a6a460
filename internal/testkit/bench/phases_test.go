package bench

// What BenchmarkForwarding, BenchmarkRabbitMQ and BenchmarkActiveMQToRabbitMQ
// do alike for every path once its brokers are up: wait for a quiet machine,
// start the bridge, run the phases (warm-up, full speed, paced), check that
// every message arrived once, and take the bridge's bill. They differ only in
// the brokers they start and in their clients' protocol.

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// waitQuiet waits up to -bench.quietwait for the machine to be idle before
// a path starts, and records how busy it was.
func waitQuiet(b *testing.B, r *result) {
	if *flagQuietWait <= 0 {
		return
	}
	busy, waited := WaitQuiet(*flagQuietWait, 0.25, runtime.NumCPU())
	r.idleBefore = busy
	b.Logf("machine %.0f%% busy before start (waited %s)", 100*busy, waited.Round(time.Second))
}

// startBenchBridge starts `brokernet bridge LOCAL REMOTE` with the bench's
// --window and --prefetch, logging warnings and above; it is killed at the
// end of the (sub-)benchmark, showing its output if that failed.
func startBenchBridge(b *testing.B, r *result, local, remote string) *Bridge {
	bin := brokernetBinary(b)
	args := []string{"bridge", "--log-level", "warn", "--log-format", "json"}
	if *flagWindow > 0 {
		args = append(args, "--window", fmt.Sprint(*flagWindow))
	}
	if *flagPrefetch > 0 {
		args = append(args, "--prefetch", fmt.Sprint(*flagPrefetch))
	}
	args = append(args, strings.Fields(*flagBridgeFlags)...)
	args = append(args, local, remote)
	br, err := StartBridge(bin, args...)
	if err != nil {
		r.failed = "starting brokernet: " + err.Error()
		b.Fatal(r.failed)
	}
	b.Logf("started %s %s", bin, strings.Join(args, " "))
	b.Cleanup(func() {
		br.Kill()
		if b.Failed() {
			b.Logf("brokernet output:\n%s", br.Output())
		}
	})
	return br
}

// pathRun is one path with its clients connected, ready to be measured.
type pathRun struct {
	rec *Recorder // the consumer's
	// wait waits until every message of phase p arrived, nothing new
	// arrived for stall, the consumer's connection ended or ctx ended; it
	// reports whether all arrived.
	wait func(ctx context.Context, p Phase, stall time.Duration) bool
	// send sends phase p, n messages (at rate msg/s; 0: full speed), and
	// returns once the broker confirmed each.
	send   func(ctx context.Context, p Phase, n int, rate float64) (SendStats, error)
	sample func() CPUSample
	br     *Bridge // nil when the brokers' own link carries the path
	// pids are broker A's, broker B's and the bridge's (0: none), named in
	// the -bench.latencies files.
	pids [3]int
	// beforeFull and afterFull, if set, run right before the full-speed
	// phase and right after the harness's second one, which runs only with
	// them (BenchmarkForwarding's go-stomp pair).
	beforeFull, afterFull func(ctx context.Context)
}

// measure runs the phases of r (r.n messages at full speed), the loss check
// and, on a bridged path, stops the bridge and records its CPU and RSS.
func (p *pathRun) measure(b *testing.B, ctx context.Context, r *result) {
	// pathCtx ends when the bridge exits, so that waiting for messages stops
	// at once instead of after a stall timeout.
	pathCtx, cancelPath := context.WithCancel(ctx)
	defer cancelPath()
	if p.br != nil {
		go func() {
			select {
			case <-p.br.Exited():
				cancelPath()
			case <-pathCtx.Done():
			}
		}()
	}
	bridgeAlive := func(when string) {
		if p.br == nil {
			return
		}
		if s := p.br.ExitSummary(); s != "" {
			r.failed = s + " (" + when + ")"
			b.Fatalf("%s\n%s", r.failed, p.br.Output())
		}
	}
	send := func(ph Phase, n int, rate float64) SendStats {
		b.Helper()
		p.rec.Expect(ph, n)
		st, err := p.send(pathCtx, ph, n, rate)
		if err != nil {
			bridgeAlive(fmt.Sprintf("during the %s phase", ph))
			b.Fatalf("%s phase: sending: %v", ph, err)
		}
		return st
	}

	// Warm-up: proves the path forwards (demand has propagated, the bridge or
	// network connector is up) and lets the JVMs compile the hot paths.
	t0 := time.Now()
	send(Warmup, *flagWarmup, 0)
	// 90 s, and 2.5 ms more per message: 60,000 persistent messages take the
	// native path about 40 s here.
	wctx, cancel := context.WithTimeout(pathCtx, 90*time.Second+time.Duration(*flagWarmup)*2500*time.Microsecond)
	ok := p.wait(wctx, Warmup, 60*time.Second)
	cancel()
	bridgeAlive("during the warm-up")
	if !ok {
		w := p.rec.Result(Warmup)
		r.failed = fmt.Sprintf("warm-up: only %d of %d messages arrived", w.Distinct, w.N)
		if p.br != nil {
			r.failed += "; brokernet's last words: " + firstNonEmpty(p.br.LastLine(), "(none)")
		}
		b.Fatalf("%s within %s", r.failed, time.Since(t0).Round(time.Millisecond))
	}
	b.Logf("warm-up: %d messages through in %s", *flagWarmup, time.Since(t0).Round(time.Millisecond))

	if p.beforeFull != nil {
		p.beforeFull(pathCtx)
		bridgeAlive("before the full-speed phase")
	}

	// Full speed.
	c0 := p.sample()
	st := send(Full, r.n, 0)
	if !p.wait(pathCtx, Full, stallTimeout) {
		b.Errorf("full-speed phase: messages missing after %s without progress", stallTimeout)
	}
	r.full = phaseStats{n: r.n, cpu: p.sample().Sub(c0)}
	full := p.rec.Result(Full)
	if wall := full.Last.Sub(st.Start); full.Distinct > 0 && wall > 0 {
		r.rate = float64(full.Distinct) / wall.Seconds()
	}
	if d := st.End.Sub(st.Start); d > 0 {
		r.sendRate = float64(r.n) / d.Seconds()
	}
	r.p50, r.p99 = full.P50, full.P99
	bridgeAlive("during the full-speed phase")

	if p.afterFull != nil {
		// The harness's second full-speed run, before the pair's second: the
		// JVMs keep warming up, and the pair ran once before the first.
		c0 := p.sample()
		st := send(Repeat, r.n, 0)
		if !p.wait(pathCtx, Repeat, stallTimeout) {
			b.Errorf("second full-speed phase: messages missing after %s without progress", stallTimeout)
		}
		r.fullAgain = phaseStats{n: r.n, cpu: p.sample().Sub(c0)}
		if again := p.rec.Result(Repeat); again.Distinct > 0 && again.Last.After(st.Start) {
			r.rateAgain = float64(again.Distinct) / again.Last.Sub(st.Start).Seconds()
		}
		bridgeAlive("during the second full-speed phase")
		p.afterFull(pathCtx)
		bridgeAlive("after the full-speed phase")
	}

	if *flagGCBefore {
		fullGC(b, p.pids[:2])
	}

	// Paced.
	r.steadyN = int(*flagRate * flagSteady.Seconds())
	c0 = p.sample()
	sst := send(Steady, r.steadyN, *flagRate)
	if d := sst.End.Sub(sst.Start); d > 0 {
		r.steadyRate = float64(r.steadyN) / d.Seconds()
	}
	if !p.wait(pathCtx, Steady, stallTimeout) {
		b.Errorf("steady phase: messages missing after %s without progress", stallTimeout)
	}
	r.steady = phaseStats{n: r.steadyN, cpu: p.sample().Sub(c0)}
	bridgeAlive("during the paced phase")
	// Late duplicates (a redelivery after a lost confirmation) come soon.
	time.Sleep(500 * time.Millisecond)
	steady := p.rec.Result(Steady)
	r.sp50, r.sp99, r.sMax = steady.P50, steady.P99, steady.Max
	if *flagLatencies != "" {
		if err := writeLatencies(r, p, sst.Start); err != nil {
			b.Errorf("-bench.latencies: %v", err)
		}
	}

	for ph := range NumPhases {
		pr := p.rec.Result(ph)
		r.lost += pr.Lost
		r.dups += pr.Dups
		r.bad += pr.Bad
	}
	r.foreign = p.rec.Foreign()
	if r.lost > 0 || r.dups > 0 || r.bad > 0 || r.foreign > 0 {
		b.Errorf("LOSS CHECK FAILED on %s/%s: lost %d, duplicates %d, bad seq %d, foreign %d", r.mode, r.path, r.lost, r.dups, r.bad, r.foreign)
	}

	if p.br != nil {
		u, err := p.br.Stop(45 * time.Second)
		r.bridgeCPU, r.bridgeRSS, r.bridgeExit = u.CPU, u.MaxRSS, u.ExitCode
		r.bridgeMsgs = *flagWarmup + r.n + r.fullAgain.n + r.steadyN + r.minSent
		if err != nil {
			b.Errorf("stopping brokernet: %v\n%s", err, p.br.Output())
		} else if u.ExitCode != 0 {
			b.Errorf("brokernet exit code %d\n%s", u.ExitCode, p.br.Output())
		}
		if out := strings.TrimSpace(p.br.Output()); out != "" {
			b.Logf("brokernet output (warn and above):\n%s", out)
		}
	}
	b.Logf("%s/%s: %d msgs full speed %.0f msg/s (producer %.0f msg/s), p50 %s p99 %s; paced %d at %.0f msg/s p50 %s p99 %s max %s",
		r.mode, r.path, r.n, r.rate, r.sendRate, r.p50, r.p99, r.steadyN, r.steadyRate, r.sp50, r.sp99, r.sMax)
}

// writeLatencies writes the paced phase's latencies of r into
// -bench.latencies: a comment line with the phase's start (Unix ns), the
// rate and the pids, then "seq latency_us" per message (-1: never arrived).
// Message seq was sent at about start + seq/rate.
func writeLatencies(r *result, p *pathRun, start time.Time) error {
	if err := os.MkdirAll(*flagLatencies, 0o755); err != nil {
		return err
	}
	name := fmt.Sprintf("%s-%s-r%d.txt", r.mode, r.path, r.round)
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "# start_unix_ns %d rate %g pidA %d pidB %d pidBridge %d\n", start.UnixNano(), *flagRate, p.pids[0], p.pids[1], p.pids[2])
	for seq, d := range p.rec.Latencies(Steady) {
		us := int64(-1)
		if d >= 0 {
			us = d.Microseconds()
		}
		fmt.Fprintf(&buf, "%d %d\n", seq, us)
	}
	return os.WriteFile(filepath.Join(*flagLatencies, name), buf.Bytes(), 0o644)
}

// fullGC runs a full collection in each broker JVM of pids and waits for
// it: -bench.gcbeforepaced.
func fullGC(b *testing.B, pids []int) {
	for _, pid := range pids {
		t0 := time.Now()
		ran, err := FullGC(pid)
		if err != nil {
			b.Fatalf("-bench.gcbeforepaced: %v", err)
		}
		if ran {
			b.Logf("full collection in JVM %d took %s", pid, time.Since(t0).Round(time.Millisecond))
		}
	}
}
