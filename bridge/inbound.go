package bridge

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"slices"
	"strconv"
	"time"

	"github.com/brokernet/brokernet/destination"
	"github.com/brokernet/brokernet/hop"
	"github.com/brokernet/brokernet/transport"
)

// Inbound: what becomes of one local delivery, from the Delivery event to the
// message handed to the window (window.go). In order: the backlog while the
// window is full, the checks (a permitted destination, the hop filter where
// the local broker has no selectors, topic copies already forwarded), and the
// message to send, with the headers brokernet adds. A delivery that must not
// travel is settled unsent (a topic copy) or held on the local broker
// (hold.go).

// onDelivery takes one delivery of connection p: it waits for the rate
// limits (rate.go), or goes on (enqueue).
func (s *session) onDelivery(ctx context.Context, p *peer, ev transport.Event) error {
	if !p.local || s.draining {
		// Not taken: the broker redelivers it after this session.
		return nil
	}
	if s.shape(ev) {
		return nil
	}
	return s.enqueue(ctx, ev)
}

// enqueue forwards a delivery now, or queues it in the backlog while the
// window is full or a suspect or a request waits, or parks it behind its
// destination's share of the window (isolate.go).
func (s *session) enqueue(ctx context.Context, ev transport.Event) error {
	if s.inFlight >= s.cfg.Window || s.backlog.len() > 0 || s.isolating || s.awaitReplyTo(ev) {
		s.backlog.push(ev)
		return nil
	}
	if s.park(ev) {
		return nil
	}
	return s.onLocalMessage(ctx, ev)
}

// takeBacklog forwards deliveries that waited for room in the window.
func (s *session) takeBacklog(ctx context.Context) error {
	for s.backlog.len() > 0 && s.inFlight < s.cfg.Window && !s.isolating {
		ev := s.backlog.pop()
		if s.awaitReplyTo(ev) {
			// A request waits for its reply-to's demand (temp.go).
			s.backlog.pushFront(ev)
			return nil
		}
		if s.park(ev) {
			continue
		}
		if err := s.onLocalMessage(ctx, ev); err != nil {
			return err
		}
	}
	return nil
}

// eventQueue is a FIFO of events that keeps its array: the backlog fills and
// empties with every window's worth of messages under load, and a slice
// resliced from the front would grow a new array each time.
type eventQueue struct {
	items []transport.Event
	head  int
}

func (q *eventQueue) len() int { return len(q.items) - q.head }

func (q *eventQueue) push(ev transport.Event) {
	if q.head > 0 && q.head >= len(q.items)/2 {
		n := copy(q.items, q.items[q.head:])
		clear(q.items[n:])
		q.items, q.head = q.items[:n], 0
	}
	q.items = append(q.items, ev)
}

// pushFront puts ev back at the head.
func (q *eventQueue) pushFront(ev transport.Event) {
	if q.head > 0 {
		q.head--
		q.items[q.head] = ev
		return
	}
	q.items = append(q.items, transport.Event{})
	copy(q.items[1:], q.items)
	q.items[0] = ev
}

// front returns the head; the queue must not be empty.
func (q *eventQueue) front() transport.Event { return q.items[q.head] }

// pop takes the head; the queue must not be empty.
func (q *eventQueue) pop() transport.Event {
	ev := q.items[q.head]
	q.items[q.head] = transport.Event{}
	q.head++
	if q.head == len(q.items) {
		q.items, q.head = q.items[:0], 0
	}
	return ev
}

// onLocalMessage forwards one message received on a demand subscription.
func (s *session) onLocalMessage(ctx context.Context, ev transport.Event) error {
	ds, ok := s.subs[ev.Sub]
	if !ok || ds.removing {
		// Not ours any more: the broker takes it back with the unsubscription.
		return nil
	}
	return s.forward(ctx, ds, ev)
}

