package bridge_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/brokernet/brokernet/bridge"
	"github.com/brokernet/brokernet/internal/stomptest"
	"github.com/brokernet/brokernet/internal/testbroker"
	"github.com/brokernet/brokernet/transport"
	"github.com/brokernet/brokernet/transport/openwire"
)

// The conformance suite: one table of scenarios that every combination of
// brokers and bridge protocols runs, so that every transport and broker flavour
// is held to the same behaviour (Watermill's pubsub/tests, in spirit). Test
// producers and consumers speak STOMP to every broker; the protocol under test
// is the one the bridge uses.

// side is one broker of a pair as the suite sees it.
type side interface {
	// ClientURI is a STOMP URI for test producers and consumers.
	ClientURI() string
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

// combination is one row of the suite's table.
type combination struct {
	name string
	// pair starts the two brokers (local, remote) for the test.
	pair func(t *testing.T) (local, remote side)
}

var combinations = []combination{
	{"ActiveMQ-to-ActiveMQ-STOMP", func(t *testing.T) (side, side) {
		bs := startBrokers(t, 2, true)
		return activemqSide{bs[0]}, activemqSide{bs[1]}
	}},
	{"ActiveMQ-to-ActiveMQ-OpenWire", func(t *testing.T) (side, side) {
		bs := startBrokers(t, 2, true)
		return openwireSide{activemqSide{bs[0]}}, openwireSide{activemqSide{bs[1]}}
	}},
	{"ActiveMQ-OpenWire-to-ActiveMQ-STOMP", func(t *testing.T) (side, side) {
		bs := startBrokers(t, 2, true)
		return openwireSide{activemqSide{bs[0]}}, activemqSide{bs[1]}
	}},
	{"RabbitMQ-to-ActiveMQ-STOMP", func(t *testing.T) (side, side) {
		var r *testbroker.RabbitMQ
		var a *testbroker.ActiveMQ
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); r = testbroker.StartRabbitMQ(t, testbroker.RabbitOptions{}) }()
		go func() { defer wg.Done(); a = startBrokers(t, 1, true)[0] }()
		wg.Wait()
		if r == nil || a == nil {
			t.FailNow()
		}
		return rabbitSide{r}, activemqSide{a}
	}},
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

