package bridge

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"github.com/brokernet/brokernet/advisory"
	"github.com/brokernet/brokernet/demand"
	"github.com/brokernet/brokernet/transport"
)

// A session is one connected life of a bridge: both connections, the demand table
// built from the advisory replay, and the messages in flight. Everything in it is
// owned by the goroutine running session.run; each connection talks to it through
// its one ordered event stream. When a connection fails the session ends, the local
// broker takes back every unsettled message, and Bridge.Run starts a new session,
// which rebuilds demand from scratch.
//
// The session's concerns live in files of their own. A message's path reads in
// two of them, after the event loop here hands over its Delivery event:
//   - inbound.go: a local delivery from its arrival to the message handed to
//     the window (backlog, hop filter, topic copies, headers added);
//   - window.go: that message from its Send to the remote broker through the
//     Commit and its confirmation to its Settle on the local broker.
//
// Beside the path, each file one concern of the session:
//   - hold.go: messages that must stay on the local broker, held and released;
//   - identity.go: which id a forwarded message carries on the remote broker;
//   - replay.go: replay subscriptions' delay;
//   - rate.go: rate limits, deliveries waiting for them;
//   - subscriptions.go: demand subscriptions on the local broker;
//   - narrow.go: wildcard demand narrowed around exclusions;
//   - durables.go: durable demand across sessions (the ledger);
//   - temp.go: temporary destinations mirrored, and requests waiting for them;
//   - rename.go: destinations renamed between the brokers;
//   - stuck.go: messages a remote consumer waits for that cannot travel;
//   - observe.go: what the session publishes for operators;
//   - demandsource.go: a remote broker's demand read beside the connection (RabbitMQ's events).
//
// bridge.go holds the Bridge, its Config, and Run, which runs one session after
// another.
type session struct {
	b   *Bridge
	cfg *Config
	log zerolog.Logger

	local, remote *peer
	// durable is the local connection that holds durable demand subscriptions. It
	// is dialed when the first one is needed: durable subscriptions need a stable
	// client-id, and ActiveMQ then reports that client-id instead of the
	// connection id in its advisories, which the main local connection needs to
	// recognise its own consumers.
	durable *peer

	localID, remoteID string
	table             *demand.Table
	expander          *demand.Expander // narrows wildcard demand (narrow.go)

	// sourceEvents carries the remote broker's demand when it comes from a
	// source beside the connection (RabbitMQ, demandsource.go); sourceKnown are the
	// consumers it reported, sourceSnap those of the snapshot being read.
	sourceEvents <-chan sourceEvent
	sourceKnown  map[string]bool
	sourceSnap   map[string]bool

	subs map[string]*demandSub // by subscription id
	// waitingDurable holds durable subscriptions to make once the live
	// subscription with the same name is gone: ActiveMQ refuses a second one.
	waitingDurable map[string]demand.Subscription
	// vtWarned are the virtual topics warned about as bridged twice
	// (warnVirtualTopics); nil until the first warning.
	vtWarned map[string]bool

	dedup  topicDedup
	replay replayState
	shaper *shaper         // rate limits (rate.go)
	temps  tempState       // the remote broker's temporary destinations (temp.go)
	rh     remoteHoldState // the remote broker confirming nothing (remotehold.go)

	// Durable demand across sessions (durables.go): the ledger as last saved,
	// whether it is kept, durable demand names assumed to exist on the local
	// broker but not seen this session, and the remote removal watch.
	ledger        []ledgerEntry
	ledgerVersion int64
	ledgerOn      bool
	uncertain     map[string]bool
	offlineSince  map[string]time.Time // remote durable subscriptions by durableKeyOf

	// backlog holds local deliveries taken from the stream while the window was
	// full, in order: the stream is always read, so that confirmations behind
	// deliveries are never stuck. The subscriptions' prefetch bounds it.
	backlog eventQueue
	// each sends every message on its own to a remote broker that confirms
	// them one by one (nil: in batches); loads are the destinations' shares
	// of the window then, parked the deliveries waiting for one (isolate.go).
	each   transport.EachConfirmer
	loads  map[string]*destLoad
	parked int
	// unconfirmed counts the messages sent one by one not yet confirmed.
	unconfirmed int

	open *txn // batch being filled, nil if none
	// remoteTx: the remote broker's Commit is a transaction, so a batch of
	// persistent messages is invisible there until committed and never
	// lingers (Config.CommitDelay). lingerDue fires when the open batch's
	// delay is over; nil while none is set.
	remoteTx    bool
	lingerTimer *time.Timer
	lingerDue   <-chan time.Time
	draining    bool   // the session was asked to end: nothing new is taken
	committing  int    // batches awaiting their confirmation
	inCommit    []*txn // those batches, oldest first
	inFlight    int    // forwarded, not yet settled on the local broker (window)
	// retry holds forwarded messages the remote released, to send again.
	retry      []*entry
	retryTimer *time.Timer
	retryDue   chan struct{}
	// held are deliveries that must stay on the local broker (hold.go), to be
	// released after holdDelay.
	held       []heldMsg
	holdTimer  *time.Timer
	holdCounts map[string]int // times each message was held, by BrokernetID
	releaseDue chan struct{}
	// stampID: the remote broker has no selectors, so forwarded messages carry
	// IDHeader for the bridges there to recognise them (inbound.go).
	stampID bool
	// keepsID says which ids the remote's protocol keeps (nil: none, STOMP);
	// a forwarded message whose id it cannot keep carries it in IDHeader
	// (identity.go).
	keepsID func(id string) bool
	// stampPrefix and stampSeq make IDHeader values for messages without id
	// (inbound.go's stampOf).
	stampPrefix string
	stampSeq    uint64
	// isolating is set while a suspect message (one the remote refused before)
	// waits to be sent alone, or is in flight alone.
	isolating bool
	// dirty are subscriptions that may have entries to settle.
	dirty map[*demandSub]struct{}

	wasUp       bool
	localFailed bool
}

