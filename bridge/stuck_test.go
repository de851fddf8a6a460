package bridge_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/brokernet/brokernet/bridge"
	"github.com/brokernet/brokernet/internal/stomptest"
)

// TestStuckMessagesCounted: a bridge B->A with a consumer on A counts, on B's
// queue, exactly the messages its demand cannot take (visited A, or out of
// hops) and that nobody on B takes; the ones it may forward reach A and are
// never counted; a consumer on B that takes them clears the count.
func TestStuckMessagesCounted(t *testing.T) {
	bs := startBrokers(t, 2, false)
	a, b := bs[0], bs[1]
	ba := startBridge(t, b.StompURI(), a.StompURI(), func(c *bridge.Config) {
		c.Demand.MessageTTL, c.Demand.ConsumerTTL = 3, 3
		c.StuckInterval = 500 * time.Millisecond
	})
	_, aID := ba.BrokerIDs()
	ca := stomptest.Subscribe(t, a.StompURI(), "/queue/moved")
	waitDemand(t, ba, 1, 10*time.Second)

	const visited, spent, onward, plain = 600, 30, 40, 50
	stomptest.SendN(t, b.StompURI(), "/queue/moved", 0, visited, false, "BrokernetPath", "|"+aID+"|", "BrokernetHops", "1")
	stomptest.SendN(t, b.StompURI(), "/queue/moved", visited, spent, false, "BrokernetPath", "|C|D|E|", "BrokernetHops", "3")
	stomptest.SendN(t, b.StompURI(), "/queue/moved", visited+spent, onward, false, "BrokernetPath", "|C|", "BrokernetHops", "1")
	stomptest.SendN(t, b.StompURI(), "/queue/moved", visited+spent+onward, plain, false)
	ca.WaitDistinct(onward+plain, 20*time.Second)

	const want = visited + spent
	stomptest.Eventually(t, 15*time.Second, func() error {
		list, measured := ba.Stuck()
		if !measured || len(list) != 1 || list[0].Destination != "queue://moved" || list[0].Messages != want {
			return fmt.Errorf("stuck %v (measured %v), want %d on queue://moved", list, measured, want)
		}
		return nil
	})
	if got := ba.Stats().Stuck.Load(); got != want {
		t.Errorf("stuck gauge %d, want %d", got, want)
	}
	if n := ca.Distinct(); n != onward+plain {
		t.Errorf("A consumed %d, want %d", n, onward+plain)
	}

	cb := stomptest.Subscribe(t, b.StompURI(), "/queue/moved")
	cb.WaitDistinct(want, 20*time.Second)
	// Browsing took nothing and marked nothing: none comes redelivered.
	for _, f := range cb.Frames() {
		if f.Header.Get("redelivered") == "true" {
			t.Fatalf("message %s redelivered after browses", f.Header.Get("message-id"))
		}
	}
	stomptest.Eventually(t, 10*time.Second, func() error {
		if list, measured := ba.Stuck(); !measured || len(list) != 0 {
			return fmt.Errorf("stuck %v (measured %v) after B's consumer took them, want none", list, measured)
		}
		return nil
	})
}
