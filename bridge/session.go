package bridge

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-stomp/stomp/v3/frame"

	"github.com/brokernet/brokernet/advisory"
	"github.com/brokernet/brokernet/demand"
	"github.com/brokernet/brokernet/destination"
	"github.com/brokernet/brokernet/transport/stomp"
)

// A session is one connected life of a bridge: both connections, the demand table
// built from the advisory replay, and the messages in flight. Everything in it is
// owned by the goroutine running session.run; the connections' reader goroutines
// talk to it only through channels. When either connection fails the session ends,
// the local broker takes back every unacknowledged message, and Bridge.Run starts a
// new session, which rebuilds demand from scratch.
type session struct {
	b   *Bridge
	cfg *Config

	local, remote *stomp.Conn
	localID       string
	remoteID      string
	table         *demand.Table

	// durable is the local connection that holds durable demand subscriptions. It
	// is dialed when the first one is needed: durable subscriptions need a stable
	// client-id, and ActiveMQ then reports that client-id instead of the
	// connection id in the CONNECTED session header, which the main local
	// connection needs to recognise its own consumers in local advisories.
	durable   *stomp.Conn
	durableIn <-chan *frame.Frame
	// waitingDurable holds durable subscriptions to make once the live
	// subscription with the same name is gone: ActiveMQ refuses a second one.
	waitingDurable map[string]demand.Subscription

	subs map[string]*demandSub // by STOMP subscription id

	// seen remembers the ids of recent topic messages while a topic has more
	// than one of our demand subscriptions (routes to several brokers, or a
	// subscription being replaced): the broker gives each a copy, and each
	// message is forwarded once. A ring bounds it.
	seen     map[string]struct{}
	seenRing []string
	seenPos  int

	replayDue *notifier[string] // replay subscriptions whose delay has passed ("" = rate limiter tick)
	timers    []*time.Timer

	// Replay rate limiting (Config.ReplayRateLimit): a token bucket and the
	// replay messages waiting for tokens.
	replayQ     []*frame.Frame
	tokens      float64
	refilled    time.Time
	replayTimer bool

	open       *txn          // transaction being filled, nil if none
	committing int           // commits awaiting their receipt
	inFlight   int           // forwarded, not yet acknowledged on the local broker (window)
	commits    chan txResult // commit outcomes from the remote reader goroutine
	txSeq      uint64
	markSeq    uint64 // empty local transactions that confirm ACKs

	// ready carries the ids of demand subscriptions the local broker confirmed.
	ready *notifier[string]
	// acked carries transactions whose ACKs a local connection confirmed.
	acked *notifier[*txn]

	wasUp       bool
	localFailed bool

	clock latencyClock // forward latency, bytes and batch size (observe.go)
}

// demandSub is a demand subscription open on the local broker.
type demandSub struct {
	sub  demand.Subscription
	conn *stomp.Conn // the local connection it lives on
	// individual subscriptions are acknowledged message by message (ack mode
	// client-individual) instead of cumulatively.
	individual bool
	active     bool // the broker confirmed the SUBSCRIBE
	removing   bool // UNSUBSCRIBE is due once inFlight reaches zero
	unsub      demand.Change
	inFlight   int // forwarded (or acknowledgement-only) messages awaiting a commit
	// forID is the broker this topic subscription forwards toward (Tag.For).
	forID string
	// replaced is an Unsubscribe waiting for its replacement to be confirmed by
	// the broker: until then this subscription keeps forwarding, so that a topic
	// loses nothing in between (copies are de-duplicated).
	replaced *demand.Change
}

// seenCapacity bounds the topic message ids remembered for de-duplication.
const seenCapacity = 1 << 16

// txn is one transaction on the remote broker. Its parts record, per demand
// subscription, how many messages it carries and the ack id of the last one: the
// local acknowledgement is cumulative (ack mode "client"), and commits complete in
// order on one connection, so one ACK per subscription confirms the whole part.
type txn struct {
	id    string
	n     int
	parts []txPart
	// acksPending counts the local connections whose ACK receipt is awaited.
	acksPending int
}

type txPart struct {
	sub     *demandSub
	n       int      // messages forwarded in this transaction
	held    int      // messages whose ACK waits for this commit: n plus acknowledgement-only ones
	lastAck ackRef   // the last message's ack reference
	acks    []ackRef // every message's, for individual subscriptions
}

