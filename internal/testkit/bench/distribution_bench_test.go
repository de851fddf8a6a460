package bench

// BenchmarkDistribution measures how a queue's messages are shared between
// consumers on two remote brokers when one of them is slow: the baseline of
// issue 25's balanced distribution (docs/design/balanced-distribution.md).
// Broker A holds the queue; B and C each have one consumer of it:
//
//	B   prefetch 1, acknowledges one message per -bench.distslow (100 ms: 10 msg/s)
//	C   prefetch 1, acknowledges each message at once
//
// N non-persistent messages (-bench.distn) are sent to A once both consumers'
// demand reached it, on the paths:
//
//	native               A has ActiveMQ's <networkConnector> to B and one to C
//	brokernet            `brokernet bridge A B` and `brokernet bridge A C` over STOMP
//	brokernet-openwire   the same over OpenWire
//	fast-alone           brokernet over STOMP, no consumer on B: the time C alone needs
//
// The table gives what each consumer had got when C's consumer took its last
// message, when that was, and when all N were consumed (or, at -bench.distcap,
// how many were still waiting for B's consumer). The goal of balanced
// distribution is all N in at most 1.5× the fast-alone time. Flags after -args:
//
//	-bench.distpaths=native,brokernet,brokernet-openwire,fast-alone   ("" skips it)
//	-bench.distn=2000 -bench.distslow=100ms -bench.distcap=3m

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-stomp/stomp/v3/frame"

	"github.com/brokernet/brokernet/internal/testkit/stomptest"
	"github.com/brokernet/brokernet/internal/testkit/testbroker"
	"github.com/brokernet/brokernet/transport/stomp"
)

var (
	flagDistPaths = flag.String("bench.distpaths", "native,brokernet,brokernet-openwire,fast-alone",
		"distribution paths: native, brokernet, brokernet-openwire, fast-alone (empty: none)")
	flagDistN    = flag.Int("bench.distn", 2000, "distribution: messages sent to A")
	flagDistSlow = flag.Duration("bench.distslow", 100*time.Millisecond, "distribution: how long B's consumer takes per message")
	flagDistCap  = flag.Duration("bench.distcap", 3*time.Minute, "distribution: how long to wait for all messages to be consumed")
)

// distResult is one distribution run.
type distResult struct {
	path        string
	n, onB, onC int           // onB and onC when C's consumer took its last message
	cIdle, all  time.Duration // since the first send; all is 0 when the cap came first
	leftAtCap   int
	failed      string
}

func BenchmarkDistribution(b *testing.B) {
	paths := splitList(*flagDistPaths)
	if len(paths) == 0 {
		b.Skip("-bench.distpaths is empty")
	}
	for _, p := range paths {
		switch p {
		case "native", "brokernet", "brokernet-openwire", "fast-alone":
		default:
			b.Fatalf("unknown path %q in -bench.distpaths", p)
		}
	}
	checkFlags(b) // -bench.brokers, -bench.damon
	var results []*distResult
	for _, path := range paths {
		r := &distResult{path: path, n: *flagDistN}
		results = append(results, r)
		b.Run(path, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if i == 0 {
					runDistribution(b, r)
				}
			}
			if b.Failed() && r.failed == "" {
				r.failed = "failed"
			}
		})
	}
	printDistribution(os.Stdout, results)
}

// distConsumer counts what one consumer took, acknowledging each message after
// hold.
type distConsumer struct {
	conn *stomp.Conn
	mu   sync.Mutex
	n    int
	last time.Time
	done chan struct{}
}

func subscribeDist(b *testing.B, uri, dest string, hold time.Duration) *distConsumer {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conn, err := Dial(ctx, uri)
	if err != nil {
		b.Fatal(err)
	}
	c := &distConsumer{conn: conn, done: make(chan struct{})}
	if err := conn.Subscribe(ctx, "dist", dest, "client-individual", "activemq.prefetchSize", "1"); err != nil {
		b.Fatal(err)
	}
	go func() {
		defer close(c.done)
		for f := range conn.Deliveries() {
			time.Sleep(hold)
			conn.Write(context.Background(), frame.New(frame.ACK, frame.Id, f.Header.Get(frame.Ack)))
			c.mu.Lock()
			c.n++
			c.last = time.Now()
			c.mu.Unlock()
		}
	}()
	b.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		conn.Close(cctx)
		conn.Abort()
		<-c.done
	})
	return c
}

