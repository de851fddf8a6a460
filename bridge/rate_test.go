package bridge

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/brokernet/brokernet/demand"
	"github.com/brokernet/brokernet/destination"
	"github.com/brokernet/brokernet/hop"
	"github.com/brokernet/brokernet/transport"
)

func mustPattern(t *testing.T, s string) *destination.Pattern {
	t.Helper()
	p, err := destination.ParsePattern(s)
	if err != nil {
		t.Fatal(err)
	}
	return &p
}

// received counts the remote broker's messages whose body starts with prefix.
func receivedWith(b *fakeBroker, prefix string) int {
	n := 0
	for _, body := range b.receivedBodies() {
		if strings.HasPrefix(body, prefix) {
			n++
		}
	}
	return n
}

// A destination pattern's limit holds back only its destinations: the
// unlimited queue's messages all go at once, the limited one's no faster
// than the limit allows (a second's worth at once, the rest at the rate), in
// order, each once, and waiting ones are counted.
func TestRateLimitHoldsBackOnlyItsDestinations(t *testing.T) {
	local, remote := newFakeBroker("A"), newFakeBroker("B")
	remote.consumers = append(remote.consumers, queueConsumer("ID:remote-1:1:1:1", "slow.a"), queueConsumer("ID:remote-1:1:1:2", "fast"))
	b, _, _ := startFake(t, local, remote, Config{RateLimits: []RateLimit{{Pattern: mustPattern(t, "queue://slow.>"), Messages: 40}}})
	waitFor(t, 5*time.Second, "two demand subscriptions", func() bool { return b.Stats().DemandSubs.Load() == 2 })
	start := time.Now()
	local.put("slow.a", 100)
	local.put("fast", 100)
	waitFor(t, 5*time.Second, "every fast message", func() bool { return receivedWith(remote, "fast-") == 100 })
	waitFor(t, 5*time.Second, "slow messages waiting for the limit", func() bool { return b.Stats().RateLimited.Load() > 0 })
	if n := receivedWith(remote, "slow.a-"); n >= 100 {
		t.Fatalf("all %d slow messages forwarded at once", n)
	}
	waitFor(t, 10*time.Second, "every slow message", func() bool { return receivedWith(remote, "slow.a-") == 100 })
	// 40 at once, then 60 at 40 a second: never sooner than 1.5 s.
	if took := time.Since(start); took < 1400*time.Millisecond {
		t.Errorf("100 messages limited to 40/s forwarded in %v", took)
	}
	checkOrderOnce(t, remote, "slow.a", 100)
	waitFor(t, 5*time.Second, "settled, none waiting", func() bool {
		return local.queued("slow.a") == 0 && b.Stats().RateLimited.Load() == 0
	})
}

// A connector-wide limit is shared by the destinations in turn; a byte limit
// counts bodies.
func TestRateLimitSharedInTurnAndByBytes(t *testing.T) {
	t.Run("messages", func(t *testing.T) {
		local, remote := newFakeBroker("A"), newFakeBroker("B")
		remote.consumers = append(remote.consumers, queueConsumer("ID:remote-1:1:1:1", "a"), queueConsumer("ID:remote-1:1:1:2", "b"))
		b, _, _ := startFake(t, local, remote, Config{RateLimits: []RateLimit{{Messages: 50}}})
		waitFor(t, 5*time.Second, "two demand subscriptions", func() bool { return b.Stats().DemandSubs.Load() == 2 })
		local.put("a", 100)
		local.put("b", 100)
		waitFor(t, 10*time.Second, "every message of a", func() bool { return receivedWith(remote, "a-") == 100 })
		// a took the first second's 50 alone; then the two took turns.
		if n := receivedWith(remote, "b-"); n < 40 {
			t.Errorf("b got %d while a's last 50 went, want about 50 (turns)", n)
		}
		waitFor(t, 10*time.Second, "every message of b", func() bool { return receivedWith(remote, "b-") == 100 })
		checkOrderOnce(t, remote, "a", 100)
		checkOrderOnce(t, remote, "b", 100)
	})
	t.Run("bytes", func(t *testing.T) {
		local, remote := newFakeBroker("A"), newFakeBroker("B")
		consumerOn(remote, "big")
		b, _, _ := startFake(t, local, remote, Config{RateLimits: []RateLimit{{Pattern: mustPattern(t, "queue://big"), Bytes: 300}}})
		waitFor(t, 5*time.Second, "demand", func() bool { return b.Stats().DemandSubs.Load() == 1 })
		start := time.Now()
		local.put("big", 100) // bodies "big-0" … "big-99": 5 or 6 bytes, 590 in all
		waitFor(t, 10*time.Second, "every message", func() bool { return receivedWith(remote, "big-") == 100 })
		// 300 bytes at once, then 290 at 300 a second.
		if took := time.Since(start); took < 900*time.Millisecond {
			t.Errorf("590 bytes limited to 300 B/s forwarded in %v", took)
		}
		checkOrderOnce(t, remote, "big", 100)
	})
}

