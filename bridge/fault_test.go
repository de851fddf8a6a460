package bridge_test

// Fault injection against real brokers, one suite over every protocol path
// (TestFault, a table of faultPaths): a faultproxy sits between the bridge
// and each broker (producers and consumers talk to the brokers directly), and
// each fault breaks the path at one point of the protocol or of the network.
// Every fault asserts the bridge's promise: nothing lost, duplicates at most
// one window (and reported), the bridge back within its back-off.
//
// The paths: ActiveMQ to ActiveMQ over STOMP; and, with one side RabbitMQ
// bridged over AMQP 1.0 (RabbitMQ 3.10, transport/amqp), ActiveMQ (STOMP) →
// RabbitMQ and RabbitMQ → ActiveMQ. The faultproxy reads STOMP and AMQP 1.0
// frames, so the cuts fall at the same points of the protocol: over AMQP 1.0
// the remote's confirmation of a forwarded message is its disposition of the
// transfer, and the local acknowledgement is the bridge's own disposition.
// RabbitMQ's demand is read over STOMP (its event exchange, see
// bridge/demandsource.go): that connection goes through a proxy of its own,
// faulted with the AMQP one where a fault is about the whole broker
// (half-open). Producers and consumers on RabbitMQ speak AMQP 1.0 (see
// conformance_test.go for why). What differs per path is in the path's cuts
// and in the rig's methods; what RabbitMQ alone needs (its lazily journalled
// acknowledgements in the SIGKILL faults) is marked where it is done.

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/brokernet/brokernet/bridge"
	"github.com/brokernet/brokernet/internal/testkit/amqptest"
	"github.com/brokernet/brokernet/internal/testkit/faultproxy"
	"github.com/brokernet/brokernet/internal/testkit/stomptest"
	"github.com/brokernet/brokernet/internal/testkit/testbroker"
	"github.com/brokernet/brokernet/transport"
	"github.com/brokernet/brokernet/transport/amqp"
)

const (
	faultWindow   = 200
	faultMaxDelay = time.Second // maxReconnectDelay of the bridge's URIs
	// faultHeartBeat is the bridge's heart-beat interval in the half-open
	// faults (the AMQP idle time-out too).
	faultHeartBeat = time.Second
)

// faultPath is one protocol path of the suite: which side, if any, is
// RabbitMQ over AMQP 1.0, and where its cuts fall.
type faultPath struct {
	name string
	base string // prefix of its queue names
	// toRabbit and fromRabbit: RabbitMQ over AMQP 1.0 is the remote (the
	// local) broker, ActiveMQ over STOMP the other; neither: two ActiveMQ
	// brokers over STOMP.
	toRabbit, fromRabbit bool
	cuts                 []faultCut
}

var faultPaths = []faultPath{
	{name: "ActiveMQ to ActiveMQ over STOMP", base: "fault.stomp", cuts: cutsSTOMP},
	{name: "ActiveMQ over STOMP to RabbitMQ over AMQP 1.0", base: "fault.amqpto", toRabbit: true, cuts: cutsToRabbit},
	{name: "RabbitMQ over AMQP 1.0 to ActiveMQ over STOMP", base: "fault.amqpfrom", fromRabbit: true, cuts: cutsFromRabbit},
}

// faultCut is one cut point of a path.
type faultCut struct {
	name  string
	local bool // cut the local broker's data connection, else the remote's
	rule  func(cut *time.Time) func(faultproxy.Frame) faultproxy.Action
}

// cutsSTOMP are the cut points between two ActiveMQ brokers over STOMP: the
// remote confirms each SEND with a RECEIPT (isolateDestinations: one by one),
// and only then the bridge ACKs the local message.
var cutsSTOMP = []faultCut{
	{"remote in the middle of the SENDs", false, func(cut *time.Time) func(faultproxy.Frame) faultproxy.Action {
		return nth(faultproxy.ToServer, "SEND", 333, cut)
	}},
	{"remote after a SEND before its RECEIPT", false, afterReceipt},
	{"local after the RECEIPT before the ACK", true, func(cut *time.Time) func(faultproxy.Frame) faultproxy.Action {
		return nth(faultproxy.ToServer, "ACK", 5, cut)
	}},
}