// forward checks one message of demand subscription ds and, if it is to
// travel, makes the message to send for it and hands both to the window
// (admit).
func (s *session) forward(ctx context.Context, ds *demandSub, ev transport.Event) error {
	m := ev.Msg
	if m.Destination.Name == "" {
		m.Destination = ds.sub.Destination
	}
	if ds.individual && !s.table.Permits(m.Destination) {
		// A static wildcard subscription: check the concrete destination, as
		// ActiveMQ does at forward time. A forbidden message is neither forwarded
		// nor settled; it stays on the local broker.
		return nil
	}
	e := &entry{ds: ds, ref: ev.Ref, id: m.ID, taken: time.Now()}
	if s.eachMode() {
		e.load = loadKey(ds, m)
	}
	if ds.bridgeFilters {
		switch s.hopVerdict(ds, m) {
		case stays:
			s.hold(ds, m, ev.Ref)
			return nil
		case notOurs:
			s.settleUnsent(e)
			return nil
		}
	}
	var forIDs []string
	// A message without id cannot be recognised (its copies are not told apart).
	topic := ds.sub.Destination.Kind == destination.Topic && m.ID != ""
	if ds.sub.Destination.Kind == destination.Topic {
		forIDs, _ = s.topicRoutes(m.Destination)
	}
	if topic {
		// Every topic message is checked, whatever the number of our
		// subscriptions on the topic now: the copy of one that retired since
		// may already have gone out.
		if s.dedup.seen(m.ID) {
			// Another of our subscriptions forwarded this message: settle it
			// in order with this subscription's others.
			s.settleUnsent(e)
			s.b.stats.Duplicates.Add(1)
			return nil
		}
	}
	e.out = outgoing(m, s.localID, s.remoteID, forIDs)
	if ds.sub.Replay {
		s.stampMove(e.out, e.taken)
	}
	s.checkReplyTo(e.out)
	e.out.Destination = s.b.renames.remote(e.out.Destination)
	carry := m.ID != "" && (s.keepsID == nil || !s.keepsID(m.ID))
	if (s.stampID || carry) && m.PropString(IDHeader) == "" {
		e.out.Props = append(e.out.Props, transport.Property{Name: IDHeader, Value: s.stampOf(m)})
	}
	taken, err := s.admit(ctx, ev, e)
	if taken && topic {
		// A topic message that went out (or to the dead-letter queue) is
		// remembered, so that other copies of it are settled without forwarding.
		s.dedup.remember(m.ID)
	}
	return err
}

// Brokers without selectors (RabbitMQ) cannot withhold from a demand
// subscription the messages that already visited the remote broker or spent
// their hop budget, as ActiveMQ does with the hop filter in the selector. The
// bridge filters them itself:
//
//   - a topic copy that must not travel is settled without forwarding: it was
//     this subscription's own copy, the topic's other subscribers have theirs;
//   - a queue message that must not travel stays where it is, for the local
//     broker's own consumers: the bridge holds it unsettled and releases it
//     later, so that it goes back to the queue (hold.go).
//
// Subscriptions filtered this way are settled individually, so that a held
// message is never covered by the cumulative acknowledgement of a later one.

// verdict is what becomes of a message the local broker could not filter.
type verdict int

const (
	forwardIt verdict = iota // may travel to the remote broker
	notOurs                  // a topic copy that must not travel: settle it
	stays                    // a queue message that must not travel: hold, release later
)

// hopVerdict applies the hop filter of the demand selector to m (see
// hop.Selector): not to a broker it visited, not beyond MessageTTL hops, and
// a topic message only toward the brokers it was sent for.
func (s *session) hopVerdict(ds *demandSub, m *transport.Message) verdict {
	bad := stays
	if ds.sub.Destination.Kind == destination.Topic {
		bad = notOurs
	}
	path := m.PropString(hop.PathHeader)
	if path == "" {
		return forwardIt
	}
	if ids, err := hop.ParsePath(path); err != nil || slices.Contains(ids, s.remoteID) {
		return bad
	}
	if ttl := s.cfg.Demand.MessageTTL; ttl >= 0 {
		if hops, err := strconv.Atoi(m.PropString(hop.HopsHeader)); err == nil && hops >= ttl {
			return bad
		}
	}
	if bad == notOurs && ds.forID != "" {
		ids, _ := hop.ParsePath(m.PropString(hop.ForHeader))
		if !slices.Contains(ids, ds.forID) {
			return notOurs
		}
	}
	return forwardIt
}

// topicDedup remembers the ids of recent forwarded topic messages: when a topic
// has more than one of our demand subscriptions (routes to several brokers, one
// per selector under conduit, or a subscription being replaced) the broker gives
// each a copy, and each message is forwarded once. Every topic message is
// remembered, as the copies of one may arrive after the subscription that
// forwarded it retired. A ring bounds it.
type topicDedup struct {
	ids  map[string]struct{}
	ring []string
	pos  int
}

// seenCapacity bounds the topic message ids remembered for de-duplication.
const seenCapacity = 1 << 16

func newTopicDedup() topicDedup {
	return topicDedup{ids: make(map[string]struct{})}
}

func (d *topicDedup) seen(id string) bool {
	_, ok := d.ids[id]
	return ok
}

// remember records a forwarded topic message id, forgetting the oldest.
func (d *topicDedup) remember(id string) {
	if d.ring == nil {
		d.ring = make([]string, seenCapacity)
	}
	if old := d.ring[d.pos]; old != "" {
		delete(d.ids, old)
	}
	d.ring[d.pos] = id
	d.pos = (d.pos + 1) % len(d.ring)
	d.ids[id] = struct{}{}
}

// topicRoutes returns the brokers our live topic subscriptions that receive a
// copy of a message published on topic d forward toward (their Tag.For), and how
// many such subscriptions there are. A wildcard subscription (prices.>) receives
// a copy of every topic it matches, so it counts for each of them.
func (s *session) topicRoutes(d destination.Destination) (forIDs []string, n int) {
	for _, ds := range s.subs {
		if ds.removing || !ds.receives(d) {
			continue
		}
		n++
		if ds.forID != "" && !slices.Contains(forIDs, ds.forID) {
			forIDs = append(forIDs, ds.forID)
		}
	}
	slices.Sort(forIDs)
	return forIDs, n
}

