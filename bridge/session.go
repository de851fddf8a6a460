package bridge

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/go-stomp/stomp/v3/frame"

	"github.com/brokernet/brokernet/advisory"
	"github.com/brokernet/brokernet/demand"
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

	subs map[string]*demandSub // by STOMP subscription id

	open       *txn          // transaction being filled, nil if none
	committing int           // commits awaiting their receipt
	inFlight   int           // messages in open and committing transactions
	commits    chan txResult // commit outcomes from the remote reader goroutine
	txSeq      uint64

	// ready carries the ids of demand subscriptions the local broker confirmed.
	ready *notifier

	wasUp       bool
	localFailed bool
}

// demandSub is a demand subscription open on the local broker.
type demandSub struct {
	sub      demand.Subscription
	active   bool // the broker confirmed the SUBSCRIBE
	removing bool // UNSUBSCRIBE is due once inFlight reaches zero
	inFlight int  // forwarded, not yet confirmed
}

// txn is one transaction on the remote broker. Its parts record, per demand
// subscription, how many messages it carries and the ack id of the last one: the
// local acknowledgement is cumulative (ack mode "client"), and commits complete in
// order on one connection, so one ACK per subscription confirms the whole part.
type txn struct {
	id    string
	n     int
	parts []txPart
}

type txPart struct {
	sub     *demandSub
	n       int
	lastAck ackRef // the last message's ack reference
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
	identitySub      = "bn-identity"
)

func newSession(b *Bridge) *session {
	return &session{
		b:       b,
		cfg:     &b.cfg,
		subs:    make(map[string]*demandSub),
		commits: make(chan txResult, 64),
		ready:   newNotifier(),
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
	s.wasUp = true
	s.b.stats.Sessions.Add(1)
	s.b.setUp(true, s.localID, s.remoteID)
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
		if draining && s.inFlight == 0 {
			return s.closeGracefully(wctx)
		}
		var in <-chan *frame.Frame
		if !draining && s.inFlight < s.cfg.Window {
			in = localIn
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
			if err := s.maybeCommit(wctx, len(localIn) == 0); err != nil {
				return err
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
		case <-s.ready.signal:
			for _, id := range s.ready.take() {
				if ds, ok := s.subs[id]; ok {
					ds.active = true
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
	return errors.Join(errL, errR)
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
	s.b.stats.Advisories.Add(1)
	changes, decision := s.table.Apply(ev)
	s.b.log.Debug().Str("consumer", ev.Consumer.ID).Str("decision", decision.String()).Msg("advisory")
	for _, ch := range changes {
		switch ch.Kind {
		case demand.Subscribe:
			if err := s.subscribe(ctx, ch.Sub); err != nil {
				return err
			}
		case demand.Unsubscribe:
			if err := s.unsubscribe(ctx, ch.Sub.ID); err != nil {
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
	// The receipt is not waited for here: that would stop this loop from draining
	// the local deliveries the receipt may queue behind. It marks the subscription
	// active when it arrives. A refused SUBSCRIBE comes back as an ERROR frame,
	// which ends the session.
	id := sub.ID
	if err := s.local.WriteReceipt(ctx, f, func(err error) {
		if err == nil {
			s.ready.add(id)
		}
	}); err != nil {
		return fmt.Errorf("local broker: %w", err)
	}
	s.subs[sub.ID] = &demandSub{sub: sub}
	s.updateSubStats()
	s.b.log.Info().Str("destination", sub.Destination.String()).Str("sub", sub.ID).
		Int("priority", sub.Priority).Strs("consumers", sub.Consumers).Msg("demand added")
	return nil
}

// unsubscribe removes a demand subscription once its in-flight messages are
// confirmed; until then its new deliveries are dropped unacknowledged, and the
// broker redelivers them elsewhere after the UNSUBSCRIBE.
func (s *session) unsubscribe(ctx context.Context, id string) error {
	ds, ok := s.subs[id]
	if !ok {
		return nil
	}
	ds.removing = true
	if ds.inFlight > 0 {
		return nil
	}
	return s.finishUnsubscribe(ctx, ds)
}

func (s *session) finishUnsubscribe(ctx context.Context, ds *demandSub) error {
	delete(s.subs, ds.sub.ID)
	s.updateSubStats()
	if err := s.local.Write(ctx, frame.New(frame.UNSUBSCRIBE, frame.Id, ds.sub.ID)); err != nil {
		return fmt.Errorf("local broker: %w", err)
	}
	s.b.log.Info().Str("destination", ds.sub.Destination.String()).Str("sub", ds.sub.ID).Msg("demand removed")
	return nil
}

// onLocalMessage forwards one message received on a demand subscription.
func (s *session) onLocalMessage(ctx context.Context, f *frame.Frame) error {
	ds, ok := s.subs[f.Header.Get(frame.Subscription)]
	if !ok || ds.removing {
		// Not ours any more: the broker takes it back with the UNSUBSCRIBE.
		return nil
	}
	if s.open == nil {
		s.txSeq++
		s.open = &txn{id: "bn-tx-" + strconv.FormatUint(s.txSeq, 10)}
		if err := s.remote.Write(ctx, frame.New(frame.BEGIN, frame.Transaction, s.open.id)); err != nil {
			return fmt.Errorf("remote broker: %w", err)
		}
	}
	out := forwardFrame(f, s.localID, s.open.id)
	if err := s.remote.Write(ctx, out); err != nil {
		return fmt.Errorf("remote broker: %w", err)
	}
	tx := s.open
	tx.n++
	if n := len(tx.parts); n > 0 && tx.parts[n-1].sub == ds {
		tx.parts[n-1].n++
		tx.parts[n-1].lastAck = ackRefOf(f)
	} else {
		tx.parts = append(tx.parts, txPart{sub: ds, n: 1, lastAck: ackRefOf(f)})
	}
	ds.inFlight++
	s.inFlight++
	return nil
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
func (s *session) onCommitted(ctx context.Context, tx *txn) error {
	s.committing--
	s.inFlight -= tx.n
	for _, p := range tx.parts {
		if err := s.local.Write(ctx, p.lastAck.frame()); err != nil {
			s.localFailed = true
			return fmt.Errorf("local broker: %w", err)
		}
		p.sub.inFlight -= p.n
		if p.sub.removing && p.sub.inFlight == 0 {
			if err := s.finishUnsubscribe(ctx, p.sub); err != nil {
				return err
			}
		}
	}
	s.b.stats.Forwarded.Add(int64(tx.n))
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
}

// notifier hands ids from a connection's reader goroutine to the session loop
// without ever blocking the reader.
type notifier struct {
	mu     sync.Mutex
	ids    []string
	signal chan struct{}
}

func newNotifier() *notifier { return &notifier{signal: make(chan struct{}, 1)} }

func (n *notifier) add(id string) {
	n.mu.Lock()
	n.ids = append(n.ids, id)
	n.mu.Unlock()
	select {
	case n.signal <- struct{}{}:
	default:
	}
}

func (n *notifier) take() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	ids := n.ids
	n.ids = nil
	return ids
}