// cutsToRabbit are the cut points with RabbitMQ as the remote: the bridge's
// transfers are confirmed by RabbitMQ's dispositions (rabbit_amqp1_0_incoming_link:
// once routed and, if persistent, stored), and only then ACKed on ActiveMQ.
var cutsToRabbit = []faultCut{
	{"remote in the middle of the transfers", false, func(cut *time.Time) func(faultproxy.Frame) faultproxy.Action {
		return nth(faultproxy.ToServer, faultproxy.AMQPTransfer, 333, cut)
	}},
	{"remote after the transfers before their dispositions", false, func(cut *time.Time) func(faultproxy.Frame) faultproxy.Action {
		return nth(faultproxy.ToClient, faultproxy.AMQPDisposition, 5, cut)
	}},
	{"local after the dispositions before the ACK", true, func(cut *time.Time) func(faultproxy.Frame) faultproxy.Action {
		return nth(faultproxy.ToServer, "ACK", 5, cut)
	}},
}

// cutsFromRabbit are the cut points with RabbitMQ as the local broker: the
// remote (ActiveMQ over STOMP) confirms each SEND with a RECEIPT, and only
// then the bridge settles the delivery with its disposition.
var cutsFromRabbit = []faultCut{
	{"remote in the middle of the SENDs", false, func(cut *time.Time) func(faultproxy.Frame) faultproxy.Action {
		return nth(faultproxy.ToServer, "SEND", 333, cut)
	}},
	{"remote after a SEND before its RECEIPT", false, afterReceipt},
	{"local after the RECEIPT before the dispositions", true, func(cut *time.Time) func(faultproxy.Frame) faultproxy.Action {
		return nth(faultproxy.ToServer, faultproxy.AMQPDisposition, 5, cut)
	}},
}

// nth returns a cut rule that cuts (CutBefore) at the k-th frame with command
// cmd travelling in direction d, and records when.
func nth(d faultproxy.Dir, cmd string, k int, cut *time.Time) func(faultproxy.Frame) faultproxy.Action {
	seen := 0
	return func(f faultproxy.Frame) faultproxy.Action {
		if f.Dir == d && f.Command == cmd {
			if seen++; seen == k {
				*cut = time.Now()
				return faultproxy.CutBefore
			}
		}
		return faultproxy.Pass
	}
}

// afterReceipt returns the STOMP rule that cuts after one of the remote's
// SENDs before its RECEIPT (from the hundredth SEND on).
func afterReceipt(cut *time.Time) func(faultproxy.Frame) faultproxy.Action {
	receipts := map[string]bool{}
	return func(f faultproxy.Frame) faultproxy.Action {
		switch {
		case f.Dir == faultproxy.ToServer && f.Command == "SEND" && f.Get("receipt") != "":
			receipts[f.Get("receipt")] = true
		case f.Dir == faultproxy.ToClient && f.Command == "RECEIPT" && receipts[f.Get("receipt-id")] && len(receipts) >= 100:
			*cut = time.Now()
			return faultproxy.CutBefore
		}
		return faultproxy.Pass
	}
}

// TestFault runs every fault on every protocol path, each path on a pair of
// brokers of its own, the paths in parallel. (It replaces TestFaultCutPoints,
// TestFaultHalfOpen, TestFaultSlowLinks, TestFaultKillLocalBroker,
// TestFaultKillRemoteBroker, TestFaultAMQPToRabbitMQ and
// TestFaultAMQPFromRabbitMQ: -run 'TestFault/ActiveMQ_to_ActiveMQ' is the
// STOMP suite of before.)
func TestFault(t *testing.T) {
	if testing.Short() {
		t.Skip("needs brokers")
	}
	for _, path := range faultPaths {
		t.Run(path.name, func(t *testing.T) {
			t.Parallel()
			runFaults(t, &path)
		})
	}
}

// faultBrokers are a path's two brokers: ActiveMQ a and, on the STOMP path,
// ActiveMQ b; on the others RabbitMQ r.
type faultBrokers struct {
	a, b *testbroker.ActiveMQ
	r    *testbroker.RabbitMQ
}

func startFaultBrokers(t *testing.T, path *faultPath) *faultBrokers {
	t.Helper()
	testbroker.Require(t)
	bs := &faultBrokers{}
	if !path.toRabbit && !path.fromRabbit {
		as := startBrokers(t, 2, true)
		bs.a, bs.b = as[0], as[1]
		return bs
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		bs.r = testbroker.StartRabbitMQs(t, testbroker.RabbitOptions{})[0]
	}()
	go func() {
		defer wg.Done()
		bs.a = startBrokers(t, 1, true)[0]
	}()
	wg.Wait()
	if bs.a == nil || bs.r == nil {
		t.FailNow()
	}
	return bs
}

