package bridge_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/brokernet/brokernet/bridge"
	"github.com/brokernet/brokernet/internal/testkit/amqptest"
	"github.com/brokernet/brokernet/internal/testkit/stomptest"
	"github.com/brokernet/brokernet/internal/testkit/testbroker"
	"github.com/brokernet/brokernet/transport"
	"github.com/brokernet/brokernet/transport/amqp"
	"github.com/brokernet/brokernet/transport/openwire"
	stompt "github.com/brokernet/brokernet/transport/stomp"
)

// The conformance suite: one table of scenarios that every combination of
// brokers and bridge protocols runs, so that every transport and broker flavour
// is held to the same behaviour (Watermill's pubsub/tests, in spirit). Each
// side brings its own test producer and consumer: STOMP, except on a RabbitMQ
// bridged over AMQP 1.0, where they speak AMQP 1.0 too (RabbitMQ 3.10 does not
// translate faithfully between its STOMP and AMQP 1.0 plugins: an AMQP 1.0
// message reaches a STOMP consumer as raw sections, a STOMP message reaches an
// AMQP 1.0 consumer without its application headers).

// side is one broker of a pair as the suite sees it.
type side interface {
	// Send sends messages seq from … from+n-1 (body "message SEQ", property
	// seq, extra headers as key, value pairs in STOMP spelling) to dest and
	// waits until the broker took them.
	Send(t *testing.T, dest string, from, n int, persistent bool, headers ...string)
	// Subscribe opens a test consumer on dest, closed when t ends.
	Subscribe(t *testing.T, dest string) consumer
	// Endpoint is what the bridge dials.
	Endpoint(t *testing.T) transport.Endpoint
	// ID is the broker id to configure, "" when the bridge learns it.
	ID() string
	// Queue and Topic are the STOMP destinations of a queue and a topic.
	Queue(name string) string
	Topic(name string) string
	// Depth is how many messages queue name holds.
	Depth(t *testing.T, name string) int64
	// Restart stops the broker (SIGKILL) and starts it again on its store.
	Restart(ctx context.Context) error
}

// consumer is a test consumer as the scenarios use it: it counts messages by
// their seq property and settles each after counting it.
type consumer interface {
	WaitDistinct(n int, timeout time.Duration)
	Distinct() int
	Count() int
	Duplicates() int
	Seqs() []int
	// FirstHeader is a header of the first message received, in STOMP spelling.
	FirstHeader(name string) string
	// FirstBody is the body of the first message received.
	FirstBody() string
	Close()
}

// stompConsumer is a consumer over STOMP.
type stompConsumer struct{ *stomptest.Consumer }

func (c stompConsumer) FirstHeader(name string) string { return c.Frames()[0].Header.Get(name) }
func (c stompConsumer) FirstBody() string              { return string(c.Frames()[0].Body) }

// amqpConsumer is a consumer over AMQP 1.0; its headers are read in STOMP
// spelling through the STOMP transport's mapping.
type amqpConsumer struct{ *amqptest.Consumer }

func (c amqpConsumer) FirstHeader(name string) string {
	return stompt.SendFrame(c.Messages()[0], "").Header.Get(name)
}
func (c amqpConsumer) FirstBody() string { return string(c.Messages()[0].Body) }

// combination is one row of the suite's table.
type combination struct {
	name string
	// pair gives the two brokers (local, remote) for the test.
	pair func(t *testing.T, p *brokerPool) (local, remote side)
	// skip names scenarios this row cannot pass, with the measured reason.
	skip map[string]string
}

// brokerPool holds the suite's brokers, started once and shared between rows:
// two ActiveMQ brokers (persistent) and two RabbitMQ nodes. Rows use destination
// names of their own, so they do not meet.
type brokerPool struct {
	amq [2]*testbroker.ActiveMQ
	rmq [2]*testbroker.RabbitMQ
}

// startPool starts every broker of the pool in parallel; they stop when t ends.
// It returns nil if one did not start (t has failed then).
func startPool(t *testing.T) *brokerPool {
	p := &brokerPool{}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		rs := testbroker.StartRabbitMQs(t, testbroker.RabbitOptions{}, testbroker.RabbitOptions{})
		p.rmq[0], p.rmq[1] = rs[0], rs[1]
	}()
	go func() {
		defer wg.Done()
		bs := startBrokers(t, 2, true)
		p.amq[0], p.amq[1] = bs[0], bs[1]
	}()
	wg.Wait()
	if p.amq[1] == nil || p.rmq[1] == nil {
		return nil
	}
	return p
}

