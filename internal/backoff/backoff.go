// Package backoff computes reconnect delays the way ActiveMQ's failover and discovery
// transports name them: initialReconnectDelay, maxReconnectDelay and backOffMultiplier.
package backoff

import (
	"context"
	"math/rand/v2"
	"time"
)

// Policy is an exponential back-off policy. The zero value is not useful; start from Default.
// Exported types carry it as transport.Reconnect (same fields), so that the
// algorithm stays internal.
type Policy struct {
	// Initial is the delay before the first reconnect attempt (initialReconnectDelay).
	Initial time.Duration
	// Max caps the delay (maxReconnectDelay).
	Max time.Duration
	// Multiplier grows the delay after each failed attempt (backOffMultiplier).
	Multiplier float64
}

// Default returns ActiveMQ's failover defaults, except a 1 s initial delay instead of
// 10 ms: reconnecting a whole bridge is costlier than a single failover hop.
func Default() Policy {
	return Policy{Initial: time.Second, Max: 30 * time.Second, Multiplier: 2}
}

// Delay returns the delay before attempt n (0-based), with ±20 % jitter so that many
// bridges to one restarted broker do not reconnect in lock step.
func (p Policy) Delay(n int) time.Duration {
	d := float64(p.Initial)
	for i := 0; i < n && d < float64(p.Max); i++ {
		d *= p.Multiplier
	}
	if d > float64(p.Max) {
		d = float64(p.Max)
	}
	jitter := 0.8 + 0.4*rand.Float64()
	return time.Duration(d * jitter)
}

// Sleep waits for the delay of attempt n or until ctx is done, reporting whether the
// full delay passed.
func (p Policy) Sleep(ctx context.Context, n int) bool {
	t := time.NewTimer(p.Delay(n))
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// DefaultStableAfter is how long a session must stay up before a reconnect loop
// forgets its earlier failures (Retry.StableAfter's default).
const DefaultStableAfter = 10 * time.Second

// Retry counts the attempts of a reconnect loop. The count grows with every session
// that ends and resets only when the session had stayed up for StableAfter: a broker
// that accepts a connection and drops it at once (a flapping broker, a refused
// login after CONNECTED, a proxy that cuts every stream) is then redialled with
// growing delays instead of at Policy.Initial forever.
type Retry struct {
	// Policy gives the delays.
	Policy Policy
	// StableAfter is how long a session must have been up to reset the count.
	// Zero means DefaultStableAfter.
	StableAfter time.Duration

	attempt int
}

// Ended records the end of a session that had been up for upFor (zero if it never
// came up) and returns the attempt number (0-based) whose delay to wait before the
// next dial.
func (r *Retry) Ended(upFor time.Duration) int {
	stable := r.StableAfter
	if stable <= 0 {
		stable = DefaultStableAfter
	}
	if upFor >= stable {
		r.attempt = 0
	}
	n := r.attempt
	r.attempt++
	return n
}