// faultRig is a bridge between a path's brokers, each path through a proxy.
type faultRig struct {
	*faultBrokers
	path *faultPath
	pa   *faultproxy.Proxy // bridge ↔ ActiveMQ a's STOMP
	pb   *faultproxy.Proxy // bridge ↔ ActiveMQ b's STOMP (STOMP path)
	pr   *faultproxy.Proxy // bridge ↔ RabbitMQ's AMQP 1.0
	prs  *faultproxy.Proxy // bridge ↔ RabbitMQ's STOMP (its event exchange)
	br   *running
}

// proxied returns the STOMP URI of p with fast reconnects and query (extra options).
func proxied(p *faultproxy.Proxy, query string) string {
	u := fmt.Sprintf("stomp://%s?initialReconnectDelay=100&maxReconnectDelay=%d", p.Addr(), faultMaxDelay.Milliseconds())
	if query != "" {
		u += "&" + query
	}
	return u
}

// newFaultRig starts the proxies and the bridge; query holds options for
// both URIs (heartBeat is the AMQP idle time-out too).
func newFaultRig(t *testing.T, bs *faultBrokers, path *faultPath, query string) *faultRig {
	t.Helper()
	r := &faultRig{faultBrokers: bs, path: path, pa: faultproxy.Start(t, bs.a.StompAddr())}
	if bs.b != nil {
		r.pb = faultproxy.Start(t, bs.b.StompAddr())
		r.br = startBridge(t, proxied(r.pa, query), proxied(r.pb, query), func(c *bridge.Config) {
			c.Window = faultWindow
			c.LocalID, c.RemoteID = bs.a.ID(), bs.b.ID()
		})
		return r
	}
	r.pr, r.prs = faultproxy.Start(t, bs.r.AMQPAddr()), faultproxy.Start(t, bs.r.StompAddr())
	au := stomptest.URI(t, proxied(r.pa, query))
	ru := fmt.Sprintf("amqp://guest:guest@%s?initialReconnectDelay=100&maxReconnectDelay=%d&management=%s&stompPort=%d",
		r.pr.Addr(), faultMaxDelay.Milliseconds(), bs.r.ManagementURL(), r.prs.Port())
	if query != "" {
		ru += "&" + query
	}
	rep, err := amqp.ParseURI(ru)
	if err != nil {
		t.Fatal(err)
	}
	cfg := bridge.Config{
		Local: au, Remote: rep, LocalID: bs.a.ID(),
		Window: faultWindow,
		Demand: defaultDemand(),
		Log:    stomptest.Logger(t),
	}
	if path.fromRabbit {
		cfg.Local, cfg.Remote = transport.Endpoint(rep), transport.Endpoint(au)
		cfg.LocalID, cfg.RemoteID = "", bs.a.ID() // RabbitMQ's id is its cluster name, learnt
	}
	r.br = runBridge(t, cfg)
	return r
}

// send sends messages [0, n) to queue q on the local broker.
func (r *faultRig) send(t *testing.T, q string, n int, persistent bool) {
	t.Helper()
	if r.path.fromRabbit {
		amqptest.SendN(t, r.r.AMQPURI(), "/queue/"+q, 0, n, persistent)
		return
	}
	stomptest.SendN(t, r.a.StompURI(), "/queue/"+q, 0, n, persistent)
}

// sendLarge sends n non-persistent messages of about 10 kB to queue q on the
// local broker.
func (r *faultRig) sendLarge(t *testing.T, q string, n int) {
	t.Helper()
	body := make([]byte, 10_000)
	for i := range body {
		body[i] = 'x'
	}
	if r.path.fromRabbit {
		// In a property: amqptest's bodies are "message SEQ". ActiveMQ's
		// STOMP takes header lines up to 10 KiB (StompWireFormat).
		amqptest.SendN(t, r.r.AMQPURI(), "/queue/"+q, 0, n, false, "x-pad", string(body[:9_000]))
		return
	}
	pc := stomptest.Dial(t, r.a.StompURI())
	if err := stomptest.SendBody(context.Background(), pc, "/queue/"+q, 0, n, false, body); err != nil {
		t.Fatal(err)
	}
}

