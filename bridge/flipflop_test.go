package bridge_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/brokernet/brokernet/bridge"
	"github.com/brokernet/brokernet/hop"
	"github.com/brokernet/brokernet/internal/testkit/stomptest"
	"github.com/brokernet/brokernet/internal/testkit/testbroker"
)

// TestNoFlipFlop: 300 messages wait for a consumer that moves between A and
// B every second for 12 s (a consumer that takes one message and never
// acknowledges it), duplex bridges with replay on. Uncapped (ActiveMQ's
// replayWhenNoConsumers has no cap), messages follow it back and forth, one
// move a second. With maxReplays 3 and a 300 ms cool-down none moves more than
// three times. With a 5 s cool-down and no cap, moves are 5 s apart: none
// moves more than three times in the 12 s. Then consumers on both brokers take everything:
// nothing lost. The distribution of moves per message is logged.
func TestNoFlipFlop(t *testing.T) {
	t.Parallel()
	testbroker.Require(t)
	for _, tc := range []struct {
		name     string
		cap      int
		cooldown time.Duration
		wantMax  int // most moves allowed; 0: must exceed 3 (the flip-flop shown)
	}{
		{"uncapped", 0, -1, 0},
		{"cap 3, cool-down 300ms", 3, 300 * time.Millisecond, 3},
		{"cool-down 5s", 0, 5 * time.Second, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			const n = 300
			bs := startBrokers(t, 2, false)
			a, b := bs[0], bs[1]
			duplex(t, a, b, func(c *bridge.Config) {
				c.Demand.ReplayWhenNoConsumers = true
				c.Demand.MaxReplays = tc.cap
				c.ReplayCooldown = tc.cooldown
			})
			stomptest.SendN(t, a.StompURI(), "/queue/ff", 0, n, false)
			// The moving consumer: prefetch 1, never acknowledges.
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			for i := range 12 {
				uri := []string{b.StompURI(), a.StompURI()}[i%2]
				hold := stomptest.Dial(t, uri)
				if err := hold.Subscribe(ctx, "hold", "/queue/ff", "client-individual", "activemq.prefetchSize", "1"); err != nil {
					t.Fatal(err)
				}
				time.Sleep(time.Second) // the consumer stays a second: the fault being simulated
				if err := hold.Close(ctx); err != nil {
					t.Fatal(err)
				}
			}
			ca := stomptest.Subscribe(t, a.StompURI(), "/queue/ff")
			cb := stomptest.Subscribe(t, b.StompURI(), "/queue/ff")
			waitAll(t, n, time.Minute, ca, cb)
			dist := map[int]int{}
			for _, c := range []*stomptest.Consumer{ca, cb} {
				for _, f := range c.Frames() {
					moves, _ := strconv.Atoi(f.Header.Get(hop.MovesHeader))
					dist[moves]++
				}
			}
			most := slices.Max(slices.Collect(maps.Keys(dist)))
			var line string
			for _, m := range slices.Sorted(maps.Keys(dist)) {
				line += fmt.Sprintf(" %d moves: %d;", m, dist[m])
			}
			t.Logf("moves per message (A took %d, B %d):%s", ca.Distinct(), cb.Distinct(), line)
			switch {
			case tc.wantMax == 0 && most <= 3:
				t.Errorf("uncapped, the most moves was %d: the moving consumer did not make messages flip-flop", most)
			case tc.wantMax > 0 && most > tc.wantMax:
				t.Errorf("a message moved %d times, want at most %d", most, tc.wantMax)
			}
		})
	}
}
