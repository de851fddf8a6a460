package bridge_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	gostomp "github.com/go-stomp/stomp/v3"

	"github.com/brokernet/brokernet/internal/jmstest"
	"github.com/brokernet/brokernet/internal/testbroker"
)

// TestRequestReplyAcrossVendors measures request/reply between RabbitMQ 3.10
// and ActiveMQ 5.17 through two brokernet bridges (RabbitMQ over STOMP,
// ActiveMQ over OpenWire). Neither broker can address the other's temporary
// reply destinations: RabbitMQ's STOMP rewrites a reply-to "/temp-queue/X"
// to "/reply-queue/amq.gen-…", which has no ActiveMQ form, and RabbitMQ's
// STOMP refuses a SEND whose reply-to is an ActiveMQ temporary queue
// ("/remote-temp-queue/ID:…": ERROR "Processing error", connection closed).
// The bridges deliver the requests without the reply-to (no reply can come
// back) instead of reconnecting and sending them again forever, which is what
// happened before (measured: the bridge down every second, each request
// dead-lettered after 3 refusals).
func TestRequestReplyAcrossVendors(t *testing.T) {
	testbroker.Require(t)
	const n = 5
	r := testbroker.StartRabbitMQ(t, testbroker.RabbitOptions{})
	a := testbroker.StartActiveMQ(t, testbroker.Options{})
	rURI := r.StompURI() + "?initialReconnectDelay=100&maxReconnectDelay=1000&management=" + r.ManagementURL()
	ar := startURIBridge(t, a.OpenWireURI(), rURI, nil)
	ra := startURIBridge(t, rURI, a.OpenWireURI(), nil)
	dial := func() *gostomp.Conn {
		c, err := gostomp.Dial("tcp", r.StompAddr(), gostomp.ConnOpt.Login("guest", "guest"), gostomp.ConnOpt.Host("/"),
			gostomp.ConnOpt.Logger(testbroker.QuietLogger{}))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Disconnect() })
		return c
	}

	t.Run("requester on RabbitMQ, responder on ActiveMQ", func(t *testing.T) {
		resp := jmstest.Start(t, "RequestReply", "respond", a.OpenWireURI(), "rr.fromrabbit", "5000")
		resp.WaitLine(t, "READY", 60*time.Second)
		waitDemand(t, ra, 1, 60*time.Second)
		c := dial()
		// RabbitMQ makes the temporary queue for the reply-to of a SEND
		// (a SUBSCRIBE to /temp-queue/ is an "Invalid destination").
		for i := 0; i < n; i++ {
			if err := c.Send("/queue/rr.fromrabbit", "text/plain", []byte(fmt.Sprint("request ", i)),
				gostomp.SendOpt.Header("reply-to", "/temp-queue/replies")); err != nil {
				t.Fatal(err)
			}
		}
		out := resp.Wait(t, 60*time.Second)
		t.Logf("requester on RabbitMQ (reply-to /temp-queue/replies); responder on ActiveMQ: %s", strings.Join(out, " | "))
		if got := len(jmstest.Prefixed(out, "REQUEST replyTo=null")); got != n {
			t.Errorf("responder got %d requests without JMSReplyTo, want %d", got, n)
		}
	})

	t.Run("requester on ActiveMQ, responder on RabbitMQ", func(t *testing.T) {
		c := dial()
		sub, err := c.Subscribe("/queue/rr.torabbit", gostomp.AckAuto)
		if err != nil {
			t.Fatal(err)
		}
		waitDemand(t, ar, 1, 60*time.Second)
		out := jmstest.Run(t, 2*time.Minute, "RequestReply", "request", a.OpenWireURI(), "rr.torabbit", fmt.Sprint(n), "2000", "perrequest")
		var replyTos []string
		for len(replyTos) < n {
			select {
			case m := <-sub.C:
				if m.Err != nil {
					t.Fatal(m.Err)
				}
				replyTos = append(replyTos, fmt.Sprintf("%q", m.Header.Get("reply-to")))
			case <-time.After(10 * time.Second):
				t.Fatalf("responder on RabbitMQ got %d of %d requests", len(replyTos), n)
			}
		}
		t.Logf("requester on ActiveMQ (JMS temporary queue): %s; responder on RabbitMQ got %d requests, reply-to %s",
			strings.Join(strings.Fields(out), " "), len(replyTos), strings.Join(replyTos, " "))
		if !strings.Contains(out, fmt.Sprintf("REPLIES 0 TIMEOUTS %d", n)) {
			t.Errorf("requester: %s", out)
		}
	})
	// The bridges never went down on the way.
	if s1, s2 := ar.Stats().Sessions.Load(), ra.Stats().Sessions.Load(); s1 != 1 || s2 != 1 {
		t.Errorf("bridge sessions %d and %d, want 1 each (no reconnects)", s1, s2)
	}
}
