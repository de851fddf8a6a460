package bridge_test

import (
	"context"
	"time"

	"testing"

	"github.com/brokernet/brokernet/internal/testkit/faultproxy"
	"github.com/brokernet/brokernet/internal/testkit/stomptest"
	"github.com/brokernet/brokernet/internal/testkit/testbroker"
)

// TestFrozenOpenWirePath is TestFault's "frozen 45s with default heart-beats"
// between two ActiveMQ brokers over OpenWire, the URIs at their defaults: the
// path to the remote broker stops passing bytes for 45 s in the middle of a
// persistent stream, nothing closed. The bridge notices within 15 s (its
// keep-alive, wireFormat.maxInactivityDuration, is 5 s; with ActiveMQ's own
// 30 s it noticed nothing in the 45 s), comes back when the path does, and
// loses nothing.
func TestFrozenOpenWirePath(t *testing.T) {
	t.Parallel()
	testbroker.Require(t)
	const n = 1500
	bs := startBrokers(t, 2, true)
	a, b := bs[0], bs[1]
	p := faultproxy.Start(t, b.OpenWireAddr())
	br := startURIBridge(t, a.OpenWireURI(), "tcp://"+p.Addr()+"?initialReconnectDelay=100&maxReconnectDelay=1000", nil)
	c := stomptest.Subscribe(t, b.StompURI(), "/queue/frozen.ow")
	waitDemand(t, br, 1, 30*time.Second)
	// A stream of 100 messages a second, so that the freeze falls in its
	// middle and messages keep coming during it.
	prod := stomptest.Dial(t, a.StompURI())
	sent := make(chan error, 1)
	go func() {
		for i := 0; i < n; i += 50 {
			if err := stomptest.Send(context.Background(), prod, "/queue/frozen.ow", i, 50, true); err != nil {
				sent <- err
				return
			}
			time.Sleep(500 * time.Millisecond)
		}
		sent <- nil
	}()
	freezeRemote(t, br, []*faultproxy.Proxy{p}, c, n)
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
}