func (p *brokerPool) activemq(i int) *testbroker.ActiveMQ { return p.amq[i] }
func (p *brokerPool) rabbitmq(i int) *testbroker.RabbitMQ { return p.rmq[i] }

var combinations = []combination{
	{"ActiveMQ-to-ActiveMQ-STOMP", func(t *testing.T, p *brokerPool) (side, side) {
		return activemqSide{p.activemq(0)}, activemqSide{p.activemq(1)}
	}, nil},
	{"ActiveMQ-to-ActiveMQ-OpenWire", func(t *testing.T, p *brokerPool) (side, side) {
		return openwireSide{activemqSide{p.activemq(0)}}, openwireSide{activemqSide{p.activemq(1)}}
	}, nil},
	{"ActiveMQ-OpenWire-to-ActiveMQ-STOMP", func(t *testing.T, p *brokerPool) (side, side) {
		return openwireSide{activemqSide{p.activemq(0)}}, activemqSide{p.activemq(1)}
	}, nil},
	{"RabbitMQ-to-ActiveMQ-STOMP", func(t *testing.T, p *brokerPool) (side, side) {
		return rabbitSide{r: p.rabbitmq(0)}, activemqSide{p.activemq(1)}
	}, nil},
	{"ActiveMQ-to-RabbitMQ-STOMP", func(t *testing.T, p *brokerPool) (side, side) {
		return activemqSide{p.activemq(0)}, rabbitSide{r: p.rabbitmq(1), restarted: new(rabbitRestart)}
	}, nil},
	{"ActiveMQ-to-RabbitMQ-AMQP", func(t *testing.T, p *brokerPool) (side, side) {
		return activemqSide{p.activemq(0)}, rabbitSide{r: p.rabbitmq(1), amqp: true, restarted: new(rabbitRestart)}
	}, nil},
	{"RabbitMQ-AMQP-to-ActiveMQ", func(t *testing.T, p *brokerPool) (side, side) {
		return rabbitSide{r: p.rabbitmq(0), amqp: true}, activemqSide{p.activemq(1)}
	}, nil},
	{"RabbitMQ-to-RabbitMQ-AMQP", func(t *testing.T, p *brokerPool) (side, side) {
		return rabbitSide{r: p.rabbitmq(0), amqp: true}, rabbitSide{r: p.rabbitmq(1), amqp: true, restarted: new(rabbitRestart)}
	}, nil},
	{"ActiveMQ-OpenWire-to-RabbitMQ-STOMP", func(t *testing.T, p *brokerPool) (side, side) {
		return openwireSide{activemqSide{p.activemq(0)}}, rabbitSide{r: p.rabbitmq(1), restarted: new(rabbitRestart)}
	}, nil},
	{"ActiveMQ-OpenWire-to-RabbitMQ-AMQP", func(t *testing.T, p *brokerPool) (side, side) {
		return openwireSide{activemqSide{p.activemq(0)}}, rabbitSide{r: p.rabbitmq(1), amqp: true, restarted: new(rabbitRestart)}
	}, nil},
	{"RabbitMQ-to-ActiveMQ-OpenWire", func(t *testing.T, p *brokerPool) (side, side) {
		return rabbitSide{r: p.rabbitmq(0)}, openwireSide{activemqSide{p.activemq(1)}}
	}, nil},
	{"RabbitMQ-AMQP-to-ActiveMQ-OpenWire", func(t *testing.T, p *brokerPool) (side, side) {
		return rabbitSide{r: p.rabbitmq(0), amqp: true}, openwireSide{activemqSide{p.activemq(1)}}
	}, nil},
}

// scenario is one behaviour every combination must show.
type scenario struct {
	name string
	run  func(t *testing.T, local, remote side)
}

