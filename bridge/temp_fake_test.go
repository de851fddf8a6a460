package bridge

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/brokernet/brokernet/destination"
	"github.com/brokernet/brokernet/transport"
)

// TestTempMirrorFollowsTheRemote: a remote temporary queue is mirrored on the
// local broker (with the remote broker in its path), its consumer makes
// demand there, and when it goes the demand goes first, then the mirror. A
// temporary destination whose path holds the local broker is never mirrored
// back.
func TestTempMirrorFollowsTheRemote(t *testing.T) {
	local, remote := &tempBroker{fakeBroker: newFakeBroker("L")}, &tempBroker{fakeBroker: newFakeBroker("R")}
	br := startTempFake(t, local, remote)
	rc := remote.conn()
	tq := destination.Destination{Kind: destination.TempQueue, Name: "ID:r-1:1:1"}
	back := destination.Destination{Kind: destination.TempQueue, Name: "ID:l-1:1:1"}

	rc.events <- tempEvent(back, false, "L")
	rc.events <- tempEvent(tq, false)
	rc.events <- consumerOf("ID:r-1:1:1:1", tq)
	waitFor(t, 5*time.Second, "the mirror and its demand", func() bool {
		return br.Stats().DemandSubs.Load() == 1 && br.Stats().TempDestinations.Load() == 1
	})
	rc.events <- tempEvent(tq, true)
	waitFor(t, 5*time.Second, "the mirror and its demand to go", func() bool {
		return br.Stats().DemandSubs.Load() == 0 && br.Stats().TempDestinations.Load() == 0
	})
	want := []string{"mirror temp-queue://ID:r-1:1:1 [R]", "subscribe temp-queue://ID:r-1:1:1",
		"unsubscribe temp-queue://ID:r-1:1:1", "drop temp-queue://ID:r-1:1:1"}
	if got := local.callLog(); !slices.Equal(got, want) {
		t.Fatalf("local broker saw\n%q\nwant\n%q", got, want)
	}
}

// TestRequestWaitsForItsReplyToDemand: a request whose reply-to is a
// temporary queue of the local broker is forwarded only once the remote
// broker shows a consumer of that queue (the mirror's demand), and requests
// without such a reply-to are not held behind nothing.
func TestRequestWaitsForItsReplyToDemand(t *testing.T) {
	local, remote := &tempBroker{fakeBroker: newFakeBroker("L")}, &tempBroker{fakeBroker: newFakeBroker("R")}
	br := startTempFake(t, local, remote)
	lc, rc := local.conn(), remote.conn()
	replyTo := destination.Destination{Kind: destination.TempQueue, Name: "ID:l-1:1:1"}
	lc.events <- tempEvent(replyTo, false)
	rc.events <- transport.Event{Kind: transport.Consumer, Consumer: queueConsumer("ID:r-2:1:1:1", "req")}
	waitFor(t, 5*time.Second, "demand for req", func() bool { return br.Stats().DemandSubs.Load() == 1 })

	local.putWith("req", 1)
	waitFor(t, 5*time.Second, "a request without reply-to to go", func() bool { return len(remote.receivedBodies()) == 1 })

	// The fake broker's own lock (tempBroker has one of its own).
	local.fakeBroker.mu.Lock()
	local.seq++
	local.queues["req"] = append(local.queues["req"], &fakeMsg{id: "ID:L-req", msg: &transport.Message{ID: "ID:L-req",
		Destination: destination.Destination{Kind: destination.Queue, Name: "req"}, Priority: 4,
		ReplyTo: "/remote-temp-queue/ID:l-1:1:1", Body: []byte("request")}})
	local.fakeBroker.mu.Unlock()
	local.dispatch()
	// An event behind the delivery on the same stream: once it is counted,
	// the delivery was handled.
	lc.events <- transport.Event{Kind: transport.BadConsumer, Err: fmt.Errorf("marker")}
	waitFor(t, 5*time.Second, "the local stream to be read", func() bool { return br.Stats().BadAdvisories.Load() == 1 })
	if sent, _ := remote.counts(); sent != 1 {
		t.Fatalf("the request was sent (%d sends) before its reply-to's demand", sent)
	}
	rc.events <- consumerOf("ID:R-bridge:1:1:1", replyTo)
	waitFor(t, 5*time.Second, "the request to go", func() bool { return len(remote.receivedBodies()) == 2 })
	if got := remote.receivedBodies()[1]; got != "request" {
		t.Fatalf("forwarded %q", got)
	}
}
