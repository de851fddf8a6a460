package bench

// BenchmarkRabbitMQ is the RabbitMQ side's anchor (issue 7 part 6): on two
// RabbitMQ 3.10 nodes A and B, a producer on A's queue and a consumer on B's
// queue of the same name, both over AMQP 1.0 (transport/amqp), 1 KiB bodies:
//
//	federation      B's queue is federated from A's (rabbitmq_federation: an
//	                upstream to A and a policy on the queue, ack-mode
//	                on-confirm, the plugin's default)
//	brokernet-amqp  `brokernet bridge amqp://A amqp://B` as a subprocess (demand
//	                from B's event exchange over STOMP)
//
// The same phases as BenchmarkForwarding (warm-up, full speed, paced at
// -bench.rate for -bench.steady), on fresh nodes per path and mode, with the
// same loss check: every sequence number arrives once. Both paths acknowledge
// A only after B confirmed (federation on-confirm; brokernet always), so both
// are at-least-once. The table goes to stdout; flags after -args:
//
//	-bench.rabbitpaths=federation,brokernet-amqp   ("" skips this benchmark)
//	-bench.rabbitn=20000 -bench.rabbitnpersistent=5000   full-speed messages
//	-bench.modes, -bench.repeat, -bench.rate, -bench.steady, -bench.warmup, -bench.size,
//	-bench.window, -bench.prefetch, -bench.bin, -bench.quietwait   as for BenchmarkForwarding
//
// With -bench.repeat above 1 every mode×path runs that many times in
// interleaved rounds and a summary table gives the median and range of each
// figure, as for BenchmarkForwarding.

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/brokernet/brokernet/destination"
	"github.com/brokernet/brokernet/internal/testkit/testbroker"
	"github.com/brokernet/brokernet/transport"
	"github.com/brokernet/brokernet/transport/amqp"
)

var (
	flagRabbitPaths = flag.String("bench.rabbitpaths", "federation,brokernet-amqp", "RabbitMQ paths to measure: federation, brokernet-amqp (empty: none)")
	flagRabbitN     = flag.Int("bench.rabbitn", 20000, "RabbitMQ paths: messages in the full-speed phase, non-persistent")
	flagRabbitNP    = flag.Int("bench.rabbitnpersistent", 5000, "RabbitMQ paths: messages in the full-speed phase, persistent")
)

const (
	rabbitQueue = "bench.rmq"
	// The AMQP 1.0 producer commits a batch every rabbitBatch messages and
	// keeps at most rabbitInFlight unconfirmed; the consumer's link credit.
	rabbitBatch    = 100
	rabbitInFlight = 1000
	rabbitCredit   = 1000
)

var knownRabbitPaths = map[string]bool{"federation": true, "brokernet-amqp": true}

func BenchmarkRabbitMQ(b *testing.B) {
	paths := splitList(*flagRabbitPaths)
	if len(paths) == 0 {
		b.Skip("-bench.rabbitpaths is empty")
	}
	for _, p := range paths {
		if !knownRabbitPaths[p] {
			b.Fatalf("unknown path %q in -bench.rabbitpaths (want federation or brokernet-amqp)", p)
		}
	}
	rounds := checkFlags(b)
	results := runRounds(b, rounds, splitList(*flagModes), paths, func(mode, path string) *result {
		return &result{settings: brokerSettings{name: "rabbitmq", desc: "RabbitMQ 3.10 defaults"}, mode: mode, path: path}
	}, runRabbitPath)
	title := fmt.Sprintf("brokernet bench, RabbitMQ 3.10 (two nodes, defaults), producer and consumer over AMQP 1.0: %d B bodies; full speed %d (non-persistent) / %d (persistent) msgs; producer commits every %d, at most %d unconfirmed; consumer credit %d, accepts each; paced %.0f msg/s for %s; warm-up %d",
		*flagBodySize, *flagRabbitN, *flagRabbitNP, rabbitBatch, rabbitInFlight, rabbitCredit, *flagRate, *flagSteady, *flagWarmup)
	printRabbitTable(os.Stdout, results, rounds, title, "brokersCPU/msg: both nodes during the full-speed phase")
}

