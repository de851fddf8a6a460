package bridge

import (
	"context"
	"slices"
	"strconv"
	"time"

	"github.com/brokernet/brokernet/advisory"
	"github.com/brokernet/brokernet/destination"
	"github.com/brokernet/brokernet/transport"
)

// Brokers without selectors (RabbitMQ) cannot withhold from a demand
// subscription the messages that already visited the remote broker or spent
// their hop budget, as ActiveMQ does with the hop filter in the selector. The
// bridge filters them itself:
//
//   - a topic copy that must not travel is settled without forwarding: it was
//     this subscription's own copy, the topic's other subscribers have theirs;
//   - a queue message that must not travel stays where it is, for the local
//     broker's own consumers: the bridge holds it unsettled and releases it
//     later, so that it goes back to the queue. Demand subscriptions get a
//     priority below local consumers, so a released message goes to a local
//     consumer when there is one; when there is none it can come back to the
//     bridge, which holds it again: the release delay doubles each round up to
//     maxHoldDelay, so a message that can go nowhere costs one delivery per
//     delay, never a busy loop. A local consumer appearing shortens the wait.
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
// advisory.Selector): not to a broker it visited, not beyond MessageTTL hops, and
// a topic message only toward the brokers it was sent for.
func (s *session) hopVerdict(ds *demandSub, m *transport.Message) verdict {
	bad := stays
	if ds.sub.Destination.Kind == destination.Topic {
		bad = notOurs
	}
	path := m.PropString(advisory.PathHeader)
	if path == "" {
		return forwardIt
	}
	if ids, err := advisory.ParsePath(path); err != nil || slices.Contains(ids, s.remoteID) {
		return bad
	}
	if ttl := s.cfg.Demand.MessageTTL; ttl >= 0 {
		if hops, err := strconv.Atoi(m.PropString(advisory.HopsHeader)); err == nil && hops >= ttl {
			return bad
		}
	}
	if bad == notOurs && ds.forID != "" {
		ids, _ := advisory.ParsePath(m.PropString(advisory.ForHeader))
		if !slices.Contains(ids, ds.forID) {
			return notOurs
		}
	}
	return forwardIt
}

// Delays of releasing held messages.
const (
	minHoldDelay = time.Second
	maxHoldDelay = 30 * time.Second
)

// heldMsg is a local delivery the bridge holds because it must stay local.
type heldMsg struct {
	ds  *demandSub
	ref transport.Ref
}

// hold keeps a delivery unsettled until the next release round.
func (s *session) hold(ds *demandSub, ref transport.Ref) {
	s.held = append(s.held, heldMsg{ds: ds, ref: ref})
	s.b.stats.Held.Store(int64(len(s.held)))
	if s.holdTimer != nil {
		return
	}
	if s.holdDelay == 0 {
		s.holdDelay = minHoldDelay
	}
	s.holdTimer = time.AfterFunc(s.holdDelay, func() {
		select {
		case s.releaseDue <- struct{}{}:
		default:
		}
	})
}

// releaseHeld gives held deliveries back to the local broker, and makes the
// next round wait longer.
func (s *session) releaseHeld(ctx context.Context) error {
	s.holdTimer = nil
	s.holdDelay = min(2*s.holdDelay, maxHoldDelay)
	held := s.held
	s.held = nil
	s.b.stats.Held.Store(0)
	bySub := make(map[*demandSub][]transport.Ref)
	var order []*demandSub
	for _, h := range held {
		if _, live := s.subs[h.ds.sub.ID]; !live {
			continue // unsubscribed: the broker took it back already
		}
		if _, ok := bySub[h.ds]; !ok {
			order = append(order, h.ds)
		}
		bySub[h.ds] = append(bySub[h.ds], h.ref)
	}
	for _, ds := range order {
		if err := ds.peer.conn.Settle(ctx, ds.sub.ID, bySub[ds], transport.Released); err != nil {
			s.localFailed = true
			return ds.peer.errorf(err)
		}
	}
	return nil
}

// localConsumerChanged shortens the wait of held messages: a new local consumer
// may take them now.
func (s *session) localConsumerChanged() {
	s.holdDelay = minHoldDelay
	if len(s.held) > 0 && s.holdTimer != nil && s.holdTimer.Stop() {
		s.holdTimer = nil
		select {
		case s.releaseDue <- struct{}{}:
		default:
		}
	}
}
