package bridge_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/brokernet/brokernet/bridge"
	"github.com/brokernet/brokernet/internal/jmstest"
	"github.com/brokernet/brokernet/internal/stomptest"
	"github.com/brokernet/brokernet/internal/testbroker"
	"github.com/brokernet/brokernet/transport/endpoint"
)

// Request/reply across the network (issue 23): a requester on B sends
// requests whose JMSReplyTo is a temporary destination of its connection, a
// responder on A answers them. ActiveMQ's networkConnector does it by default
// (bridgeTempDestinations); so must brokernet.

// startURIBridge runs a bridge between two broker URIs of any protocol.
func startURIBridge(t *testing.T, local, remote string, mod func(*bridge.Config)) *running {
	t.Helper()
	l, err := endpoint.Parse(local)
	if err != nil {
		t.Fatal(err)
	}
	r, err := endpoint.ParseRemote(remote)
	if err != nil {
		t.Fatal(err)
	}
	d := defaultDemand()
	d.BridgeTemp = true
	cfg := bridge.Config{Local: l, Remote: r, Demand: d, Log: stomptest.Logger(t)}
	if mod != nil {
		mod(&cfg)
	}
	return runBridge(t, cfg)
}

// requestReply runs a JMS responder on a and a requester of n requests on b
// and returns the replies the requester got and the responder's output.
func requestReply(t *testing.T, a, b *testbroker.ActiveMQ, queue string, n int, mode string, ready func()) (replies int, responder []string) {
	t.Helper()
	resp := jmstest.Start(t, "RequestReply", "respond", a.OpenWireURI(), queue, "3000")
	resp.WaitLine(t, "READY", 60*time.Second)
	if ready != nil {
		ready()
	}
	out := jmstest.Run(t, time.Duration(n)*200*time.Millisecond+2*time.Minute, "RequestReply", "request", b.OpenWireURI(), queue, fmt.Sprint(n), "3000", mode)
	var timeouts int
	for _, l := range strings.Split(out, "\n") {
		if _, err := fmt.Sscanf(l, "REPLIES %d TIMEOUTS %d", &replies, &timeouts); err == nil {
			break
		}
	}
	responder = resp.Wait(t, 60*time.Second)
	return replies, responder
}

// TestRequestReplyAcrossNetworkLikeNetworkConnector compares, with ActiveMQ's
// JMS client on both ends, request/reply over ActiveMQ's own duplex
// networkConnector and over a brokernet duplex bridge over OpenWire.
func TestRequestReplyAcrossNetworkLikeNetworkConnector(t *testing.T) {
	testbroker.Require(t)
	const n = 50
	for _, mode := range []string{"perrequest", "topic"} {
		t.Run("networkConnector "+mode, func(t *testing.T) {
			a := testbroker.StartActiveMQ(t, testbroker.Options{ID: "A-nc-" + mode})
			b := testbroker.StartActiveMQ(t, testbroker.Options{ID: "B-nc-" + mode,
				NetworkConnectors: []string{a.OpenWireURI()}, NetworkAttrs: `duplex="true"`})
			got, out := requestReply(t, a, b, "rr.nc", n, mode, func() {
				// The responder's consumer must have reached B as demand.
				stomptest.Eventually(t, 30*time.Second, func() error { return b.CheckQueueConsumers("rr.nc", 1) })
			})
			t.Logf("networkConnector, %s: %d of %d replies; responder: %s", mode, got, n, last(out))
			if got != n {
				t.Fatalf("networkConnector: %d of %d replies", got, n)
			}
		})
		t.Run("brokernet "+mode, func(t *testing.T) {
			a := testbroker.StartActiveMQ(t, testbroker.Options{ID: "A-bn-" + mode})
			b := testbroker.StartActiveMQ(t, testbroker.Options{ID: "B-bn-" + mode})
			ab := startURIBridge(t, a.OpenWireURI(), b.OpenWireURI(), nil)
			ba := startURIBridge(t, b.OpenWireURI(), a.OpenWireURI(), nil)
			got, out := requestReply(t, a, b, "rr.bn", n, mode, func() { waitDemand(t, ba, 1, 30*time.Second) })
			t.Logf("brokernet, %s: %d of %d replies; responder: %s", mode, got, n, last(out))
			if got != n {
				t.Fatalf("brokernet: %d of %d replies; responder:\n%s", got, n, strings.Join(out, "\n"))
			}
			// Nothing of the requests' temporary destinations stays behind.
			stomptest.Eventually(t, 30*time.Second, func() error {
				if d, m := ab.Stats().DemandSubs.Load(), ab.Stats().TempDestinations.Load(); d != 0 || m != 0 {
					return fmt.Errorf("bridge A→B holds %d demand subscriptions, %d mirrored temporary destinations", d, m)
				}
				return noTemps(a)
			})
		})
	}
	t.Run("brokernet without bridgeTempDestinations", func(t *testing.T) {
		a := testbroker.StartActiveMQ(t, testbroker.Options{ID: "A-bn-off"})
		b := testbroker.StartActiveMQ(t, testbroker.Options{ID: "B-bn-off"})
		off := func(c *bridge.Config) { c.Demand.BridgeTemp = false }
		startURIBridge(t, a.OpenWireURI(), b.OpenWireURI(), off)
		ba := startURIBridge(t, b.OpenWireURI(), a.OpenWireURI(), off)
		got, out := requestReply(t, a, b, "rr.off", n, "perrequest", func() { waitDemand(t, ba, 1, 30*time.Second) })
		t.Logf("brokernet without bridgeTempDestinations: %d of %d replies (the requester stops after 5 timeouts); responder: %s", got, n, strings.Join(out, " | "))
		if got != 0 {
			t.Fatalf("%d replies without bridgeTempDestinations, want 0", got)
		}
	})
}

// noTemps returns nil once broker b holds no temporary destination.
func noTemps(b *testbroker.ActiveMQ) error {
	q, tp, err := b.TempDestinations(context.Background())
	if err != nil {
		return err
	}
	if q != 0 || tp != 0 {
		return fmt.Errorf("%s holds %d temporary queues, %d temporary topics", b.Name(), q, tp)
	}
	return nil
}

func last(lines []string) string {
	if len(lines) == 0 {
		return ""
	}
	return lines[len(lines)-1]
}
