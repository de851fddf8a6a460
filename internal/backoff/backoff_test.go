package backoff

import (
	"testing"
	"time"
)

func TestRetryResetsOnlyAfterAStableSession(t *testing.T) {
	r := Retry{Policy: Policy{Initial: time.Second, Max: time.Minute, Multiplier: 2}, StableAfter: 10 * time.Second}
	steps := []struct {
		upFor time.Duration
		want  int
	}{
		{0, 0},               // never came up
		{0, 1},               // again: the count grows
		{2 * time.Second, 2}, // up briefly (a flapping broker): still grows
		{9*time.Second + 999*time.Millisecond, 3}, // just short of stable
		{10 * time.Second, 0},                     // stable: earlier failures forgotten
		{time.Millisecond, 1},
		{time.Hour, 0},
	}
	for i, s := range steps {
		if got := r.Ended(s.upFor); got != s.want {
			t.Fatalf("step %d: session up for %v: attempt %d, want %d", i, s.upFor, got, s.want)
		}
	}
}

func TestRetryFlappingDelaysGrowToMax(t *testing.T) {
	p := Policy{Initial: time.Second, Max: 8 * time.Second, Multiplier: 2}
	r := Retry{Policy: p}
	var last time.Duration
	for i := 0; i < 10; i++ {
		n := r.Ended(500 * time.Millisecond) // every session dropped after half a second
		d := p.Delay(n)
		if i == 9 && d < time.Duration(0.8*float64(p.Max)) {
			t.Fatalf("after %d flaps the delay is %v, want about the max %v", i+1, d, p.Max)
		}
		last = d
	}
	if last > time.Duration(1.2*float64(p.Max)) {
		t.Fatalf("delay %v exceeds max %v plus jitter", last, p.Max)
	}
}

func TestRetryDefaultStableAfter(t *testing.T) {
	var r Retry
	r.Ended(0)
	r.Ended(0)
	if got := r.Ended(DefaultStableAfter - time.Nanosecond); got != 2 {
		t.Fatalf("attempt %d, want 2", got)
	}
	if got := r.Ended(DefaultStableAfter); got != 0 {
		t.Fatalf("attempt %d, want 0", got)
	}
}