// seqConsumer is a test consumer over any protocol, as tally reads it.
type seqConsumer interface {
	// Seqs returns the seq property of every message received, repeats included.
	Seqs() []int
}

// faultConsumer is a test consumer on the remote broker, over either protocol.
type faultConsumer interface {
	seqConsumer
	Distinct() int
	Close()
}

// subscribe opens a consumer of queue q on the remote broker.
func (r *faultRig) subscribe(t *testing.T, q string) faultConsumer {
	t.Helper()
	switch {
	case r.path.toRabbit:
		return amqptest.Subscribe(t, r.r.AMQPURI(), r.r.ManagementURL(), "/queue/"+q)
	case r.path.fromRabbit:
		return stomptest.Subscribe(t, r.a.StompURI(), "/queue/"+q)
	}
	return stomptest.Subscribe(t, r.b.StompURI(), "/queue/"+q)
}

// local and remote are the proxies of the local and the remote broker's data
// connection.
func (r *faultRig) local() *faultproxy.Proxy {
	if r.path.fromRabbit {
		return r.pr
	}
	return r.pa
}

func (r *faultRig) remote() *faultproxy.Proxy {
	switch {
	case r.path.toRabbit:
		return r.pr
	case r.path.fromRabbit:
		return r.pa
	}
	return r.pb
}

// rabbit reports whether the local (or remote) broker is RabbitMQ.
func (r *faultRig) rabbit(local bool) bool {
	if local {
		return r.path.fromRabbit
	}
	return r.path.toRabbit
}

// proxies are every proxy in front of the local (or remote) broker.
func (r *faultRig) proxies(local bool) []*faultproxy.Proxy {
	if r.rabbit(local) {
		return []*faultproxy.Proxy{r.pr, r.prs}
	}
	if local {
		return []*faultproxy.Proxy{r.local()}
	}
	return []*faultproxy.Proxy{r.remote()}
}

// slow is the proxy the slow-link faults slow down: the AMQP 1.0 one,
// whichever side it is; between two ActiveMQ brokers the remote one.
func (r *faultRig) slow() *faultproxy.Proxy {
	if r.pr != nil {
		return r.pr
	}
	return r.pb
}

// restart SIGKILLs the local (or remote) broker and starts it again on its store.
func (r *faultRig) restart(t *testing.T, local bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	killed := time.Now()
	var err error
	switch {
	case r.rabbit(local):
		err = r.r.Restart(ctx)
	case local || r.b == nil:
		err = r.a.Restart(ctx)
	default:
		err = r.b.Restart(ctx)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("broker restarted %v after the kill", time.Since(killed).Round(time.Millisecond))
}

// restartRabbit is restart for a RabbitMQ side (RabbitMQ only), which may
// forget acknowledgements in the kill: the bridge is kept away (its proxies
// refuse) until the durable queue q has said what it holds after the
// restart. It returns the bridge's Forwarded count, final at the kill
// (nothing is confirmed without the broker), and that depth; the proxies
// accept again before it returns.
func (r *faultRig) restartRabbit(t *testing.T, local bool, q string) (forwarded, after int) {
	t.Helper()
	ps := r.proxies(local)
	for _, p := range ps {
		p.Refuse(true)
	}
	requireDurable(t, r.r, q)
	r.restart(t, local)
	forwarded = int(r.br.Stats().Forwarded.Load())
	after = rabbitDepth(t, r.r, q)
	for _, p := range ps {
		p.Refuse(false)
	}
	return forwarded, after
}

// explain logs, if t failed, where q's messages are: what the bridge
// forwarded and, with RabbitMQ on the path, the RabbitMQ queue's counts, so
// a stall shows its side.
func (r *faultRig) explain(t *testing.T, q string) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		if r.r == nil {
			t.Logf("bridge forwarded %d, up %v", r.br.Stats().Forwarded.Load(), r.br.Up())
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		st, err := r.r.QueueStats(ctx, q)
		t.Logf("RabbitMQ queue %s: %+v (err %v); bridge forwarded %d, up %v", q, st, err, r.br.Stats().Forwarded.Load(), r.br.Up())
	})
}