func runRabbitPath(b *testing.B, r *result) {
	ctx := context.Background()
	persistent := r.mode == modePersistent
	r.n = *flagRabbitN
	if persistent {
		r.n = *flagRabbitNP
	}
	waitQuiet(b, r)
	nodes := testbroker.StartRabbitMQs(b, testbroker.RabbitOptions{}, testbroker.RabbitOptions{})
	a, bb := nodes[0], nodes[1]

	var br *Bridge
	switch r.path {
	case "federation":
		if err := federate(ctx, bb, a, rabbitQueue); err != nil {
			r.failed = err.Error()
			b.Fatal(err)
		}
	case "brokernet-amqp":
		uri := func(n *testbroker.RabbitMQ) string {
			return n.AMQPURI() + "?stompPort=" + strconv.Itoa(n.StompPort()) + "&management=" + url.QueryEscape(n.ManagementURL())
		}
		br = startBenchBridge(b, r, uri(a), uri(bb))
	}
	pidBridge := 0
	if br != nil {
		pidBridge = br.Pid()
	}
	sample := func() CPUSample {
		c := TakeCPU(0, 0, pidBridge)
		c.BrokerA, c.BrokerB = treeCPU(a.Pid()), treeCPU(bb.Pid())
		return c
	}

	cons, err := subscribeAMQP(ctx, bb.AMQPURI(), rabbitQueue)
	if err != nil {
		b.Fatal(err)
	}
	defer cons.close()
	prod, err := dialAMQP(ctx, a.AMQPURI())
	if err != nil {
		b.Fatal(err)
	}
	defer prod.Abort()
	body := Body(*flagBodySize)
	run := &pathRun{rec: &cons.Recorder, sample: sample, br: br,
		wait: func(ctx context.Context, p Phase, stall time.Duration) bool {
			return cons.wait(ctx, p, stall, cons.done)
		},
		send: func(ctx context.Context, p Phase, n int, rate float64) (SendStats, error) {
			return sendAMQP(ctx, prod, p, n, persistent, body, rate)
		}}
	run.measure(b, ctx, r)
}

// treeCPU is the user+system CPU time so far of process pid and all its
// descendants: a test node's pid is its wrapper's, whose children are the
// Erlang VM (beam.smp) and its helpers.
func treeCPU(pid int) time.Duration {
	if pid <= 0 {
		return 0
	}
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	parent := map[int]int{}
	for _, d := range dirs {
		p, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile("/proc/" + d.Name() + "/stat")
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(data, ')')
		if i < 0 {
			continue
		}
		// After the command: state, ppid (fields 3 and 4).
		if f := strings.Fields(string(data[i+1:])); len(f) > 1 {
			parent[p], _ = strconv.Atoi(f[1])
		}
	}
	var total time.Duration
	for p := range parent {
		for q := p; q > 1; q = parent[q] {
			if q == pid {
				total += ProcCPU(p)
				break
			}
		}
	}
	return total
}

// federate makes queue on down a federated queue of the same queue on up: an
// upstream named after up (its AMQP 0-9-1 port is the AMQP 1.0 one) and a
// policy applying it to the queue (rabbitmq_federation, enabled on test nodes).
func federate(ctx context.Context, down, up *testbroker.RabbitMQ, queue string) error {
	upstream := fmt.Sprintf(`{"value":{"uri":"amqp://guest:guest@%s","ack-mode":"on-confirm"}}`, up.AMQPAddr())
	if err := mgmtPut(ctx, down, "/api/parameters/federation-upstream/%2F/bench-up", upstream); err != nil {
		return fmt.Errorf("federation upstream: %w", err)
	}
	policy := fmt.Sprintf(`{"pattern":"^%s$","definition":{"federation-upstream-set":"all"},"apply-to":"queues"}`,
		strings.ReplaceAll(queue, ".", `\\.`))
	if err := mgmtPut(ctx, down, "/api/policies/%2F/bench-federation", policy); err != nil {
		return fmt.Errorf("federation policy: %w", err)
	}
	return nil
}