// ackRef is what an ACK needs of a MESSAGE: its STOMP 1.2 "ack" header, or for
// STOMP 1.1 its subscription and message-id.
type ackRef struct {
	id, sub, msgID string
}

func ackRefOf(m *frame.Frame) ackRef {
	if id, ok := m.Header.Contains(frame.Ack); ok {
		return ackRef{id: id}
	}
	return ackRef{sub: m.Header.Get(frame.Subscription), msgID: m.Header.Get(frame.MessageId)}
}

// frame builds the ACK. In ack mode "client" it acknowledges every message the
// subscription received up to this one.
func (a ackRef) frame() *frame.Frame {
	if a.id != "" {
		return frame.New(frame.ACK, frame.Id, a.id)
	}
	return frame.New(frame.ACK, frame.Subscription, a.sub, frame.MessageId, a.msgID)
}

type txResult struct {
	tx  *txn
	err error
}

const (
	advisorySubQueue = "bn-adv-queue"
	advisorySubTopic = "bn-adv-topic"
	localAdvQueue    = "bn-ladv-queue"
	localAdvTopic    = "bn-ladv-topic"
	identitySub      = "bn-identity"
)

func newSession(b *Bridge) *session {
	return &session{
		b:              b,
		cfg:            &b.cfg,
		subs:           make(map[string]*demandSub),
		seen:           make(map[string]struct{}),
		seenRing:       make([]string, seenCapacity),
		waitingDurable: make(map[string]demand.Subscription),
		commits:        make(chan txResult, 64),
		ready:          newNotifier[string](),
		acked:          newNotifier[*txn](),
		replayDue:      newNotifier[string](),
	}
}

func (s *session) run(ctx context.Context) error {
	log := s.b.log
	// Writes during drain must not fail because ctx was cancelled.
	wctx := context.WithoutCancel(ctx)

	var err error
	s.remote, err = dialAny(ctx, append([]stomp.URI{s.cfg.Remote}, s.cfg.RemoteFailover...))
	if err != nil {
		return fmt.Errorf("remote broker: %w", err)
	}
	defer s.remote.Abort()
	s.local, err = dialAny(ctx, append([]stomp.URI{s.cfg.Local}, s.cfg.LocalFailover...))
	if err != nil {
		s.localFailed = true
		return fmt.Errorf("local broker: %w", err)
	}
	defer s.local.Abort()
	log.Info().Str("local", s.local.URI().String()).Str("remote", s.remote.URI().String()).
		Str("local_server", s.local.Server()).Str("remote_server", s.remote.Server()).Msg("connected")

	if s.localID, err = brokerID(ctx, s.local, s.cfg.LocalID); err != nil {
		s.localFailed = true
		return fmt.Errorf("local broker id: %w", err)
	}
	if s.remoteID, err = brokerID(ctx, s.remote, s.cfg.RemoteID); err != nil {
		return fmt.Errorf("remote broker id: %w", err)
	}
	if s.localID == s.remoteID {
		return fmt.Errorf("%w (%q)", ErrLoopback, s.localID)
	}
	s.b.setIDs(s.localID, s.remoteID)
	opts := s.cfg.Demand
	opts.LocalID, opts.RemoteID = s.localID, s.remoteID
	s.table = demand.New(opts)

	// Consumer advisories. ActiveMQ replays every existing consumer to a new advisory
	// subscriber, so the table ends up right whether consumers came before or after us.
	for id, topic := range map[string]string{advisorySubQueue: advisory.Topics()[0], advisorySubTopic: advisory.Topics()[1]} {
		if err := s.remote.Subscribe(ctx, id, topic, "auto",
			advisory.TransformationHeader, advisory.TransformationJSON); err != nil {
			return fmt.Errorf("remote broker: %w", err)
		}
	}
	// Our own broker's consumers matter for duplicate-route suppression (which
	// routes other bridges hold there) and for replay (whether local consumers exist).
	o := s.cfg.Demand
	if o.SuppressQueues || o.SuppressTopics || o.ReplayWhenNoConsumers {
		for id, topic := range map[string]string{localAdvQueue: advisory.Topics()[0], localAdvTopic: advisory.Topics()[1]} {
			if err := s.local.Subscribe(ctx, id, topic, "auto",
				advisory.TransformationHeader, advisory.TransformationJSON); err != nil {
				s.localFailed = true
				return fmt.Errorf("local broker: %w", err)
			}
		}
	}
	defer func() {
		for _, t := range s.timers {
			t.Stop()
		}
		if s.durable != nil {
			s.durable.Abort()
		}
	}()
	if err := s.apply(ctx, s.table.Start()); err != nil {
		return err
	}
	s.wasUp = true
	s.b.stats.Sessions.Add(1)
	s.b.setUp(true)
	log.Info().Str("local_id", s.localID).Str("remote_id", s.remoteID).Msg("bridge up")
	defer s.b.stats.DemandSubs.Store(0)
	defer s.b.stats.PendingSubs.Store(0)

	return s.loop(ctx, wctx)
}