func (c *distConsumer) count() (int, time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n, c.last
}

func runDistribution(b *testing.B, r *distResult) {
	debian := *flagBrokers == "debian"
	opts := func(name string) testbroker.Options {
		return testbroker.Options{Name: name, ID: name + "-id", Persistent: debian, DebianDefaults: debian}
	}
	prefix := "dist-" + r.path
	var bb, cb *testbroker.ActiveMQ
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); bb = testbroker.StartActiveMQ(b, opts(prefix+"-B")) }()
	go func() { defer wg.Done(); cb = testbroker.StartActiveMQ(b, opts(prefix+"-C")) }()
	wg.Wait()
	if bb == nil || cb == nil {
		b.FailNow()
	}
	ao := opts(prefix + "-A")
	if r.path == "native" {
		ao.NetworkConnectors = []string{bb.OpenWireURI(), cb.OpenWireURI()}
	}
	a := testbroker.StartActiveMQ(b, ao)
	const q = "dist.q"
	switch r.path {
	case "brokernet", "fast-alone":
		startForwardBridge(b, a.StompURI(), bb.StompURI())
		startForwardBridge(b, a.StompURI(), cb.StompURI())
	case "brokernet-openwire":
		startForwardBridge(b, a.OpenWireURI(), bb.OpenWireURI())
		startForwardBridge(b, a.OpenWireURI(), cb.OpenWireURI())
	}
	var slow *distConsumer
	demand := 1
	if r.path != "fast-alone" {
		slow = subscribeDist(b, bb.StompURI(), "/queue/"+q, *flagDistSlow)
		demand = 2
	}
	fast := subscribeDist(b, cb.StompURI(), "/queue/"+q, 0)
	stomptest.Eventually(b, 60*time.Second, func() error { return a.CheckQueueConsumers(q, int64(demand)) })

	start := time.Now()
	stomptest.SendN(b, a.StompURI(), "/queue/"+q, 0, r.n, false)
	deadline := start.Add(*flagDistCap)
	var lastC time.Time
	for {
		nC, lc := fast.count()
		nB := 0
		if slow != nil {
			nB, _ = slow.count()
		}
		if lc.After(lastC) {
			lastC = lc
			r.onC, r.onB = nC, nB
			r.cIdle = lc.Sub(start)
		}
		if nB+nC >= r.n {
			r.all = time.Since(start)
			break
		}
		if time.Now().After(deadline) {
			r.leftAtCap = r.n - nB - nC
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	b.Logf("%s: C got %d and B %d by %v (C's last message); all %d consumed in %v, %d left at the cap",
		r.path, r.onC, r.onB, r.cIdle.Round(time.Millisecond), r.n, r.all.Round(time.Millisecond), r.leftAtCap)
}

// startForwardBridge runs `brokernet bridge [flags] local remote` (with
// -bench.bridgeflags) until the benchmark ends.
func startForwardBridge(b *testing.B, local, remote string, flags ...string) {
	bin := brokernetBinary(b)
	args := append([]string{"bridge", "--log-level", "warn", "--log-format", "json"}, flags...)
	args = append(args, strings.Fields(*flagBridgeFlags)...)
	br, err := StartBridge(bin, append(args, local, remote)...)
	if err != nil {
		b.Fatalf("starting brokernet: %v", err)
	}
	b.Cleanup(func() {
		br.Kill()
		if b.Failed() {
			b.Logf("brokernet output:\n%s", br.Output())
		}
	})
}

func printDistribution(w io.Writer, results []*distResult) {
	fmt.Fprintf(w, "\nOne queue, consumers on two remote brokers: B's takes %v per message (prefetch 1), C's at once (prefetch 1); non-persistent messages sent to A; brokers: %s\n",
		*flagDistSlow, brokerProfileDesc())
	fmt.Fprintf(w, "%-20s %6s %14s %14s %14s %16s %14s\n", "path", "msgs", "C got", "B got", "C's last at", "all consumed in", "left at cap")
	for _, r := range results {
		if r.failed != "" {
			fmt.Fprintf(w, "%-20s %s\n", r.path, r.failed)
			continue
		}
		all := "-"
		if r.all > 0 {
			all = fmtDur(r.all)
		}
		fmt.Fprintf(w, "%-20s %6d %14d %14d %14s %16s %14d\n", r.path, r.n, r.onC, r.onB, fmtDur(r.cIdle), all, r.leftAtCap)
	}
}
