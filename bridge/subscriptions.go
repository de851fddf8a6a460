package bridge

import (
	"context"
	"fmt"
	"strings"

	"github.com/brokernet/brokernet/demand"
	"github.com/brokernet/brokernet/destination"
	"github.com/brokernet/brokernet/hop"
	"github.com/brokernet/brokernet/transport"
)

// Demand subscriptions: the demand table's changes carried out on the local
// broker, a subscription made, replaced or retired once nothing of it is in
// flight.

// demandSub is a demand subscription open on the local broker.
type demandSub struct {
	sub  demand.Subscription
	peer *peer // the local connection it lives on
	// individual subscriptions are settled message by message instead of
	// cumulatively (static wildcard includes, which leave some messages alone).
	individual bool
	active     bool // the broker confirmed the subscription
	removing   bool // to unsubscribe once nothing of it is in flight
	unsub      demand.Change
	// pending are the deliveries taken and not yet settled, in delivery order.
	pending []*entry
	// shaped are deliveries waiting for the rate limits, in delivery order
	// (rate.go).
	shaped eventQueue
	// settling counts deliveries settled whose settlement the broker has not yet
	// confirmed (Sync).
	settling int
	// bridgeFilters: the local broker has no selectors, so the bridge applies
	// the hop filter itself (inbound.go).
	bridgeFilters bool
	// pattern matches the destinations of a wildcard subscription; nil otherwise.
	pattern *destination.Pattern
	// forID is the broker this topic subscription forwards toward (Tag.For).
	forID string
	// replaced is an Unsubscribe waiting for its replacement to be confirmed by
	// the broker: until then this subscription keeps forwarding, so that a topic
	// loses nothing in between (copies are de-duplicated).
	replaced *demand.Change
}

// busy reports whether deliveries of ds are still in flight.
func (ds *demandSub) busy() bool { return len(ds.pending) > 0 || ds.settling > 0 }