var scenarios = []scenario{
	{"forwards on demand and only then", scenarioOnDemandOnly},
	{"stops when the consumer leaves", scenarioConsumerLeaves},
	{"serves a consumer that existed before the bridge", scenarioConsumerBeforeBridge},
	{"topic subscribers with wildcards get each message once", scenarioTopicWildcards},
	{"headers round-trip", scenarioHeaders},
	{"duplex consumers on both sides consume each message once", scenarioDuplex},
	// Last: it restarts the remote broker.
	{"persistent messages survive a remote broker restart", scenarioRemoteRestart},
}

// conformancePools is how many broker pools the suite starts: rows run in
// parallel, each on a pool of its own (a row restarts its remote broker last),
// so this many rows at most run at once.
const conformancePools = 2

func TestConformance(t *testing.T) {
	t.Parallel()
	testbroker.Require(t)
	pools := make(chan *brokerPool, conformancePools)
	var wg sync.WaitGroup
	for range conformancePools {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if p := startPool(t); p != nil {
				pools <- p
			}
		}()
	}
	wg.Wait()
	if len(pools) < conformancePools {
		t.FailNow()
	}
	for _, c := range combinations {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			pool := <-pools
			defer func() { pools <- pool }()
			local, remote := c.pair(t, pool)
			for _, s := range scenarios {
				ok := t.Run(s.name, func(t *testing.T) {
					if why, ok := c.skip[s.name]; ok {
						t.Skip(why)
					}
					s.run(t, local, remote)
				})
				if !ok && s.name == scenarios[len(scenarios)-1].name {
					break
				}
			}
		})
	}
}

// conformanceBridge runs a bridge local → remote until the test ends and waits
// until it is up.
func conformanceBridge(t *testing.T, local, remote side) *running {
	t.Helper()
	cfg := bridge.Config{
		Local: local.Endpoint(t), Remote: remote.Endpoint(t),
		LocalID: local.ID(), RemoteID: remote.ID(),
		Demand: defaultDemand(),
		Log:    stomptest.Logger(t),
	}
	return runBridge(t, cfg)
}

// unique returns a destination name no other scenario of the run uses.
func unique(base string) string {
	return fmt.Sprintf("%s.%d", base, time.Now().UnixNano()%1e9)
}

func waitDepth(t *testing.T, s side, q string, want int64, timeout time.Duration) {
	t.Helper()
	stomptest.Eventually(t, timeout, func() error {
		if got := s.Depth(t, q); got != want {
			return fmt.Errorf("queue %s holds %d, want %d", q, got, want)
		}
		return nil
	})
}

// waitOr is stomptest.Eventually that adds what diag says to the failure.
func waitOr(t *testing.T, timeout time.Duration, cond func() error, diag func() string) {
	t.Helper()
	if err := poll(timeout, cond); err != nil {
		t.Fatalf("after %s: %v (%s)", timeout, err, diag())
	}
}