func TestConformance(t *testing.T) {
	if testing.Short() {
		t.Skip("needs brokers")
	}
	for _, c := range combinations {
		t.Run(c.name, func(t *testing.T) {
			local, remote := c.pair(t)
			for _, s := range scenarios {
				ok := t.Run(s.name, func(t *testing.T) { s.run(t, local, remote) })
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
	b, err := bridge.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	var once sync.Once
	var runErr error
	stop := func() error {
		once.Do(func() {
			cancel()
			select {
			case runErr = <-done:
			case <-time.After(40 * time.Second):
				runErr = errors.New("bridge did not stop")
			}
		})
		return runErr
	}
	t.Cleanup(func() { stop() })
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	if err := b.WaitUp(wctx); err != nil {
		t.Fatalf("bridge never came up: %v", err)
	}
	return &running{Bridge: b, stop: stop}
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

func scenarioOnDemandOnly(t *testing.T, local, remote side) {
	q := unique("conf.demand")
	b := conformanceBridge(t, local, remote)
	stomptest.SendN(t, local.ClientURI(), local.Queue(q), 0, 50, true)
	advisories := b.Stats().Advisories.Load()
	// Nobody consumes on the remote: nothing moves.
	probe := stomptest.Subscribe(t, remote.ClientURI(), remote.Queue(q+".probe"))
	waitDemand(t, b, 1, 20*time.Second) // the probe's demand is in place: advisories flow
	if b.Stats().Advisories.Load() <= advisories {
		t.Fatal("no advisory seen")
	}
	probe.Close()
	waitDemand(t, b, 0, 20*time.Second)
	waitDepth(t, local, q, 50, 20*time.Second) // without demand, all 50 stay
	c := stomptest.Subscribe(t, remote.ClientURI(), remote.Queue(q))
	c.WaitDistinct(50, 30*time.Second)
	if c.Duplicates() != 0 {
		t.Errorf("%d duplicates", c.Duplicates())
	}
	waitDepth(t, local, q, 0, 20*time.Second)
}

func scenarioConsumerLeaves(t *testing.T, local, remote side) {
	q := unique("conf.leaves")
	b := conformanceBridge(t, local, remote)
	c := stomptest.Subscribe(t, remote.ClientURI(), remote.Queue(q))
	waitDemand(t, b, 1, 20*time.Second)
	stomptest.SendN(t, local.ClientURI(), local.Queue(q), 0, 20, true)
	c.WaitDistinct(20, 30*time.Second)
	c.Close()
	waitDemand(t, b, 0, 20*time.Second)
	stomptest.SendN(t, local.ClientURI(), local.Queue(q), 20, 30, true)
	waitDepth(t, local, q, 30, 20*time.Second)
}

func scenarioConsumerBeforeBridge(t *testing.T, local, remote side) {
	q := unique("conf.before")
	c := stomptest.Subscribe(t, remote.ClientURI(), remote.Queue(q))
	stomptest.SendN(t, local.ClientURI(), local.Queue(q), 0, 40, true)
	conformanceBridge(t, local, remote)
	c.WaitDistinct(40, 30*time.Second)
	waitDepth(t, local, q, 0, 20*time.Second)
}

func scenarioTopicWildcards(t *testing.T, local, remote side) {
	base := unique("conf.topic")
	b := conformanceBridge(t, local, remote)
	exact := stomptest.Subscribe(t, remote.ClientURI(), remote.Topic(base+".x"))
	wild := stomptest.Subscribe(t, remote.ClientURI(), remote.Topic(base+".*"))
	waitDemand(t, b, 2, 20*time.Second)
	stomptest.SendN(t, local.ClientURI(), local.Topic(base+".x"), 0, 100, false)
	exact.WaitDistinct(100, 30*time.Second)
	wild.WaitDistinct(100, 30*time.Second)
	for name, c := range map[string]*stomptest.Consumer{"exact": exact, "wildcard": wild} {
		if c.Duplicates() != 0 || c.Count() != 100 {
			t.Errorf("%s subscriber: %d messages, %d duplicates; want 100, 0", name, c.Count(), c.Duplicates())
		}
	}
}

func scenarioHeaders(t *testing.T, local, remote side) {
	q := unique("conf.headers")
	b := conformanceBridge(t, local, remote)
	c := stomptest.Subscribe(t, remote.ClientURI(), remote.Queue(q))
	waitDemand(t, b, 1, 20*time.Second)
	hdrs := []string{"correlation-id", "corr-1", "type", "OrderPlaced", "x-app", "grün ✓", "priority", "7"}
	stomptest.SendN(t, local.ClientURI(), local.Queue(q), 0, 1, true, hdrs...)
	c.WaitDistinct(1, 30*time.Second)
	f := c.Frames()[0]
	for i := 0; i < len(hdrs); i += 2 {
		if got := f.Header.Get(hdrs[i]); got != hdrs[i+1] {
			t.Errorf("header %s = %q, want %q", hdrs[i], got, hdrs[i+1])
		}
	}
	if got := string(f.Body); got != "message 0" {
		t.Errorf("body %q", got)
	}
}

func scenarioDuplex(t *testing.T, local, remote side) {
	q := unique("conf.duplex")
	ab := conformanceBridge(t, local, remote)
	ba := conformanceBridge(t, remote, local)
	cl := stomptest.Subscribe(t, local.ClientURI(), local.Queue(q))
	cr := stomptest.Subscribe(t, remote.ClientURI(), remote.Queue(q))
	waitDemand(t, ab, 1, 20*time.Second)
	waitDemand(t, ba, 1, 20*time.Second)
	stomptest.SendN(t, local.ClientURI(), local.Queue(q), 0, 500, true)
	stomptest.Eventually(t, 60*time.Second, func() error {
		if n := cl.Distinct() + cr.Distinct(); n < 500 {
			return fmt.Errorf("consumed %d of 500 (%d here, %d there)", n, cl.Distinct(), cr.Distinct())
		}
		return nil
	})
	seen := map[int]int{}
	for _, c := range []*stomptest.Consumer{cl, cr} {
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
	c := stomptest.Subscribe(t, remote.ClientURI(), remote.Queue(q))
	waitDemand(t, b, 1, 20*time.Second)
	stomptest.SendN(t, local.ClientURI(), local.Queue(q), 0, 1000, true)
	stomptest.Eventually(t, 30*time.Second, func() error {
		if c.Distinct() < 200 {
			return fmt.Errorf("%d received before the restart, waiting for 200", c.Distinct())
		}
		return nil
	})
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
	c2 := stomptest.Subscribe(t, remote.ClientURI(), remote.Queue(q))
	stomptest.Eventually(t, 90*time.Second, func() error {
		for _, s := range c2.Seqs() {
			got[s] = true
		}
		if len(got) < 1000 {
			return fmt.Errorf("%d of 1000 received", len(got))
		}
		return nil
	})
	t.Logf("duplicates after the restart: %d (bounded by the window)", c.Duplicates()+c2.Duplicates()+c.Distinct()+c2.Distinct()-1000)
	waitDepth(t, local, q, 0, 30*time.Second)
}

// activemqSide is an ActiveMQ broker bridged over STOMP.
type activemqSide struct{ b *testbroker.ActiveMQ }

func (s activemqSide) ClientURI() string { return s.b.StompURI() }
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
// still speak STOMP).
type openwireSide struct{ activemqSide }

func (s openwireSide) Endpoint(t *testing.T) transport.Endpoint {
	u, err := openwire.ParseURI(s.b.OpenWireURI() + "?initialReconnectDelay=100&maxReconnectDelay=1000")
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// rabbitSide is a RabbitMQ broker bridged over STOMP.
type rabbitSide struct{ r *testbroker.RabbitMQ }

func (s rabbitSide) ClientURI() string { return s.r.StompURI() }
func (s rabbitSide) Endpoint(t *testing.T) transport.Endpoint {
	return stomptest.URI(t, s.r.StompURI()+"?initialReconnectDelay=100&maxReconnectDelay=1000&management="+s.r.ManagementURL())
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
func (s rabbitSide) Restart(ctx context.Context) error { return s.r.Restart(ctx) }