func mgmtPut(ctx context.Context, n *testbroker.RabbitMQ, path, body string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, n.ManagementURL()+path, strings.NewReader(body))
	if err != nil {
		return err
	}
	req.SetBasicAuth("guest", "guest")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("PUT %s: %s: %s", path, resp.Status, msg)
	}
	return nil
}

func dialAMQP(ctx context.Context, uri string) (*amqp.Conn, error) {
	u, err := amqp.ParseURI(uri)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	return amqp.DialConn(ctx, u)
}

// sendAMQP sends n messages of phase p to rabbitQueue on c, in committed
// batches of rabbitBatch with at most rabbitInFlight unconfirmed, paced at rate
// msg/s when rate > 0 (bursts on a 5 ms ticker), and returns once RabbitMQ
// accepted every one. c's events are read here only.
func sendAMQP(ctx context.Context, c *amqp.Conn, p Phase, n int, persistent bool, body []byte, rate float64) (SendStats, error) {
	d := destination.Destination{Kind: destination.Queue, Name: rabbitQueue}
	tag := phaseTags[p]
	pending := map[transport.Token]int{}
	inFlight := 0
	// await takes confirmations until at most limit messages are unconfirmed.
	await := func(limit int) error {
		for inFlight > limit {
			select {
			case ev, ok := <-c.Events():
				if !ok {
					return fmt.Errorf("producer connection ended: %w", c.Err())
				}
				k, mine := pending[ev.Token]
				if !mine {
					continue
				}
				if ev.Kind == transport.Refused {
					return fmt.Errorf("batch refused: %w", ev.Err)
				}
				for _, o := range ev.Outcomes {
					if o.Outcome != transport.Accepted {
						return fmt.Errorf("a message was not accepted: %v", o.Err)
					}
				}
				delete(pending, ev.Token)
				inFlight -= k
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	}
	sendBatch := func(from, k int) error {
		for i := from; i < from+k; i++ {
			m := &transport.Message{Destination: d, Persistent: persistent, Priority: -1, Body: body, Props: []transport.Property{
				{Name: HeaderPhase, Value: tag},
				{Name: HeaderSeq, Value: strconv.Itoa(i)},
				{Name: HeaderTS, Value: strconv.FormatInt(time.Now().UnixNano(), 10)},
			}}
			if err := c.Send(ctx, m); err != nil {
				return err
			}
		}
		tok, err := c.Commit(ctx)
		if err != nil {
			return err
		}
		pending[tok] = k
		inFlight += k
		return await(rabbitInFlight)
	}
	st := SendStats{Start: time.Now()}
	if rate <= 0 {
		for i := 0; i < n; i += rabbitBatch {
			if err := sendBatch(i, min(rabbitBatch, n-i)); err != nil {
				return st, err
			}
		}
	} else {
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for sent := 0; sent < n; {
			select {
			case <-t.C:
			case <-ctx.Done():
				return st, ctx.Err()
			}
			due := min(n, int(rate*time.Since(st.Start).Seconds()))
			for sent < due {
				k := min(rabbitBatch, due-sent)
				if err := sendBatch(sent, k); err != nil {
					return st, err
				}
				sent += k
			}
		}
	}
	if err := await(0); err != nil {
		return st, err
	}
	st.End = time.Now()
	return st, nil
}

// amqpConsumer records what arrives on rabbitQueue over AMQP 1.0, accepting
// each message once recorded.
type amqpConsumer struct {
	Recorder
	conn *amqp.Conn
	done chan struct{}
	once sync.Once
}

func subscribeAMQP(ctx context.Context, uri, queue string) (*amqpConsumer, error) {
	c, err := dialAMQP(ctx, uri)
	if err != nil {
		return nil, err
	}
	tok, err := c.Subscribe(ctx, transport.Subscription{ID: "bench", Destination: destination.Destination{Kind: destination.Queue, Name: queue},
		Prefetch: rabbitCredit, Ack: transport.Individual})
	if err != nil {
		c.Abort()
		return nil, err
	}
	for {
		select {
		case ev, ok := <-c.Events():
			if !ok {
				return nil, fmt.Errorf("consumer connection ended: %w", c.Err())
			}
			if ev.Token != tok {
				continue
			}
			if ev.Kind == transport.Refused {
				c.Abort()
				return nil, fmt.Errorf("subscribing to %s: %w", queue, ev.Err)
			}
			cons := &amqpConsumer{conn: c, done: make(chan struct{})}
			go cons.run()
			return cons, nil
		case <-time.After(30 * time.Second):
			c.Abort()
			return nil, errors.New("subscription not confirmed within 30 s")
		}
	}
}

func (c *amqpConsumer) run() {
	defer close(c.done)
	for ev := range c.conn.Events() {
		if ev.Kind != transport.Delivery {
			continue
		}
		m := ev.Msg
		c.record(m.PropString(HeaderPhase), m.PropString(HeaderSeq), m.PropString(HeaderTS), time.Now())
		if err := c.conn.Settle(context.Background(), ev.Sub, []transport.Ref{ev.Ref}, transport.Accepted); err != nil {
			fmt.Fprintf(os.Stderr, "bench consumer: settling: %v\n", err)
			return
		}
	}
}

func (c *amqpConsumer) close() {
	c.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = c.conn.Close(ctx)
		<-c.done
	})
}

