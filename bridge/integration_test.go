package bridge_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/brokernet/brokernet/bridge"
	"github.com/brokernet/brokernet/demand"
	"github.com/brokernet/brokernet/destination"
	"github.com/brokernet/brokernet/internal/testkit/stomptest"
	"github.com/brokernet/brokernet/internal/testkit/testbroker"
)

// These tests run against real ActiveMQ brokers that testbroker starts on free ports.
// Every test of the external test package starts brokers of its own, so they
// all call t.Parallel: two run at once by default (go test's -parallel is
// GOMAXPROCS), which halves the package's time on a 2-core machine, where
// most of a test is waiting on brokers.

func TestMain(m *testing.M) { testbroker.Main(m) }

// startBrokers starts n brokers in parallel.
func startBrokers(t *testing.T, n int, persistent bool) []*testbroker.ActiveMQ {
	t.Helper()
	testbroker.Require(t) // skips under -short: t.Skip cannot run in the goroutines below
	out := make([]*testbroker.ActiveMQ, n)
	var wg sync.WaitGroup
	for i := range out {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprintf("%c", 'A'+i)
			out[i] = testbroker.StartActiveMQ(t, testbroker.Options{Name: name, ID: name + "-" + t.Name(), Persistent: persistent})
		}()
	}
	wg.Wait()
	for _, b := range out {
		if b == nil {
			t.FailNow()
		}
	}
	return out
}

type running struct {
	*bridge.Bridge
	stop func() error
}

func defaultDemand() demand.Options {
	return demand.Options{Conduit: true, ConsumerTTL: 1, MessageTTL: 1, PriorityBase: -5, Prefetch: 1000}
}

// startBridge runs a bridge from local to remote until the test ends, and waits
// until it is up.
func startBridge(t *testing.T, local, remote string, mod func(*bridge.Config)) *running {
	t.Helper()
	cfg := bridge.Config{
		Local:  stomptest.URI(t, local),
		Remote: stomptest.URI(t, remote),
		Demand: defaultDemand(),
		Log:    stomptest.Logger(t),
	}
	if mod != nil {
		mod(&cfg)
	}
	return runBridge(t, cfg)
}