// peer is one connection of a session with its pending confirmations.
type peer struct {
	conn   transport.Conn
	name   string // for errors: "local broker", "remote broker", ...
	local  bool   // a connection to the local broker
	events <-chan transport.Event
	// ops are the actions waiting for a Confirmed or Refused event, by token.
	ops map[transport.Token]func(transport.Event) error
}

func newPeer(c transport.Conn, name string, local bool) *peer {
	return &peer{conn: c, name: name, local: local, events: c.Events(), ops: make(map[transport.Token]func(transport.Event) error)}
}

// errorf wraps err with the peer's name.
func (p *peer) errorf(err error) error { return fmt.Errorf("%s: %w", p.name, err) }

// await registers what to do when the request with tok is confirmed or refused.
func (p *peer) await(tok transport.Token, op func(transport.Event) error) { p.ops[tok] = op }

func newSession(b *Bridge) *session {
	return &session{
		b:              b,
		cfg:            &b.cfg,
		log:            b.log,
		subs:           make(map[string]*demandSub),
		waitingDurable: make(map[string]demand.Subscription),
		dedup:          newTopicDedup(),
		uncertain:      make(map[string]bool),
		offlineSince:   make(map[string]time.Time),
		replay:         newReplayState(),
		shaper:         newShaper(&b.cfg, &b.full, b.renames, time.Now()),
		retryDue:       make(chan struct{}, 1),
		releaseDue:     make(chan struct{}, 1),
	}
}