// printRabbitTable prints one row per result under title, grouped by
// mode×path and labelled with their round when there are several, then the
// summary over the rounds; brokers says what the brokersCPU/msg column counts.
func printRabbitTable(w io.Writer, results []*result, rounds int, title, brokers string) {
	if len(results) == 0 {
		return
	}
	rows := groupRounds(results)
	fmt.Fprintln(w)
	fmt.Fprintln(w, title)
	fmt.Fprintf(w, "%-15s %-23s %8s %10s %10s %8s %8s %8s %5s %4s %14s %16s %10s\n",
		"mode", "path", "msgs/s", "p50(full)", "p99(full)", "p50@r", "p99@r", "rate@r", "lost", "dup", "bridgeCPU/msg", "brokersCPU/msg", "bridgeRSS")
	for _, g := range rows {
		for _, r := range g.runs {
			if r.failed != "" && r.rate == 0 {
				fmt.Fprintf(w, "%-15s %-23s %s\n", r.mode, r.label(rounds), r.failed)
				continue
			}
			bridgeCPU, rss := "-", "-"
			if r.bridged() && r.bridgeMsgs > 0 {
				bridgeCPU = fmt.Sprintf("%.0fµs", float64(r.bridgeCPUPerMsg())/1e3)
				rss = fmt.Sprintf("%.0fMiB", float64(r.bridgeRSS)/1024)
			}
			line := fmt.Sprintf("%-15s %-23s %8.0f %10s %10s %8s %8s %8.0f %5d %4d %14s %16s %10s",
				r.mode, r.label(rounds), r.rate, fmtDur(r.p50), fmtDur(r.p99), fmtDur(r.sp50), fmtDur(r.sp99), r.steadyRate,
				r.lost, r.dups, bridgeCPU, perMsg(r.full.cpu.BrokerA+r.full.cpu.BrokerB, r.full.n)+"µs", rss)
			if r.failed != "" && rounds > 1 {
				line += "  " + r.failed
			}
			fmt.Fprintln(w, line)
		}
	}
	fmt.Fprintln(w, "bridgeCPU/msg: the brokernet process's whole-life CPU over every message it forwarded; "+brokers)
	if rounds > 1 {
		fmt.Fprintln(w)
		printSummary(w, rows, rounds, "@r")
		fmt.Fprintln(w, judgeLoss(rows, rounds).line)
	}
}
