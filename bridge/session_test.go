package bridge

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/brokernet/brokernet/advisory"
	"github.com/brokernet/brokernet/demand"
	"github.com/brokernet/brokernet/destination"
	"github.com/brokernet/brokernet/transport"
)

// These tests run the session against the in-memory fakeBroker: the window,
// batching, settlement, drain, retries, dead-lettering and refusals, in
// milliseconds and without brokers.

func consumerOn(remote *fakeBroker, q string) {
	remote.consumers = append(remote.consumers, queueConsumer("ID:remote-1:1:1:1", q))
}

// wantBodies checks that remote received q-0..q-(n-1), each once.
func wantAllOnce(t *testing.T, remote *fakeBroker, q string, n int) {
	t.Helper()
	got := remote.receivedBodies()
	seen := map[string]int{}
	for _, b := range got {
		seen[b]++
	}
	for i := 0; i < n; i++ {
		b := fmt.Sprintf("%s-%d", q, i)
		if seen[b] != 1 {
			t.Errorf("%s received %d times, want once", b, seen[b])
		}
	}
	if len(got) != n {
		t.Errorf("received %d messages, want %d", len(got), n)
	}
}

func TestWindowBoundsMessagesInFlight(t *testing.T) {
	local, remote := newFakeBroker("A"), newFakeBroker("B")
	consumerOn(remote, "q")
	remote.holdCommits = true
	b, _, _ := startFake(t, local, remote, Config{Window: 10, MaxBatch: 4, MaxCommits: 2})
	local.put("q", 100)

	// With commits held, the bridge sends at most a window's worth.
	waitFor(t, 2*time.Second, "two commits held", func() bool { return remote.heldCommits() == 2 })
	if held := remote.heldCommits(); held != 2 {
		t.Fatalf("%d commits awaiting confirmation, want MaxCommits=2", held)
	}
	if q := local.queued("q"); q != 100 {
		t.Fatalf("local holds %d unsettled, want all 100 before any confirmation", q)
	}
	for local.queued("q") > 0 {
		remote.release()
		waitFor(t, 2*time.Second, "progress", func() bool { return remote.heldCommits() > 0 || local.queued("q") == 0 })
	}
	wantAllOnce(t, remote, "q", 100)
	waitFor(t, time.Second, "forwarded counted", func() bool { return b.Stats().Forwarded.Load() == 100 })
}

func TestLoneMessageIsCommittedWithinTheDelay(t *testing.T) {
	local, remote := newFakeBroker("A"), newFakeBroker("B")
	consumerOn(remote, "q")
	startFake(t, local, remote, Config{})
	local.put("q", 1)
	waitFor(t, 2*time.Second, "the message settled", func() bool { return local.queued("q") == 0 })
	wantAllOnce(t, remote, "q", 1)
}

// Messages the remote already holds (non-persistent) arriving one at a time,
// each while the bridge is idle, share one commit within CommitDelay: the
// bridge does not ask a confirmation of every message.
func TestIdleMessagesShareACommitWithinTheDelay(t *testing.T) {
	local, remote := newFakeBroker("A"), newFakeBroker("B")
	consumerOn(remote, "q")
	startFake(t, local, remote, Config{CommitDelay: time.Second})
	for i := 1; i <= 5; i++ {
		local.put("q", 1)
		waitFor(t, 2*time.Second, fmt.Sprintf("message %d sent", i), func() bool { s, _ := remote.counts(); return s == i })
	}
	waitFor(t, 5*time.Second, "all settled", func() bool { return local.queued("q") == 0 })
	if got := len(remote.receivedBodies()); got != 5 {
		t.Fatalf("remote received %d messages, want 5", got)
	}
	if _, commits := remote.counts(); commits != 1 {
		t.Fatalf("%d commits for 5 messages sent within the delay, want 1", commits)
	}
}

// Persistent messages to a broker whose commit is a transaction are invisible
// there until committed: an idle batch of them is committed at once, whatever
// CommitDelay.
func TestIdlePersistentBatchIsCommittedAtOnce(t *testing.T) {
	local, remote := newFakeBroker("A"), newFakeBroker("B")
	local.persistent = true
	consumerOn(remote, "q")
	startFake(t, local, remote, Config{CommitDelay: time.Hour})
	for i := 1; i <= 3; i++ {
		local.put("q", 1)
		waitFor(t, 5*time.Second, fmt.Sprintf("message %d received", i), func() bool { return len(remote.receivedBodies()) == i })
	}
	if _, commits := remote.counts(); commits != 3 {
		t.Fatalf("%d commits for 3 persistent messages sent one at a time, want 3", commits)
	}
}

