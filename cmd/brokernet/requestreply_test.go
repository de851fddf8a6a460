package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/brokernet/brokernet/internal/testkit/jmstest"
	"github.com/brokernet/brokernet/internal/testkit/testbroker"
)

// TestRequestReplyThroughTheBridgeCommand is issue 23's measurement as a user
// runs it: `brokernet bridge tcp://A tcp://B --duplex`, ActiveMQ's JMS client
// on both ends, a requester on B with a temporary queue per request (as
// JmsTemplate), a responder on A. With the default bridgeTempDestinations
// every reply arrives; with --bridge-temp-destinations=false none can.
func TestRequestReplyThroughTheBridgeCommand(t *testing.T) {
	t.Parallel()
	testbroker.Require(t)
	for _, tc := range []struct {
		flags   []string
		timeout string // a request's wait for its reply, ms
		want    string
	}{
		{nil, "10000", "REPLIES 50 TIMEOUTS 0"},
		{[]string{"--bridge-temp-destinations=false"}, "3000", "REPLIES 0 TIMEOUTS 5"},
	} {
		t.Run(fmt.Sprintf("flags %q", tc.flags), func(t *testing.T) {
			a, b := startPair(t)
			startBridgeProc(t, append(tc.flags, "--duplex", a.OpenWireURI(), b.OpenWireURI())...)
			resp := jmstest.Start(t, "RequestReply", "respond", a.OpenWireURI(), "rr.cli", "20000", "50")
			resp.WaitLine(t, "READY", 60*time.Second)
			waitConsumers(t, b, "rr.cli", 1) // the responder's demand reached B
			out := jmstest.Run(t, 3*time.Minute, "RequestReply", "request", b.OpenWireURI(), "rr.cli", "50", tc.timeout, "perrequest")
			t.Logf("brokernet bridge --duplex %s: replies%s", strings.Join(tc.flags, " "), strings.Join(jmstest.Prefixed(strings.Split(out, "\n"), "REPLIES"), ""))
			if !strings.Contains(out, tc.want) {
				t.Fatalf("requester: %s, want %s", out, tc.want)
			}
		})
	}
}