func (s *session) run(ctx context.Context) error {
	// Writes during drain must not fail because ctx was cancelled.
	wctx := context.WithoutCancel(ctx)

	// Sources beside the connections stop with the session.
	ctx, stopSources := context.WithCancel(ctx)
	defer stopSources()
	rc, rep, err := dialAny(ctx, s.cfg.Remote, s.cfg.RemoteFailover, transport.DialOptions{})
	if err != nil {
		return fmt.Errorf("remote broker: %w", err)
	}
	s.remote = newPeer(rc, "remote broker", false)
	defer rc.Abort()
	lc, lep, err := dialAny(ctx, s.cfg.Local, s.cfg.LocalFailover, transport.DialOptions{})
	if err != nil {
		s.localFailed = true
		return fmt.Errorf("local broker: %w", err)
	}
	s.local = newPeer(lc, "local broker", true)
	defer lc.Abort()
	li, ri := lc.Info(), rc.Info()
	s.remoteTx = ri.Transactions
	if ec, ok := transport.ConfirmsEach(rc); ok && !s.cfg.Batched {
		s.each = ec
		s.loads = make(map[string]*destLoad)
	}
	s.log.Info().Str("local_server", li.Server).Str("remote_server", ri.Server).
		Str("local_protocol", li.Protocol).Str("remote_protocol", ri.Protocol).Msg("connected")

	if s.localID, err = brokerID(ctx, lc, s.cfg.LocalID); err != nil {
		s.localFailed = true
		return fmt.Errorf("local broker id: %w", err)
	}
	if s.remoteID, err = brokerID(ctx, rc, s.cfg.RemoteID); err != nil {
		return fmt.Errorf("remote broker id: %w", err)
	}
	if err := checkIDs(s.cfg, s.localID, s.remoteID); err != nil {
		return err
	}
	if s.localID == s.remoteID {
		return fmt.Errorf("%w (%q)", ErrLoopback, s.localID)
	}
	s.b.setIDs(s.localID, s.remoteID)
	s.stampID = !ri.Selectors
	s.keepsID = ri.KeepsID
	opts := s.cfg.Demand
	opts.LocalID, opts.RemoteID = s.localID, s.remoteID
	opts.BridgeTemp = s.setupTemps()
	s.table = demand.New(opts)
	if err := s.watchDestinations(ctx, opts); err != nil {
		s.localFailed = true
		return fmt.Errorf("local broker: %w", err)
	}
	_, lists := transport.ListsDurables(rep)
	if (s.cfg.DurableOfflineTimeout > 0 || lists) && li.Flavour == transport.ActiveMQ && ri.Flavour == transport.ActiveMQ {
		// Durable demand that outlives the bridge (durables.go). Only a
		// timeout, or a remote that lists its durable subscriptions, needs the
		// ledger; otherwise an offline subscriber's durable demand stays on
		// the local broker with its messages by itself.
		s.ledgerOn = true
		if err := s.restoreDurables(ctx, rep); err != nil {
			return err
		}
	}

	// Temporary destinations first, so that their replay comes before the
	// consumers of them.
	if err := s.watchTemps(ctx); err != nil {
		return fmt.Errorf("remote broker: %w", err)
	}
	// Consumer advisories. ActiveMQ replays every existing consumer to a new advisory
	// subscriber, so the table ends up right whether consumers came before or after us.
	if err := rc.WatchConsumers(ctx); err != nil {
		if !errors.Is(err, transport.ErrUnsupported) || ri.Flavour != transport.RabbitMQ {
			return fmt.Errorf("remote broker: %w", err)
		}
		if err := s.watchDemandSource(ctx, rep); err != nil {
			return fmt.Errorf("remote broker demand: %w", err)
		}
	}
	// Our own broker's consumers matter for duplicate-route suppression (which
	// routes other bridges hold there) and for replay (whether local consumers exist).
	o := s.cfg.Demand
	if o.SuppressQueues || o.SuppressTopics || o.ReplayWhenNoConsumers {
		err := lc.WatchConsumers(ctx)
		switch {
		case errors.Is(err, transport.ErrUnsupported):
			// A broker without advisories (RabbitMQ) shows neither the routes
			// other bridges hold there nor, over its events, their tags.
			s.log.Warn().Str("local_server", li.Server).
				Msg("duplicate-route suppression and replay need the local broker's consumer advisories; not available on this broker")
		case err != nil:
			s.localFailed = true
			return fmt.Errorf("local broker: %w", err)
		}
	}
	defer func() {
		s.replay.stop()
		s.shaper.stop()
		s.stopWaiting()
		if s.retryTimer != nil {
			s.retryTimer.Stop()
		}
		if s.holdTimer != nil {
			s.holdTimer.Stop()
		}
		s.b.stats.Held.Store(0)
		if s.durable != nil {
			s.durable.conn.Abort()
		}
	}()
	if err := s.apply(ctx, s.table.Start()); err != nil {
		return err
	}
	defer s.measureStuck(ctx, lc, lep)()
	s.wasUp = true
	s.b.stats.Sessions.Add(1)
	s.b.setUp(true)
	s.log.Info().Str("local_id", s.localID).Str("remote_id", s.remoteID).Msg("bridge up")
	defer s.b.stats.DemandSubs.Store(0)
	defer s.b.stats.TempDestinations.Store(0) // mirrors end with the local connection
	defer s.b.stats.PendingSubs.Store(0)
	defer s.b.setBlocked(nil)
	defer s.b.setRemoteHold(nil)
	if !s.eachMode() {
		hctx, stopWatch := context.WithCancel(wctx)
		defer stopWatch()
		go s.watchRemoteHold(hctx)
	}
	fctx, stopFull := context.WithCancel(wctx)
	defer stopFull()
	go s.watchFullQueues(fctx)

	return s.loop(ctx, wctx)
}

