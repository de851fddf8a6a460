package bridge_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	goamqp "github.com/Azure/go-amqp"
	gostomp "github.com/go-stomp/stomp/v3"

	"github.com/brokernet/brokernet/internal/testkit/jmstest"
	"github.com/brokernet/brokernet/internal/testkit/stomptest"
	"github.com/brokernet/brokernet/internal/testkit/testbroker"
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
	t.Parallel()
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
		resp := jmstest.Start(t, "RequestReply", "respond", a.OpenWireURI(), "rr.fromrabbit", "20000", fmt.Sprint(n))
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

// TestRequestReplyAMQPDynamicReceiverAcrossVendors measures an AMQP 1.0
// requester on RabbitMQ 3.10 (go-amqp) answered by a JMS responder on
// ActiveMQ 5.17, through two brokernet bridges (RabbitMQ over AMQP 1.0,
// ActiveMQ over OpenWire).
//
// A dynamic receiver (the AMQP 1.0 form of a temporary reply queue) cannot
// exist there: RabbitMQ 3.10's AMQP 1.0 plugin refuses the attach with
// amqp:not-implemented "Dynamic sources not supported" and ends the session,
// so there is no address to put in reply-to and no consumer to make demand.
// Nothing a bridge does changes that. What an AMQP 1.0 requester on 3.10 can
// do instead is name a durable reply queue; that crosses the bridges like any
// queue (measured 20 of 20). A session-bound one does not (0 of 20, below).
func TestRequestReplyAMQPDynamicReceiverAcrossVendors(t *testing.T) {
	t.Parallel()
	testbroker.Require(t)
	const n = 20
	r := testbroker.StartRabbitMQ(t, testbroker.RabbitOptions{})
	a := testbroker.StartActiveMQ(t, testbroker.Options{})
	rURI := r.AMQPURI() + "?initialReconnectDelay=100&maxReconnectDelay=1000&management=" + r.ManagementURL() +
		"&stompPort=" + strconv.Itoa(r.StompPort())
	ar := startURIBridge(t, a.OpenWireURI(), rURI, nil)
	ra := startURIBridge(t, rURI, a.OpenWireURI(), nil)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	conn, err := goamqp.Dial(ctx, "amqp://"+r.AMQPAddr(), &goamqp.ConnOptions{SASLType: goamqp.SASLTypePlain("guest", "guest")})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	t.Run("dynamic receiver", func(t *testing.T) {
		sess, err := conn.NewSession(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer sess.Close(ctx)
		rcv, err := sess.NewReceiver(ctx, "", &goamqp.ReceiverOptions{DynamicAddress: true, Credit: -1})
		var ae *goamqp.Error
		if err == nil {
			t.Fatalf("RabbitMQ 3.10 attached a dynamic receiver, address %q: measure request/reply with it", rcv.Address())
		}
		t.Logf("dynamic receiver on RabbitMQ: %v", err)
		if !errors.As(err, &ae) || ae.Condition != goamqp.ErrCondNotImplemented {
			t.Errorf("attach error %v, want %s (Dynamic sources not supported)", err, goamqp.ErrCondNotImplemented)
		}
	})

	named := func(t *testing.T, queue string, durable bool) (replies int, responder []string) {
		resp := jmstest.Start(t, "RequestReply", "respond", a.OpenWireURI(), queue, "20000", fmt.Sprint(n))
		resp.WaitLine(t, "READY", 60*time.Second)
		waitDemand(t, ra, 1, 60*time.Second)
		sess, err := conn.NewSession(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer sess.Close(ctx)
		replyTo := "/queue/" + queue + ".replies"
		// Manual credit: go-amqp's automatic credit stalls against 3.10
		// (shared/reference/verified-here.md).
		// A durable terminus makes RabbitMQ 3.10 declare the queue durable,
		// as the bridge's links do; otherwise it is exclusive and
		// auto-delete, bound to the session (transport/amqp durableTerminus).
		ro := &goamqp.ReceiverOptions{Credit: -1}
		if durable {
			ro.SourceDurability = goamqp.DurabilityUnsettledState
		}
		rcv, err := sess.NewReceiver(ctx, replyTo, ro)
		if err != nil {
			t.Fatal(err)
		}
		if err := rcv.IssueCredit(n); err != nil {
			t.Fatal(err)
		}
		// The reply queue's demand: a consumer of it on ActiveMQ. (Not a
		// count of ar's demand subscriptions: ar also takes ra's AMQP 1.0
		// consumer of the request queue on RabbitMQ for demand, which comes
		// and goes with the responder; waiting for a count of 1 once let
		// the responder's 60 s idle run out before the requests were sent.)
		stomptest.Eventually(t, 60*time.Second, func() error {
			sctx, sc := context.WithTimeout(ctx, 10*time.Second)
			defer sc()
			st, err := a.QueueStats(sctx, queue+".replies")
			if err == nil && st.ConsumerCount == 0 {
				err = errors.New("no consumer")
			}
			if err != nil {
				return fmt.Errorf("ActiveMQ %s.replies: %w", queue, err)
			}
			return nil
		})
		snd, err := sess.NewSender(ctx, "/queue/"+queue, &goamqp.SenderOptions{TargetDurability: goamqp.DurabilityUnsettledState})
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < n; i++ {
			m := goamqp.NewMessage([]byte(fmt.Sprint("request ", i)))
			rt := replyTo
			m.Properties = &goamqp.MessageProperties{ReplyTo: &rt, CorrelationID: fmt.Sprint("req-", i)}
			if err := snd.Send(ctx, m, nil); err != nil {
				t.Fatal(err)
			}
		}
		got := map[string]bool{}
		for len(got) < n {
			rctx, rc := context.WithTimeout(ctx, 15*time.Second)
			m, err := rcv.Receive(rctx, nil)
			rc()
			if err != nil {
				t.Logf("after %d of %d replies: %v", len(got), n, err)
				break
			}
			if err := rcv.AcceptMessage(ctx, m); err != nil {
				t.Fatal(err)
			}
			if err := rcv.IssueCredit(1); err != nil {
				t.Fatal(err)
			}
			if m.Properties != nil && m.Properties.CorrelationID != nil {
				got[fmt.Sprint(m.Properties.CorrelationID)] = true
			}
		}
		if len(got) < n {
			sctx, sc := context.WithTimeout(ctx, 10*time.Second)
			st, err := a.QueueStats(sctx, queue)
			sc()
			t.Logf("ActiveMQ %s stats %+v (%v); bridge demand subscriptions %d and %d", queue, st, err,
				ar.Stats().DemandSubs.Load(), ra.Stats().DemandSubs.Load())
			rs := rabbitSide{r: r}
			t.Logf("RabbitMQ %s %d, %s.replies %d; ActiveMQ %s %d, replies %d, DLQ %d", queue, rs.Depth(t, queue), queue, rs.Depth(t, queue+".replies"),
				queue, queueSize(t, a, queue), queueSize(t, a, queue+".replies"), queueSize(t, a, "ActiveMQ.DLQ"))
		}
		out := resp.Wait(t, 60*time.Second)
		t.Logf("requester on RabbitMQ (AMQP 1.0, reply-to %s, durable terminus %v): %d of %d replies; responder on ActiveMQ: %s",
			replyTo, durable, len(got), n, strings.Join(out, " | "))
		return len(got), out
	}
	t.Run("named reply queue", func(t *testing.T) {
		replies, out := named(t, "rr.amqp", true)
		if replies != n {
			t.Errorf("%d of %d replies", replies, n)
		}
		if want := "REQUEST replyTo=queue://rr.amqp.replies"; len(jmstest.Prefixed(out, want)) != n {
			t.Errorf("responder: want %d lines %q", n, want)
		}
	})
	// A reply queue bound to the requester's session (non-durable terminus:
	// RabbitMQ declares it exclusive, auto-delete and not durable), the
	// nearest thing 3.10 has to a dynamic receiver. The responder gets the
	// reply-to, but the bridge's sender attaches with a durable terminus and
	// RabbitMQ refuses it ("PRECONDITION_FAILED - inequivalent arg 'durable'"):
	// each reply is dead-lettered on ActiveMQ after its refusals.
	t.Run("session reply queue", func(t *testing.T) {
		replies, out := named(t, "rr.amqpx", false)
		if replies != 0 {
			t.Errorf("%d of %d replies through a session-bound reply queue, measured 0: update docs/request-reply.md", replies, n)
		}
		if want := "REQUEST replyTo=queue://rr.amqpx.replies"; len(jmstest.Prefixed(out, want)) != n {
			t.Errorf("responder: want %d lines %q", n, want)
		}
		if got := queueSize(t, a, "ActiveMQ.DLQ"); got != n {
			t.Errorf("ActiveMQ.DLQ holds %d messages, want the %d replies", got, n)
		}
	})
	if s1, s2 := ar.Stats().Sessions.Load(), ra.Stats().Sessions.Load(); s1 != 1 || s2 != 1 {
		t.Errorf("bridge sessions %d and %d, want 1 each (no reconnects)", s1, s2)
	}
}
