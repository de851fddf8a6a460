package openwire

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/brokernet/brokernet/bridge"
	"github.com/brokernet/brokernet/demand"
	"github.com/brokernet/brokernet/internal/testkit/stomptest"
	"github.com/brokernet/brokernet/internal/testkit/testbroker"
)

// TestBridgeOverOpenWireKeepsJMSSelectorsWorking is issue 13's scenario
// through the bridge: a JMS consumer on B with a typed selector, a JMS
// producer on A, a brokernet bridge A→B over OpenWire between them.
func TestBridgeOverOpenWireKeepsJMSSelectorsWorking(t *testing.T) {
	if testing.Short() {
		t.Skip("needs ActiveMQ and a JDK")
	}
	java := javaClient(t)
	a := testbroker.StartActiveMQ(t, testbroker.Options{ID: "A-jms"})
	b := testbroker.StartActiveMQ(t, testbroker.Options{ID: "B-jms"})
	br := startBridge(t, a, b)

	// The consumer on B stops at the 7 messages its selector matches (or
	// after a minute of silence); the 13 others must stay on A (below).
	var out bytes.Buffer
	consumer := exec.Command("java", "-cp", javaClasspath, "Jms", "consume", b.OpenWireURI(), "jms.bridged", "intProp > 5 AND boolProp = TRUE", "60000", "7")
	consumer.Stdout = &out
	if err := consumer.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { consumer.Process.Kill(); consumer.Wait() })
	stomptest.Eventually(t, 30*time.Second, func() error {
		if n := br.Stats().DemandSubs.Load(); n != 1 {
			return fmt.Errorf("bridge has %d demand subscriptions, want 1", n)
		}
		return nil
	})
	java("produce", a.OpenWireURI(), "jms.bridged", "20")
	if err := consumer.Wait(); err != nil {
		t.Fatalf("consumer: %v\n%s", err, out.String())
	}
	t.Logf("JMS consumer on B:\n%s", out.String())
	if !strings.Contains(out.String(), "COUNT 7\n") ||
		!strings.Contains(out.String(), "MSG intProp=Integer:8 longProp=Long:10000000008 boolProp=Boolean:true doubleProp=Double:8.5") {
		t.Fatalf("JMS consumer on B got the wrong messages:\n%s", out.String())
	}
	// The 13 that match nobody stay on A for local consumers.
	stomptest.Eventually(t, 10*time.Second, func() error {
		st, err := a.QueueStats(context.Background(), "jms.bridged")
		if err != nil {
			return err
		}
		if st.Size != 13 {
			return fmt.Errorf("A holds %d, want 13", st.Size)
		}
		return nil
	})
}

// startBridge runs a bridge from a to b over OpenWire on both sides until
// the test ends, and waits until it is up.
func startBridge(t *testing.T, a, b *testbroker.ActiveMQ) *bridge.Bridge {
	t.Helper()
	local, err := ParseURI(a.OpenWireURI())
	if err != nil {
		t.Fatal(err)
	}
	remote, err := ParseURI(b.OpenWireURI())
	if err != nil {
		t.Fatal(err)
	}
	br, err := bridge.New(bridge.Config{
		Local: local, Remote: remote,
		Demand: demand.Options{Conduit: true, ConsumerTTL: 1, MessageTTL: 1, PriorityBase: -5, Prefetch: 1000},
		Log:    stomptest.Logger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- br.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("bridge did not stop")
		}
	})
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	if err := br.WaitUp(wctx); err != nil {
		t.Fatalf("bridge never came up: %v", err)
	}
	return br
}