// runBridge runs a bridge with cfg until the test ends, and waits until it is up.
func runBridge(t *testing.T, cfg bridge.Config) *running {
	t.Helper()
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

// waitDemand waits until the bridge holds exactly n demand subscriptions.
func waitDemand(t *testing.T, b *running, n int, timeout time.Duration) {
	t.Helper()
	stomptest.Eventually(t, timeout, func() error {
		if got := b.Stats().DemandSubs.Load(); got != int64(n) {
			return fmt.Errorf("bridge has %d demand subscriptions, want %d", got, n)
		}
		return nil
	})
}

func queueSize(t *testing.T, b *testbroker.ActiveMQ, q string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := b.QueueStats(ctx, q)
	if errors.Is(err, testbroker.ErrNoSuchDestination) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return st.Size
}

func TestNoConsumerMessagesStayLocal(t *testing.T) {
	t.Parallel()
	bs := startBrokers(t, 2, false)
	a, b := bs[0], bs[1]
	br := startBridge(t, a.StompURI(), b.StompURI(), nil)

	stomptest.SendN(t, a.StompURI(), "/queue/stay", 0, 100, false)
	if got := queueSize(t, a, "stay"); got != 100 {
		t.Fatalf("queue on A holds %d messages, want 100", got)
	}
	if n := br.Stats().DemandSubs.Load(); n != 0 {
		t.Fatalf("bridge opened %d demand subscriptions with no consumer anywhere", n)
	}
	c := stomptest.Subscribe(t, a.StompURI(), "/queue/stay")
	c.WaitDistinct(100, 20*time.Second)
	if f := br.Stats().Forwarded.Load(); f != 0 {
		t.Fatalf("bridge forwarded %d messages without demand", f)
	}
	if got := queueSize(t, b, "stay"); got != 0 {
		t.Fatalf("queue on B holds %d messages, want none", got)
	}
}

func TestForwardsInOrderExactlyOnce(t *testing.T) {
	t.Parallel()
	bs := startBrokers(t, 2, false)
	a, b := bs[0], bs[1]
	br := startBridge(t, a.StompURI(), b.StompURI(), nil)

	c := stomptest.Subscribe(t, b.StompURI(), "/queue/orders")
	waitDemand(t, br, 1, 10*time.Second)
	const n = 5000
	stomptest.SendN(t, a.StompURI(), "/queue/orders", 0, n, false)
	c.WaitDistinct(n, 60*time.Second)
	stomptest.Eventually(t, 10*time.Second, func() error {
		if f := br.Stats().Forwarded.Load(); f != n {
			return fmt.Errorf("bridge confirmed %d of %d", f, n)
		}
		return nil
	})
	if d := c.Duplicates(); d != 0 {
		t.Fatalf("%d duplicates", d)
	}
	for i, s := range c.Seqs() {
		if s != i {
			t.Fatalf("message %d has seq %d: order not kept", i, s)
		}
	}
	if got := queueSize(t, a, "orders"); got != 0 {
		t.Fatalf("%d messages left on A after all were forwarded and acknowledged", got)
	}
}

func TestConsumerLeavesForwardingStops(t *testing.T) {
	t.Parallel()
	bs := startBrokers(t, 2, false)
	a, b := bs[0], bs[1]
	br := startBridge(t, a.StompURI(), b.StompURI(), nil)

	c := stomptest.Subscribe(t, b.StompURI(), "/queue/leave")
	waitDemand(t, br, 1, 10*time.Second)
	stomptest.SendN(t, a.StompURI(), "/queue/leave", 0, 200, false)
	c.WaitDistinct(200, 30*time.Second)

	c.Close()
	start := time.Now()
	waitDemand(t, br, 0, time.Second)
	t.Logf("demand removed %s after the consumer left", time.Since(start).Round(time.Millisecond))

	stomptest.SendN(t, a.StompURI(), "/queue/leave", 200, 100, false)
	local := stomptest.Subscribe(t, a.StompURI(), "/queue/leave")
	local.WaitDistinct(100, 20*time.Second)
	if m := local.Missing(200, 100); len(m) != 0 {
		t.Fatalf("messages sent after the consumer left are missing on A: %v", m)
	}
	if got := queueSize(t, b, "leave"); got != 0 {
		t.Fatalf("%d messages reached B after its consumer left", got)
	}
}

func TestConsumerBeforeBridgeIsServed(t *testing.T) {
	t.Parallel()
	bs := startBrokers(t, 2, false)
	a, b := bs[0], bs[1]
	c := stomptest.Subscribe(t, b.StompURI(), "/queue/early")
	br := startBridge(t, a.StompURI(), b.StompURI(), nil)
	waitDemand(t, br, 1, 10*time.Second)
	stomptest.SendN(t, a.StompURI(), "/queue/early", 0, 300, true)
	c.WaitDistinct(300, 30*time.Second)
}

func TestDuplexNoPingPong(t *testing.T) {
	t.Parallel()
	bs := startBrokers(t, 2, false)
	a, b := bs[0], bs[1]
	ab := startBridge(t, a.StompURI(), b.StompURI(), nil)
	ba := startBridge(t, b.StompURI(), a.StompURI(), nil)

	ca := stomptest.Subscribe(t, a.StompURI(), "/queue/duplex")
	cb := stomptest.Subscribe(t, b.StompURI(), "/queue/duplex")
	waitDemand(t, ab, 1, 10*time.Second)
	waitDemand(t, ba, 1, 10*time.Second)

	const n = 1000
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); stomptest.SendN(t, a.StompURI(), "/queue/duplex", 0, n, false) }()
	go func() { defer wg.Done(); stomptest.SendN(t, b.StompURI(), "/queue/duplex", n, n, false) }()
	wg.Wait()

	stomptest.Eventually(t, 30*time.Second, func() error {
		seen := map[int]int{}
		for _, c := range []*stomptest.Consumer{ca, cb} {
			for _, s := range c.Seqs() {
				seen[s]++
			}
		}
		if len(seen) != 2*n {
			return fmt.Errorf("%d of %d distinct messages received", len(seen), 2*n)
		}
		for s, k := range seen {
			if k != 1 {
				return fmt.Errorf("message %d received %d times", s, k)
			}
		}
		return nil
	})
	// Quiescent: both queues empty; a message bouncing between the brokers would
	// show up as a duplicate or as a queue that never empties.
	stomptest.Eventually(t, 10*time.Second, func() error {
		if sa, sb := queueSize(t, a, "duplex"), queueSize(t, b, "duplex"); sa+sb != 0 {
			return fmt.Errorf("queues still hold %d on A and %d on B", sa, sb)
		}
		return nil
	})
	if got := ca.Count() + cb.Count(); got != 2*n {
		t.Fatalf("%d deliveries for %d messages", got, 2*n)
	}
	t.Logf("A consumed %d, B consumed %d; A->B forwarded %d, B->A forwarded %d",
		ca.Count(), cb.Count(), ab.Stats().Forwarded.Load(), ba.Stats().Forwarded.Load())
}

