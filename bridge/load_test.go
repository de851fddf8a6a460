package bridge_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/brokernet/brokernet/internal/testkit/stomptest"
)

// TestBridgeOverStompUnderLoad pushes 30,000 non-persistent 1 KiB messages
// through one STOMP bridge session as fast as the producer sends them: the load
// under which the OpenWire transport once stalled (an unbounded stream of ACK +
// Sync pairs filling ActiveMQ's receive buffer while it waited to write to us).
// Every message must arrive, in one session.
func TestBridgeOverStompUnderLoad(t *testing.T) {
	t.Parallel()
	const n = 30000
	bs := startBrokers(t, 2, false)
	a, b := bs[0], bs[1]
	br := startBridge(t, a.StompURI(), b.StompURI(), nil)
	cons := stomptest.Subscribe(t, b.StompURI(), "/queue/load", "activemq.prefetchSize", "5000")
	waitDemand(t, br, 1, 30*time.Second)
	body := bytes.Repeat([]byte("x"), 1024)
	start := time.Now()
	p := stomptest.Dial(t, a.StompURI())
	if err := stomptest.SendBody(context.Background(), p, "/queue/load", 0, n, false, body); err != nil {
		t.Fatal(err)
	}
	cons.WaitDistinct(n, 3*time.Minute)
	t.Logf("%d messages through in %s (%.0f msg/s), %d duplicates", n, time.Since(start),
		n/time.Since(start).Seconds(), cons.Duplicates())
	if s := br.Stats().Sessions.Load(); s != 1 {
		t.Errorf("the bridge had %d sessions, want 1 (it lost its connection under load)", s)
	}
}