func TestDrainConfirmsInFlightAndLeavesTheRest(t *testing.T) {
	local, remote := newFakeBroker("A"), newFakeBroker("B")
	consumerOn(remote, "q")
	remote.holdCommits = true
	b, cancel, done := startFake(t, local, remote, Config{Window: 10, MaxBatch: 5, MaxCommits: 1})
	local.put("q", 50)
	waitFor(t, 2*time.Second, "a commit held", func() bool { return remote.heldCommits() == 1 })
	cancel()
	// Released only once the session drains: released earlier, the commit
	// would free the window for the backlog of a session still running.
	waitFor(t, 2*time.Second, "draining", func() bool { return b.drains.Load() == 1 })
	// Draining: the held commit and the open batch complete; nothing new is taken.
	waitFor(t, 2*time.Second, "drain", func() bool {
		remote.release()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run = %v, want nil after drain", err)
			}
			return true
		default:
			return false
		}
	})
	got := len(remote.receivedBodies())
	if got == 0 || got > 10 {
		t.Fatalf("forwarded %d during drain, want 1..window(10)", got)
	}
	if q := local.queued("q"); q != 50-got {
		t.Fatalf("local holds %d, want %d (nothing lost, nothing settled unforwarded)", q, 50-got)
	}
}

func TestReleasedMessagesAreSentAgainInOrderOfSettlement(t *testing.T) {
	local, remote := newFakeBroker("A"), newFakeBroker("B")
	consumerOn(remote, "q")
	releases := 0
	remote.outcome = func(m *transport.Message) transport.Outcome {
		if string(m.Body) == "q-3" && releases < 2 {
			releases++
			return transport.Released
		}
		return transport.Accepted
	}
	startFake(t, local, remote, Config{})
	local.put("q", 20)
	waitFor(t, 5*time.Second, "all settled", func() bool { return local.queued("q") == 0 })
	wantAllOnce(t, remote, "q", 20)
	if releases != 2 {
		t.Fatalf("released %d times, want 2", releases)
	}
}

func TestRejectedMessageGoesToDeadLetterQueue(t *testing.T) {
	local, remote := newFakeBroker("A"), newFakeBroker("B")
	consumerOn(remote, "q")
	remote.outcome = func(m *transport.Message) transport.Outcome {
		if string(m.Body) == "q-7" {
			return transport.Rejected
		}
		return transport.Accepted
	}
	b, _, _ := startFake(t, local, remote, Config{})
	local.put("q", 20)
	waitFor(t, 5*time.Second, "all settled", func() bool { return local.queued("q") == 0 })
	got := remote.receivedBodies()
	if len(got) != 19 || slices.Contains(got, "q-7") {
		t.Fatalf("remote got %d (q-7 among them: %v), want the 19 others", len(got), slices.Contains(got, "q-7"))
	}
	dl := local.receivedBodies()
	if !slices.Equal(dl, []string{"q-7"}) {
		t.Fatalf("dead-lettered %v, want [q-7]", dl)
	}
	m := local.received[0]
	if m.Destination.Name != "ActiveMQ.DLQ" || m.PropString(DeadLetterDestinationHeader) != "queue://q" || m.PropString(DeadLetterReasonHeader) == "" {
		t.Fatalf("dead letter to %s with destination %q reason %q", m.Destination, m.PropString(DeadLetterDestinationHeader), m.PropString(DeadLetterReasonHeader))
	}
	if n := b.Stats().DeadLettered.Load(); n != 1 {
		t.Fatalf("DeadLettered = %d, want 1", n)
	}
}

// A refusal that ends the connection (a STOMP ERROR) is pinned on its message
// by sending the suspects alone, in batches and one by one alike.
func TestMessageRefusedRepeatedlyIsDeadLetteredAndTheRestFlow(t *testing.T) {
	for _, each := range []bool{false, true} {
		t.Run(map[bool]string{false: "in batches", true: "one by one"}[each], func(t *testing.T) {
			testRefusedRepeatedly(t, each)
		})
	}
}

