package bridge

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/brokernet/brokernet/destination"
	"github.com/brokernet/brokernet/transport"
)

// A limited queue's room is its limit less what it holds less what the
// bridge sent it within the statistics' lag; messages wait once it is spent,
// until a read shows room again.
func TestFullQueueRoom(t *testing.T) {
	var f fullQueues
	q := destination.Destination{Kind: destination.Queue, Name: "orders"}
	other := destination.Destination{Kind: destination.Queue, Name: "other"}
	now := time.Unix(1_800_000_000, 0)
	limit := func(held int) transport.QueueRoom {
		return transport.QueueRoom{Limited: true, MaxMessages: 10, Messages: held, Policy: "max-length 10, overflow reject-publish"}
	}
	if f.any() {
		t.Fatal("empty set has entries")
	}
	// Found after a refusal with 3 in flight, the statistics showing 5.
	st, known, _ := f.update(q, limit(5), 3, now)
	if !known || st.msgs != 2 || !st.since.IsZero() {
		t.Fatalf("after the refusal: known %v, room %d, since %v; want room 2, not full", known, st.msgs, st.since)
	}
	for i := range 2 {
		if w := f.admit(q, 10, now, 0); w != 0 {
			t.Fatalf("message %d waited %v with room", i, w)
		}
	}
	if w := f.admit(q, 10, now, 0); w <= 0 {
		t.Fatal("a message went with the room spent")
	}
	if w := f.admit(other, 10, now, 0); w != 0 {
		t.Fatalf("another queue waited %v", w)
	}
	// The next read shows 7 (the statistics lag): the 5 sent since count
	// too, so the queue is full.
	now = now.Add(fullRecheck)
	st, _, hadRoom := f.update(q, limit(7), 0, now)
	if st.msgs > 0 || st.since.IsZero() || !hadRoom {
		t.Fatalf("second read: room %d, since %v, had room %v; want full", st.msgs, st.since, hadRoom)
	}
	if b := f.blocked(); len(b) != 1 || b[0].Destination != "queue://orders" || b[0].Reason == "" {
		t.Fatalf("blocked %+v", b)
	}
	// Once the sends are older than the lag, a queue the consumer emptied
	// has its whole limit.
	for range statsLag {
		now = now.Add(fullRecheck)
		st, _, _ = f.update(q, limit(0), 0, now)
	}
	if st.msgs != 10 || !st.since.IsZero() || len(f.blocked()) != 0 {
		t.Fatalf("drained: room %d, since %v, blocked %v; want room 10", st.msgs, st.since, f.blocked())
	}
	// Found at most half full read after read, it is forgotten.
	for range forgetAfter - statsLag - 1 {
		now = now.Add(fullRecheck)
		f.update(q, limit(0), 0, now)
	}
	if !f.any() {
		t.Fatalf("forgotten after %d roomy reads, want %d", forgetAfter-1, forgetAfter)
	}
	now = now.Add(fullRecheck)
	if _, known, _ := f.update(q, limit(5), 0, now); known || f.any() {
		t.Fatal("a queue found half full or less 5 reads in a row is still remembered")
	}
	f.update(q, limit(5), 3, now)
	// A queue whose limit was removed is forgotten.
	if _, known, _ := f.update(q, transport.QueueRoom{}, 0, now); known || f.any() {
		t.Fatal("a queue without limits is still remembered")
	}
}

// A byte limit: a message larger than the bytes left waits.
func TestFullQueueByteRoom(t *testing.T) {
	var f fullQueues
	q := destination.Destination{Kind: destination.Queue, Name: "big"}
	now := time.Unix(1_800_000_000, 0)
	f.update(q, transport.QueueRoom{Limited: true, MaxBytes: 1000, Bytes: 400}, 0, now)
	if w := f.admit(q, 600, now, 0); w != 0 {
		t.Fatalf("600 bytes waited %v with 600 left", w)
	}
	if w := f.admit(q, 1, now, 0); w <= 0 {
		t.Fatal("a byte went with no bytes left")
	}
}

// TestReconnectDoesNotWaitForUnansweredLimits: a remote broker whose session
// ended with queue messages in flight and whose management API does not
// answer (a frozen path) is dialled again after fullReadWait, not after the
// read gives up; the read, answered later, still takes effect.
func TestReconnectDoesNotWaitForUnansweredLimits(t *testing.T) {
	local, remote := newFakeBroker("A"), newFakeBroker("B")
	consumerOn(remote, "q")
	remote.holdCommits = true
	answer := make(chan struct{})
	var reads atomic.Int32
	remote.queueRoom = func(ctx context.Context, d destination.Destination) (transport.QueueRoom, error) {
		reads.Add(1)
		select {
		case <-answer:
			return transport.QueueRoom{Limited: true, MaxMessages: 10, Messages: 10, Policy: "max-length 10, overflow reject-publish"}, nil
		case <-ctx.Done():
			return transport.QueueRoom{}, ctx.Err()
		}
	}
	b, _, _ := startFake(t, local, remote, Config{Window: 20})
	local.put("q", 50)
	waitFor(t, 2*time.Second, "commits held", func() bool { return remote.heldCommits() > 0 })
	first := <-remote.dialed
	remote.mu.Lock()
	remote.held, remote.holdCommits = nil, false // the next session's are confirmed
	remote.mu.Unlock()
	ended := time.Now()
	first.fail(errors.New("no data or heart-beat from B for 15s"))
	select {
	case <-remote.dialed:
	case <-time.After(fullReadWait + 3*time.Second):
		t.Fatalf("no reconnect %v after the session ended while the limits read hung (fullReadWait %v)", time.Since(ended), fullReadWait)
	}
	t.Logf("dialled again %v after the session ended, %d limit read(s) pending", time.Since(ended).Round(time.Millisecond), reads.Load())
	if reads.Load() == 0 {
		t.Fatal("the limits were not read")
	}
	close(answer) // the management API answers late: the queue is full
	waitFor(t, 5*time.Second, "the late answer taken", func() bool { return b.full.any() })
}