// checkOrderOnce checks that the remote broker received queue q's n messages
// in order, each once.
func checkOrderOnce(t *testing.T, remote *fakeBroker, q string, n int) {
	t.Helper()
	var got []string
	for _, body := range remote.receivedBodies() {
		if strings.HasPrefix(body, q+"-") {
			got = append(got, body)
		}
	}
	if len(got) != n {
		t.Fatalf("%s: %d received, want %d", q, len(got), n)
	}
	for i, body := range got {
		if want := q + "-" + strconv.Itoa(i); body != want {
			t.Fatalf("%s message %d is %s, want %s (order lost or duplicated)", q, i, body, want)
		}
	}
}

// A replay counts one more move in the message and stamps its time; the
// cool-down holds a replay delivery until that time plus the cool-down.
func TestReplayStampAndCooldown(t *testing.T) {
	s := &session{b: &Bridge{}}
	s.b.stats.Moves = NewHistogram(MovesBuckets)
	now := time.UnixMilli(1_800_000_000_000)
	m := &transport.Message{Props: []transport.Property{{Name: "a", Value: "1"}, {Name: hop.MovesHeader, Value: int32(2)}, {Name: hop.MovedAtHeader, Value: "5"}}}
	s.stampMove(m, now)
	want := []transport.Property{{Name: "a", Value: "1"}, {Name: hop.MovesHeader, Value: "3"}, {Name: hop.MovedAtHeader, Value: "1800000000000"}}
	if !slices.Equal(m.Props, want) {
		t.Fatalf("props %v, want %v", m.Props, want)
	}
	if _, n, _ := s.b.stats.Moves.Snapshot(); n != 1 {
		t.Errorf("moves observed %d times, want 1", n)
	}
	at, ok := movedAt(m)
	if !ok || !at.Equal(now) {
		t.Fatalf("movedAt = %v, %v", at, ok)
	}

	sh := newShaper(&Config{ReplayCooldown: 5 * time.Second, Demand: demand.Options{ReplayWhenNoConsumers: true}}, &fullQueues{}, renames{}, now)
	replay := &demandSub{sub: demand.Subscription{Replay: true}}
	ev := transport.Event{Msg: m}
	if ok, wait := sh.admit(replay, ev, now.Add(2*time.Second)); ok || wait != 3*time.Second {
		t.Errorf("2 s after its replay: admitted %v, wait %v; want to wait 3s", ok, wait)
	}
	if ok, _ := sh.admit(replay, ev, now.Add(5*time.Second)); !ok {
		t.Error("5 s after its replay: not admitted")
	}
	plain := &demandSub{sub: demand.Subscription{}}
	if ok, _ := sh.admit(plain, ev, now); !ok {
		t.Error("a demand subscription's delivery waited for the replay cool-down")
	}
	if ok, _ := sh.admit(replay, transport.Event{Msg: &transport.Message{}}, now); !ok {
		t.Error("a message never replayed waited for the cool-down")
	}
}