// receives reports whether ds gets a copy of a message on topic d.
func (ds *demandSub) receives(d destination.Destination) bool {
	if ds.sub.Destination.Kind != d.Kind {
		return false
	}
	if ds.pattern == nil {
		return ds.sub.Destination.Name == d.Name
	}
	return ds.pattern.Match(d)
}

// outgoing returns the message to send to the remote broker remoteID for m,
// received locally: the same message, recording that it left broker localID.
//
// It keeps m's id (see identity.go), except toward a broker the message was
// on before, which gets an id of its own (revisitID).
//
// The hop path is "|id1|id2|": the brokers the message has left, in order. The
// demand subscription's selector keeps the local broker from dispatching a message
// whose path holds the remote broker or whose hop count reached messageTTL, so a
// message never revisits a broker and never travels further than allowed. A topic
// message also carries the brokers it is sent for (forIDs), which topic demand
// subscriptions there select on. brokernet's own headers come first.
func outgoing(m *transport.Message, localID, remoteID string, forIDs []string) *transport.Message {
	out := *m
	out.Redelivered = false
	var path string
	var hops int
	props := make([]transport.Property, 3, len(m.Props)+4) // room for IDHeader
	for _, p := range m.Props {
		switch p.Name {
		case hop.PathHeader:
			path, _ = p.Value.(string)
			continue
		case hop.HopsHeader:
			hops = propInt(p.Value)
			continue
		case hop.ForHeader:
			continue
		}
		props = append(props, p)
	}
	if out.ID != "" && hop.PathHolds(path, remoteID) {
		out.ID = revisitID(out.ID, hops+1)
	}
	props[0] = transport.Property{Name: hop.PathHeader, Value: hop.AppendPath(path, localID)}
	props[1] = transport.Property{Name: hop.HopsHeader, Value: strconv.Itoa(hops + 1)}
	if len(forIDs) > 0 {
		props[2] = transport.Property{Name: hop.ForHeader, Value: hop.FormatPath(forIDs)}
	} else {
		props = append(props[:2], props[3:]...)
	}
	out.Props = props
	return &out
}

// checkReplyTo drops m's reply-to when the remote broker cannot address it,
// with a warning (once per session): sent there, it is refused (an ActiveMQ
// reply-to, a temporary queue of another connection, made RabbitMQ 3.10's
// STOMP answer "Processing error" and close the connection), or refused by
// the sending transport (RabbitMQ's "/reply-queue/amq.gen-…" has no
// OpenWire form), and the bridge would reconnect and send it again forever.
// The request still arrives, without JMSReplyTo; no reply can come back.
func (s *session) checkReplyTo(m *transport.Message) {
	if m.ReplyTo == "" {
		return
	}
	d, err := destination.Parse(m.ReplyTo)
	switch s.remote.conn.Info().Flavour {
	case transport.ActiveMQ:
		if err == nil {
			return
		}
	case transport.RabbitMQ:
		// Its own forms (/reply-queue/, /amq/queue/, /exchange/…) pass.
		if err != nil || !d.IsTemp() {
			return
		}
	default:
		return
	}
	if !s.temps.replyToWarned {
		s.temps.replyToWarned = true
		s.log.Warn().Str("reply_to", m.ReplyTo).Str("remote_server", s.remote.conn.Info().Server).
			Msg("reply-to the remote broker cannot address: requests go without it (no reply can come back)")
	}
	m.ReplyTo = ""
}

// IDHeader carries a forwarded message's id on its first broker where the
// remote's protocol cannot keep the id itself (STOMP: the broker assigns a
// new one), so that applications can reconcile a message with what its
// producer sent (identity.go), and so that a broker without stable message
// ids (RabbitMQ's STOMP message-id differs per delivery) lets the bridge
// recognise the message when it comes back. Once set it travels unchanged.
const IDHeader = "BrokernetID"

// stampOf is the IDHeader value for m: its id, or, for a message without one
// forwarded to a broker without selectors (an AMQP 1.0 publisher need not set
// message-id, and RabbitMQ 3.10 adds none), an id of this session's making. Without it, every id-less message held on the remote broker shared
// one hold count, so after ten holds each was held 30 s (measured: duplex
// RabbitMQ⇄RabbitMQ over AMQP 1.0 consumed 417 of 500 in 60 s).
func (s *session) stampOf(m *transport.Message) string {
	if m.ID != "" {
		return m.ID
	}
	if s.stampPrefix == "" {
		b := make([]byte, 6)
		_, _ = rand.Read(b)
		s.stampPrefix = "bn:" + s.localID + ":" + hex.EncodeToString(b) + ":"
	}
	s.stampSeq++
	return s.stampPrefix + strconv.FormatUint(s.stampSeq, 10)
}
