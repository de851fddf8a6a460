package bench

// BenchmarkRequestReply measures request/reply across one link, as JMS
// applications make it, with ActiveMQ's own JMS client (internal/testkit/jmstest's
// RoundTrip): a responder on broker A answers requests on a queue, a requester
// on broker B sends them one after the other with JMSReplyTo a temporary
// queue of its own and waits for each reply. Every request crosses B→A and
// every reply A→B, so both directions of the link are on the path:
//
//	native               A has ActiveMQ's <networkConnector duplex="true"> to B (bridgeTempDestinations is on by default)
//	brokernet-openwire   `brokernet bridge tcp://A tcp://B --duplex`
//
// (Over STOMP brokernet cannot bridge temporary destinations, so no reply
// would come: docs/request-reply.md.)
//
// in two styles:
//
//	shared        one temporary reply queue for all requests, matched by correlation id (Camel's InOut)
//	per-request   a new temporary queue per request, deleted after its reply (Spring's JmsTemplate.sendAndReceive):
//	              each round trip includes making the reply queue's demand on A and removing it
//
// Non-persistent messages, the brokers as BenchmarkForwarding runs them
// (-bench.brokers), DAMON stopped as for BenchmarkForwarding (-bench.damon).
// Each path×style runs -bench.repeat times in interleaved
// rounds; the table gives the round trip's p50, p90 and p99 and the request
// rate, per round and as medians. Flags after -args:
//
//	-bench.rrpaths=native,brokernet-openwire   ("" skips this benchmark)
//	-bench.rrstyles=shared,per-request
//	-bench.rrn=2000 -bench.rrwarmup=500   measured and warm-up requests per run
//	-bench.rrtimeout=10s                  a request without reply after this is counted as lost

import (
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/brokernet/brokernet/internal/testkit/jmstest"
	"github.com/brokernet/brokernet/internal/testkit/testbroker"
)

var (
	flagRRPaths   = flag.String("bench.rrpaths", "native,brokernet-openwire", "request/reply paths: native, brokernet-openwire (empty: none)")
	flagRRStyles  = flag.String("bench.rrstyles", "shared,per-request", "request/reply styles: shared (one reply queue), per-request (a temporary queue per request)")
	flagRRN       = flag.Int("bench.rrn", 2000, "measured requests per request/reply run")
	flagRRWarmup  = flag.Int("bench.rrwarmup", 500, "warm-up requests per request/reply run")
	flagRRTimeout = flag.Duration("bench.rrtimeout", 10*time.Second, "a request without reply after this counts as lost")
)

// rrResult is one request/reply run.
type rrResult struct {
	path, style string
	round       int
	ok, lost    int
	rtts        []time.Duration // sorted
	elapsed     time.Duration
	failed      string
}

func (r *rrResult) pct(p float64) time.Duration {
	if len(r.rtts) == 0 {
		return 0
	}
	i := int(p * float64(len(r.rtts)-1))
	return r.rtts[i]
}

func (r *rrResult) rate() float64 {
	if r.elapsed <= 0 {
		return 0
	}
	return float64(r.ok) / r.elapsed.Seconds()
}

func BenchmarkRequestReply(b *testing.B) {
	paths, styles := splitList(*flagRRPaths), splitList(*flagRRStyles)
	if len(paths) == 0 || len(styles) == 0 {
		b.Skip("-bench.rrpaths or -bench.rrstyles is empty")
	}
	for _, p := range paths {
		if p != "native" && p != "brokernet-openwire" {
			b.Fatalf("unknown path %q in -bench.rrpaths (want native or brokernet-openwire)", p)
		}
	}
	for _, s := range styles {
		if s != "shared" && s != "per-request" {
			b.Fatalf("unknown style %q in -bench.rrstyles (want shared or per-request)", s)
		}
	}
	rounds := checkFlags(b) // -bench.repeat, -bench.brokers, -bench.damon (stops DAMON for the run)
	if _, err := jmstest.Classpath(); err != nil {
		b.Fatal(err)
	}
	var results []*rrResult
	for round := 1; round <= rounds; round++ {
		for _, style := range styles {
			for _, path := range paths {
				r := &rrResult{path: path, style: style, round: round}
				results = append(results, r)
				b.Run(fmt.Sprintf("round%d/%s/%s", round, style, path), func(b *testing.B) {
					runRequestReply(b, r)
					b.ReportMetric(ms(r.pct(0.5)), "p50-ms")
					b.ReportMetric(ms(r.pct(0.99)), "p99-ms")
					b.ReportMetric(r.rate(), "req/s")
				})
			}
		}
	}
	printRequestReply(os.Stdout, results, paths, styles)
}

