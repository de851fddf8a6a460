package bridge_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-stomp/stomp/v3/frame"

	"github.com/brokernet/brokernet/advisory"
	"github.com/brokernet/brokernet/bridge"
	"github.com/brokernet/brokernet/demand"
	"github.com/brokernet/brokernet/destination"
	"github.com/brokernet/brokernet/internal/testkit/stomptest"
	"github.com/brokernet/brokernet/internal/testkit/testbroker"
)

// These tests cover issue 8, defects 1 and 2: demand subscriptions that come
// and go must never cost a topic subscriber, durable or not, a message.

// settled waits until the bridge applied an advisory after before and has no
// subscription awaiting the local broker's confirmation.
func settled(t *testing.T, br *running, before int64) {
	t.Helper()
	stomptest.Eventually(t, 20*time.Second, func() error {
		st := br.Stats()
		if st.Advisories.Load() <= before || st.PendingSubs.Load() != 0 {
			return fmt.Errorf("%d advisories (was %d), %d subscriptions pending", st.Advisories.Load(), before, st.PendingSubs.Load())
		}
		return nil
	})
}

// TestTopicSelectorChurnLosesNothing: a subscriber on B selecting k IN
// ('a','b') receives a fast topic stream published on A while a second
// subscriber selecting k IN ('b','c') joins and leaves several times. The
// first gets every message it selects, once: its demand subscription is never
// replaced (a replaced topic subscription loses what the broker held for it),
// and the messages both select are forwarded once.
func TestTopicSelectorChurnLosesNothing(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("needs brokers")
	}
	bs := startBrokers(t, 2, false)
	a, b := bs[0], bs[1]
	ab := startBridge(t, a.StompURI(), b.StompURI(), nil)
	first := stomptest.Subscribe(t, b.StompURI(), "/topic/stream", "selector", "k IN ('a','b')")
	waitDemand(t, ab, 1, 10*time.Second)

	const chunk, chunks = 500, 60 // 30,000 messages, k cycling a, b, c by chunk
	keys := []string{"a", "b", "c"}
	want := 0
	for i := range chunks {
		if keys[i%3] != "c" {
			want += chunk
		}
	}
	pub := stomptest.Dial(t, a.StompURI())
	sent := make(chan error, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var published sync.WaitGroup
	published.Add(1)
	var pubDone atomic.Bool
	go func() {
		defer published.Done()
		defer pubDone.Store(true)
		wanted := 0 // of the first subscriber's messages, in the chunks sent
		for i := range chunks {
			// At most ~8 chunks ahead of the first subscriber, so that the
			// stream still flows while the second one comes and goes.
			for wanted-first.Distinct() > 8*chunk && ctx.Err() == nil {
				time.Sleep(5 * time.Millisecond)
			}
			if err := stomptest.Send(ctx, pub, "/topic/stream", i*chunk, chunk, false, "k", keys[i%3]); err != nil {
				sent <- err
				return
			}
			if keys[i%3] != "c" {
				wanted += chunk
			}
		}
		sent <- nil
	}()
	// The second subscriber comes and goes while the stream flows: each time
	// once the first has a further sixth of its messages.
	secondGot := 0
	for k := 1; k <= 4; k++ {
		stomptest.Eventually(t, 60*time.Second, func() error {
			if got := first.Distinct(); got < want*k/6 {
				return fmt.Errorf("first subscriber has %d messages, waiting for %d", got, want*k/6)
			}
			return nil
		})
		before := ab.Stats().Advisories.Load()
		second := stomptest.Subscribe(t, b.StompURI(), "/topic/stream", "selector", "k IN ('b','c')")
		settled(t, ab, before)
		stomptest.Eventually(t, 30*time.Second, func() error {
			if second.Count() == 0 && !pubDone.Load() {
				return errors.New("the second subscriber has nothing yet")
			}
			return nil
		})
		before = ab.Stats().Advisories.Load()
		second.Close()
		settled(t, ab, before)
		secondGot += second.Count()
	}
	published.Wait()
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	stomptest.Eventually(t, 60*time.Second, func() error {
		if got := first.Distinct(); got < want {
			return fmt.Errorf("first subscriber has %d of %d messages", got, want)
		}
		return nil
	})
	var missing []int
	for i := range chunks {
		if keys[i%3] != "c" {
			missing = append(missing, first.Missing(i*chunk, chunk)...)
		}
	}
	if len(missing) > 0 || first.Duplicates() != 0 || first.Count() != want {
		t.Fatalf("first subscriber: %d received, %d missing, %d duplicates, want %d once each",
			first.Count(), len(missing), first.Duplicates(), want)
	}
	t.Logf("first subscriber got all %d messages once; the second got %d in its 4 visits; %d forwarded",
		want, secondGot, ab.Stats().Forwarded.Load())
}

