package bridge_test

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/brokernet/brokernet/bridge"
	"github.com/brokernet/brokernet/internal/testkit/stomptest"
	"github.com/brokernet/brokernet/internal/testkit/testbroker"
	"github.com/brokernet/brokernet/transport"
	"github.com/brokernet/brokernet/transport/endpoint"
	"github.com/brokernet/brokernet/transport/openwire"
)

// TestDurableDestroyedWhileBridgeDownIsListed: with a remote broker that lists its
// durable subscriptions online or offline (ActiveMQ's syncDurableSubs
// exchange, over OpenWire), no timeout is needed. Two durable subscribers on B
// go offline and the bridge stops; one destroys its subscription meanwhile.
// The bridge, back, destroys that one's demand on A (nothing accumulates there
// for it) and keeps the other's, which gets every message published while it
// was away. The remote is reached over OpenWire, or over STOMP with the
// broker's OpenWire port named (?openwirePort=); over STOMP without it nothing
// can be asked, and the destroyed one's demand is kept with what it got.
func TestDurableDestroyedWhileBridgeDownIsListed(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("needs brokers")
	}
	const backoff = "initialReconnectDelay=100&maxReconnectDelay=1000"
	tests := []struct {
		name   string
		remote func(t *testing.T, a, b *testbroker.ActiveMQ) transport.Endpoint
		lists  bool // whether the destroyed subscription's demand must go
	}{
		{"over OpenWire", func(t *testing.T, _, b *testbroker.ActiveMQ) transport.Endpoint {
			u, err := openwire.ParseURI(b.OpenWireURI() + "?" + backoff)
			if err != nil {
				t.Fatal(err)
			}
			return u
		}, true},
		{"over STOMP with openwirePort", func(t *testing.T, _, b *testbroker.ActiveMQ) transport.Endpoint {
			return overOpenWire(t, b.StompURI()+"?openwirePort="+strconv.Itoa(b.OpenWirePort())+"&"+backoff)
		}, true},
		// A wrong port, here the local broker's: its listing lacks both
		// remote durables, and believing it would destroy the offline
		// subscriber's backlog too. The bridge checks who answered.
		{"over STOMP with another broker's openwirePort keeps the demand", func(t *testing.T, a, b *testbroker.ActiveMQ) transport.Endpoint {
			return overOpenWire(t, b.StompURI()+"?openwirePort="+strconv.Itoa(a.OpenWirePort())+"&"+backoff)
		}, false},
		{"over STOMP without openwirePort keeps the demand", func(t *testing.T, _, b *testbroker.ActiveMQ) transport.Endpoint {
			return stomptest.URI(t, b.StompURI()+"?"+backoff)
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bs := startBrokers(t, 2, true)
			a, b := bs[0], bs[1]
			start := func() *running {
				return runBridge(t, bridge.Config{Local: stomptest.URI(t, a.StompURI()), Remote: tt.remote(t, a, b),
					Demand: defaultDemand(), Log: stomptest.Logger(t)})
			}
			durableDestroyedWhileBridgeDown(t, a, b, start, tt.lists)
		})
	}
}

// durableDestroyedWhileBridgeDown runs TestDurableDestroyedWhileBridgeDownIsListed's
// scenario with the bridges start makes; lists tells whether the remote lists
// its durable subscriptions.
func durableDestroyedWhileBridgeDown(t *testing.T, a, b *testbroker.ActiveMQ, start func() *running, lists bool) {
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
	stomptest.DestroyDurable(t, b.StompURI(), "durable-x", "sx")

	ab = start()
	want := int64(0)
	if lists {
		want = 1
		stomptest.Eventually(t, 30*time.Second, func() error {
			if n := ab.Stats().DurablesDestroyed.Load(); n != 1 {
				return fmt.Errorf("%d durable demand subscriptions destroyed, want 1", n)
			}
			return nil
		})
	}
	// The durable subscriptions are listed (or not) before the consumer
	// advisories are read, so once the kept subscriber got its backlog the
	// bridge has decided about the destroyed one.
	back := durableConsumer(t, b, "durable-y", "sy", "kept", "")
	back.WaitDistinct(50, 30*time.Second)
	if missing := back.Missing(100, 50); len(missing) != 0 {
		t.Fatalf("the offline subscriber missed %v of what was published while it was away", missing)
	}
	stomptest.SendN(t, a.StompURI(), "/topic/gone", 200, 50, true)
	if err := ab.stop(); err != nil {
		t.Fatal(err)
	}
	if n := ab.Stats().DurablesDestroyed.Load(); n != want {
		t.Fatalf("%d durable demand subscriptions destroyed, want %d (the kept one's must stay)", n, want)
	}
	n := durableLeft(t, a, b, "gone", "sx")
	switch {
	case lists && n != 0:
		t.Fatalf("A kept %d messages for a destroyed remote durable subscription", n)
	case !lists && n < 100:
		t.Fatalf("A kept %d messages for the remote durable subscription it cannot know destroyed, want the 100 published for it", n)
	}
	t.Logf("A holds %d messages for the destroyed remote durable subscription", n)
}

// overOpenWire parses a STOMP URI naming its broker's OpenWire port as
// configuration does (transport/endpoint), which lists durable subscriptions
// over OpenWire.
func overOpenWire(t *testing.T, s string) transport.Endpoint {
	t.Helper()
	u, err := endpoint.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}
