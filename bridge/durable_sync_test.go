package bridge_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/go-stomp/stomp/v3/frame"

	"github.com/brokernet/brokernet/bridge"
	"github.com/brokernet/brokernet/internal/stomptest"
	"github.com/brokernet/brokernet/transport/openwire"
)

// TestDurableDestroyedWhileBridgeDownOverOpenWire: with the remote broker
// reached over OpenWire, which lists its durable subscriptions online or
// offline (ActiveMQ's syncDurableSubs exchange), no timeout is needed. Two
// durable subscribers on B go offline and the bridge stops; one destroys its
// subscription meanwhile. The bridge, back, destroys that one's demand on A
// (nothing accumulates there for it) and keeps the other's, which gets every
// message published while it was away.
func TestDurableDestroyedWhileBridgeDownOverOpenWire(t *testing.T) {
	if testing.Short() {
		t.Skip("needs brokers")
	}
	bs := startBrokers(t, 2, true)
	a, b := bs[0], bs[1]
	start := func() *running {
		u, err := openwire.ParseURI(b.OpenWireURI() + "?initialReconnectDelay=100&maxReconnectDelay=1000")
		if err != nil {
			t.Fatal(err)
		}
		return runBridge(t, bridge.Config{Local: stomptest.URI(t, a.StompURI()), Remote: u,
			Demand: defaultDemand(), Log: stomptest.Logger(t)})
	}
	ab := start()
	gone := durableConsumer(t, b, "durable-x", "sx", "gone", "")
	kept := durableConsumer(t, b, "durable-y", "sy", "kept", "")
	waitDemand(t, ab, 2, 10*time.Second)
	stomptest.SendN(t, a.StompURI(), "/topic/gone", 0, 10, true)
	stomptest.SendN(t, a.StompURI(), "/topic/kept", 0, 10, true)
	gone.WaitDistinct(10, 20*time.Second)
	kept.WaitDistinct(10, 20*time.Second)
	before := ab.Stats().Advisories.Load()
	gone.Close()
	kept.Close()
	settled(t, ab, before)
	if err := ab.stop(); err != nil {
		t.Fatal(err)
	}
	// Kept on A by the durable demand for the offline subscribers.
	stomptest.SendN(t, a.StompURI(), "/topic/gone", 100, 50, true)
	stomptest.SendN(t, a.StompURI(), "/topic/kept", 100, 50, true)
	// One subscriber destroys its durable subscription while the bridge is down.
	c := stomptest.Dial(t, b.StompURI()+"?clientId=durable-x")
	done := make(chan error, 1)
	if err := c.WriteReceipt(context.Background(), frame.New(frame.UNSUBSCRIBE, frame.Id, "x",
		"activemq.subscriptionName", "sx"), func(err error) { done <- err }); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	c.Close(context.Background())

	ab = start()
	stomptest.Eventually(t, 30*time.Second, func() error {
		if n := ab.Stats().DurablesDestroyed.Load(); n != 1 {
			return fmt.Errorf("%d durable demand subscriptions destroyed, want 1", n)
		}
		return nil
	})
	back := durableConsumer(t, b, "durable-y", "sy", "kept", "")
	back.WaitDistinct(50, 30*time.Second)
	if missing := back.Missing(100, 50); len(missing) != 0 {
		t.Fatalf("the offline subscriber missed %v of what was published while it was away", missing)
	}
	stomptest.SendN(t, a.StompURI(), "/topic/gone", 200, 50, true)
	if err := ab.stop(); err != nil {
		t.Fatal(err)
	}
	if n := ab.Stats().DurablesDestroyed.Load(); n != 1 {
		t.Fatalf("%d durable demand subscriptions destroyed, want 1 (the kept one's must stay)", n)
	}
	if n := durableLeft(t, a, b, "gone", "sx"); n != 0 {
		t.Fatalf("A kept %d messages for a destroyed remote durable subscription", n)
	}
}