// durableConsumer subscribes a durable subscriber to topic on broker b.
func durableConsumer(t *testing.T, b *testbroker.ActiveMQ, clientID, name, topic, selector string) *stomptest.Consumer {
	t.Helper()
	headers := []string{"activemq.subscriptionName", name}
	if selector != "" {
		headers = append(headers, "selector", selector)
	}
	return stomptest.Subscribe(t, b.StompURI()+"?clientId="+clientID, "/topic/"+topic, headers...)
}

// TestDurableBacklogSurvivesOtherSelector: a durable subscriber selecting
// k = 'a' is offline on B while 1,000 persistent messages for it are
// published on A; a second durable subscriber selecting k = 'b' comes and
// goes; the first comes back and gets all 1,000. Its durable demand on A is
// never destroyed while its remote durable subscription exists.
func TestDurableBacklogSurvivesOtherSelector(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("needs brokers")
	}
	bs := startBrokers(t, 2, true)
	a, b := bs[0], bs[1]
	ab := startBridge(t, a.StompURI(), b.StompURI(), nil)
	da := durableConsumer(t, b, "durable-a", "sa", "feed", "k = 'a'")
	waitDemand(t, ab, 1, 10*time.Second)
	before := ab.Stats().Advisories.Load()
	da.Close()
	settled(t, ab, before)
	waitDemand(t, ab, 0, 10*time.Second)

	stomptest.SendN(t, a.StompURI(), "/topic/feed", 0, 1000, true, "k", "a")

	db := durableConsumer(t, b, "durable-b", "sb", "feed", "k = 'b'")
	waitDemand(t, ab, 1, 10*time.Second)
	stomptest.SendN(t, a.StompURI(), "/topic/feed", 5000, 10, true, "k", "b")
	db.WaitDistinct(10, 20*time.Second)
	before = ab.Stats().Advisories.Load()
	db.Close()
	settled(t, ab, before)

	da = durableConsumer(t, b, "durable-a", "sa", "feed", "k = 'a'")
	da.WaitDistinct(1000, 60*time.Second)
	if m := da.Missing(0, 1000); len(m) > 0 || da.Duplicates() != 0 {
		t.Fatalf("durable subscriber: %d missing, %d duplicates", len(m), da.Duplicates())
	}
}

// durableLeft stops nothing: with no bridge running, it opens the durable
// demand subscription for durable subscriber name on topic as the bridge from
// a to b makes it (same client-id, name and selector, so ActiveMQ hands back
// what it kept rather than re-creating it), publishes a marker and returns how
// many messages the subscription held before the marker.
func durableLeft(t *testing.T, a, b *testbroker.ActiveMQ, topic, name string) int {
	t.Helper()
	o := defaultDemand()
	o.LocalID, o.RemoteID = a.ID(), b.ID()
	ch, _ := demand.New(o).Apply(advisory.Event{Kind: advisory.ConsumerAdded, Consumer: advisory.Consumer{
		ID: "probe", Destination: destination.Destination{Kind: destination.Topic, Name: topic}, SubscriptionName: name}})
	if len(ch) != 1 || ch[0].Sub.DurableName == "" {
		t.Fatalf("no durable demand for %s: %+v", name, ch)
	}
	sub := ch[0].Sub
	return durableHeld(t, a, bridgeClientID(a, b), topic, sub.DurableName, sub.Selector)
}

// bridgeClientID is the client-id of the durable connection of the bridge
// from a to b. A wrong one (a subtest's broker id holds a '/', which the
// bridge replaces) would make durableLeft count a new, empty durable
// subscription.
func bridgeClientID(a, b *testbroker.ActiveMQ) string {
	return bridge.DurableClientID(a.ID(), b.ID())
}

// durableHeld opens durable subscription name of clientID on topic of broker
// a with selector (which must be the one it was made with, or ActiveMQ
// re-creates it empty), publishes a marker and returns how many messages the
// subscription held before the marker.
func durableHeld(t *testing.T, a *testbroker.ActiveMQ, clientID, topic, name, selector string) int {
	t.Helper()
	headers := []string{"activemq.subscriptionName", name}
	if selector != "" {
		headers = append(headers, "selector", selector)
	}
	c := stomptest.Subscribe(t, a.StompURI()+"?clientId="+clientID, "/topic/"+topic, headers...)
	const marker = 1_000_000
	stomptest.SendN(t, a.StompURI(), "/topic/"+topic, marker, 1, true)
	stomptest.Eventually(t, 20*time.Second, func() error {
		if c.Missing(marker, 1) != nil {
			return errors.New("marker not received yet")
		}
		return nil
	})
	c.Close()
	return c.Count() - 1
}

