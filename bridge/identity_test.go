package bridge_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/brokernet/brokernet/bridge"
	"github.com/brokernet/brokernet/demand"
	"github.com/brokernet/brokernet/destination"
	"github.com/brokernet/brokernet/internal/testkit/amqptest"
	"github.com/brokernet/brokernet/internal/testkit/jmstest"
	"github.com/brokernet/brokernet/internal/testkit/stomptest"
	"github.com/brokernet/brokernet/internal/testkit/testbroker"
	"github.com/brokernet/brokernet/transport"
)

// Message identity (identity.go), seen by ActiveMQ's own JMS client.

// jmsProduce sends n text messages with int property i = 0…n-1 to dest with
// ActiveMQ's JMS client and returns the JMSMessageID the producer got for each.
func jmsProduce(t *testing.T, url, dest string, n int, persistent bool) []string {
	t.Helper()
	mode := map[bool]string{true: "persistent", false: "nonpersistent"}[persistent]
	out := jmstest.Run(t, 2*time.Minute, "Jms", "produce", url, dest, strconv.Itoa(n), mode)
	ids := jmstest.Prefixed(strings.Split(out, "\n"), "ID ")
	if len(ids) != n {
		t.Fatalf("the JMS producer printed %d ids, want %d:\n%s", len(ids), n, out)
	}
	return ids
}

// startIdent starts an Ident consumer of dest (all messages when selector is
// "") that ends after n messages or max, and waits until it consumes.
func startIdent(t *testing.T, url, dest, selector string, n int, max time.Duration) *jmstest.Proc {
	t.Helper()
	p := jmstest.Start(t, "Ident", "consume", url, dest, selector, strconv.Itoa(n), strconv.FormatInt(max.Milliseconds(), 10))
	p.WaitLine(t, "READY", time.Minute)
	return p
}

// sameIDs counts the messages whose JMSMessageID is the producer's.
func sameIDs(sent []string, got []jmstest.IdentMsg) int {
	n := 0
	for _, m := range got {
		if m.I >= 0 && m.I < len(sent) && m.ID == sent[m.I] {
			n++
		}
	}
	return n
}

