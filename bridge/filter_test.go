package bridge_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/brokernet/brokernet/bridge"
	"github.com/brokernet/brokernet/demand"
	"github.com/brokernet/brokernet/destination"
	"github.com/brokernet/brokernet/internal/testkit/stomptest"
)

// TestContentFilters bridges ActiveMQ A to B with a connector filter
// (region = 'eu') and one for queue://filt.gold.> (tier = 'gold'). B's
// consumers get exactly the messages both select; the others stay on A,
// never delivered to the bridge, and A's own consumer takes them there.
func TestContentFilters(t *testing.T) {
	t.Parallel()
	bs := startBrokers(t, 2, false)
	a, b := bs[0], bs[1]
	gold, err := destination.ParsePattern("queue://filt.gold.>")
	if err != nil {
		t.Fatal(err)
	}
	br := startBridge(t, a.StompURI(), b.StompURI(), func(c *bridge.Config) {
		c.Demand.ContentFilters = []demand.ContentFilter{{Selector: "region = 'eu'"}, {Pattern: &gold, Selector: "tier = 'gold'"}}
	})
	plainB := stomptest.Subscribe(t, b.StompURI(), "/queue/filt.plain")
	goldB := stomptest.Subscribe(t, b.StompURI(), "/queue/filt.gold.orders")
	waitDemand(t, br, 2, 30*time.Second)

	// filt.plain: 100 eu, 100 us. filt.gold.orders: 50 eu gold, 50 eu silver, 50 us gold.
	stomptest.SendN(t, a.StompURI(), "/queue/filt.plain", 0, 100, true, "region", "eu")
	stomptest.SendN(t, a.StompURI(), "/queue/filt.plain", 100, 100, true, "region", "us")
	stomptest.SendN(t, a.StompURI(), "/queue/filt.gold.orders", 0, 50, true, "region", "eu", "tier", "gold")
	stomptest.SendN(t, a.StompURI(), "/queue/filt.gold.orders", 50, 50, true, "region", "eu", "tier", "silver")
	stomptest.SendN(t, a.StompURI(), "/queue/filt.gold.orders", 100, 50, true, "region", "us", "tier", "gold")
	plainB.WaitDistinct(100, 30*time.Second)
	goldB.WaitDistinct(50, 30*time.Second)

	// What the filters withhold stays on A: wait for the queues to settle at
	// it (the bridge has forwarded everything it was given), then check B got
	// only what they select.
	queueSize := func(q string, want int64) error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		st, err := a.QueueStats(ctx, q)
		if err != nil {
			return err
		}
		if st.Size != want {
			return fmt.Errorf("%s on A holds %d, want %d", q, st.Size, want)
		}
		return nil
	}
	for q, want := range map[string]int64{"filt.plain": 100, "filt.gold.orders": 100} {
		stomptest.Eventually(t, 30*time.Second, func() error { return queueSize(q, want) })
	}
	for _, tc := range []struct {
		c       *stomptest.Consumer
		name    string
		from, n int
	}{{plainB, "filt.plain", 0, 100}, {goldB, "filt.gold.orders", 0, 50}} {
		if got, miss := tc.c.Count(), tc.c.Missing(tc.from, tc.n); got != tc.n || len(miss) != 0 {
			t.Errorf("%s on B: %d messages (%d of seqs %d..%d missing), want exactly those", tc.name, got, len(miss), tc.from, tc.from+tc.n-1)
		}
		for _, f := range tc.c.Frames() {
			if f.Header.Get("region") != "eu" || tc.name == "filt.gold.orders" && f.Header.Get("tier") != "gold" {
				t.Fatalf("%s on B got seq %s region %q tier %q", tc.name, f.Header.Get("seq"), f.Header.Get("region"), f.Header.Get("tier"))
			}
		}
	}

	// A's own consumers take the rest, untouched: A dispatched each message
	// once, to the bridge or to them.
	plainA := stomptest.Subscribe(t, a.StompURI(), "/queue/filt.plain")
	goldA := stomptest.Subscribe(t, a.StompURI(), "/queue/filt.gold.orders")
	plainA.WaitDistinct(100, 30*time.Second)
	goldA.WaitDistinct(100, 30*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for q, onB := range map[string]int64{"filt.plain": 100, "filt.gold.orders": 50} {
		sa, err := a.QueueStats(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		sb, err := b.QueueStats(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		if sa.DispatchCount != sa.EnqueueCount || sb.EnqueueCount != onB {
			t.Errorf("%s: A enqueued %d and dispatched %d (want each once); B enqueued %d, want %d",
				q, sa.EnqueueCount, sa.DispatchCount, sb.EnqueueCount, onB)
		}
	}
	t.Logf("B got 100 of filt.plain's 200 and 50 of filt.gold.orders' 150, each selected; A's consumers the other 200, each dispatched once")
}