func TestTopicSubscriberGetsEachMessageOnce(t *testing.T) {
	t.Parallel()
	bs := startBrokers(t, 2, false)
	a, b := bs[0], bs[1]
	br := startBridge(t, a.StompURI(), b.StompURI(), nil)
	c1 := stomptest.Subscribe(t, b.StompURI(), "/topic/prices")
	c2 := stomptest.Subscribe(t, b.StompURI(), "/topic/prices")
	// Conduit: two subscribers on B share one demand subscription on A.
	waitDemand(t, br, 1, 10*time.Second)
	const n = 1000
	stomptest.SendN(t, a.StompURI(), "/topic/prices", 0, n, false)
	c1.WaitDistinct(n, 30*time.Second)
	c2.WaitDistinct(n, 30*time.Second)
	stomptest.Eventually(t, 10*time.Second, func() error {
		if f := br.Stats().Forwarded.Load(); f != n {
			return fmt.Errorf("bridge confirmed %d of %d", f, n)
		}
		return nil
	})
	if d := c1.Duplicates() + c2.Duplicates(); d != 0 {
		t.Fatalf("%d duplicate deliveries", d)
	}
}

func TestHeadersArriveUnchanged(t *testing.T) {
	t.Parallel()
	bs := startBrokers(t, 2, false)
	a, b := bs[0], bs[1]
	br := startBridge(t, a.StompURI(), b.StompURI(), nil)
	c := stomptest.Subscribe(t, b.StompURI(), "/queue/hdr")
	waitDemand(t, br, 1, 10*time.Second)

	expires := fmt.Sprint(time.Now().Add(time.Hour).UnixMilli())
	want := map[string]string{
		"persistent":     "true",
		"priority":       "7",
		"content-type":   "application/json",
		"correlation-id": "corr-1",
		"reply-to":       "/queue/replies",
		"type":           "OrderPlaced",
		"expires":        expires,
		"x-app":          "value:with:colons",
		"tenant":         "t1",
	}
	p := stomptest.Dial(t, a.StompURI())
	hdrs := []string{}
	for k, v := range want {
		if k != "persistent" {
			hdrs = append(hdrs, k, v)
		}
	}
	stomptest.SendOn(t, p, "/queue/hdr", 0, 1, true, hdrs...)
	c.WaitDistinct(1, 20*time.Second)
	got := c.Frames()[0]
	for k, v := range want {
		if g := got.Header.Get(k); g != v {
			t.Errorf("header %s = %q, want %q", k, g, v)
		}
	}
	if string(got.Body) != "message 0" {
		t.Errorf("body = %q", got.Body)
	}
	if h := got.Header.Get("BrokernetHops"); h != "1" {
		t.Errorf("BrokernetHops = %q, want 1", h)
	}
}

func TestIncludeExclude(t *testing.T) {
	t.Parallel()
	bs := startBrokers(t, 2, false)
	a, b := bs[0], bs[1]
	excl, err := destination.ParsePattern("queue://secret.>")
	if err != nil {
		t.Fatal(err)
	}
	br := startBridge(t, a.StompURI(), b.StompURI(), func(c *bridge.Config) {
		c.Demand.Filter.Exclude = []destination.Pattern{excl}
	})
	pub := stomptest.Subscribe(t, b.StompURI(), "/queue/public.orders")
	stomptest.Subscribe(t, b.StompURI(), "/queue/secret.orders")
	waitDemand(t, br, 1, 10*time.Second)
	stomptest.SendN(t, a.StompURI(), "/queue/secret.orders", 0, 50, false)
	stomptest.SendN(t, a.StompURI(), "/queue/public.orders", 0, 50, false)
	pub.WaitDistinct(50, 20*time.Second)
	if got := queueSize(t, a, "secret.orders"); got != 50 {
		t.Fatalf("excluded queue on A holds %d, want all 50", got)
	}
	// Counted once A confirmed the acknowledgements, which may follow B's consumer.
	stomptest.Eventually(t, 10*time.Second, func() error {
		if f := br.Stats().Forwarded.Load(); f != 50 {
			return fmt.Errorf("bridge forwarded %d, want only the 50 public ones", f)
		}
		return nil
	})
}