func testRefusedRepeatedly(t *testing.T, each bool) {
	local, remote := newFakeBroker("A"), newFakeBroker("B")
	remote.eachConfirm = each
	consumerOn(remote, "q")
	refusals := 0
	remote.refuse = func(m *transport.Message) bool {
		if string(m.Body) == "q-5" {
			refusals++
			return true
		}
		return false
	}
	b, _, _ := startFake(t, local, remote, Config{MaxRefusals: 3})
	local.put("q", 200)
	waitFor(t, 10*time.Second, "all settled", func() bool { return local.queued("q") == 0 })
	got := remote.receivedBodies()
	seen := map[string]int{}
	for _, g := range got {
		seen[g]++
	}
	for i := 0; i < 200; i++ {
		body := fmt.Sprintf("q-%d", i)
		if i == 5 {
			if seen[body] != 0 {
				t.Errorf("the refused message reached the remote")
			}
			continue
		}
		if seen[body] == 0 {
			t.Errorf("%s lost", body)
		}
	}
	if refusals != 3 {
		t.Errorf("remote refused it %d times, want MaxRefusals=3", refusals)
	}
	if dl := local.receivedBodies(); !slices.Equal(dl, []string{"q-5"}) {
		t.Fatalf("dead-lettered %v, want [q-5]", dl)
	}
	if !strings.Contains(local.received[0].PropString(DeadLetterReasonHeader), "refused") {
		t.Errorf("reason %q", local.received[0].PropString(DeadLetterReasonHeader))
	}
	t.Logf("duplicates on the remote: %d (bounded by the window)", len(got)-199)
	if b.Stats().Sessions.Load() < 2 {
		t.Errorf("sessions = %d, want reconnects", b.Stats().Sessions.Load())
	}
}

func TestRemoteFailureRedeliversEverythingUnsettled(t *testing.T) {
	local, remote := newFakeBroker("A"), newFakeBroker("B")
	consumerOn(remote, "q")
	remote.holdCommits = true
	b, _, _ := startFake(t, local, remote, Config{Window: 20})
	local.put("q", 100)
	waitFor(t, 2*time.Second, "commits held", func() bool { return remote.heldCommits() > 0 })
	first := <-remote.dialed
	first.fail(errors.New("network cut"))
	remote.mu.Lock()
	remote.held = nil // their confirmations never come
	remote.holdCommits = false
	remote.mu.Unlock()
	waitFor(t, 5*time.Second, "all settled", func() bool { return local.queued("q") == 0 })
	wantAllOnce(t, remote, "q", 100)
	if b.Stats().Sessions.Load() < 2 {
		t.Errorf("sessions = %d, want a reconnect", b.Stats().Sessions.Load())
	}
}

func TestDeadDurableConnectionEndsSessionWhileWindowFull(t *testing.T) {
	local, remote := newFakeBroker("A"), newFakeBroker("B")
	remote.consumers = append(remote.consumers, advisory.Event{Kind: advisory.ConsumerAdded, ConsumerCount: -1,
		Consumer: advisory.Consumer{ID: "ID:remote-1:1:1:1", Destination: destination.Destination{Kind: destination.Topic, Name: "t"},
			SubscriptionName: "sub1", ClientID: "client1"}})
	remote.holdCommits = true
	b, _, _ := startFake(t, local, remote, Config{Window: 5, MaxBatch: 5, MaxCommits: 1})
	local.put("t", 50)
	waitFor(t, 2*time.Second, "window full", func() bool { return remote.heldCommits() == 1 })
	// The durable subscription lives on the second local connection.
	var durable *fakeConn
	local.mu.Lock()
	for _, c := range local.conns {
		for _, s := range c.subs {
			if s.sub.DurableName != "" {
				durable = c
			}
		}
	}
	local.mu.Unlock()
	if durable == nil {
		t.Fatal("no durable demand subscription was made")
	}
	// The old session's confirmations never come; the next session's are not held.
	remote.mu.Lock()
	remote.held, remote.holdCommits = nil, false
	remote.mu.Unlock()
	durable.fail(errors.New("connection reset"))
	waitFor(t, 5*time.Second, "a new session", func() bool { return b.Stats().Sessions.Load() >= 2 })
	waitFor(t, 5*time.Second, "all settled", func() bool { return local.queued("t") == 0 })
}