// TestDurableDestroyedWhileBridgeDown: a durable subscriber on B goes offline,
// the bridge stops, messages for it accumulate on A, and the subscriber
// destroys its durable subscription. ActiveMQ's advisories cannot tell the
// bridge that it was destroyed rather than offline, so with a durable offline
// timeout the bridge, back, destroys the demand once the subscription was
// offline that long, counting from when its ledger saw it leave: no durable
// demand subscription for it remains on A, and nothing accumulates there.
func TestDurableDestroyedWhileBridgeDown(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("needs brokers")
	}
	bs := startBrokers(t, 2, true)
	a, b := bs[0], bs[1]
	const timeout = 3 * time.Second
	withTimeout := func(c *bridge.Config) { c.DurableOfflineTimeout = timeout }
	ab := startBridge(t, a.StompURI(), b.StompURI(), withTimeout)
	d := durableConsumer(t, b, "durable-x", "sx", "gone", "")
	waitDemand(t, ab, 1, 10*time.Second)
	stomptest.SendN(t, a.StompURI(), "/topic/gone", 0, 10, true)
	d.WaitDistinct(10, 20*time.Second)
	before := ab.Stats().Advisories.Load()
	d.Close()
	settled(t, ab, before)
	if err := ab.stop(); err != nil {
		t.Fatal(err)
	}
	if n := ab.Stats().DurablesDestroyed.Load(); n != 0 {
		t.Fatalf("%d durable demand subscriptions destroyed while the subscriber was offline for less than %v", n, timeout)
	}
	// Kept for the offline subscriber by the durable demand on A.
	stomptest.SendN(t, a.StompURI(), "/topic/gone", 100, 50, true)
	// The subscriber destroys its durable subscription while the bridge is down.
	stomptest.DestroyDurable(t, b.StompURI(), "durable-x", "sx")

	ab = startBridge(t, a.StompURI(), b.StompURI(), withTimeout)
	stomptest.Eventually(t, 30*time.Second, func() error {
		if n := ab.Stats().DurablesDestroyed.Load(); n != 1 {
			return fmt.Errorf("%d durable demand subscriptions destroyed, want 1", n)
		}
		return nil
	})
	stomptest.SendN(t, a.StompURI(), "/topic/gone", 200, 50, true)
	if err := ab.stop(); err != nil {
		t.Fatal(err)
	}
	if n := durableLeft(t, a, b, "gone", "sx"); n != 0 {
		t.Fatalf("A kept %d messages for a destroyed remote durable subscription", n)
	}
}

// TestStaleDurableDemandIsDestroyed: the bridge's ledger on A names a durable
// demand subscription that no remote durable subscription it records produces
// (made under an older naming rule); it holds messages. Once the bridge is
// up, it is destroyed with them.
func TestStaleDurableDemandIsDestroyed(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("needs brokers")
	}
	bs := startBrokers(t, 2, true)
	a, b := bs[0], bs[1]
	clientID := bridgeClientID(a, b)
	const stale = "bn_stale_name"
	old := stomptest.Subscribe(t, a.StompURI()+"?clientId="+clientID, "/topic/old", "activemq.subscriptionName", stale)
	old.Close()
	stomptest.SendN(t, a.StompURI(), "/topic/old", 0, 20, true)
	rec := map[string]any{"version": 1, "durables": []demand.RemoteDurable{{
		Consumer:   advisory.Consumer{Destination: destination.Destination{Kind: destination.Topic, Name: "old"}, SubscriptionName: "gone-sub"},
		DemandName: stale,
	}}}
	body, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	pub := stomptest.Dial(t, a.StompURI())
	done := make(chan error, 1)
	f := frame.New(frame.SEND, frame.Destination, "/queue/brokernet.durables."+clientID, "persistent", "true")
	f.Body = body
	if err := pub.WriteReceipt(context.Background(), f, func(err error) { done <- err }); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	// The ledger is kept when durable demand may expire (DurableOfflineTimeout).
	ab := startBridge(t, a.StompURI(), b.StompURI(), func(c *bridge.Config) { c.DurableOfflineTimeout = time.Hour })
	stomptest.Eventually(t, 30*time.Second, func() error {
		if n := ab.Stats().DurablesDestroyed.Load(); n != 1 {
			return fmt.Errorf("%d durable demand subscriptions destroyed, want 1", n)
		}
		return nil
	})
	if err := ab.stop(); err != nil {
		t.Fatal(err)
	}
	if n := durableHeld(t, a, clientID, "old", stale, ""); n != 0 {
		t.Fatalf("the stale durable demand still held %d messages", n)
	}
}