func mustPattern(t *testing.T, s string) destination.Pattern {
	t.Helper()
	p, err := destination.ParsePattern(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestMessageIDsKeptLikeTheNetworkConnector: ActiveMQ's own networkConnector
// A→B (for queue ids.native) and a brokernet bridge A→B over OpenWire (for
// queue ids.bn) side by side: a JMS consumer on B sees the JMSMessageID the
// JMS producer on A got, 100 of 100, on both paths (before: 0 of 100 through
// brokernet).
func TestMessageIDsKeptLikeTheNetworkConnector(t *testing.T) {
	t.Parallel()
	testbroker.Require(t)
	const n = 100
	b := testbroker.StartActiveMQ(t, testbroker.Options{Name: "B", ID: "B-" + t.Name()})
	a := testbroker.StartActiveMQ(t, testbroker.Options{Name: "A", ID: "A-" + t.Name(),
		NetworkConnectors: []string{b.OpenWireURI()},
		NetworkXML:        `<dynamicallyIncludedDestinations><queue physicalName="ids.native"/></dynamicallyIncludedDestinations>`})
	d := defaultDemand()
	d.Filter.Exclude = []destination.Pattern{mustPattern(t, "queue://ids.native")}
	br := runBridge(t, bridge.Config{
		Local: openwireSide{activemqSide{a}}.Endpoint(t), Remote: openwireSide{activemqSide{b}}.Endpoint(t),
		Demand: d, Log: stomptest.Logger(t),
	})
	native := startIdent(t, b.OpenWireURI(), "queue://ids.native", "", n, 2*time.Minute)
	bn := startIdent(t, b.OpenWireURI(), "queue://ids.bn", "", n, 2*time.Minute)
	stomptest.Eventually(t, 30*time.Second, func() error { return a.CheckQueueConsumers("ids.native", 1) })
	waitDemand(t, br, 1, 30*time.Second)

	sentNative := jmsProduce(t, a.OpenWireURI(), "queue://ids.native", n, true)
	sentBN := jmsProduce(t, a.OpenWireURI(), "queue://ids.bn", n, true)
	gotNative := jmstest.IdentMsgs(t, native.Wait(t, 2*time.Minute))
	gotBN := jmstest.IdentMsgs(t, bn.Wait(t, 2*time.Minute))
	sn, sb := sameIDs(sentNative, gotNative), sameIDs(sentBN, gotBN)
	t.Logf("JMSMessageID on B equal to the producer's on A: networkConnector %d of %d, brokernet over OpenWire %d of %d", sn, len(gotNative), sb, len(gotBN))
	if len(gotNative) != n || sn != n {
		t.Errorf("networkConnector: %d of %d received, %d with the producer's id", len(gotNative), n, sn)
	}
	if len(gotBN) != n || sb != n {
		t.Errorf("brokernet: %d of %d received, %d with the producer's id", len(gotBN), n, sb)
	}
}

// TestReplayToTheOriginIsNotADuplicate: a queue message that comes back to
// the broker it started on (a replay: its consumer moved there) must not be
// taken for a duplicate of itself. ActiveMQ's queue remembers the ids it was
// sent (the cursor audit) and forgets one only when a network subscription
// acknowledges it, which brokernet's demand subscriptions are not; so the
// replay gets an id of its own. Persistent brokers, over OpenWire both ways,
// persistent messages: all 100 come back to a JMS consumer on A.
func TestReplayToTheOriginIsNotADuplicate(t *testing.T) {
	t.Parallel()
	bs := startBrokers(t, 2, true)
	a, b := bs[0], bs[1]
	const n, q = 100, "replay.ids"
	cfg := func(local, remote *testbroker.ActiveMQ) bridge.Config {
		d := defaultDemand()
		d.ReplayWhenNoConsumers = true
		return bridge.Config{
			Local: openwireSide{activemqSide{local}}.Endpoint(t), Remote: openwireSide{activemqSide{remote}}.Endpoint(t),
			Demand: d, Log: stomptest.Logger(t),
		}
	}
	ab := runBridge(t, cfg(a, b))
	ba := runBridge(t, cfg(b, a))
	// A consumer on B that takes one message and never acknowledges it, so
	// that what A→B forwards waits on B.
	hold := stomptest.Dial(t, b.StompURI())
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := hold.Subscribe(ctx, "hold", "/queue/"+q, "client-individual", "activemq.prefetchSize", "1"); err != nil {
		t.Fatal(err)
	}
	// A→B's demand and B→A's replay subscription (A has no consumer).
	stomptest.Eventually(t, 30*time.Second, func() error { return a.CheckQueueConsumers(q, 2) })
	sent := jmsProduce(t, a.OpenWireURI(), "queue://"+q, n, true)
	stomptest.Eventually(t, 30*time.Second, func() error {
		if f := ab.Stats().Forwarded.Load(); f != n {
			return fmt.Errorf("A->B forwarded %d of %d", f, n)
		}
		return nil
	})
	if err := hold.Close(ctx); err != nil {
		t.Fatal(err)
	}
	got := jmstest.IdentMsgs(t, startIdent(t, a.OpenWireURI(), "queue://"+q, "", n, 90*time.Second).Wait(t, 2*time.Minute))
	seen := map[int]bool{}
	for _, m := range got {
		seen[m.I] = true
	}
	t.Logf("A's JMS consumer got %d messages (%d distinct) back from B (B->A forwarded %d), %d with the producer's id",
		len(got), len(seen), ba.Stats().Forwarded.Load(), sameIDs(sent, got))
	if len(seen) != n || len(got) != n {
		t.Fatalf("%d messages (%d distinct) came back to A, want %d", len(got), len(seen), n)
	}
	for _, m := range got {
		if want := sent[m.I]; !strings.Contains(m.ID, "-bnr2:") {
			t.Errorf("message %d came back as %s, want an id derived from %s", m.I, m.ID, want)
			break
		}
	}
}

// TestMessageIdentityOverSTOMPAndAMQP: from ActiveMQ (A, over OpenWire) to
// another ActiveMQ over STOMP, which assigns its own ids, the producer's
// JMSMessageID travels in BrokernetID; from A over STOMP (ActiveMQ's
// message-id header) to B over OpenWire it is kept; to RabbitMQ over AMQP 1.0 it is the
// message-id. From RabbitMQ over AMQP 1.0 to ActiveMQ over OpenWire, a
// publisher's message-id in ActiveMQ's form becomes the JMSMessageID, another
// travels in BrokernetID (ActiveMQ prints an id
// without its "ID:" prefix with one).
func TestMessageIdentityOverSTOMPAndAMQP(t *testing.T) {
	t.Parallel()
	const n = 100
	r := testbroker.StartRabbitMQ(t, testbroker.RabbitOptions{})
	bs := startBrokers(t, 2, false)
	a, b := bs[0], bs[1]
	rs := rabbitSide{r: r, amqp: true}
	only := func(q string) demand.Options {
		d := defaultDemand()
		d.Filter.Include = []destination.Pattern{mustPattern(t, "queue://"+q)}
		return d
	}
	toB := runBridge(t, bridge.Config{
		Local: openwireSide{activemqSide{a}}.Endpoint(t), Remote: stomptest.URI(t, b.StompURI()),
		Demand: only("ids.stomp"), Log: stomptest.Logger(t),
	})
	fromSTOMP := runBridge(t, bridge.Config{
		Local: stomptest.URI(t, a.StompURI()), Remote: openwireSide{activemqSide{b}}.Endpoint(t),
		Demand: only("ids.s2o"), Log: stomptest.Logger(t),
	})
	toR := runBridge(t, bridge.Config{
		Local: openwireSide{activemqSide{a}}.Endpoint(t), Remote: rs.Endpoint(t),
		Demand: defaultDemand(), Log: stomptest.Logger(t),
	})
	fromR := runBridge(t, bridge.Config{
		Local: rs.Endpoint(t), Remote: openwireSide{activemqSide{a}}.Endpoint(t),
		Demand: defaultDemand(), Log: stomptest.Logger(t),
	})

	t.Run("STOMP carries the original in BrokernetID", func(t *testing.T) {
		c := startIdent(t, b.OpenWireURI(), "queue://ids.stomp", "", n, 2*time.Minute)
		waitDemand(t, toB, 1, 30*time.Second)
		sent := jmsProduce(t, a.OpenWireURI(), "queue://ids.stomp", n, true)
		got := jmstest.IdentMsgs(t, c.Wait(t, 2*time.Minute))
		orig, same := 0, sameIDs(sent, got)
		for _, m := range got {
			if m.Orig == sent[m.I] {
				orig++
			}
		}
		t.Logf("over STOMP: %d of %d with the producer's id in BrokernetID, %d with it as JMSMessageID", orig, len(got), same)
		if len(got) != n || orig != n {
			t.Errorf("%d of %d received, %d with the producer's id in BrokernetID", len(got), n, orig)
		}
	})

	t.Run("from STOMP to OpenWire the id is kept", func(t *testing.T) {
		c := startIdent(t, b.OpenWireURI(), "queue://ids.s2o", "", n, 2*time.Minute)
		waitDemand(t, fromSTOMP, 1, 30*time.Second)
		sent := jmsProduce(t, a.OpenWireURI(), "queue://ids.s2o", n, true)
		got := jmstest.IdentMsgs(t, c.Wait(t, 2*time.Minute))
		same := sameIDs(sent, got)
		t.Logf("local over STOMP, remote over OpenWire: %d of %d with the producer's id as JMSMessageID", same, len(got))
		if len(got) != n || same != n {
			t.Errorf("%d of %d received, %d with the producer's id", len(got), n, same)
		}
	})

	t.Run("AMQP 1.0 keeps message-id", func(t *testing.T) {
		c := amqptest.Subscribe(t, r.AMQPURI(), r.ManagementURL(), "/queue/ids.amqp")
		waitDemand(t, toR, 1, 30*time.Second)
		sent := jmsProduce(t, a.OpenWireURI(), "queue://ids.amqp", n, true)
		stomptest.Eventually(t, time.Minute, func() error {
			if got := len(c.Messages()); got < n {
				return fmt.Errorf("%d of %d received on RabbitMQ", got, n)
			}
			return nil
		})
		same := 0
		for _, m := range c.Messages() {
			v, _ := m.Prop("i")
			i, err := strconv.Atoi(fmt.Sprint(v))
			if err == nil && i >= 0 && i < n && m.ID == sent[i] {
				same++
			}
		}
		t.Logf("over AMQP 1.0: %d of %d with the producer's JMSMessageID as message-id", same, len(c.Messages()))
		if same != n || len(c.Messages()) != n {
			t.Errorf("%d of %d received, %d with the producer's id", len(c.Messages()), n, same)
		}
	})

	t.Run("AMQP 1.0 message-id becomes the JMSMessageID", func(t *testing.T) {
		c := startIdent(t, a.OpenWireURI(), "queue://ids.from.amqp", "", n, 2*time.Minute)
		waitDemand(t, fromR, 1, 30*time.Second)
		conn := amqptest.Dial(t, r.AMQPURI())
		d := destination.Destination{Kind: destination.Queue, Name: "ids.from.amqp"}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for i := range n {
			m := amqptest.Message(d, i, true, "i", strconv.Itoa(i))
			m.ID = fmt.Sprintf("order-%d", i)
			if i%2 == 1 {
				m.ID = fmt.Sprintf("ID:amqp-publisher-1:1:1:%d", i+1)
			}
			if err := conn.Send(ctx, m); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := conn.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		got := jmstest.IdentMsgs(t, c.Wait(t, 2*time.Minute))
		same, carried := 0, 0
		for _, m := range got {
			// An ActiveMQ MessageId is kept; another id is carried in
			// BrokernetID (ActiveMQ's STOMP consumers could not ack it).
			if m.I%2 == 1 && m.ID == fmt.Sprintf("ID:amqp-publisher-1:1:1:%d", m.I+1) {
				same++
			}
			if m.I%2 == 0 && m.Orig == fmt.Sprintf("order-%d", m.I) && m.ID != "ID:"+m.Orig {
				carried++
			}
		}
		t.Logf("from AMQP 1.0: %d of %d with the publisher's ActiveMQ-form message-id as JMSMessageID, %d of %d others in BrokernetID", same, n/2, carried, n/2)
		if len(got) != n || same != n/2 || carried != n/2 {
			t.Errorf("%d of %d received, %d kept and %d carried, want %d each", len(got), n, same, carried, n/2)
		}
	})
}

// TestTopicCopiesKeepTheirIDs: three JMS subscribers of one topic on B with
// different selectors make three demand subscriptions on A; the bridge
// forwards each message once, with the producer's id, and B hands it to each
// subscriber it selects: none is dropped as a duplicate of another's copy.
func TestTopicCopiesKeepTheirIDs(t *testing.T) {
	t.Parallel()
	bs := startBrokers(t, 2, false)
	a, b := bs[0], bs[1]
	const n = 100
	br := runBridge(t, bridge.Config{
		Local: openwireSide{activemqSide{a}}.Endpoint(t), Remote: openwireSide{activemqSide{b}}.Endpoint(t),
		Demand: defaultDemand(), Log: stomptest.Logger(t),
	})
	subs := []struct {
		selector string
		want     int
	}{{"i < 60", 60}, {"i >= 40", 60}, {"", n}}
	var procs []*jmstest.Proc
	for _, s := range subs {
		procs = append(procs, startIdent(t, b.OpenWireURI(), "topic://ids.t", s.selector, s.want, 2*time.Minute))
	}
	waitDemand(t, br, len(subs), 30*time.Second)
	sent := jmsProduce(t, a.OpenWireURI(), "topic://ids.t", n, false)
	for k, s := range subs {
		got := jmstest.IdentMsgs(t, procs[k].Wait(t, 2*time.Minute))
		same := sameIDs(sent, got)
		t.Logf("subscriber %q: %d messages, %d with the producer's id", s.selector, len(got), same)
		if len(got) != s.want || same != s.want {
			t.Errorf("subscriber %q: %d messages, %d with the producer's id, want %d", s.selector, len(got), same, s.want)
		}
	}
	t.Logf("the bridge forwarded %d, settled %d copies another of its subscriptions forwarded",
		br.Stats().Forwarded.Load(), br.Stats().Duplicates.Load())
}

// TestMessageIDsKeptOverHops: A→B→C with TTL 2 and a JMS consumer on C. Over
// OpenWire on both hops C sees the producer's JMSMessageID; with a STOMP hop
// first (B assigns its own id) the producer's id is in BrokernetID, which the
// OpenWire hop after it passes on unchanged.
func TestMessageIDsKeptOverHops(t *testing.T) {
	t.Parallel()
	bs := startBrokers(t, 3, false)
	a, b, c := bs[0], bs[1], bs[2]
	const n = 100
	ow := func(x *testbroker.ActiveMQ) transport.Endpoint { return openwireSide{activemqSide{x}}.Endpoint(t) }
	hop := func(t *testing.T, local, remote transport.Endpoint, q string) *running {
		d := defaultDemand()
		d.ConsumerTTL, d.MessageTTL = 2, 2
		d.Filter.Include = []destination.Pattern{mustPattern(t, "queue://"+q)}
		return runBridge(t, bridge.Config{Local: local, Remote: remote, Demand: d, Log: stomptest.Logger(t)})
	}
	for _, row := range []struct {
		name, q  string
		first    transport.Endpoint // A→B's remote
		viaSTOMP bool
	}{
		{"OpenWire on both hops", "ids.hops.ow", ow(b), false},
		{"STOMP then OpenWire", "ids.hops.mixed", stomptest.URI(t, b.StompURI()), true},
	} {
		t.Run(row.name, func(t *testing.T) {
			ab := hop(t, ow(a), row.first, row.q)
			bc := hop(t, ow(b), ow(c), row.q)
			cons := startIdent(t, c.OpenWireURI(), "queue://"+row.q, "", n, 2*time.Minute)
			waitDemand(t, bc, 1, 30*time.Second)
			waitDemand(t, ab, 1, 30*time.Second)
			sent := jmsProduce(t, a.OpenWireURI(), "queue://"+row.q, n, true)
			got := jmstest.IdentMsgs(t, cons.Wait(t, 2*time.Minute))
			same, orig := sameIDs(sent, got), 0
			for _, m := range got {
				if m.Orig == sent[m.I] {
					orig++
				}
			}
			t.Logf("%s: on C %d of %d with the producer's JMSMessageID, %d with it in BrokernetID", row.name, same, len(got), orig)
			if len(got) != n {
				t.Fatalf("%d of %d reached C", len(got), n)
			}
			if !row.viaSTOMP && same != n {
				t.Errorf("%d of %d with the producer's JMSMessageID", same, n)
			}
			if row.viaSTOMP && orig != n {
				t.Errorf("%d of %d with the producer's id in BrokernetID", orig, n)
			}
		})
	}
}
