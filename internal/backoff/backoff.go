// Package backoff computes reconnect delays the way ActiveMQ's failover and discovery
// transports name them: initialReconnectDelay, maxReconnectDelay and backOffMultiplier.
package backoff

import (
	"context"
	"math/rand/v2"
	"time"
)

// Policy is an exponential back-off policy. The zero value is not useful; start from Default.
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