// dialAny connects to the first of uris that answers.
func dialAny(ctx context.Context, uris []stomp.URI) (*stomp.Conn, error) {
	var errs []error
	for _, u := range uris {
		c, err := stomp.Dial(ctx, u, stomp.Options{})
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, errors.Join(errs...)
}

// loop is the session's event loop.
func (s *session) loop(ctx, wctx context.Context) error {
	var drainDeadline <-chan time.Time
	draining := false
	localIn := s.local.Deliveries()
	remoteIn := s.remote.Deliveries()
	for {
		if draining && s.inFlight == 0 && s.open == nil && s.committing == 0 {
			return s.closeGracefully(wctx)
		}
		var in, durIn <-chan *frame.Frame
		if !draining && s.inFlight < s.cfg.Window {
			in, durIn = localIn, s.durableIn
		}
		var cancelled <-chan struct{}
		if !draining {
			cancelled = ctx.Done()
		}
		select {
		case <-cancelled:
			draining = true
			t := time.NewTimer(s.cfg.DrainTimeout)
			defer t.Stop()
			drainDeadline = t.C
			s.b.log.Info().Int("in_flight", s.inFlight).Msg("draining")
			// Whatever is open is committed now; nothing new is taken.
			if err := s.maybeCommit(wctx, true); err != nil {
				return err
			}
		case <-drainDeadline:
			return fmt.Errorf("drain timed out with %d messages in flight; they will be redelivered", s.inFlight)
		case f, ok := <-in:
			if !ok {
				s.localFailed = true
				return fmt.Errorf("local broker: %w", s.local.Err())
			}
			if err := s.onLocalMessage(wctx, f); err != nil {
				return err
			}
			if err := s.maybeCommit(wctx, len(localIn) == 0 && len(s.durableIn) == 0); err != nil {
				return err
			}
		case f, ok := <-durIn:
			if !ok {
				s.localFailed = true
				return fmt.Errorf("local broker (durable subscriptions): %w", s.durable.Err())
			}
			if err := s.onLocalMessage(wctx, f); err != nil {
				return err
			}
			if err := s.maybeCommit(wctx, len(s.durableIn) == 0 && len(localIn) == 0); err != nil {
				return err
			}
		case <-s.replayDue.signal:
			for _, id := range s.replayDue.take() {
				if id == "" {
					// The replay rate limiter's timer.
					s.replayTimer = false
					if err := s.drainReplays(wctx); err != nil {
						return err
					}
					if err := s.maybeCommit(wctx, len(localIn) == 0); err != nil {
						return err
					}
					continue
				}
				if sub, ok := s.table.Lookup(id); ok && sub.Replay {
					if err := s.subscribe(wctx, sub); err != nil {
						return err
					}
				}
			}
		case f, ok := <-remoteIn:
			if !ok {
				return fmt.Errorf("remote broker: %w", s.remote.Err())
			}
			if err := s.onAdvisory(wctx, f); err != nil {
				return err
			}
		case r := <-s.commits:
			if r.err != nil {
				return fmt.Errorf("remote broker: committing %d messages: %w", r.tx.n, r.err)
			}
			if err := s.onCommitted(wctx, r.tx); err != nil {
				return err
			}
			if err := s.maybeCommit(wctx, draining || len(localIn) == 0); err != nil {
				return err
			}
		case <-s.acked.signal:
			for _, tx := range s.acked.take() {
				if tx.acksPending--; tx.acksPending == 0 {
					if err := s.onAcked(wctx, tx); err != nil {
						return err
					}
				}
			}
			if err := s.maybeCommit(wctx, draining || len(localIn) == 0); err != nil {
				return err
			}
		case <-s.ready.signal:
			for _, id := range s.ready.take() {
				if ds, ok := s.subs[id]; ok {
					ds.active = true
				}
				if err := s.retireReplaced(wctx, id); err != nil {
					return err
				}
			}
			s.updateSubStats()
		case <-s.local.Done():
			s.localFailed = true
			return fmt.Errorf("local broker: %w", s.local.Err())
		case <-s.remote.Done():
			return fmt.Errorf("remote broker: %w", s.remote.Err())
		}
	}
}

// closeGracefully disconnects both ends with receipts, so that every ACK written
// before was processed by the local broker.
func (s *session) closeGracefully(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	errL := s.local.Close(ctx)
	errR := s.remote.Close(ctx)
	var errD error
	if s.durable != nil {
		errD = s.durable.Close(ctx)
	}
	return errors.Join(errL, errR, errD)
}

// onAdvisory applies one consumer advisory to the demand table and the broker.
func (s *session) onAdvisory(ctx context.Context, f *frame.Frame) error {
	sub := f.Header.Get(frame.Subscription)
	if sub != advisorySubQueue && sub != advisorySubTopic {
		return nil
	}
	ev, err := advisory.ParseActiveMQ(f.Header, f.Body)
	if errors.Is(err, advisory.ErrNotConsumerAdvisory) {
		s.b.log.Debug().Str("body", advisory.Trim(f.Body, 200)).Msg("ignoring advisory")
		return nil
	}
	if err != nil {
		s.b.stats.BadAdvisories.Add(1)
		s.b.log.Warn().Err(err).Str("body", advisory.Trim(f.Body, 300)).Msg("skipping malformed advisory")
		return nil
	}
	changes, decision := s.table.Apply(ev)
	s.b.log.Debug().Str("consumer", ev.Consumer.ID).Str("decision", decision.String()).Msg("advisory")
	err = s.apply(ctx, changes)
	// Counted once its changes are written, so that a test seeing the count
	// knows the local broker will process them before anything it sends later.
	s.b.stats.Advisories.Add(1)
	return err
}

// onLocalAdvisory feeds a consumer advisory of the local broker to the table,
// unless it is about one of our own subscriptions.
func (s *session) onLocalAdvisory(ctx context.Context, f *frame.Frame) error {
	ev, err := advisory.ParseActiveMQ(f.Header, f.Body)
	if errors.Is(err, advisory.ErrNotConsumerAdvisory) {
		return nil
	}
	if err != nil {
		s.b.stats.BadAdvisories.Add(1)
		s.b.log.Warn().Err(err).Str("body", advisory.Trim(f.Body, 300)).Msg("skipping malformed local advisory")
		return nil
	}
	// Our own consumers on the main connection are recognised by its connection id.
	// Those on the durable connection are not (ActiveMQ reports the client-id as its
	// session); feeding them to the table is harmless: they rank equal to ours.
	if strings.HasPrefix(ev.Consumer.ID, s.local.Session()+":") {
		return nil
	}
	changes, decision := s.table.ApplyLocal(ev)
	s.b.log.Debug().Str("consumer", ev.Consumer.ID).Str("decision", decision.String()).Msg("local advisory")
	return s.apply(ctx, changes)
}

// apply carries out the table's changes on the local broker, in order.
func (s *session) apply(ctx context.Context, changes []demand.Change) error {
	for _, ch := range changes {
		switch ch.Kind {
		case demand.Subscribe:
			if ch.Sub.Replay && s.cfg.ReplayDelay > 0 {
				// Replay only what has waited: the subscription starts after the delay,
				// if the table still wants it then.
				id := ch.Sub.ID
				s.timers = append(s.timers, time.AfterFunc(s.cfg.ReplayDelay, func() { s.replayDue.add(id) }))
				continue
			}
			if err := s.subscribe(ctx, ch.Sub); err != nil {
				return err
			}
		case demand.Unsubscribe:
			if err := s.unsubscribe(ctx, ch); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *session) subscribe(ctx context.Context, sub demand.Subscription) error {
	f := frame.New(frame.SUBSCRIBE,
		frame.Id, sub.ID,
		frame.Destination, sub.Destination.StompPath(),
		frame.Ack, "client",
		"activemq.prefetchSize", strconv.Itoa(sub.Prefetch),
		"activemq.priority", strconv.Itoa(sub.Priority))
	if sub.Selector != "" {
		f.Header.Add("selector", sub.Selector)
	}
	conn := s.local
	if sub.DurableName != "" {
		for _, ds := range s.subs {
			if ds.sub.DurableName == sub.DurableName {
				// Still being retired: subscribe right after its UNSUBSCRIBE.
				s.waitingDurable[sub.DurableName] = sub
				return nil
			}
		}
		var err error
		if conn, err = s.durableConn(ctx); err != nil {
			return err
		}
		f.Header.Add("activemq.subscriptionName", sub.DurableName)
	}
	if sub.Static && strings.ContainsAny(sub.Destination.Name, "*>") {
		// A wildcard subscription may deliver destinations that must not be
		// forwarded; those stay unacknowledged, so acks must be individual.
		f.Header.Set(frame.Ack, "client-individual")
	}
	// The receipt is not waited for here: that would stop this loop from draining
	// the local deliveries the receipt may queue behind. It marks the subscription
	// active when it arrives. A refused SUBSCRIBE comes back as an ERROR frame,
	// which ends the session.
	id := sub.ID
	if err := conn.WriteReceipt(ctx, f, func(err error) {
		if err == nil {
			s.ready.add(id)
		}
	}); err != nil {
		return fmt.Errorf("local broker: %w", err)
	}
	ds := &demandSub{sub: sub, conn: conn, individual: f.Header.Get(frame.Ack) == "client-individual"}
	if _, tag, ok := advisory.ParseSelector(sub.Selector); ok {
		ds.forID = tag.For
	}
	s.subs[sub.ID] = ds
	s.updateSubStats()
	ev := s.b.log.Info().Str("destination", sub.Destination.String()).Str("sub", sub.ID).
		Int("priority", sub.Priority).Strs("consumers", sub.Consumers)
	if sub.UserSelector != "" {
		ev = ev.Str("selector", sub.UserSelector)
	}
	if sub.DurableName != "" {
		ev = ev.Str("durable", sub.DurableName)
	}
	if sub.Replay {
		ev.Msg("replay subscription added")
	} else {
		ev.Msg("demand added")
	}
	return nil
}

// durableConn returns the local connection for durable subscriptions, dialing it
// with a client-id that is the same after every restart of this bridge, so that
// the broker hands back each durable subscription and what it retained.
func (s *session) durableConn(ctx context.Context) (*stomp.Conn, error) {
	if s.durable != nil {
		return s.durable, nil
	}
	u := s.local.URI()
	if u.ClientID == "" {
		u.ClientID = durableClientID(s.localID, s.remoteID)
	}
	c, err := stomp.Dial(ctx, u, stomp.Options{})
	if err != nil {
		s.localFailed = true
		return nil, fmt.Errorf("local broker (durable subscriptions): %w", err)
	}
	s.durable, s.durableIn = c, c.Deliveries()
	return c, nil
}

// durableClientID is the client-id of the durable connection: ActiveMQ accepts
// [A-Za-z0-9._:-]; anything else becomes '_'.
func durableClientID(localID, remoteID string) string {
	clean := func(s string) string {
		return strings.Map(func(r rune) rune {
			switch {
			case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '-', r == '_', r == ':':
				return r
			}
			return '_'
		}, s)
	}
	return "brokernet_" + clean(localID) + "_to_" + clean(remoteID)
}

// unsubscribe removes a demand subscription once its in-flight messages are
// confirmed; until then its new deliveries are dropped unacknowledged, and the
// broker redelivers them elsewhere after the UNSUBSCRIBE.
func (s *session) unsubscribe(ctx context.Context, ch demand.Change) error {
	if w, ok := s.waitingDurable[ch.Sub.DurableName]; ok && w.ID == ch.Sub.ID {
		// Never made: it was waiting for its predecessor to go.
		delete(s.waitingDurable, ch.Sub.DurableName)
		return nil
	}
	ds, ok := s.subs[ch.Sub.ID]
	if ok && ch.ReplacedBy != "" && ds.sub.Destination.Kind == destination.Topic {
		// A topic message published before the replacement is in place would be
		// lost; a queue keeps it, so a queue subscription retires at once.
		if next, ok := s.subs[ch.ReplacedBy]; ok && !next.active {
			ds.replaced = &ch
			return nil
		}
	}
	// Anything waiting for this one to be confirmed as a replacement goes now.
	if err := s.retireReplaced(ctx, ch.Sub.ID); err != nil {
		return err
	}
	if !ok {
		if ch.DestroyDurable && ch.Sub.DurableName != "" {
			// Deactivated earlier (KeepDurable): only the durable remains to destroy.
			return s.destroyDurable(ctx, ch.Sub)
		}
		return nil
	}
	ds.removing = true
	ds.unsub = ch
	if ds.inFlight > 0 {
		return nil
	}
	return s.finishUnsubscribe(ctx, ds)
}

func (s *session) finishUnsubscribe(ctx context.Context, ds *demandSub) error {
	delete(s.subs, ds.sub.ID)
	s.updateSubStats()
	if err := ds.conn.Write(ctx, frame.New(frame.UNSUBSCRIBE, frame.Id, ds.sub.ID)); err != nil {
		return fmt.Errorf("local broker: %w", err)
	}
	msg := "demand removed"
	if ds.sub.Replay {
		msg = "replay subscription removed"
	}
	s.b.log.Info().Str("destination", ds.sub.Destination.String()).Str("sub", ds.sub.ID).Msg(msg)
	if ds.unsub.DestroyDurable && ds.sub.DurableName != "" {
		if err := s.destroyDurable(ctx, ds.sub); err != nil {
			return err
		}
	}
	if next, ok := s.waitingDurable[ds.sub.DurableName]; ok && ds.sub.DurableName != "" {
		delete(s.waitingDurable, ds.sub.DurableName)
		return s.subscribe(ctx, next)
	}
	return nil
}

// retireReplaced unsubscribes the subscriptions that waited for id, their
// replacement, to be confirmed.
func (s *session) retireReplaced(ctx context.Context, id string) error {
	for _, ds := range s.subs {
		if ds.replaced != nil && ds.replaced.ReplacedBy == id {
			ch := *ds.replaced
			ds.replaced = nil
			if err := s.unsubscribe(ctx, ch); err != nil {
				return err
			}
		}
	}
	return nil
}

// destroyDurable removes a durable demand subscription from the local broker
// (ActiveMQ: UNSUBSCRIBE carrying activemq.subscriptionName).
func (s *session) destroyDurable(ctx context.Context, sub demand.Subscription) error {
	conn, err := s.durableConn(ctx)
	if err != nil {
		return err
	}
	if err := conn.Write(ctx, frame.New(frame.UNSUBSCRIBE, frame.Id, sub.ID,
		"activemq.subscriptionName", sub.DurableName)); err != nil {
		return fmt.Errorf("local broker: %w", err)
	}
	s.b.log.Info().Str("destination", sub.Destination.String()).Str("durable", sub.DurableName).Msg("durable demand destroyed")
	return nil
}

// onLocalMessage forwards one message received on a demand subscription.
func (s *session) onLocalMessage(ctx context.Context, f *frame.Frame) error {
	subID := f.Header.Get(frame.Subscription)
	if subID == localAdvQueue || subID == localAdvTopic {
		return s.onLocalAdvisory(ctx, f)
	}
	ds, ok := s.subs[subID]
	if !ok || ds.removing {
		// Not ours any more: the broker takes it back with the UNSUBSCRIBE.
		return nil
	}
	if ds.sub.Replay && s.cfg.ReplayRateLimit > 0 {
		// Replays are throttled; the queue keeps their order, so the cumulative
		// ACK never covers a message still waiting here.
		s.replayQ = append(s.replayQ, f)
		return s.drainReplays(ctx)
	}
	return s.forward(ctx, ds, f)
}

// drainReplays forwards queued replay messages as the rate limit allows and
// schedules the next attempt for the rest.
func (s *session) drainReplays(ctx context.Context) error {
	now := time.Now()
	rate := float64(s.cfg.ReplayRateLimit)
	s.tokens = min(rate, s.tokens+now.Sub(s.refilled).Seconds()*rate)
	s.refilled = now
	for len(s.replayQ) > 0 && s.tokens >= 1 {
		f := s.replayQ[0]
		s.replayQ = s.replayQ[1:]
		ds, ok := s.subs[f.Header.Get(frame.Subscription)]
		if !ok || ds.removing {
			continue
		}
		s.tokens--
		if err := s.forward(ctx, ds, f); err != nil {
			return err
		}
	}
	if len(s.replayQ) > 0 && !s.replayTimer {
		s.replayTimer = true
		wait := time.Duration((1 - s.tokens) / rate * float64(time.Second))
		s.timers = append(s.timers, time.AfterFunc(wait, func() { s.replayDue.add("") }))
	}
	return nil
}

// forward sends one message of demand subscription ds inside the open transaction.
func (s *session) forward(ctx context.Context, ds *demandSub, f *frame.Frame) error {
	if ds.individual {
		// A static wildcard subscription: check the concrete destination, as
		// ActiveMQ does at forward time. A forbidden message is neither forwarded
		// nor acknowledged; it stays on the local broker.
		d, err := destination.FromStomp(f.Header.Get(frame.Destination))
		if err != nil || !s.table.Permits(d) {
			return nil
		}
	}
	if err := s.beginIfNeeded(ctx); err != nil {
		return err
	}
	var forIDs []string
	if ds.sub.Destination.Kind == destination.Topic {
		var routes int
		forIDs, routes = s.topicRoutes(ds.sub.Destination)
		if routes > 1 {
			id := f.Header.Get(frame.MessageId)
			if _, dup := s.seen[id]; dup {
				// Another of our subscriptions forwarded this message: acknowledge
				// it with the next commit, in order with this subscription's others.
				s.open.addPart(ds, 0, ackRefOf(f))
				ds.inFlight++
				s.b.stats.Duplicates.Add(1)
				return nil
			}
			s.remember(id)
		}
	}
	out := forwardFrame(f, s.localID, s.open.id, forIDs)
	if err := s.remote.Write(ctx, out); err != nil {
		return fmt.Errorf("remote broker: %w", err)
	}
	s.open.addPart(ds, 1, ackRefOf(f))
	ds.inFlight++
	s.inFlight++
	s.clock.sent(len(f.Body))
	s.b.stats.InFlight.Store(int64(s.inFlight))
	return nil
}

// topicRoutes returns the brokers our live subscriptions on topic d forward
// toward (their Tag.For), and how many such subscriptions there are.
func (s *session) topicRoutes(d destination.Destination) (forIDs []string, n int) {
	for _, ds := range s.subs {
		if ds.removing || ds.sub.Destination != d {
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

// remember records a forwarded topic message id, forgetting the oldest.
func (s *session) remember(id string) {
	if old := s.seenRing[s.seenPos]; old != "" {
		delete(s.seen, old)
	}
	s.seenRing[s.seenPos] = id
	s.seenPos = (s.seenPos + 1) % len(s.seenRing)
	s.seen[id] = struct{}{}
}

// beginIfNeeded opens a remote transaction if none is open.
func (s *session) beginIfNeeded(ctx context.Context) error {
	if s.open != nil {
		return nil
	}
	s.txSeq++
	s.open = &txn{id: "bn-tx-" + strconv.FormatUint(s.txSeq, 10)}
	if err := s.remote.Write(ctx, frame.New(frame.BEGIN, frame.Transaction, s.open.id)); err != nil {
		return fmt.Errorf("remote broker: %w", err)
	}
	return nil
}

// addPart records n more messages of ds in the transaction, the last being ack.
func (tx *txn) addPart(ds *demandSub, n int, ack ackRef) {
	tx.n += n
	k := len(tx.parts)
	if k == 0 || tx.parts[k-1].sub != ds {
		tx.parts = append(tx.parts, txPart{sub: ds})
		k++
	}
	p := &tx.parts[k-1]
	p.n += n
	p.held++
	p.lastAck = ack
	if ds.individual {
		p.acks = append(p.acks, ack)
	}
}

// maybeCommit commits the open transaction when the local side is idle, the batch
// is full or the window is exhausted, provided fewer than MaxCommits are pending.
func (s *session) maybeCommit(ctx context.Context, idle bool) error {
	tx := s.open
	if tx == nil || s.committing >= s.cfg.MaxCommits {
		return nil
	}
	if !idle && tx.n < s.cfg.MaxBatch && s.inFlight < s.cfg.Window {
		return nil
	}
	s.open = nil
	s.committing++
	err := s.remote.WriteReceipt(ctx, frame.New(frame.COMMIT, frame.Transaction, tx.id), func(err error) {
		s.commits <- txResult{tx: tx, err: err}
	})
	if err != nil {
		return fmt.Errorf("remote broker: %w", err)
	}
	return nil
}

// onCommitted acknowledges a confirmed transaction's messages on the local broker.
//
// Its messages stay in the window until the local broker has processed those
// ACKs, so that a crash at any moment leaves at most Window messages forwarded but
// unacknowledged — the most that can be delivered twice. A receipt on the ACK
// itself would tell, but ActiveMQ then syncs the removal of every acknowledged
// persistent message to disk; instead an empty transaction (BEGIN with a receipt,
// then ABORT) follows the ACKs on the same connection: the broker handles a
// connection's frames in order, so its receipt means the ACKs were processed.
func (s *session) onCommitted(ctx context.Context, tx *txn) error {
	s.committing--
	s.clock.confirmed(tx.n, &s.b.stats)
	var conns []*stomp.Conn
	for _, p := range tx.parts {
		acks := []ackRef{p.lastAck}
		if p.sub.individual {
			acks = p.acks
		}
		for _, a := range acks {
			if err := p.sub.conn.Write(ctx, a.frame()); err != nil {
				s.localFailed = true
				return fmt.Errorf("local broker: %w", err)
			}
		}
		if !slices.Contains(conns, p.sub.conn) {
			conns = append(conns, p.sub.conn)
		}
	}
	tx.acksPending = len(conns)
	for _, c := range conns {
		s.markSeq++
		mark := "bn-ack-" + strconv.FormatUint(s.markSeq, 10)
		err := c.WriteReceipt(ctx, frame.New(frame.BEGIN, frame.Transaction, mark), func(err error) {
			if err == nil {
				s.acked.add(tx)
			}
		})
		if err == nil {
			err = c.Write(ctx, frame.New(frame.ABORT, frame.Transaction, mark))
		}
		if err != nil {
			s.localFailed = true
			return fmt.Errorf("local broker: %w", err)
		}
	}
	if tx.acksPending == 0 {
		return s.onAcked(ctx, tx)
	}
	return nil
}

// onAcked releases a transaction's messages from the window once the local broker
// confirmed their ACKs, and retires subscriptions that were waiting for them.
func (s *session) onAcked(ctx context.Context, tx *txn) error {
	s.inFlight -= tx.n
	s.b.stats.InFlight.Store(int64(s.inFlight))
	for _, p := range tx.parts {
		p.sub.inFlight -= p.held
	}
	s.b.stats.Forwarded.Add(int64(tx.n))
	for _, p := range tx.parts {
		if p.sub.removing && p.sub.inFlight == 0 {
			if _, live := s.subs[p.sub.sub.ID]; live {
				if err := s.finishUnsubscribe(ctx, p.sub); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// updateSubStats publishes the number of active and pending demand subscriptions.
func (s *session) updateSubStats() {
	active := 0
	for _, ds := range s.subs {
		if ds.active {
			active++
		}
	}
	s.b.stats.DemandSubs.Store(int64(active))
	s.b.stats.PendingSubs.Store(int64(len(s.subs) - active))
	s.b.publishDemand(s.subs)
}

// notifier hands values from connection reader goroutines to the session loop
// without ever blocking a reader.
type notifier[T any] struct {
	mu     sync.Mutex
	items  []T
	signal chan struct{}
}

func newNotifier[T any]() *notifier[T] { return &notifier[T]{signal: make(chan struct{}, 1)} }

func (n *notifier[T]) add(v T) {
	n.mu.Lock()
	n.items = append(n.items, v)
	n.mu.Unlock()
	select {
	case n.signal <- struct{}{}:
	default:
	}
}

func (n *notifier[T]) take() []T {
	n.mu.Lock()
	defer n.mu.Unlock()
	items := n.items
	n.items = nil
	return items
}
