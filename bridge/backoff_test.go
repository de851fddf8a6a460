package bridge

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/brokernet/brokernet/demand"
	"github.com/brokernet/brokernet/internal/testkit/stomptest"
	"github.com/brokernet/brokernet/transport"
)

// slowFake is a fake broker with a back-off policy slow enough to measure.
type slowFake struct {
	*fakeBroker
	policy transport.Reconnect
}

func (s slowFake) Backoff() transport.Reconnect { return s.policy }

// flap runs a bridge to a remote that drops every session once it is up (after
// upFor), and returns the attempt number of each redial.
func flap(t *testing.T, stableAfter, upFor time.Duration, sessions int) []int {
	t.Helper()
	local, remote := newFakeBroker("L"), newFakeBroker("R")
	b, err := New(Config{
		Local: local, Remote: slowFake{remote, transport.Reconnect{Initial: time.Millisecond, Max: 10 * time.Millisecond, Multiplier: 2}},
		LocalID: "L", RemoteID: "R", Demand: demand.DefaultOptions(), StableAfter: stableAfter, Log: stomptest.Logger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	attempts := make(chan int, sessions)
	b.onRetry = func(attempt int, _ time.Duration) { attempts <- attempt }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { b.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	var got []int
	for i := 0; i < sessions; i++ {
		var c *fakeConn
		select {
		case c = <-remote.dialed:
		case <-time.After(10 * time.Second):
			t.Fatalf("no dial %d", i)
		}
		waitFor(t, 5*time.Second, "bridge up", b.Up)
		time.Sleep(upFor) // how long the session stays up is the condition under test
		c.fail(errors.New("remote dropped the connection"))
		select {
		case a := <-attempts:
			got = append(got, a)
		case <-time.After(10 * time.Second):
			t.Fatalf("no redial after session %d", i)
		}
	}
	return got
}

// TestFlappingRemoteBacksOff: a remote that drops every session right after it
// came up is redialled with growing delays (attempt 0, 1, 2, …: the policy's
// doubling delays), not at the initial delay forever (defect 6 of issue 8).
func TestFlappingRemoteBacksOff(t *testing.T) {
	got := flap(t, time.Hour, 0, 5)
	if want := []int{0, 1, 2, 3, 4}; !slices.Equal(got, want) {
		t.Fatalf("redial attempts %v, want %v", got, want)
	}
}

// TestStableSessionResetsBackOff: sessions that stayed up longer than StableAfter
// reset the back-off: every redial is attempt 0 (the initial delay).
func TestStableSessionResetsBackOff(t *testing.T) {
	got := flap(t, 20*time.Millisecond, 40*time.Millisecond, 4)
	if want := []int{0, 0, 0, 0}; !slices.Equal(got, want) {
		t.Fatalf("redial attempts %v, want %v", got, want)
	}
}
