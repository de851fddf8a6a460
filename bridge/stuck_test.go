package bridge_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/brokernet/brokernet/bridge"
	"github.com/brokernet/brokernet/internal/testkit/stomptest"
	"github.com/brokernet/brokernet/internal/testkit/testbroker"
	"github.com/brokernet/brokernet/transport/endpoint"
)

// TestStuckMessagesCounted: a bridge B->A with a consumer on A counts, on B's
// queue, exactly the messages its demand cannot take (visited A, or out of
// hops) and that nobody on B takes; the ones it may forward reach A and are
// never counted; a consumer on B that takes them clears the count.
func TestStuckMessagesCounted(t *testing.T) {
	t.Parallel()
	for _, local := range []struct {
		name  string
		uri   func(*testbroker.ActiveMQ) string
		byHop bool
	}{
		{"STOMP", (*testbroker.ActiveMQ).StompURI, true},
		// The test's producer sends over STOMP, so BrokernetHops is a string
		// property; only STOMP selectors compare it as a number (ActiveMQ's
		// convert_string_expressions), so over OpenWire the cases that turn
		// on the hop count are left out.
		{"OpenWire", (*testbroker.ActiveMQ).OpenWireURI, false},
	} {
		t.Run("local broker over "+local.name, func(t *testing.T) { testStuckMessagesCounted(t, local.uri, local.byHop) })
	}
}

func testStuckMessagesCounted(t *testing.T, localURI func(*testbroker.ActiveMQ) string, byHop bool) {
	bs := startBrokers(t, 2, false)
	a, b := bs[0], bs[1]
	local, err := endpoint.Parse(localURI(b))
	if err != nil {
		t.Fatal(err)
	}
	d := defaultDemand()
	d.MessageTTL, d.ConsumerTTL = 3, 3
	ba := runBridge(t, bridge.Config{
		Local: local, Remote: stomptest.URI(t, a.StompURI()), Demand: d, Log: stomptest.Logger(t),
		StuckInterval: 500 * time.Millisecond,
	})
	_, aID := ba.BrokerIDs()
	ca := stomptest.Subscribe(t, a.StompURI(), "/queue/moved")
	waitDemand(t, ba, 1, 10*time.Second)

	visited, spent, onward, plain := 600, 30, 40, 50
	if !byHop {
		spent, onward = 0, 0
	}
	stomptest.SendN(t, b.StompURI(), "/queue/moved", 0, visited, false, "BrokernetPath", "|"+aID+"|", "BrokernetHops", "1")
	stomptest.SendN(t, b.StompURI(), "/queue/moved", visited, spent, false, "BrokernetPath", "|C|D|E|", "BrokernetHops", "3")
	stomptest.SendN(t, b.StompURI(), "/queue/moved", visited+spent, onward, false, "BrokernetPath", "|C|", "BrokernetHops", "1")
	stomptest.SendN(t, b.StompURI(), "/queue/moved", visited+spent+onward, plain, false)
	ca.WaitDistinct(onward+plain, 20*time.Second)

	want := int64(visited + spent)
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
	cb.WaitDistinct(int(want), 20*time.Second)
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