func TestWithoutSelectorsMessagesThatVisitedTheRemoteStayAndDoNotSpin(t *testing.T) {
	local, remote := newFakeBroker("A"), newFakeBroker("B")
	local.noSelectors = true
	consumerOn(remote, "q")
	b, _, _ := startFake(t, local, remote, Config{})
	local.putWith("q", 5, "BrokernetPath", "|B|", "BrokernetHops", "1") // came from B
	local.put("q", 20)
	waitFor(t, 5*time.Second, "the 20 local-origin messages forwarded", func() bool { return len(remote.receivedBodies()) == 20 })
	waitFor(t, 2*time.Second, "the 5 from B held", func() bool { return b.Stats().Held.Load() == 5 })
	// The 20 leave the local queue once their acknowledgements are processed.
	waitFor(t, 5*time.Second, "local to hold only the 5 that came from B", func() bool { return local.queued("q") == 5 })
	// Held messages are released and may come back; the delay of each grows
	// by half from 100 ms, so over 2.5 s each is delivered at most 7 times (0,
	// 0.1, 0.25, 0.48, 0.81, 1.32, 2.08 s, ...); a spinning bridge would deliver
	// it hundreds of times.
	time.Sleep(2500 * time.Millisecond)
	local.mu.Lock()
	for id, n := range local.deliveries {
		if n > 7 {
			t.Errorf("message %s delivered %d times in 2.5 s: the bridge spins", id, n)
		}
	}
	local.mu.Unlock()
	if got := len(remote.receivedBodies()); got != 20 {
		t.Fatalf("remote received %d, want 20: a message went back to a broker it came from", got)
	}
}

func TestWithoutSelectorsDemandWithASelectorIsNotServed(t *testing.T) {
	local, remote := newFakeBroker("A"), newFakeBroker("B")
	local.noSelectors = true
	ev := queueConsumer("ID:remote-1:1:1:1", "q")
	ev.Consumer.Selector = "k = 'a'"
	remote.consumers = append(remote.consumers, ev)
	b, _, _ := startFake(t, local, remote, Config{})
	waitFor(t, 2*time.Second, "the advisory applied", func() bool { return b.Stats().Advisories.Load() == 1 })
	local.put("q", 10)
	if n := b.Stats().DemandSubs.Load() + b.Stats().PendingSubs.Load(); n != 0 {
		t.Fatalf("%d demand subscriptions, want none", n)
	}
	if q := local.queued("q"); q != 10 {
		t.Fatalf("local holds %d, want all 10", q)
	}
}

// A content filter on a local broker without selectors (RabbitMQ): the
// demand it would narrow is not served, and the messages stay.
func TestWithoutSelectorsFilteredDemandIsNotServed(t *testing.T) {
	local, remote := newFakeBroker("A"), newFakeBroker("B")
	local.noSelectors = true
	consumerOn(remote, "q")
	opts := demand.DefaultOptions()
	opts.ContentFilters = []demand.ContentFilter{{Selector: "region = 'eu'"}}
	b, _, _ := startFake(t, local, remote, Config{Demand: opts})
	waitFor(t, 2*time.Second, "the advisory applied", func() bool { return b.Stats().Advisories.Load() == 1 })
	local.put("q", 10)
	if n := b.Stats().DemandSubs.Load() + b.Stats().PendingSubs.Load(); n != 0 {
		t.Fatalf("%d demand subscriptions, want none", n)
	}
	if q, got := local.queued("q"), len(remote.receivedBodies()); q != 10 || got != 0 {
		t.Fatalf("local holds %d and remote got %d, want 10 and 0", q, got)
	}
}

func TestWithoutSelectorsHeldMessagesThatCameBackAreStuck(t *testing.T) {
	local, remote := newFakeBroker("A"), newFakeBroker("B")
	local.noSelectors = true
	consumerOn(remote, "q")
	b, _, _ := startFake(t, local, remote, Config{})
	local.putWith("q", 5, "BrokernetPath", "|B|", "BrokernetHops", "1") // came from B
	waitFor(t, 2*time.Second, "the 5 from B held", func() bool { return b.Stats().Held.Load() == 5 })
	if _, measured := b.Stuck(); !measured {
		t.Fatal("stuck messages not measured on a broker without selectors")
	}
	// Released after 100 ms, nobody local takes them, they come back: stuck.
	waitFor(t, 5*time.Second, "the 5 back and counted stuck", func() bool {
		list, measured := b.Stuck()
		return measured && len(list) == 1 && list[0].Destination == "queue://q" && list[0].Messages == 5 &&
			b.Stats().Stuck.Load() == 5
	})
}
