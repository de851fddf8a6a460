package bridge_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/brokernet/brokernet/bridge"
	"github.com/brokernet/brokernet/destination"
	"github.com/brokernet/brokernet/internal/testkit/stomptest"
	"github.com/brokernet/brokernet/internal/testkit/testbroker"
)

// TestRateLimitDrainsBacklog: after an outage 10,000 persistent messages wait
// on A for a consumer on B; the bridge over OpenWire, limited to 500 messages
// a second for queue://backlog.>, drains them at that rate instead of at
// full speed (a second's worth at once, then 500 a second: never sooner than
// 19 s), while a queue outside the pattern flows at once, and loses nothing.
// Beside it, ActiveMQ's networkConnector with its own rateLimit
// (conditionalNetworkBridgeFilterFactory, a policy entry on A) on the same
// backlog: it holds its rate, but may stall with part of the backlog left
// (logged).
func TestRateLimitDrainsBacklog(t *testing.T) {
	t.Parallel()
	testbroker.Require(t)
	const n, rate = 10000, 500
	t.Run("brokernet", func(t *testing.T) {
		t.Parallel()
		bs := startBrokers(t, 2, true)
		a, b := bs[0], bs[1]
		stomptest.SendN(t, a.StompURI(), "/queue/backlog.q", 0, n, true)
		stomptest.SendN(t, a.StompURI(), "/queue/other.q", 0, 1000, true)
		c := stomptest.Subscribe(t, b.StompURI(), "/queue/backlog.q")
		other := stomptest.Subscribe(t, b.StompURI(), "/queue/other.q")
		p, err := destination.ParsePattern("queue://backlog.>")
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		br := startURIBridge(t, a.OpenWireURI(), b.OpenWireURI(), func(c *bridge.Config) {
			c.RateLimits = []bridge.RateLimit{{Pattern: &p, Messages: rate}}
		})
		waitAll(t, 1000, 30*time.Second, other)
		t.Logf("other.q: 1000 in %v", time.Since(start).Round(time.Millisecond))
		stomptest.Eventually(t, 10*time.Second, func() error {
			if w := br.Stats().RateLimited.Load(); w == 0 {
				return fmt.Errorf("no delivery waiting for the rate limit (%d of backlog.q arrived)", c.Distinct())
			}
			return nil
		})
		waitAll(t, n, 2*time.Minute, c)
		took := time.Since(start)
		t.Logf("backlog.q: %d at most %d/s drained in %v (%.0f msg/s)", n, rate, took.Round(time.Millisecond), float64(n)/took.Seconds())
		if min := time.Duration(n-rate) * time.Second / rate; took < min {
			t.Errorf("drained in %v: faster than %d/s allows (%v)", took, rate, min)
		}
	})
	t.Run("networkConnector", func(t *testing.T) {
		t.Parallel()
		b := testbroker.StartActiveMQ(t, testbroker.Options{Name: "B", Persistent: true})
		a := testbroker.StartActiveMQ(t, testbroker.Options{Name: "A", Persistent: true, NetworkConnectors: []string{b.OpenWireURI()},
			PolicyEntries: fmt.Sprintf(`<policyEntry queue="backlog.>"><networkBridgeFilterFactory><conditionalNetworkBridgeFilterFactory rateLimit="%d"/></networkBridgeFilterFactory></policyEntry>`, rate)})
		stomptest.SendN(t, a.StompURI(), "/queue/backlog.q", 0, n, true)
		start := time.Now()
		c := stomptest.Subscribe(t, b.StompURI(), "/queue/backlog.q")
		// ActiveMQ rejects the matches beyond its limit and dispatches them
		// again only when something triggers a dispatch: the backlog may
		// stall (7,500 of 10,000 in one run). Wait for all, or for no
		// progress in 15 s.
		last, lastAt := -1, time.Now()
		stomptest.Eventually(t, 3*time.Minute, func() error {
			if d := c.Distinct(); d != last {
				last, lastAt = d, time.Now()
			}
			if last < n && time.Since(lastAt) < 15*time.Second {
				return fmt.Errorf("%d of %d arrived", last, n)
			}
			return nil
		})
		took := lastAt.Sub(start)
		t.Logf("networkConnector rateLimit=%d: %d of %d arrived in %v (%.0f msg/s)%s", rate, last, n, took.Round(time.Millisecond),
			float64(last)/took.Seconds(), map[bool]string{true: "", false: ", then none for 15 s"}[last == n])
		// Its own limit, the baseline of the comparison, holds.
		if most := int(float64(rate) * (took.Seconds() + 1)); last > most {
			t.Errorf("networkConnector delivered %d in %v, more than its limit allows (%d)", last, took, most)
		}
	})
}
