package bridge_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/brokernet/brokernet/bridge"
	"github.com/brokernet/brokernet/internal/testkit/stomptest"
	"github.com/brokernet/brokernet/internal/testkit/testbroker"
)

// slowPolicy gives B's slow.> queues a 1 MB memory limit with producer flow
// control: once full, ActiveMQ blocks whoever sends to them.
const slowPolicy = `<policyEntry queue="slow.>" producerFlowControl="true" memoryLimit="1mb"/>`

// blockSlowQueue fills slow.q on b: a consumer that takes one message and
// never acknowledges it, so that what the bridge forwards there piles up to
// the memory limit. It returns a func that closes that consumer.
func blockSlowQueue(t *testing.T, b *testbroker.ActiveMQ) (release func()) {
	t.Helper()
	c := stomptest.Dial(t, b.StompURI())
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := c.Subscribe(ctx, "stuck", "/queue/slow.q", "client-individual", "activemq.prefetchSize", "1"); err != nil {
		t.Fatal(err)
	}
	return c.Abort
}

// TestIsolationBlockedDestination: B's queue slow.q is full (a 1 MB memory
// limit with producer flow control, its consumer took one message and never
// acknowledged it); 3,000 messages of 1 KiB are sent to slow.q on A, then
// 1,000 to fast.q, whose consumer on B is healthy. Every fast.q message must
// reach it while slow.q stays blocked, over OpenWire and over STOMP; the
// bridge reports slow.q blocked, and once slow.q's consumer is healthy again
// every slow.q message arrives too. Before messages went one by one
// (Config.Batched), 0 of the 1,000 fast.q messages arrived: ActiveMQ blocks the
// thread that reads a connection for a transacted send to a full
// destination, and with it the rest of the connection.
//
// ActiveMQ's own networkConnector (alwaysSyncSend true by default in 5.17)
// runs the same load beside it, as the baseline.
func TestIsolationBlockedDestination(t *testing.T) {
	t.Parallel()
	const slowN, fastN = 3000, 1000
	body := bytes.Repeat([]byte("x"), 1024)
	run := func(t *testing.T, a, b *testbroker.ActiveMQ, waitDemand func(), br *running) {
		release := blockSlowQueue(t, b)
		fast := stomptest.Subscribe(t, b.StompURI(), "/queue/fast.q")
		waitDemand()
		prod := stomptest.Dial(t, a.StompURI())
		if err := stomptest.SendBody(context.Background(), prod, "/queue/slow.q", 0, slowN, false, body); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if err := stomptest.SendBody(context.Background(), prod, "/queue/fast.q", 0, fastN, false, body); err != nil {
			t.Fatal(err)
		}
		fast.WaitDistinct(fastN, 90*time.Second)
		t.Logf("fast.q: %d of %d in %s while slow.q is blocked", fast.Distinct(), fastN, time.Since(start).Round(time.Millisecond))
		if br != nil {
			stomptest.Eventually(t, 30*time.Second, func() error {
				bl := br.Blocked()
				if len(bl) != 1 || bl[0].Destination != "queue://slow.q" {
					return fmt.Errorf("blocked destinations %+v, want queue://slow.q", bl)
				}
				if n := br.Stats().BlockedDestinations.Load(); n != 1 {
					return fmt.Errorf("BlockedDestinations %d, want 1", n)
				}
				return nil
			})
			t.Logf("reported blocked: %+v", br.Blocked())
		}
		release()
		slow := stomptest.Subscribe(t, b.StompURI(), "/queue/slow.q")
		// The stuck consumer's one message went back to slow.q with its close.
		slow.WaitDistinct(slowN, 2*time.Minute)
		if br != nil {
			stomptest.Eventually(t, 30*time.Second, func() error {
				if bl := br.Blocked(); len(bl) != 0 {
					return fmt.Errorf("still reported blocked: %+v", bl)
				}
				return nil
			})
		}
	}
	for _, p := range activeMQProtocols {
		t.Run(p.name, func(t *testing.T) {
			testbroker.Require(t)
			a := testbroker.StartActiveMQ(t, testbroker.Options{Name: "A"})
			b := testbroker.StartActiveMQ(t, testbroker.Options{Name: "B", PolicyEntries: slowPolicy})
			br := startURIBridge(t, p.uri(a), p.uri(b), func(c *bridge.Config) { c.BlockedAfter = 2 * time.Second })
			run(t, a, b, func() { waitDemand(t, br, 2, 30*time.Second) }, br)
			if s := br.Stats().Sessions.Load(); s != 1 {
				t.Errorf("the bridge had %d sessions, want 1", s)
			}
		})
	}
	t.Run("networkConnector", func(t *testing.T) {
		testbroker.Require(t)
		b := testbroker.StartActiveMQ(t, testbroker.Options{Name: "B", PolicyEntries: slowPolicy})
		a := testbroker.StartActiveMQ(t, testbroker.Options{Name: "A", NetworkConnectors: []string{b.OpenWireURI()}})
		run(t, a, b, func() {
			// The network consumers on A are the demand.
			stomptest.Eventually(t, 30*time.Second, func() error { return consumers(a, "slow.q", 1) })
			stomptest.Eventually(t, 30*time.Second, func() error { return consumers(a, "fast.q", 1) })
		}, nil)
	})
}
