package bridge_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/brokernet/brokernet/bridge"
	"github.com/brokernet/brokernet/destination"
	"github.com/brokernet/brokernet/internal/testkit/jmstest"
	"github.com/brokernet/brokernet/internal/testkit/stomptest"
	"github.com/brokernet/brokernet/internal/testkit/testbroker"
)

// TestCompositeConsumerWithExcludedMember is the composite-destination
// exclusion with ActiveMQ's own JMS client: a consumer on B of the composite
// queue "public.y,secret.x", secret.> excluded on the link from A, 100
// messages sent to each queue on A. B must get public.y's 100 and none of
// secret.x's, which must stay on A for its local consumers. ActiveMQ's own
// networkConnector, in the same test, gives B the same 100 but strands
// secret.x's messages on A, dispatched to its network consumer.
func TestCompositeConsumerWithExcludedMember(t *testing.T) {
	t.Parallel()
	testbroker.Require(t)
	bs := startBrokers(t, 2, false)
	a, b := bs[0], bs[1]

	t.Run("networkConnector", func(t *testing.T) {
		nb := testbroker.StartActiveMQ(t, testbroker.Options{Name: "NB", ID: "NB-" + t.Name()})
		na := testbroker.StartActiveMQ(t, testbroker.Options{
			Name: "NA", ID: "NA-" + t.Name(), NetworkConnectors: []string{nb.OpenWireURI()},
			NetworkXML: `<excludedDestinations><queue physicalName="secret.>"/></excludedDestinations>`,
		})
		onB, strandedOnA := compositeRun(t, na, nb, func(t *testing.T) {
			// The network consumer on NA's public.y is the demand.
			stomptest.Eventually(t, 30*time.Second, func() error { return consumers(na, "public.y", 1) })
		})
		if onB.public != 100 || onB.secret != 0 {
			t.Errorf("networkConnector: B got public.y %d, secret.x %d; want 100 and 0", onB.public, onB.secret)
		}
		t.Logf("networkConnector: B got public.y %d, secret.x %d; a local consumer on A got %d of secret.x's 100",
			onB.public, onB.secret, 100-strandedOnA)
	})

	for _, p := range []struct {
		name string
		uri  func(*testbroker.ActiveMQ) string
	}{
		{"brokernet over OpenWire", (*testbroker.ActiveMQ).OpenWireURI},
		{"brokernet over STOMP", (*testbroker.ActiveMQ).StompURI},
	} {
		t.Run(p.name, func(t *testing.T) {
			br := startURIBridge(t, p.uri(a), p.uri(b), excluding(t, "queue://secret.>"))
			onB, strandedOnA := compositeRun(t, a, b, func(t *testing.T) {
				// One demand subscription, on public.y: secret.x is excluded.
				waitDemand(t, br, 1, 30*time.Second)
				stomptest.Eventually(t, 30*time.Second, func() error { return consumers(a, "public.y", 1) })
			})
			if onB.public != 100 || onB.secret != 0 || onB.other != 0 {
				t.Errorf("B got public.y %d, secret.x %d, other %d; want 100, 0, 0", onB.public, onB.secret, onB.other)
			}
			if strandedOnA != 0 {
				t.Errorf("%d of secret.x's messages did not reach A's local consumer", strandedOnA)
			}
			if err := consumers(a, "secret.x", 0); err != nil {
				t.Errorf("after the run: %v", err)
			}
		})
	}
}

// compositeCounts are what the consumer of the composite received, by queue.
type compositeCounts struct{ public, secret, other int }

// compositeRun runs the composite scenario from a to b: a JMS consumer of
// "public.y,secret.x" on b, ready waits for the link's demand, 100 messages
// to each queue on a; then a local JMS consumer of secret.x on a. It returns
// what b's consumer got and how many of secret.x's 100 a's local consumer
// did not get. The queues are drained at the end for the next run.
func compositeRun(t *testing.T, a, b *testbroker.ActiveMQ, ready func(*testing.T)) (compositeCounts, int) {
	t.Helper()
	for _, q := range []string{"public.y", "secret.x"} {
		// The queues exist on a before the demand, so that its consumer count tells the demand.
		jmstest.Run(t, 60*time.Second, "Jms", "produce", a.OpenWireURI(), "queue://"+q, "0")
	}
	// B's consumer stops at 100 messages (public.y's, or a mix if the
	// exclusion leaked); A's local consumer below then finds all of
	// secret.x's 100 unless some went to B or are stranded.
	c := jmstest.Start(t, "Jms", "consume", b.OpenWireURI(), "queue://public.y,secret.x", "", "60000", "100")
	c.WaitLine(t, "READY", 30*time.Second)
	ready(t)
	for _, q := range []string{"public.y", "secret.x"} {
		out := jmstest.Run(t, 60*time.Second, "Jms", "produce", a.OpenWireURI(), "queue://"+q, "100")
		if !strings.Contains(out, "SENT 100") {
			t.Fatalf("producer on %s: %s", q, out)
		}
	}
	var got compositeCounts
	for _, l := range jmstest.Prefixed(c.Wait(t, 90*time.Second), "MSG ") {
		switch {
		case strings.HasSuffix(l, "dest=queue://public.y"):
			got.public++
		case strings.HasSuffix(l, "dest=queue://secret.x"):
			got.secret++
		default:
			got.other++
		}
	}
	// What A holds arrives at once; 5 s of silence is the networkConnector's
	// stranded messages (dispatched to its network consumer, never sent).
	local := jmstest.Run(t, 60*time.Second, "Jms", "consume", a.OpenWireURI(), "queue://secret.x", "", "5000", "100")
	n := len(jmstest.Prefixed(strings.Split(local, "\n"), "MSG "))
	return got, 100 - n
}

// consumers checks that queue q on b has n consumers.
func consumers(b *testbroker.ActiveMQ, q string, n int64) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := b.QueueStats(ctx, q)
	if err != nil {
		return err
	}
	if st.ConsumerCount != n {
		return fmt.Errorf("%s has %d consumers, want %d", q, st.ConsumerCount, n)
	}
	return nil
}

// excluding returns a bridge.Config change that excludes patterns.
func excluding(t *testing.T, patterns ...string) func(*bridge.Config) {
	t.Helper()
	f, err := destination.ParseFilter(nil, patterns)
	if err != nil {
		t.Fatal(err)
	}
	return func(c *bridge.Config) { c.Demand.Filter = f }
}