func TestLoopbackRefused(t *testing.T) {
	t.Parallel()
	a := startBrokers(t, 1, false)[0]
	b, err := bridge.New(bridge.Config{
		Local: stomptest.URI(t, a.StompURI()), Remote: stomptest.URI(t, a.StompURI()),
		Demand: defaultDemand(), Log: stomptest.Logger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := b.Run(ctx); !errors.Is(err, bridge.ErrLoopback) {
		t.Fatalf("Run = %v, want ErrLoopback", err)
	}
}

func TestRemoteRestartLosesNothing(t *testing.T) {
	t.Parallel()
	bs := startBrokers(t, 2, true)
	a, b := bs[0], bs[1]
	br := startBridge(t, a.StompURI(), b.StompURI()+"?initialReconnectDelay=200&maxReconnectDelay=1000", nil)
	c1 := stomptest.SubscribeConfirmed(t, b.StompURI(), "/queue/restart")
	waitDemand(t, br, 1, 10*time.Second)

	const n = 3000
	sent := make(chan error, 1)
	p := stomptest.Dial(t, a.StompURI())
	go func() {
		sent <- stomptest.Send(context.Background(), p, "/queue/restart", 0, n, true)
	}()
	stomptest.Eventually(t, 30*time.Second, func() error {
		if c1.Distinct() < 300 {
			return fmt.Errorf("only %d received before restart", c1.Distinct())
		}
		return nil
	})
	if err := b.Kill(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := b.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	c2 := stomptest.Subscribe(t, b.StompURI(), "/queue/restart")
	stomptest.Eventually(t, 60*time.Second, func() error {
		if d, _, _ := tally(n, c1, c2); d != n {
			return fmt.Errorf("%d of %d distinct messages received across the restart (bridge sessions %d)",
				d, n, br.Stats().Sessions.Load())
		}
		return nil
	})
	// B also delivers again what the consumer held in doubt when it died
	// (received, its ACK not confirmed): those copies are not the bridge's.
	_, dups, _ := tally(n, c1, c2)
	redelivered := c1.Redelivered(c2.Seqs())
	t.Logf("%d duplicates across the restart: %d the bridge's (window %d), %d redelivered from the consumer's doubt",
		dups, dups-redelivered, bridge.DefaultWindow, redelivered)
	if dups-redelivered > bridge.DefaultWindow {
		t.Fatalf("the bridge duplicated %d messages, more than the window of %d", dups-redelivered, bridge.DefaultWindow)
	}
	if s := br.Stats().Sessions.Load(); s < 2 {
		t.Fatalf("bridge had %d sessions, want a reconnect", s)
	}
}

// TestMalformedAdvisoryIsSkipped: garbage published on the remote broker's
// advisory topic is counted and skipped; the bridge keeps forwarding.
func TestMalformedAdvisoryIsSkipped(t *testing.T) {
	t.Parallel()
	bs := startBrokers(t, 2, false)
	a, b := bs[0], bs[1]
	br := startBridge(t, a.StompURI(), b.StompURI(), nil)
	// "Up" can precede the broker's registration of the advisory
	// subscription, and a topic message sent before it reaches nobody: send
	// one malformed advisory per attempt until three were counted.
	stomptest.Eventually(t, 20*time.Second, func() error {
		if n := br.Stats().BadAdvisories.Load(); n < 3 {
			stomptest.SendN(t, b.StompURI(), "/topic/ActiveMQ.Advisory.Consumer.Queue.bogus", 0, 1, false)
			return fmt.Errorf("%d malformed advisories counted, want 3", n)
		}
		return nil
	})
	c := stomptest.Subscribe(t, b.StompURI(), "/queue/after")
	waitDemand(t, br, 1, 10*time.Second)
	stomptest.SendN(t, a.StompURI(), "/queue/after", 0, 10, false)
	c.WaitDistinct(10, 20*time.Second)
	if s := br.Stats().Sessions.Load(); s != 1 {
		t.Fatalf("bridge reconnected (%d sessions) after malformed advisories", s)
	}
}