// tally sums what consumers received of seqs [0, n).
func tally(n int, cs ...seqConsumer) (distinct, dups int, missing []int) {
	seen := make(map[int]int)
	for _, c := range cs {
		for _, s := range c.Seqs() {
			seen[s]++
		}
	}
	for i := 0; i < n; i++ {
		switch k := seen[i]; {
		case k == 0:
			missing = append(missing, i)
		default:
			distinct++
			dups += k - 1
		}
	}
	return distinct, dups, missing
}

// waitAll waits until the consumers hold every seq of [0, n), then checks the
// duplicates against the window and reports them.
func waitAll(t *testing.T, n int, timeout time.Duration, cs ...seqConsumer) {
	t.Helper()
	waitAllBeyond(t, n, 0, timeout, cs...)
}

// waitAllBeyond is waitAll where a broker is known to deliver up to extra
// copies of its own (acknowledgements it lost in a crash): the duplicates
// must stay within the window plus those.
func waitAllBeyond(t *testing.T, n, extra int, timeout time.Duration, cs ...seqConsumer) {
	t.Helper()
	stomptest.Eventually(t, timeout, func() error {
		if d, _, missing := tally(n, cs...); d != n {
			return fmt.Errorf("%d of %d distinct messages arrived; first missing %v", d, n, missing[:min(10, len(missing))])
		}
		return nil
	})
	_, dups, _ := tally(n, cs...)
	if extra == 0 {
		t.Logf("all %d messages arrived, %d duplicates (window %d)", n, dups, faultWindow)
	} else {
		t.Logf("all %d messages arrived, %d duplicates (window %d, plus up to %d the broker delivered again on its own)", n, dups, faultWindow, extra)
	}
	if dups > faultWindow+extra {
		t.Fatalf("%d duplicates, more than the window of %d plus the %d the broker may have delivered again on its own", dups, faultWindow, extra)
	}
}

// waitBack waits until the bridge has had more than sessions sessions and is up,
// and checks that it came back within its back-off (plus the time to connect).
func waitBack(t *testing.T, br *running, sessions int64, since time.Time) {
	t.Helper()
	stomptest.Eventually(t, 30*time.Second, func() error {
		if s := br.Stats().Sessions.Load(); s <= sessions || !br.Up() {
			return fmt.Errorf("bridge not back: %d sessions (had %d), up %v", s, sessions, br.Up())
		}
		return nil
	})
	took := time.Since(since)
	t.Logf("bridge back %v after the fault", took.Round(time.Millisecond))
	// One back-off delay (at most max × 1.2 jitter) plus a generous connect time.
	if limit := faultMaxDelay*12/10 + 5*time.Second; took > limit {
		t.Fatalf("bridge took %v to come back, more than its back-off allows (%v)", took, limit)
	}
}

// startFault starts a rig with query (explaining q's messages if the test
// fails), sends n persistent messages [0, n) to queue q on the local broker,
// and opens the remote consumer of q.
func startFault(t *testing.T, bs *faultBrokers, path *faultPath, q, query string, n int) (*faultRig, faultConsumer) {
	t.Helper()
	r := newFaultRig(t, bs, path, query)
	r.explain(t, q)
	r.send(t, q, n, true)
	return r, r.subscribe(t, q)
}

// received waits until c holds at least 300 distinct messages, before a fault.
func received(t *testing.T, c faultConsumer, fault string) {
	t.Helper()
	stomptest.Eventually(t, 60*time.Second, func() error {
		if c.Distinct() < 300 {
			return fmt.Errorf("only %d received before the %s", c.Distinct(), fault)
		}
		return nil
	})
}

