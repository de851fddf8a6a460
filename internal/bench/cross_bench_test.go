package bench

// BenchmarkActiveMQToRabbitMQ measures brokernet across vendors (issue 7 part
// 6): a producer on ActiveMQ broker A (STOMP, the same producer as
// BenchmarkForwarding), a consumer on RabbitMQ 3.10 node B's queue of the same
// name, 1 KiB bodies:
//
//	brokernet-stomp           `brokernet bridge stomp://A stomp://B`; the consumer on B speaks STOMP
//	brokernet-amqp            `brokernet bridge stomp://A amqp://B`; the consumer on B speaks AMQP 1.0
//	brokernet-openwire-amqp   `brokernet bridge tcp://A amqp://B` (OpenWire to A; not run by default)
//
// The consumer on B speaks the protocol the bridge writes to B: RabbitMQ 3.10
// hands AMQP-1.0-published messages to STOMP consumers as raw AMQP sections
// (README, "RabbitMQ"), so the benchmark headers would not be readable across.
// There is no vendor anchor here: neither ActiveMQ's networkConnector nor
// RabbitMQ's federation links the two (BenchmarkForwarding and
// BenchmarkRabbitMQ anchor each side on its own).
//
// The same phases as BenchmarkForwarding (warm-up, full speed, paced at
// -bench.rate for -bench.steady), on a fresh ActiveMQ broker and a fresh
// RabbitMQ node per path and mode, with the same loss check: every sequence
// number arrives once. brokernet acknowledges A only after B confirmed, so the
// path is at-least-once. The table goes to stdout; flags after -args:
//
//	-bench.crosspaths=brokernet-stomp,brokernet-amqp   ("" skips this benchmark)
//	-bench.rabbitn, -bench.rabbitnpersistent   full-speed messages, as for BenchmarkRabbitMQ
//	-bench.modes, -bench.repeat, -bench.rate, -bench.steady, -bench.warmup, -bench.size,
//	-bench.inflight, -bench.receiptevery, -bench.window, -bench.prefetch, -bench.bin,
//	-bench.quietwait                           as for BenchmarkForwarding (repeat: rounds and a summary)

import (
	"context"
	"flag"
	"fmt"
	"net/url"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/brokernet/brokernet/internal/testbroker"
)

var flagCrossPaths = flag.String("bench.crosspaths", "brokernet-stomp,brokernet-amqp",
	"ActiveMQ→RabbitMQ paths to measure: brokernet-stomp, brokernet-amqp, brokernet-openwire-amqp (empty: none)")

var knownCrossPaths = map[string]bool{"brokernet-stomp": true, "brokernet-amqp": true, "brokernet-openwire-amqp": true}

func BenchmarkActiveMQToRabbitMQ(b *testing.B) {
	paths := splitList(*flagCrossPaths)
	if len(paths) == 0 {
		b.Skip("-bench.crosspaths is empty")
	}
	for _, p := range paths {
		if !knownCrossPaths[p] {
			b.Fatalf("unknown path %q in -bench.crosspaths (want brokernet-stomp, brokernet-amqp or brokernet-openwire-amqp)", p)
		}
	}
	modes := splitList(*flagModes)
	for _, mode := range modes {
		if mode != modeNonPersistent && mode != modePersistent {
			b.Fatalf("-bench.modes: unknown mode %q (want %s or %s)", mode, modeNonPersistent, modePersistent)
		}
	}
	testbroker.Require(b)
	rounds := repeatRounds(b)
	results := runRounds(b, rounds, modes, paths, func(mode, path string) *result {
		return &result{settings: brokerSettings{name: "activemq-rabbitmq", desc: "ActiveMQ (Debian defaults) to RabbitMQ 3.10 (defaults)"}, mode: mode, path: path}
	}, runCrossPath)
	title := fmt.Sprintf("brokernet bench, ActiveMQ A (Debian defaults, KahaDB when persistent) → RabbitMQ 3.10 node B (defaults): %d B bodies; full speed %d (non-persistent) / %d (persistent) msgs; producer on A over STOMP as in the first table; consumer on B over the bridge's protocol to B (STOMP: ack auto; AMQP 1.0: credit %d, accepts each); paced %.0f msg/s for %s; warm-up %d",
		*flagBodySize, *flagRabbitN, *flagRabbitNP, rabbitCredit, *flagRate, *flagSteady, *flagWarmup)
	printRabbitTable(os.Stdout, results, rounds, title, "brokersCPU/msg: A's JVM and B's process tree during the full-speed phase")
}

