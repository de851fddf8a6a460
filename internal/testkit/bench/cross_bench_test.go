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
// (docs/rabbitmq.md, "Headers over AMQP 1.0"), so the benchmark headers would not be readable across.
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
	"strconv"
	"testing"
	"time"

	"github.com/brokernet/brokernet/internal/testkit/testbroker"
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
	rounds := checkFlags(b)
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
	waitQuiet(b, r)
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
	br := startBenchBridge(b, r, local, remote)
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

	prod, err := Dial(ctx, a.StompURI())
	if err != nil {
		b.Fatal(err)
	}
	defer prod.Abort()
	body := Body(*flagBodySize)
	run := &pathRun{rec: cons.rec, sample: sample, br: br,
		wait: func(ctx context.Context, p Phase, stall time.Duration) bool {
			return cons.rec.wait(ctx, p, stall, cons.done)
		},
		send: func(ctx context.Context, p Phase, n int, rate float64) (SendStats, error) {
			o := SendOptions{Dest: "/queue/" + rabbitQueue, Phase: p, N: n, Persistent: persistent, Body: body, Rate: rate,
				InFlight: *flagInFlight, ReceiptEvery: *flagReceiptEvery}
			if persistent {
				o.InFlight, o.Batch = persistentInFlight, persistentBatch
			}
			return Send(ctx, prod, o)
		}}
	run.measure(b, ctx, r)
}