// runFaults runs every fault on one path, with one pair of brokers: the
// broker kills come last.
func runFaults(t *testing.T, path *faultPath) {
	bs := startFaultBrokers(t, path)
	const n = 1500
	// Cut the connection at each point of the forwarding protocol,
	// mid-stream: nothing is lost, duplicates stay within the window.
	for i, tc := range path.cuts {
		t.Run("cut "+tc.name, func(t *testing.T) {
			q := path.base + ".cut" + strconv.Itoa(i)
			r := newFaultRig(t, bs, path, "")
			r.explain(t, q)
			r.send(t, q, n, true)
			var cut time.Time
			p := r.remote()
			if tc.local {
				p = r.local()
			}
			p.CutWhen(tc.rule(&cut))
			sessions := r.br.Stats().Sessions.Load()
			c := r.subscribe(t, q)
			stomptest.Eventually(t, 60*time.Second, func() error {
				if p.Cuts() == 0 {
					return fmt.Errorf("the cut point was never reached (%d forwarded)", r.br.Stats().Forwarded.Load())
				}
				return nil
			})
			waitBack(t, r.br, sessions, cut)
			waitAll(t, n, 90*time.Second, c)
		})
	}
	// Black-hole each side (no FIN, no RST): the bridge must notice within
	// two heart-beat intervals, and forward everything once the path heals.
	for _, local := range []bool{false, true} {
		name := map[bool]string{false: "remote", true: "local"}[local]
		t.Run("half-open "+name, func(t *testing.T) {
			r, c := startFault(t, bs, path, path.base+".half"+name, "heartBeat="+strconv.FormatInt(faultHeartBeat.Milliseconds(), 10), n)
			received(t, c, "fault")
			sessions := r.br.Stats().Sessions.Load()
			ps := r.proxies(local)
			for _, p := range ps {
				p.BlackHole()
			}
			holed := time.Now()
			stomptest.Eventually(t, 30*time.Second, func() error {
				if r.br.Up() {
					return fmt.Errorf("bridge still up %v after the black hole", time.Since(holed).Round(time.Millisecond))
				}
				return nil
			})
			detected := time.Since(holed)
			t.Logf("half-open %s connection detected after %v (heart-beat %v)", name, detected.Round(time.Millisecond), faultHeartBeat)
			for _, p := range ps {
				p.Heal()
			}
			healed := time.Now()
			if detected > 2*faultHeartBeat {
				t.Errorf("half-open connection detected after %v, more than two heart-beat intervals (%v)", detected, 2*faultHeartBeat)
			}
			waitBack(t, r.br, sessions, healed)
			waitAll(t, n, 90*time.Second, c)
		})
	}
	// Freeze the path to the remote broker for 45 s with the URIs' default
	// heart-beats (STOMP 8 s, AMQP 1.0 idle time-out 10 s): noticed within
	// 15 s, back once the path is, nothing lost.
	t.Run("frozen 45s with default heart-beats", func(t *testing.T) {
		r, c := startFault(t, bs, path, path.base+".frozen", "", n)
		freezeRemote(t, r.br, r.proxies(false), c, n)
	})
	// Run the stream over a link with 200 ms latency each way, then over one
	// limited to 1 MB/s (the AMQP 1.0 one, whichever side it is; between two
	// ActiveMQ brokers the remote one).
	t.Run("latency 200ms", func(t *testing.T) {
		q := path.base + ".latency"
		r := newFaultRig(t, bs, path, "")
		r.explain(t, q)
		r.slow().SetLatency(200 * time.Millisecond)
		const n = 500
		c := r.subscribe(t, q)
		waitDemand(t, r.br, 1, 30*time.Second)
		start := time.Now()
		r.send(t, q, n, false)
		waitAll(t, n, 90*time.Second, c)
		t.Logf("%d messages over a 200 ms link in %v", n, time.Since(start).Round(time.Millisecond))
		if s := r.br.Stats().Sessions.Load(); s != 1 {
			t.Errorf("bridge had %d sessions over a slow but working link, want 1", s)
		}
	})
	t.Run("bandwidth 1MB/s", func(t *testing.T) {
		q := path.base + ".bandwidth"
		r := newFaultRig(t, bs, path, "")
		r.explain(t, q)
		r.slow().SetBandwidth(1_000_000)
		const n = 300 // 10 kB each: 3 MB, about 3 s at 1 MB/s
		c := r.subscribe(t, q)
		waitDemand(t, r.br, 1, 30*time.Second)
		start := time.Now()
		r.sendLarge(t, q, n)
		waitAll(t, n, 90*time.Second, c)
		took := time.Since(start)
		t.Logf("%d × 10 kB over a 1 MB/s link in %v", n, took.Round(time.Millisecond))
		if took < 2*time.Second {
			t.Errorf("3 MB crossed a 1 MB/s link in %v: the limit was not applied", took)
		}
		if s := r.br.Stats().Sessions.Load(); s != 1 {
			t.Errorf("bridge had %d sessions over a slow but working link, want 1", s)
		}
	})
	// SIGKILL the local broker mid-stream and restart it on its store: the
	// messages it still held are forwarded after the restart, at most a
	// window of them twice (plus, on RabbitMQ, what it forgot it had
	// accepted).
	t.Run("SIGKILL local broker", func(t *testing.T) {
		q := path.base + ".killlocal"
		r, c := startFault(t, bs, path, q, "", n)
		received(t, c, "kill")
		sessions := r.br.Stats().Sessions.Load()
		if !r.rabbit(true) {
			r.restart(t, true)
			waitBack(t, r.br, sessions, time.Now())
			waitAll(t, n, 90*time.Second, c)
			return
		}
		// RabbitMQ only. RabbitMQ 3.10 does not make acknowledgements
		// durable at once: a classic queue's index journals them in the
		// queue process's buffers and syncs for publisher confirms, not for
		// acks, so accepted messages can come back after a SIGKILL.
		// Measured: with the stream running, 200 of 402 confirmed
		// acceptances came back; when the bridge was black-holed for the
		// second it took to ask the queue its depth before the kill, none
		// did (400 accepted, 1,100 held before and after) — the queue syncs
		// when idle. Those are the broker's duplicates, not the bridge's, so
		// they are counted here, without pausing the stream: the bridge is
		// kept away from the restarted broker until the queue says what it
		// holds; beyond what the bridge had not seen accepted
		// (Sync-confirmed), it was forgotten.
		acked, after := r.restartRabbit(t, true, q)
		forgotten := max(0, after-(n-acked))
		t.Logf("the bridge had %d of %d acceptances confirmed; after the restart the queue holds %d: RabbitMQ lost %d confirmed acceptances",
			acked, n, after, forgotten)
		waitBack(t, r.br, sessions, time.Now())
		waitAllBeyond(t, n, forgotten, 90*time.Second, c)
	})
	// SIGKILL the remote broker mid-stream and restart it: what it had
	// confirmed is on its store, the rest comes again from the local one.
	t.Run("SIGKILL remote broker", func(t *testing.T) {
		q := path.base + ".killremote"
		r, c1 := startFault(t, bs, path, q, "", n)
		received(t, c1, "kill")
		// The consumer leaves first, with its settlements processed (both
		// test consumers' Close round-trips: STOMP's waits for the
		// DISCONNECT receipt): a consumer's own acknowledgements lost in the
		// kill would make the broker redeliver, and those duplicates are not
		// the bridge's. The stream keeps flowing into the remote until the
		// kill.
		c1.Close()
		sessions := r.br.Stats().Sessions.Load()
		if !r.rabbit(false) {
			r.restart(t, false)
			restarted := time.Now()
			c2 := r.subscribe(t, q)
			waitBack(t, r.br, sessions, restarted)
			waitAll(t, n, 90*time.Second, c1, c2)
			return
		}
		// RabbitMQ only. RabbitMQ may forget the test consumer's
		// acknowledgements in the kill, as it forgets the bridge's (see
		// SIGKILL local broker): what it then delivers again is not the
		// bridge's doing. Bound: the bridge sends again only what it had not
		// seen confirmed and acknowledged (Forwarded), so duplicates ≤ what
		// RabbitMQ holds after the restart + what the consumer had −
		// Forwarded; the bridge's share of that is at most the window, the
		// rest is RabbitMQ's. The bridge is kept away until the queue has
		// been asked.
		forwarded, after := r.restartRabbit(t, false, q)
		consumed := c1.Distinct()
		extra := max(0, after+consumed-forwarded-faultWindow)
		t.Logf("the bridge had forwarded %d (confirmed, acknowledged), the consumer had %d; after the restart RabbitMQ holds %d: duplicates may exceed the window by %d, RabbitMQ's own redeliveries",
			forwarded, consumed, after, extra)
		restarted := time.Now()
		c2 := r.subscribe(t, q)
		waitBack(t, r.br, sessions, restarted)
		waitAllBeyond(t, n, extra, 90*time.Second, c1, c2)
	})
}