// crossConsumer is the consumer on RabbitMQ, over either protocol.
type crossConsumer struct {
	rec   *Recorder
	done  <-chan struct{} // closed when its connection ended
	close func()
}

func runCrossPath(b *testing.B, r *result) {
	ctx := context.Background()
	persistent := r.mode == modePersistent
	r.n = *flagRabbitN
	short := "np"
	if persistent {
		r.n = *flagRabbitNP
		short = "p"
	}
	if *flagQuietWait > 0 {
		busy, waited := WaitQuiet(*flagQuietWait, 0.25, runtime.NumCPU())
		r.idleBefore = busy
		b.Logf("machine %.0f%% busy before start (waited %s)", 100*busy, waited.Round(time.Second))
	}
	a := startBroker(b, defaultSettings, "bench-x-"+short+"-"+r.path+"-A", persistent)
	t0 := time.Now()
	rb := testbroker.StartRabbitMQs(b, testbroker.RabbitOptions{})[0]
	b.Logf("RabbitMQ node %s up in %s (stomp %s, amqp %s)", rb.Node(), time.Since(t0).Round(time.Millisecond), rb.StompAddr(), rb.AMQPAddr())

	// The bridge finds B's demand through its event exchange (over STOMP) and
	// management API; the test node's ports are not the defaults.
	mgmt := "management=" + url.QueryEscape(rb.ManagementURL())
	local, remote := a.StompURI(), rb.AMQPURI()+"?stompPort="+strconv.Itoa(rb.StompPort())+"&"+mgmt
	switch r.path {
	case "brokernet-stomp":
		remote = rb.StompURI() + "?" + mgmt
	case "brokernet-openwire-amqp":
		local = a.OpenWireURI()
	}
	args := []string{"bridge", "--log-level", "warn", "--log-format", "json"}
	if *flagWindow > 0 {
		args = append(args, "--window", fmt.Sprint(*flagWindow))
	}
	if *flagPrefetch > 0 {
		args = append(args, "--prefetch", fmt.Sprint(*flagPrefetch))
	}
	args = append(args, local, remote)
	bin := brokernetBinary(b)
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
	// pathCtx ends when the bridge exits, so that waiting stops at once.
	pathCtx, cancelPath := context.WithCancel(ctx)
	defer cancelPath()
	go func() {
		select {
		case <-br.Exited():
			cancelPath()
		case <-pathCtx.Done():
		}
	}()
	sample := func() CPUSample {
		c := TakeCPU(a.Pid(), 0, br.Pid())
		c.BrokerB = treeCPU(rb.Pid())
		return c
	}

	var cons crossConsumer
	if r.path == "brokernet-stomp" {
		c, err := Subscribe(ctx, rb.StompURI(), "/queue/"+rabbitQueue, 0)
		if err != nil {
			b.Fatal(err)
		}
		cons = crossConsumer{rec: &c.Recorder, done: c.done, close: c.Close}
	} else {
		c, err := subscribeAMQP(ctx, rb.AMQPURI(), rabbitQueue)
		if err != nil {
			b.Fatal(err)
		}
		cons = crossConsumer{rec: &c.Recorder, done: c.done, close: c.close}
	}
	defer cons.close()
	wait := func(ctx context.Context, p Phase, stall time.Duration) bool {
		return cons.rec.wait(ctx, p, stall, cons.done)
	}

	prod, err := Dial(ctx, a.StompURI())
	if err != nil {
		b.Fatal(err)
	}
	defer prod.Abort()
	body := Body(*flagBodySize)
	send := func(p Phase, n int, rate float64) SendStats {
		b.Helper()
		cons.rec.Expect(p, n)
		o := SendOptions{Dest: "/queue/" + rabbitQueue, Phase: p, N: n, Persistent: persistent, Body: body, Rate: rate,
			InFlight: *flagInFlight, ReceiptEvery: *flagReceiptEvery}
		if persistent {
			o.InFlight, o.Batch = persistentInFlight, persistentBatch
		}
		st, err := Send(pathCtx, prod, o)
		if err != nil {
			b.Fatalf("%s phase: sending: %v", p, err)
		}
		return st
	}

	// Warm-up: proves B's consumer became demand and the path forwards.
	t0 = time.Now()
	send(Warmup, *flagWarmup, 0)
	wctx, cancel := context.WithTimeout(pathCtx, 90*time.Second)
	ok := wait(wctx, Warmup, 60*time.Second)
	cancel()
	if !ok {
		w := cons.rec.Result(Warmup)
		r.failed = fmt.Sprintf("warm-up: only %d of %d messages arrived; brokernet's last words: %s",
			w.Distinct, w.N, firstNonEmpty(br.LastLine(), "(none)"))
		b.Fatal(r.failed)
	}
	b.Logf("warm-up: %d messages through in %s", *flagWarmup, time.Since(t0).Round(time.Millisecond))

	c0 := sample()
	st := send(Full, r.n, 0)
	if !wait(pathCtx, Full, stallTimeout) {
		b.Errorf("full-speed phase: messages missing after %s without progress", stallTimeout)
	}
	r.full = phaseStats{n: r.n, cpu: sample().Sub(c0)}
	full := cons.rec.Result(Full)
	if wall := full.Last.Sub(st.Start); full.Distinct > 0 && wall > 0 {
		r.rate = float64(full.Distinct) / wall.Seconds()
	}
	if d := st.End.Sub(st.Start); d > 0 {
		r.sendRate = float64(r.n) / d.Seconds()
	}
	r.p50, r.p99 = full.P50, full.P99

	r.steadyN = int(*flagRate * flagSteady.Seconds())
	c0 = sample()
	sst := send(Steady, r.steadyN, *flagRate)
	if d := sst.End.Sub(sst.Start); d > 0 {
		r.steadyRate = float64(r.steadyN) / d.Seconds()
	}
	if !wait(pathCtx, Steady, stallTimeout) {
		b.Errorf("steady phase: messages missing after %s without progress", stallTimeout)
	}
	r.steady = phaseStats{n: r.steadyN, cpu: sample().Sub(c0)}
	// Late duplicates (a redelivery after a lost confirmation) come soon.
	time.Sleep(500 * time.Millisecond)
	steady := cons.rec.Result(Steady)
	r.sp50, r.sp99, r.sMax = steady.P50, steady.P99, steady.Max

	for p := range NumPhases {
		pr := cons.rec.Result(p)
		r.lost += pr.Lost
		r.dups += pr.Dups
		r.bad += pr.Bad
	}
	r.foreign = cons.rec.Foreign()
	if r.lost > 0 || r.dups > 0 || r.bad > 0 || r.foreign > 0 {
		b.Errorf("LOSS CHECK FAILED on %s/%s: lost %d, duplicates %d, bad seq %d, foreign %d", r.mode, r.path, r.lost, r.dups, r.bad, r.foreign)
	}
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
	b.Logf("%s/%s: %d msgs full speed %.0f msg/s (producer %.0f msg/s), p50 %s p99 %s; paced %d at %.0f msg/s p50 %s p99 %s max %s",
		r.mode, r.path, r.n, r.rate, r.sendRate, r.p50, r.p99, r.steadyN, r.steadyRate, r.sp50, r.sp99, r.sMax)
}