// dialAny connects to the first of first and then failover that answers, and
// returns the connection and that endpoint.
func dialAny(ctx context.Context, first transport.Endpoint, failover []transport.Endpoint, opts transport.DialOptions) (transport.Conn, transport.Endpoint, error) {
	var errs []error
	for _, e := range append([]transport.Endpoint{first}, failover...) {
		c, err := e.Dial(ctx, opts)
		if err == nil {
			return c, e, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, nil, errors.Join(errs...)
}

// brokerID returns the broker's id: override when set, else what the broker tells.
func brokerID(ctx context.Context, c transport.Conn, override string) (string, error) {
	if override != "" {
		return override, nil
	}
	return c.BrokerID(ctx)
}

// loop is the session's event loop.
func (s *session) loop(ctx, wctx context.Context) error {
	var drainDeadline <-chan time.Time
	var expire <-chan time.Time
	if s.cfg.DurableOfflineTimeout > 0 && s.ledgerOn {
		t := time.NewTicker(min(max(s.cfg.DurableOfflineTimeout/4, 100*time.Millisecond), time.Minute))
		defer t.Stop()
		expire = t.C
	}
	blockTick := time.NewTicker(min(time.Second, s.cfg.BlockedAfter/2))
	defer blockTick.Stop()
	for {
		if s.draining && s.inFlight == 0 && s.open == nil && s.committing == 0 && !s.settling() {
			return s.closeGracefully(wctx)
		}
		var cancelled <-chan struct{}
		if !s.draining {
			cancelled = ctx.Done()
		}
		var durIn <-chan transport.Event
		if s.durable != nil {
			durIn = s.durable.events
		}
		var err error
		select {
		case <-cancelled:
			s.draining = true
			s.b.drains.Add(1)
			t := time.NewTimer(s.cfg.DrainTimeout)
			defer t.Stop()
			drainDeadline = t.C
			s.log.Info().Int("in_flight", s.inFlight).Msg("draining")
			// What was taken while the window was full is given back unsettled.
			s.backlog = eventQueue{}
			s.shaper.drop()
			for _, ld := range s.loads {
				ld.parked = eventQueue{}
			}
			s.parked = 0
			// Whatever is open is committed now; nothing new is taken.
			err = s.maybeCommit(wctx, true)
		case <-drainDeadline:
			return fmt.Errorf("drain timed out with %d messages in flight; they will be redelivered", s.inFlight)
		case ev, ok := <-s.local.events:
			err = s.onEvent(wctx, s.local, ev, ok)
		case ev, ok := <-durIn:
			err = s.onEvent(wctx, s.durable, ev, ok)
		case ev, ok := <-s.remote.events:
			err = s.onEvent(wctx, s.remote, ev, ok)
		case <-s.replay.due.Signal():
			err = s.onReplayDue(wctx)
		case <-s.shaper.due.Signal():
			err = s.onShapeDue(wctx)
		case <-s.lingerDue:
			s.lingerDue = nil // the commit check below sees the delay is over
		case <-s.retryDue:
			err = s.sendRetries(wctx)
		case <-s.releaseDue:
			err = s.releaseHeld(wctx)
		case se := <-s.sourceEvents:
			err = s.onSourceEvent(wctx, se)
		case <-expire:
			err = s.expireDurables(wctx)
		case <-s.temps.waitDue:
			s.onWaitDue()
		case <-blockTick.C:
			s.checkBlocked()
			s.countFullWaiting()
		}
		if err != nil {
			return err
		}
		if s.isolating && s.open == nil && s.committing == 0 && s.unconfirmed == 0 {
			// The suspect waiting at the head of the backlog may go alone now.
			s.isolating = false
		}
		if !s.draining {
			if err := s.unparkAll(wctx); err != nil {
				return err
			}
			if err := s.takeBacklog(wctx); err != nil {
				return err
			}
		}
		if err := s.maybeCommit(wctx, s.draining || s.idle()); err != nil {
			return err
		}
	}
}

// idle reports whether no local delivery is waiting to be read: the moment to
// commit what is open rather than wait for more.
func (s *session) idle() bool {
	if len(s.local.events) > 0 || s.backlog.len() > 0 && s.inFlight < s.cfg.Window && !s.isolating && !s.waitingReplyTo() {
		return false
	}
	return s.durable == nil || len(s.durable.events) == 0
}

// onEvent handles one event of connection p; ok is false once its stream ended.
func (s *session) onEvent(ctx context.Context, p *peer, ev transport.Event, ok bool) error {
	if !ok {
		if p.local {
			s.localFailed = true
		}
		err := p.conn.Err()
		if err == nil {
			err = transport.ErrClosed
		}
		return p.errorf(err)
	}
	switch ev.Kind {
	case transport.Delivery:
		return s.onDelivery(ctx, p, ev)
	case transport.Confirmed, transport.Refused:
		op, found := p.ops[ev.Token]
		if !found {
			return nil
		}
		delete(p.ops, ev.Token)
		return op(ev)
	case transport.Consumer:
		if p == s.remote {
			return s.onAdvisory(ctx, ev.Consumer)
		}
		return s.onLocalAdvisory(ctx, p, ev.Consumer)
	case transport.DestinationChanged:
		switch {
		case p == s.remote:
			return s.onRemoteTemp(ctx, ev.Destination)
		case ev.Destination.Destination.IsTemp():
			s.onLocalTemp(ev.Destination)
			return nil
		}
		return s.onDestination(ctx, ev.Destination)
	case transport.BadConsumer:
		s.b.stats.BadAdvisories.Add(1)
		s.log.Warn().Err(ev.Err).Str("from", p.name).Msg("skipping malformed advisory")
	}
	return nil
}

// closeGracefully disconnects both ends, so that every settlement written before
// was processed by the local broker.
func (s *session) closeGracefully(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	errL := s.local.conn.Close(ctx)
	errR := s.remote.conn.Close(ctx)
	var errD error
	if s.durable != nil {
		errD = s.durable.conn.Close(ctx)
	}
	return errors.Join(errL, errR, errD)
}

// onAdvisory applies one consumer advisory of the remote broker to the demand
// table and the local broker.
func (s *session) onAdvisory(ctx context.Context, ev advisory.Event) error {
	s.noteRemoteConsumer(ev)
	// A renamed remote destination is demand on its local name (rename.go).
	d, ok := s.b.renames.local(ev.Consumer.Destination)
	if !ok {
		s.log.Debug().Str("consumer", ev.Consumer.ID).Stringer("destination", ev.Consumer.Destination).
			Msg("remote consumer of a destination renamed away: no demand")
		s.b.stats.Advisories.Add(1)
		return nil
	}
	ev.Consumer.Destination = d
	err := s.applyRemote(ctx, s.expander.Consumer(ev))
	// Counted once its changes are written, so that a test seeing the count
	// knows the local broker will process them before anything it sends later.
	s.b.stats.Advisories.Add(1)
	return err
}

// onLocalAdvisory feeds a consumer advisory of the local broker to the table,
// unless it is about one of our own subscriptions.
func (s *session) onLocalAdvisory(ctx context.Context, p *peer, ev advisory.Event) error {
	// Our own consumers on the main connection are recognised by its connection id.
	// Those on the durable connection are not (ActiveMQ reports the client-id as its
	// session); feeding them to the table is harmless: they rank equal to ours.
	if s.local.conn.OwnConsumer(ev.Consumer.ID) {
		return nil
	}
	s.localConsumerChanged()
	changes, decision := s.table.ApplyLocal(ev)
	s.log.Debug().Str("consumer", ev.Consumer.ID).Str("decision", decision.String()).Msg("local advisory")
	return s.apply(ctx, changes)
}