// apply carries out the table's changes on the local broker, in order.
func (s *session) apply(ctx context.Context, changes []demand.Change) error {
	// Recorded first, so that durable demand is in the ledger before it exists.
	if err := s.saveLedger(ctx); err != nil {
		return err
	}
	for _, ch := range changes {
		switch ch.Kind {
		case demand.Subscribe:
			if ch.Sub.Replay && s.cfg.ReplayDelay > 0 {
				// Replay only what has waited: the subscription starts after the delay,
				// if the table still wants it then.
				s.replay.after(s.cfg.ReplayDelay, ch.Sub.ID)
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
	ts := transport.Subscription{
		ID:          sub.ID,
		Destination: sub.Destination,
		Selector:    sub.Selector,
		Prefetch:    sub.Prefetch,
		Priority:    sub.Priority,
		Exclusive:   sub.Exclusive,
		Retroactive: sub.Retroactive,
	}
	p := s.local
	if sub.DurableName != "" {
		for _, ds := range s.subs {
			if ds.sub.DurableName == sub.DurableName {
				// Still being retired: subscribe right after it is gone.
				s.waitingDurable[sub.DurableName] = sub
				return nil
			}
		}
		var err error
		if p, err = s.durablePeer(ctx); err != nil {
			return err
		}
		ts.DurableName = sub.DurableName
		delete(s.uncertain, sub.DurableName) // exists once subscribed
	}
	if sub.Static && strings.ContainsAny(sub.Destination.Name, "*>") {
		// A wildcard subscription may deliver destinations that must not be
		// forwarded; those stay unsettled, so settlement must be individual.
		ts.Ack = transport.Individual
	}
	if sub.Destination.IsTemp() && s.temps.mirror != nil && p == s.local {
		// Its consumer's advisory may come before the destination's.
		if err := s.mirrorTemp(ctx, sub.Destination, nil); err != nil {
			return err
		}
	}
	bridgeFilters := !p.conn.Info().Selectors
	if bridgeFilters {
		if sub.UserSelector != "" || sub.Replay {
			// Without selectors on the local broker, a consumer's selector cannot
			// be honoured: forwarding everything would strand what it does not
			// select on the remote. Its messages stay here.
			s.log.Warn().Str("destination", sub.Destination.String()).Str("selector", sub.UserSelector).
				Bool("replay", sub.Replay).Msg("demand not served: the local broker has no selectors")
			return nil
		}
		ts.Selector = ""
		ts.Ack = transport.Individual
	}
	if (sub.Exclusive || sub.Retroactive) && p.conn.Info().Flavour != transport.ActiveMQ {
		// RabbitMQ's STOMP and AMQP 1.0 subscriptions have no exclusive or
		// retroactive consumer (docs/consumer-flags.md): served without them.
		s.log.Warn().Str("destination", sub.Destination.String()).Bool("exclusive", sub.Exclusive).
			Bool("retroactive", sub.Retroactive).Stringer("broker", p.conn.Info().Flavour).
			Msg("consumer flags not carried: the local broker has no such subscription property")
	}
	// The confirmation is not waited for here: that would stop this loop from
	// reading the deliveries it may queue behind. It marks the subscription
	// active when it arrives.
	tok, err := p.conn.Subscribe(ctx, ts)
	if err != nil {
		return p.errorf(err)
	}
	id := sub.ID
	p.await(tok, func(ev transport.Event) error {
		if ev.Kind == transport.Refused {
			s.log.Error().Err(ev.Err).Str("destination", sub.Destination.String()).Str("sub", id).Msg("demand subscription refused")
			delete(s.subs, id)
			s.updateSubStats()
			return nil
		}
		if ds, ok := s.subs[id]; ok {
			ds.active = true
		}
		s.updateSubStats()
		return s.retireReplaced(ctx, id)
	})
	ds := &demandSub{sub: sub, peer: p, individual: ts.Ack == transport.Individual, bridgeFilters: bridgeFilters}
	if _, tag, ok := hop.ParseSelector(sub.Selector); ok {
		ds.forID = tag.For
	}
	if strings.ContainsAny(sub.Destination.Name, "*>") {
		if pat, err := destination.ParsePattern(sub.Destination.String()); err == nil {
			ds.pattern = &pat
		}
	}
	s.subs[sub.ID] = ds
	s.updateSubStats()
	ev := s.log.Info().Str("destination", sub.Destination.String()).Str("sub", sub.ID).
		Int("priority", sub.Priority).Strs("consumers", sub.Consumers)
	if sub.UserSelector != "" {
		ev = ev.Str("selector", sub.UserSelector)
	}
	if sub.Exclusive {
		ev = ev.Bool("exclusive", true)
	}
	if sub.Retroactive {
		ev = ev.Bool("retroactive", true)
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

// durablePeer returns the local connection for durable subscriptions, dialing it
// with a client-id that is the same after every restart of this bridge, so that
// the broker hands back each durable subscription and what it retained.
func (s *session) durablePeer(ctx context.Context) (*peer, error) {
	if s.durable != nil {
		return s.durable, nil
	}
	c, _, err := dialAny(ctx, s.cfg.Local, s.cfg.LocalFailover,
		transport.DialOptions{ClientID: durableClientID(s.localID, s.remoteID)})
	if err != nil {
		s.localFailed = true
		return nil, fmt.Errorf("local broker (durable subscriptions): %w", err)
	}
	s.durable = newPeer(c, "local broker (durable subscriptions)", true)
	return s.durable, nil
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
// settled; until then its new deliveries are left unsettled, and the broker
// redelivers them elsewhere after the unsubscription.
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
	if ds.busy() {
		return nil
	}
	return s.finishUnsubscribe(ctx, ds)
}

func (s *session) finishUnsubscribe(ctx context.Context, ds *demandSub) error {
	delete(s.subs, ds.sub.ID)
	s.updateSubStats()
	if err := ds.peer.conn.Unsubscribe(ctx, ds.sub.ID); err != nil {
		return ds.peer.errorf(err)
	}
	msg := "demand removed"
	if ds.sub.Replay {
		msg = "replay subscription removed"
	}
	s.log.Info().Str("destination", ds.sub.Destination.String()).Str("sub", ds.sub.ID).Msg(msg)
	if ds.sub.Destination.IsTemp() && s.temps.mirror != nil {
		if err := s.dropGoneTemp(ctx, ds.sub.Destination); err != nil {
			return err
		}
	}
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

// destroyDurable removes a durable demand subscription from the local broker.
func (s *session) destroyDurable(ctx context.Context, sub demand.Subscription) error {
	p, err := s.durablePeer(ctx)
	if err != nil {
		return err
	}
	if s.uncertain[sub.DurableName] {
		if err := s.destroyUncertain(ctx, p, sub); err != nil {
			return err
		}
	}
	if err := p.conn.DestroyDurable(ctx, transport.Subscription{ID: sub.ID, Destination: sub.Destination, DurableName: sub.DurableName}); err != nil {
		return p.errorf(err)
	}
	s.b.stats.DurablesDestroyed.Add(1)
	s.log.Info().Str("destination", sub.Destination.String()).Str("durable", sub.DurableName).Msg("durable demand destroyed")
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

// mayOverlap reports whether changes subscribe to a topic or to a virtual
// topic's consumer queue, the only changes after which warnVirtualTopics can
// find something new.
func mayOverlap(changes []demand.Change) bool {
	for _, ch := range changes {
		if ch.Kind != demand.Subscribe {
			continue
		}
		if _, ok := demand.VirtualTopicOf(ch.Sub.Destination); ok || ch.Sub.Destination.Kind == destination.Topic {
			return true
		}
	}
	return false
}

// warnVirtualTopics warns once per session about each virtual topic the demand
// takes both as a topic and through its consumer queues
// (demand.Table.VirtualTopicOverlaps): the remote broker's consumer queues
// then get its messages twice.
func (s *session) warnVirtualTopics() {
	for _, vt := range s.table.VirtualTopicOverlaps() {
		if s.vtWarned[vt.String()] {
			continue
		}
		if s.vtWarned == nil {
			s.vtWarned = make(map[string]bool)
		}
		s.vtWarned[vt.String()] = true
		s.log.Warn().Str("destination", vt.String()).
			Msg("virtual topic bridged twice: a topic subscriber on the remote broker makes the topic travel, " +
				"and the remote broker puts each copy in its Consumer.*." + vt.Name + " queues too, beside what their own demand forwards, " +
				"so their consumers get those messages twice; bridge the consumer queues or the virtual topic, not both " +
				"(exclude topic://VirtualTopic.> or the queues; docs/consumer-flags.md)")
	}
}
