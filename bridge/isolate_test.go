package bridge

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/brokernet/brokernet/transport"
)

// A remote broker that confirms messages one by one and holds back one
// queue's (ActiveMQ's producer flow control on a full queue): the other
// queue's messages all go through, the held one takes no more than its share
// of the window, is reported blocked, and once it flows every message
// arrives, in order, once.
func TestBlockedDestinationTakesOnlyItsShare(t *testing.T) {
	local, remote := newFakeBroker("A"), newFakeBroker("B")
	remote.eachConfirm = true
	remote.blockedQueue = "slow"
	remote.consumers = append(remote.consumers, queueConsumer("ID:remote-1:1:1:1", "slow"), queueConsumer("ID:remote-1:1:1:2", "fast"))
	b, _, _ := startFake(t, local, remote, Config{Window: 100, DestinationWindow: 25, BlockedAfter: 50 * time.Millisecond})
	waitFor(t, 5*time.Second, "two demand subscriptions", func() bool { return b.Stats().DemandSubs.Load() == 2 })
	local.put("slow", 500)
	local.put("fast", 500)

	waitFor(t, 5*time.Second, "every fast message", func() bool { return len(remote.receivedBodies()) == 500 })
	if n := remote.blockedCount(); n != 25 {
		t.Errorf("%d slow messages sent to the blocked queue, want its share, 25", n)
	}
	waitFor(t, 5*time.Second, "slow reported blocked", func() bool {
		bl := b.Blocked()
		return len(bl) == 1 && bl[0].Destination == "queue://slow" && b.Stats().BlockedDestinations.Load() == 1
	})
	if bl := b.Blocked(); bl[0].Unconfirmed != 25 {
		t.Errorf("blocked report %+v, want 25 unconfirmed", bl[0])
	}
	for _, body := range remote.receivedBodies() {
		if !strings.HasPrefix(body, "fast-") {
			t.Fatalf("received %s while slow is blocked", body)
		}
	}

	remote.unblock()
	waitFor(t, 5*time.Second, "every message", func() bool { return len(remote.receivedBodies()) == 1000 })
	var slow []string
	for _, body := range remote.receivedBodies() {
		if strings.HasPrefix(body, "slow-") {
			slow = append(slow, body)
		}
	}
	for i, body := range slow {
		if want := fmt.Sprintf("slow-%d", i); body != want {
			t.Fatalf("slow message %d is %s, want %s (order lost)", i, body, want)
		}
	}
	seen := map[string]int{}
	for _, body := range remote.receivedBodies() {
		seen[body]++
	}
	for i := range 500 {
		if n := seen[fmt.Sprintf("fast-%d", i)]; n != 1 {
			t.Errorf("fast-%d received %d times, want once", i, n)
		}
	}
	waitFor(t, 5*time.Second, "settled on the local broker", func() bool {
		return local.queued("slow") == 0 && local.queued("fast") == 0
	})
	waitFor(t, 5*time.Second, "no longer reported blocked", func() bool {
		return len(b.Blocked()) == 0 && b.Stats().BlockedDestinations.Load() == 0
	})
	if s := b.Stats().Sessions.Load(); s != 1 {
		t.Errorf("%d sessions, want 1", s)
	}
}

// A message the remote broker refuses on its own (the connection stays up) is
// sent again, and dead-lettered once refused MaxRefusals times; the others
// flow meanwhile, on the same session.
func TestMessageRefusedOnItsOwnIsRetriedThenDeadLettered(t *testing.T) {
	local, remote := newFakeBroker("A"), newFakeBroker("B")
	remote.eachConfirm = true
	remote.outcome = func(m *transport.Message) transport.Outcome {
		if string(m.Body) == "q-3" {
			return transport.Rejected
		}
		return transport.Accepted
	}
	consumerOn(remote, "q")
	b, _, _ := startFake(t, local, remote, Config{MaxRefusals: 2})
	local.put("q", 10)
	waitFor(t, 10*time.Second, "nine forwarded, one dead-lettered", func() bool {
		return len(remote.receivedBodies()) == 9 && b.Stats().DeadLettered.Load() == 1
	})
	waitFor(t, 5*time.Second, "all settled", func() bool { return local.queued("q") == 0 })
	if got := local.receivedBodies(); len(got) != 1 || got[0] != "q-3" {
		t.Errorf("the local broker's dead-letter queue got %v, want [q-3]", got)
	}
	if s := b.Stats().Sessions.Load(); s != 1 {
		t.Errorf("%d sessions, want 1 (a refusal on its own must not end the connection)", s)
	}
}
