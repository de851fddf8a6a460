package bridge_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/brokernet/brokernet/internal/testkit/stomptest"
	"github.com/brokernet/brokernet/internal/testkit/testbroker"
)

// TestExclusionHoldsForWildcardDemand: with queue://secret.> excluded, a
// consumer of /queue/> on the remote broker gets what the other queues hold,
// including a queue created later, and none of the 100 messages sent to
// secret.x, which stay consumable on the local broker.
func TestExclusionHoldsForWildcardDemand(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts brokers")
	}
	testExclusionHoldsForWildcardDemand(t, (*testbroker.ActiveMQ).StompURI)
}

// TestExclusionHoldsForWildcardDemandOverOpenWire is the same with the bridge
// on OpenWire at both ends: the OpenWire connection reports the local
// broker's destinations too.
func TestExclusionHoldsForWildcardDemandOverOpenWire(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts brokers")
	}
	testExclusionHoldsForWildcardDemand(t, (*testbroker.ActiveMQ).OpenWireURI)
}

func testExclusionHoldsForWildcardDemand(t *testing.T, uri func(*testbroker.ActiveMQ) string) {
	bs := startBrokers(t, 2, false)
	a, b := bs[0], bs[1]
	stomptest.SendN(t, a.StompURI(), "/queue/secret.x", 0, 100, false)
	stomptest.SendN(t, a.StompURI(), "/queue/public.y", 0, 50, false)
	br := startURIBridge(t, uri(a), uri(b), excluding(t, "queue://secret.>"))
	all := stomptest.Subscribe(t, b.StompURI(), "/queue/>")
	all.WaitDistinct(50, 30*time.Second)
	stomptest.SendN(t, a.StompURI(), "/queue/later.z", 50, 20, false)
	all.WaitDistinct(70, 30*time.Second)
	for _, f := range all.Frames() {
		if d := f.Header.Get("destination"); strings.Contains(d, "secret") {
			t.Fatalf("the wildcard consumer got a message of %s", d)
		}
	}
	if got := queueSize(t, a, "secret.x"); got != 100 {
		t.Fatalf("secret.x on the local broker holds %d messages, want 100", got)
	}
	stomptest.Eventually(t, 10*time.Second, func() error {
		if n := br.Stats().DemandSubs.Load(); n != 2 {
			return fmt.Errorf("%d demand subscriptions, want 2 (public.y and later.z)", n)
		}
		return nil
	})
	mine := stomptest.Subscribe(t, a.StompURI(), "/queue/secret.x")
	mine.WaitDistinct(100, 20*time.Second)
}
