package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/brokernet/brokernet/internal/testkit/stomptest"
)

// TestBridgeOverOpenWireURIs runs `brokernet bridge tcp://A tcp://B`: both
// brokers are reached over OpenWire, and messages move on demand only.
func TestBridgeOverOpenWireURIs(t *testing.T) {
	a, b := startPair(t)
	p := startBridgeProc(t, a.OpenWireURI(), b.OpenWireURI())

	c := stomptest.Subscribe(t, b.StompURI(), "/queue/ow.orders")
	waitConsumers(t, a, "ow.orders", 1)
	stomptest.SendN(t, a.StompURI(), "/queue/ow.orders", 0, 200, true)
	// No consumer on B for ow.idle: the running bridge (it created the demand
	// above) leaves its messages on A.
	stomptest.SendN(t, a.StompURI(), "/queue/ow.idle", 0, 10, true)
	c.WaitDistinct(200, 60*time.Second)
	if logs := p.logs.String(); !strings.Contains(logs, `"local_protocol":"openwire","remote_protocol":"openwire"`) {
		t.Errorf("the bridge did not connect over OpenWire on both sides:\n%s", logs)
	}
	if d := c.Duplicates(); d != 0 {
		t.Errorf("%d duplicates", d)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := a.QueueStats(ctx, "ow.idle")
	if err != nil {
		t.Fatal(err)
	}
	if st.Size != 10 || st.ConsumerCount != 0 {
		t.Fatalf("ow.idle on A without demand: size %d, consumers %d; want 10 and 0", st.Size, st.ConsumerCount)
	}
}
