package bridge_test

import (
	"fmt"

	"github.com/go-stomp/stomp/v3/frame"
	"strings"
	"testing"
	"time"

	"github.com/brokernet/brokernet/bridge"
	"github.com/brokernet/brokernet/internal/testkit/stomptest"
	"github.com/brokernet/brokernet/internal/testkit/testbroker"
)

// A message the remote broker refuses (here: larger than its STOMP connector's
// maxFrameSize, answered with an ERROR frame that ends the connection) is
// dead-lettered on the local broker after MaxRefusals, and everything behind it
// still flows.
func TestRefusedMessageIsDeadLetteredAndTheRestFlow(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("needs brokers")
	}
	a := testbroker.StartActiveMQ(t, testbroker.Options{Name: "A", ID: "A-" + t.Name(), Persistent: true})
	b := testbroker.StartActiveMQ(t, testbroker.Options{Name: "B", ID: "B-" + t.Name(),
		StompOptions: "wireFormat.maxFrameSize=1048576"})
	br := startBridge(t, a.StompURI(), b.StompURI()+"?initialReconnectDelay=50&maxReconnectDelay=200", nil)
	cons := stomptest.Subscribe(t, b.StompURI(), "/queue/orders")
	waitDemand(t, br, 1, 20*time.Second)

	big := stomptest.Dial(t, a.StompURI())
	f := frame.New(frame.SEND, frame.Destination, "/queue/orders", "persistent", "true", "big", "yes", "seq", "0")
	f.Body = []byte(strings.Repeat("x", 2<<20))
	if err := big.Request(t.Context(), f); err != nil {
		t.Fatal(err)
	}
	stomptest.SendN(t, a.StompURI(), "/queue/orders", 1, 2000, true)
	cons.WaitDistinct(2000, 90*time.Second)
	for _, f := range cons.Frames() {
		if f.Header.Get("big") != "" {
			t.Fatal("the oversized message reached the remote")
		}
	}
	if missing := cons.Missing(1, 2000); len(missing) > 0 {
		t.Fatalf("missing %d of the 2,000 small messages, e.g. %v", len(missing), missing[:min(5, len(missing))])
	}
	dlq := stomptest.Subscribe(t, a.StompURI(), "/queue/ActiveMQ.DLQ")
	dlq.WaitDistinct(1, 30*time.Second)
	f = dlq.Frames()[0]
	if f.Header.Get("big") != "yes" || f.Header.Get(bridge.DeadLetterDestinationHeader) != "queue://orders" ||
		!strings.Contains(f.Header.Get(bridge.DeadLetterReasonHeader), "maximum frame size") {
		t.Fatalf("dead letter headers: big=%q destination=%q reason=%q", f.Header.Get("big"),
			f.Header.Get(bridge.DeadLetterDestinationHeader), f.Header.Get(bridge.DeadLetterReasonHeader))
	}
	if n := br.Stats().DeadLettered.Load(); n != 1 {
		t.Fatalf("DeadLettered = %d, want 1", n)
	}
	stomptest.Eventually(t, 20*time.Second, func() error {
		if n := queueSize(t, a, "orders"); n != 0 {
			return fmt.Errorf("A still holds %d on orders", n)
		}
		return nil
	})
	t.Logf("duplicates on B: %d (bounded by the window); sessions: %d", cons.Duplicates(), br.Stats().Sessions.Load())
}