func runRequestReply(b *testing.B, r *rrResult) {
	for i := 0; i < b.N; i++ {
		if i > 0 {
			continue // one run per round: b.N is 1 under -benchtime 1x
		}
		defer func() {
			if b.Failed() && r.failed == "" {
				r.failed = "failed"
			}
		}()
		debian := *flagBrokers == "debian"
		opts := func(name string) testbroker.Options {
			return testbroker.Options{Name: name, ID: name + "-id", Persistent: debian, DebianDefaults: debian, FullJIT: true}
		}
		prefix := fmt.Sprintf("rr-%s-%s-%d", r.style, r.path, r.round)
		bb := testbroker.StartActiveMQ(b, opts(prefix+"-B"))
		ao := opts(prefix + "-A")
		if r.path == "native" {
			ao.NetworkConnectors = []string{bb.OpenWireURI()}
			ao.NetworkAttrs = `duplex="true"`
		}
		a := testbroker.StartActiveMQ(b, ao)
		switch r.path {
		case "brokernet-openwire":
			startDuplexBridge(b, a.OpenWireURI(), bb.OpenWireURI())
		}
		resp := jmstest.Start(b, "RoundTrip", "responder", a.OpenWireURI(), "rr.requests")
		resp.WaitLine(b, "READY", 60*time.Second)
		timeoutMS := strconv.FormatInt(flagRRTimeout.Milliseconds(), 10)
		req := jmstest.Start(b, "RoundTrip", "requester", bb.OpenWireURI(), "rr.requests",
			strconv.Itoa(*flagRRWarmup), strconv.Itoa(*flagRRN), r.style, timeoutMS)
		// The warm-up's first request waits for the demand to reach B; the
		// rate is taken over the measured requests' round trips.
		lines := req.Wait(b, time.Duration(*flagRRWarmup+*flagRRN)*(*flagRRTimeout)+time.Minute)
		for _, v := range jmstest.Prefixed(lines, "RTT ") {
			us, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				b.Fatalf("requester printed %q", v)
			}
			r.rtts = append(r.rtts, time.Duration(us)*time.Microsecond)
			r.elapsed += time.Duration(us) * time.Microsecond
		}
		slices.Sort(r.rtts)
		r.ok = len(r.rtts)
		r.lost = len(jmstest.Prefixed(lines, "TIMEOUT "))
		b.Logf("%s %s round %d: %d replies, %d lost, p50 %s p99 %s", r.path, r.style, r.round, r.ok, r.lost, fmtDur(r.pct(0.5)), fmtDur(r.pct(0.99)))
	}
}

// printRequestReply writes the per-run rows and, with several rounds, the
// medians per style×path.
func printRequestReply(w io.Writer, results []*rrResult, paths, styles []string) {
	fmt.Fprintf(w, "\nRequest/reply across one link (ActiveMQ JMS client, non-persistent, %d warm-up + %d measured requests per run; brokers: %s)\n",
		*flagRRWarmup, *flagRRN, brokerProfileDesc())
	if damonNote != "" {
		fmt.Fprintln(w, damonNote)
	}
	fmt.Fprintf(w, "%-12s %-20s %6s %8s %6s %10s %10s %10s %10s\n", "style", "path", "round", "replies", "lost", "p50", "p90", "p99", "req/s")
	for _, r := range results {
		if r.failed != "" {
			fmt.Fprintf(w, "%-12s %-20s %6d %s\n", r.style, r.path, r.round, r.failed)
			continue
		}
		fmt.Fprintf(w, "%-12s %-20s %6d %8d %6d %10s %10s %10s %10.0f\n", r.style, r.path, r.round, r.ok, r.lost,
			fmtDur(r.pct(0.5)), fmtDur(r.pct(0.9)), fmtDur(r.pct(0.99)), r.rate())
	}
	if *flagRepeat < 2 {
		return
	}
	fmt.Fprintf(w, "\nMedians over %d rounds (range min–max)\n", *flagRepeat)
	fmt.Fprintf(w, "%-12s %-20s %24s %24s %16s\n", "style", "path", "p50", "p99", "req/s")
	for _, style := range styles {
		for _, path := range paths {
			var p50, p99, rate []float64
			for _, r := range results {
				if r.style == style && r.path == path && r.failed == "" && r.ok > 0 {
					p50 = append(p50, ms(r.pct(0.5)))
					p99 = append(p99, ms(r.pct(0.99)))
					rate = append(rate, r.rate())
				}
			}
			if len(p50) == 0 {
				fmt.Fprintf(w, "%-12s %-20s no successful run\n", style, path)
				continue
			}
			fmt.Fprintf(w, "%-12s %-20s %24s %24s %16s\n", style, path, medRange(p50, "%.2f ms"), medRange(p99, "%.2f ms"), medRange(rate, "%.0f"))
		}
	}
}

// medRange renders the median of xs and its range.
func medRange(xs []float64, format string) string {
	s := slices.Clone(xs)
	slices.Sort(s)
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return fmt.Sprintf(format+" ("+format+"–"+format+")", med, s[0], s[len(s)-1])
}

// startDuplexBridge runs `brokernet bridge --duplex local remote` until the
// benchmark ends.
func startDuplexBridge(b *testing.B, local, remote string) {
	startForwardBridge(b, local, remote, "--duplex")
}