// poll calls cond until it returns nil or timeout has passed, and returns its
// last error.
func poll(timeout time.Duration, cond func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func scenarioOnDemandOnly(t *testing.T, local, remote side) {
	q := unique("conf.demand")
	b := conformanceBridge(t, local, remote)
	local.Send(t, local.Queue(q), 0, 50, true)
	advisories := b.Stats().Advisories.Load()
	// Nobody consumes on the remote: nothing moves.
	probe := remote.Subscribe(t, remote.Queue(q+".probe"))
	waitDemand(t, b, 1, 20*time.Second) // the probe's demand is in place: advisories flow
	if b.Stats().Advisories.Load() <= advisories {
		t.Fatal("no advisory seen")
	}
	probe.Close()
	waitDemand(t, b, 0, 20*time.Second)
	waitDepth(t, local, q, 50, 20*time.Second) // without demand, all 50 stay
	c := remote.Subscribe(t, remote.Queue(q))
	c.WaitDistinct(50, 30*time.Second)
	if c.Duplicates() != 0 {
		t.Errorf("%d duplicates", c.Duplicates())
	}
	waitDepth(t, local, q, 0, 20*time.Second)
}

func scenarioConsumerLeaves(t *testing.T, local, remote side) {
	q := unique("conf.leaves")
	b := conformanceBridge(t, local, remote)
	c := remote.Subscribe(t, remote.Queue(q))
	waitDemand(t, b, 1, 20*time.Second)
	local.Send(t, local.Queue(q), 0, 20, true)
	c.WaitDistinct(20, 30*time.Second)
	c.Close()
	waitDemand(t, b, 0, 20*time.Second)
	local.Send(t, local.Queue(q), 20, 30, true)
	waitDepth(t, local, q, 30, 20*time.Second)
}

func scenarioConsumerBeforeBridge(t *testing.T, local, remote side) {
	q := unique("conf.before")
	c := remote.Subscribe(t, remote.Queue(q))
	local.Send(t, local.Queue(q), 0, 40, true)
	conformanceBridge(t, local, remote)
	c.WaitDistinct(40, 30*time.Second)
	waitDepth(t, local, q, 0, 20*time.Second)
}

func scenarioTopicWildcards(t *testing.T, local, remote side) {
	base := unique("conf.topic")
	b := conformanceBridge(t, local, remote)
	exact := remote.Subscribe(t, remote.Topic(base+".x"))
	wild := remote.Subscribe(t, remote.Topic(base+".*"))
	waitDemand(t, b, 2, 20*time.Second)
	local.Send(t, local.Topic(base+".x"), 0, 100, false)
	exact.WaitDistinct(100, 30*time.Second)
	wild.WaitDistinct(100, 30*time.Second)
	for name, c := range map[string]consumer{"exact": exact, "wildcard": wild} {
		if c.Duplicates() != 0 || c.Count() != 100 {
			t.Errorf("%s subscriber: %d messages, %d duplicates; want 100, 0", name, c.Count(), c.Duplicates())
		}
	}
}

func scenarioHeaders(t *testing.T, local, remote side) {
	q := unique("conf.headers")
	b := conformanceBridge(t, local, remote)
	c := remote.Subscribe(t, remote.Queue(q))
	waitDemand(t, b, 1, 20*time.Second)
	hdrs := []string{"correlation-id", "corr-1", "type", "OrderPlaced", "x-app", "grün ✓", "priority", "7"}
	local.Send(t, local.Queue(q), 0, 1, true, hdrs...)
	c.WaitDistinct(1, 30*time.Second)
	for i := 0; i < len(hdrs); i += 2 {
		if got := c.FirstHeader(hdrs[i]); got != hdrs[i+1] {
			t.Errorf("header %s = %q, want %q", hdrs[i], got, hdrs[i+1])
		}
	}
	if got := c.FirstBody(); got != "message 0" {
		t.Errorf("body %q", got)
	}
}

func scenarioDuplex(t *testing.T, local, remote side) {
	q := unique("conf.duplex")
	ab := conformanceBridge(t, local, remote)
	ba := conformanceBridge(t, remote, local)
	cl := local.Subscribe(t, local.Queue(q))
	cr := remote.Subscribe(t, remote.Queue(q))
	waitDemand(t, ab, 1, 20*time.Second)
	waitDemand(t, ba, 1, 20*time.Second)
	local.Send(t, local.Queue(q), 0, 500, true)
	stomptest.Eventually(t, 60*time.Second, func() error {
		if n := cl.Distinct() + cr.Distinct(); n < 500 {
			return fmt.Errorf("consumed %d of 500 (%d here, %d there)", n, cl.Distinct(), cr.Distinct())
		}
		return nil
	})
	seen := map[int]int{}
	for _, c := range []consumer{cl, cr} {
		for _, s := range c.Seqs() {
			seen[s]++
		}
	}
	for s, n := range seen {
		if n != 1 {
			t.Errorf("message %d consumed %d times", s, n)
		}
	}
	waitDepth(t, local, q, 0, 20*time.Second)
	waitDepth(t, remote, q, 0, 20*time.Second)
}

func scenarioRemoteRestart(t *testing.T, local, remote side) {
	q := unique("conf.restart")
	b := conformanceBridge(t, local, remote)
	c := remote.Subscribe(t, remote.Queue(q))
	waitDemand(t, b, 1, 20*time.Second)
	local.Send(t, local.Queue(q), 0, 1000, true)
	// Where the messages are when a wait fails: still on the local broker, in
	// the bridge's window, forwarded to the remote and not consumed, or nowhere.
	where := func() string {
		st := b.Stats()
		_, _, confirmed := st.CommitBatch.Snapshot()
		return fmt.Sprintf("local queue holds %d, remote queue %d; the bridge forwarded %d (the remote confirmed %.0f), dead-lettered %d, has %d in flight, %d sessions, %d ended by an error",
			local.Depth(t, q), remote.Depth(t, q), st.Forwarded.Load(), confirmed, st.DeadLettered.Load(), st.InFlight.Load(),
			st.Sessions.Load(), st.SessionFailure.Load()) + diagnose(t, remote, q)
	}
	waitOr(t, 30*time.Second, func() error {
		if c.Distinct() < 200 {
			return fmt.Errorf("%d received before the restart, waiting for 200", c.Distinct())
		}
		return nil
	}, where)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := remote.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	got := map[int]bool{}
	for _, s := range c.Seqs() {
		got[s] = true
	}
	// A new consumer after the restart gets the rest: what the remote stored
	// before it died and what the bridge forwards once it is back.
	c2 := remote.Subscribe(t, remote.Queue(q))
	err := poll(90*time.Second, func() error {
		for _, s := range c2.Seqs() {
			got[s] = true
		}
		if len(got) < 1000 {
			return fmt.Errorf("%d of 1000 received", len(got))
		}
		return nil
	})
	if err != nil {
		if l, ok := remote.(restartLoser); ok {
			if lost := l.LostOnRestart(); lost != "" {
				t.Skipf("after 90s: %v (%s); %s: the broker's loss, so this run cannot judge the bridge", err, where(), lost)
			}
		}
		t.Fatalf("after 90s: %v (%s)", err, where())
	}
	t.Logf("duplicates after the restart: %d (bounded by the window)", c.Duplicates()+c2.Duplicates()+c.Distinct()+c2.Distinct()-1000)
	waitDepth(t, local, q, 0, 30*time.Second)
}

// restartLoser is a side that can tell whether its broker lost durable
// queues, and with them what they held, in its last Restart.
type restartLoser interface {
	LostOnRestart() string
}

// diagnoser is a side that can say more about a queue when a wait fails.
type diagnoser interface {
	Diagnose(t *testing.T, name string) string
}

func diagnose(t *testing.T, s side, name string) string {
	if d, ok := s.(diagnoser); ok {
		return "; " + d.Diagnose(t, name)
	}
	return ""
}

// activemqSide is an ActiveMQ broker bridged over STOMP.
type activemqSide struct{ b *testbroker.ActiveMQ }

func (s activemqSide) Send(t *testing.T, dest string, from, n int, persistent bool, headers ...string) {
	t.Helper()
	stomptest.SendN(t, s.b.StompURI(), dest, from, n, persistent, headers...)
}
func (s activemqSide) Subscribe(t *testing.T, dest string) consumer {
	t.Helper()
	return stompConsumer{stomptest.Subscribe(t, s.b.StompURI(), dest)}
}
func (s activemqSide) Endpoint(t *testing.T) transport.Endpoint {
	return stomptest.URI(t, s.b.StompURI()+"?initialReconnectDelay=100&maxReconnectDelay=1000")
}
func (s activemqSide) ID() string               { return "" }
func (s activemqSide) Queue(name string) string { return "/queue/" + name }
func (s activemqSide) Topic(name string) string { return "/topic/" + name }
func (s activemqSide) Depth(t *testing.T, name string) int64 {
	return queueSize(t, s.b, name)
}
func (s activemqSide) Restart(ctx context.Context) error { return s.b.Restart(ctx) }

// openwireSide is an ActiveMQ broker bridged over OpenWire (test clients
// speak STOMP: ActiveMQ converts between its protocols).
type openwireSide struct{ activemqSide }

func (s openwireSide) Endpoint(t *testing.T) transport.Endpoint {
	u, err := openwire.ParseURI(s.b.OpenWireURI() + "?initialReconnectDelay=100&maxReconnectDelay=1000")
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// rabbitSide is a RabbitMQ broker bridged over STOMP, or over AMQP 1.0.
type rabbitSide struct {
	r    *testbroker.RabbitMQ
	amqp bool
	// restarted is what the last Restart saw (shared by the row's copies).
	restarted *rabbitRestart
}

// rabbitRestart is how many durable classic queues a node had before a
// SIGKILL and the recovery line of its log after the restart.
type rabbitRestart struct {
	durable   int
	recovered int // -1: no recovery line found
	line      string
}

// Send and Subscribe speak the protocol the bridge speaks to this broker.
func (s rabbitSide) Send(t *testing.T, dest string, from, n int, persistent bool, headers ...string) {
	t.Helper()
	if s.amqp {
		amqptest.SendN(t, s.r.AMQPURI(), dest, from, n, persistent, headers...)
		return
	}
	stomptest.SendN(t, s.r.StompURI(), dest, from, n, persistent, headers...)
}
func (s rabbitSide) Subscribe(t *testing.T, dest string) consumer {
	t.Helper()
	if s.amqp {
		return amqpConsumer{amqptest.Subscribe(t, s.r.AMQPURI(), s.r.ManagementURL(), dest)}
	}
	return stompConsumer{stomptest.Subscribe(t, s.r.StompURI(), dest)}
}
func (s rabbitSide) Endpoint(t *testing.T) transport.Endpoint {
	opts := "?initialReconnectDelay=100&maxReconnectDelay=1000&management=" + s.r.ManagementURL()
	if s.amqp {
		u, err := amqp.ParseURI(s.r.AMQPURI() + opts + "&stompPort=" + strconv.Itoa(s.r.StompPort()))
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	return stomptest.URI(t, s.r.StompURI()+opts)
}
func (s rabbitSide) ID() string               { return "" }
func (s rabbitSide) Queue(name string) string { return "/queue/" + name }
func (s rabbitSide) Topic(name string) string { return "/topic/" + name }
func (s rabbitSide) Depth(t *testing.T, name string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", s.r.ManagementURL()+"/api/queues/%2F/"+url.PathEscape(name), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth("guest", "guest")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("queue %s depth: %v", name, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return 0
	}
	var q struct {
		Messages int64 `json:"messages"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&q); err != nil {
		t.Fatalf("queue %s depth: %v", name, err)
	}
	return q.Messages
}

// Restart kills and restarts the node, noting how many durable classic
// queues it had and how many its log says it recovered. RabbitMQ 3.10 has come
// back from a SIGKILL without a durable queue it had (see rabbitDepth).
func (s rabbitSide) Restart(ctx context.Context) error {
	rec := rabbitRestart{durable: -1, recovered: -1}
	if out, err := s.r.Ctl(ctx, "list_queues", "-q", "--no-table-headers", "name", "durable", "type"); err == nil {
		rec.durable = 0
		for _, line := range strings.Split(out, "\n") {
			if f := strings.Fields(line); len(f) == 3 && f[1] == "true" && f[2] == "classic" {
				rec.durable++
			}
		}
	}
	mark := s.r.LogSize()
	if err := s.r.Restart(ctx); err != nil {
		return err
	}
	// The node writes its log behind: wait a little for this boot's line.
	// Without one, nothing is known lost.
	_ = poll(10*time.Second, func() error {
		line, n, ok := testbroker.ClassicRecovery(s.r.LogSince(mark))
		if !ok || n < 0 {
			return errors.New("no recovery line yet")
		}
		rec.recovered, rec.line = n, line
		return nil
	})
	if s.restarted != nil {
		*s.restarted = rec
	}
	return nil
}

// LostOnRestart says how many durable queues the last Restart lost, "" if
// none is known lost.
func (s rabbitSide) LostOnRestart() string {
	if s.restarted == nil || s.restarted.durable < 0 || s.restarted.recovered < 0 || s.restarted.recovered >= s.restarted.durable {
		return ""
	}
	return fmt.Sprintf("RabbitMQ had %d durable classic queues before the SIGKILL and recovered %d (its log: %s)",
		s.restarted.durable, s.restarted.recovered, s.restarted.line)
}

// Diagnose says whether the node knows queue name (Depth reads a missing one
// as empty) and what its log says it recovered at its last start.
func (s rabbitSide) Diagnose(t *testing.T, name string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	known := "the node knows the queue"
	if _, err := s.r.QueueStats(ctx, name); err != nil {
		known = err.Error()
	}
	recovered, _, ok := testbroker.ClassicRecovery(s.r.LogTail(400))
	if !ok {
		recovered = "no recovery line in the log tail"
	}
	return known + "; " + recovered
}
