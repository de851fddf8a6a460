package bridge_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/brokernet/brokernet/internal/testkit/stomptest"
	"github.com/brokernet/brokernet/internal/testkit/testbroker"
)

// activeMQProtocols are the two ways a bridge speaks to ActiveMQ, each with
// the URI of a test broker for it.
var activeMQProtocols = []struct {
	name string
	uri  func(*testbroker.ActiveMQ) string
}{
	{"STOMP", (*testbroker.ActiveMQ).StompURI},
	{"OpenWire", (*testbroker.ActiveMQ).OpenWireURI},
}

// TestBridgeUnderLoad pushes 30,000 non-persistent 1 KiB messages through
// one bridge session as fast as the producer sends them, over STOMP and over
// OpenWire: the load under which the OpenWire transport once stalled (an
// unbounded stream of ACK + Sync pairs filling ActiveMQ's receive buffer while
// it waited to write to us; bench/history/2026-12-01.md). Every message must
// arrive, and the bridge must never lose its session on the way (a stalled
// connection ends by its read deadline, then reconnects: Sessions would be 2).
func TestBridgeUnderLoad(t *testing.T) {
	t.Parallel()
	const n = 30000
	for _, p := range activeMQProtocols {
		t.Run(p.name, func(t *testing.T) {
			bs := startBrokers(t, 2, false)
			a, b := bs[0], bs[1]
			br := startURIBridge(t, p.uri(a), p.uri(b), nil)
			cons := stomptest.Subscribe(t, b.StompURI(), "/queue/load", "activemq.prefetchSize", "5000")
			waitDemand(t, br, 1, 30*time.Second)
			body := bytes.Repeat([]byte("x"), 1024)
			start := time.Now()
			prod := stomptest.Dial(t, a.StompURI())
			if err := stomptest.SendBody(context.Background(), prod, "/queue/load", 0, n, false, body); err != nil {
				t.Fatal(err)
			}
			cons.WaitDistinct(n, 3*time.Minute)
			t.Logf("%s: %d messages through in %s (%.0f msg/s), %d duplicates", p.name, n, time.Since(start),
				n/time.Since(start).Seconds(), cons.Duplicates())
			if s := br.Stats().Sessions.Load(); s != 1 {
				t.Errorf("the bridge had %d sessions, want 1 (it lost its connection under load)", s)
			}
		})
	}
}