// requireDurable fails the test unless queue q exists on r and is durable: a
// queue missing after a restart is then one the broker lost (rabbitDepth).
func requireDurable(t *testing.T, r *testbroker.RabbitMQ, q string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := r.QueueStats(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Durable {
		t.Fatalf("queue %s is not durable: a SIGKILL of its broker would lose it", q)
	}
}

// rabbitDepth is how many messages queue q holds on r, right after a restart,
// while nothing consumes from it or sends to it. It asks the queue itself
// (rabbitmqctl list_queues) and, where that does not answer, the management
// API: its statistics lag behind a changing queue, but they start empty with
// the node, so the first count they give of this idle queue is exact. Right
// after a restart the node lists its recovered queues only once their
// processes are up, so the queue is waited for; a failure shows the node's log.
//
// RabbitMQ 3.10 has come back from a SIGKILL without the durable queue q
// (requireDurable checked it before): twice in full runs, its log saying it
// recovered the other queues only. What it lost then is the broker's, and the
// run cannot judge the bridge: the test is skipped with that evidence.
func rabbitDepth(t *testing.T, r *testbroker.RabbitMQ, q string) int {
	t.Helper()
	// ask returns the depth, where it came from, or why not; gone says both
	// the node's list and the management API answered without the queue.
	ask := func() (n int, from string, gone bool, err error) {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		out, ctlErr := r.Ctl(ctx, "list_queues", "-q", "--no-table-headers", "name", "messages", "state")
		unlisted := false // the node answered without the queue
		if ctlErr == nil {
			for _, line := range strings.Split(out, "\n") {
				if f := strings.Fields(line); len(f) >= 2 && f[0] == q {
					if n, err := strconv.Atoi(f[1]); err == nil {
						return n, "rabbitmqctl", false, nil
					}
					ctlErr = fmt.Errorf("list_queues lists %s without a count: %q", q, line)
				}
			}
			if ctlErr == nil {
				unlisted = true
				ctlErr = fmt.Errorf("list_queues has no queue %s:\n%s", q, out)
			}
		}
		mctx, mcancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer mcancel()
		st, err := r.QueueStats(mctx, q)
		switch {
		case err != nil:
			return 0, "", unlisted && errors.Is(err, testbroker.ErrNoQueue), errors.Join(ctlErr, err)
		case !st.Counted:
			return 0, "", false, errors.Join(ctlErr, fmt.Errorf("the management API has no count for %s yet", q))
		}
		return st.Messages, "the management API", false, nil
	}
	deadline := time.Now().Add(90 * time.Second)
	var goneSince time.Time
	for {
		n, from, gone, err := ask()
		if err == nil {
			t.Logf("queue %s holds %d messages (asked %s)", q, n, from)
			return n
		}
		switch {
		case !gone:
			goneSince = time.Time{}
		case goneSince.IsZero():
			goneSince = time.Now()
		case time.Since(goneSince) > 15*time.Second:
			recovered, _, ok := testbroker.ClassicRecovery(r.LogTail(200))
			if !ok {
				recovered = "(no recovery line in the log tail)"
			}
			t.Skipf("RabbitMQ came back from the SIGKILL without durable queue %s, and with it whatever it held: the broker's loss, so this run cannot judge the bridge. Its log: %s", q, recovered)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the depth of queue %s after the restart: %v\nnode log:\n%s", q, err, r.LogTail(60))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// frozenFor is how long freezeRemote stops the path: longer than the 30 s
// ActiveMQ's own clients take to notice by default.
const frozenFor = 45 * time.Second

// freezeRemote stops every byte through ps (no FIN, no RST) for frozenFor
// while c receives a persistent stream of n messages: the bridge must notice
// within 15 s, come back once the path does, and lose nothing.
func freezeRemote(t *testing.T, br *running, ps []*faultproxy.Proxy, c faultConsumer, n int) {
	t.Helper()
	received(t, c, "freeze")
	sessions := br.Stats().Sessions.Load()
	for _, p := range ps {
		p.BlackHole()
	}
	frozen := time.Now()
	stomptest.Eventually(t, frozenFor, func() error {
		if br.Up() {
			return fmt.Errorf("bridge still up %v into the freeze", time.Since(frozen).Round(time.Millisecond))
		}
		return nil
	})
	noticed := time.Since(frozen)
	t.Logf("frozen path noticed after %v", noticed.Round(time.Millisecond))
	time.Sleep(time.Until(frozen.Add(frozenFor))) // the freeze lasts its time, whatever the bridge does
	for _, p := range ps {
		p.Heal()
	}
	healed := time.Now()
	if noticed > 15*time.Second {
		t.Errorf("frozen path noticed after %v, want within 15 s", noticed)
	}
	waitBack(t, br, sessions, healed)
	waitAll(t, n, 2*time.Minute, c)
}
