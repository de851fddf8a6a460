package bridge

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/brokernet/brokernet/advisory"
	"github.com/brokernet/brokernet/destination"
	"github.com/brokernet/brokernet/transport"
)

// Temporary destinations across the network (ActiveMQ's
// bridgeTempDestinations, activemq-network.md §2.1, §2.5): a requester on the
// remote broker sends with JMSReplyTo its temporary queue; the responder on
// the local broker may send there only if the queue exists here (a JMS
// client refuses to publish to a temporary destination its connection has
// not seen in the broker's temporary destination advisories: "Cannot publish
// to a deleted Destination"). So the bridge watches the remote broker's
// temporary destinations and mirrors each one on the local broker
// (transport.TempMirror), removes the mirror when the original goes, and the
// requester's consumer makes demand on the mirror like any consumer: the
// reply is forwarded to the original.
//
// The request travels on another bridge (the one the other way), and may
// reach the responder before that bridge made the mirror and its demand:
// two bridges, two connections, no order between them. The responder's
// client then refuses to reply ("Cannot publish to a deleted Destination"),
// or, to a temporary topic without subscription yet, the reply is dropped.
// ActiveMQ's duplex networkConnector gets the order from its one connection.
// So every bridge also watches its local broker's temporary destinations, and
// holds a message whose reply-to is one of them until the remote broker shows
// a consumer of that destination (the demand of the bridge mirroring it
// there, which it made after the mirror): the mirror, its announcement to the
// responder's connection and the subscription that takes the reply all come
// before the request. It waits at most tempWait; a wait that runs out means
// no bridge mirrors this broker's temporary destinations there, and the
// session waits no more.

// tempWait bounds how long a request waits for its reply-to's demand on the
// remote broker.
const tempWait = 2 * time.Second

// tempState is a session's view of the remote broker's temporary destinations.
type tempState struct {
	mirror transport.TempMirror // the local connection, nil when not mirroring
	// live are the remote temporary destinations mirrored on the local broker.
	live map[destination.Destination]bool
	// gone are mirrors whose original went, kept until their demand
	// subscriptions finished unsubscribing: ActiveMQ removes a temporary
	// destination's subscriptions with it, and an acknowledgement of what one
	// of them forwarded would then fail ("Unmatched acknowledge").
	gone map[destination.Destination]bool

	// order says requests wait for their reply-to's demand (see above);
	// local are the local broker's own temporary destinations, consumersOf
	// the remote broker's consumers of temporary destinations (remoteCons:
	// theirs by consumer id).
	order       bool
	local       map[destination.Destination]bool
	remoteCons  map[string]destination.Destination
	consumersOf map[destination.Destination]int
	// waiting is the reply-to the backlog's head waits for, until waitDue.
	waiting   destination.Destination
	waitTimer *time.Timer
	waitDue   <-chan time.Time

	replyToWarned bool // checkReplyTo (inbound.go) warned this session
}

// tempCapable reports whether this session can bridge temporary destinations:
// the remote broker reports them and the local one can mirror them. A bridge
// that cannot says so once and treats them as ActiveMQ does with
// bridgeTempDestinations off (no demand).
func (s *session) tempCapable() bool {
	if !s.cfg.Demand.BridgeTemp {
		return false
	}
	_, watches := s.remote.conn.(transport.TempWatcher)
	m, mirrors := s.local.conn.(transport.TempMirror)
	if !watches || !mirrors {
		why := "the remote broker's temporary destinations are watched over OpenWire only: use tcp:// or ssl:// for an ActiveMQ remote"
		if watches {
			why = "the local connection cannot create another broker's temporary destinations (ActiveMQ lets only a temporary queue's owner consume it, and only OpenWire can register a connection as that owner): use tcp:// or ssl:// for an ActiveMQ local broker"
		}
		s.log.Info().Str("local_protocol", s.local.conn.Info().Protocol).Str("remote_protocol", s.remote.conn.Info().Protocol).
			Msg("temporary destinations are not bridged (request/reply to remote temporary queues): " + why)
		return false
	}
	s.temps.mirror, s.temps.live, s.temps.gone = m, make(map[destination.Destination]bool), make(map[destination.Destination]bool)
	return true
}

// setupTemps decides what this session does with temporary destinations and
// returns whether remote consumers of them make demand.
func (s *session) setupTemps() bool {
	s.temps = tempState{}
	if !s.cfg.Demand.BridgeTemp {
		return false
	}
	if _, watches := s.local.conn.(transport.TempWatcher); watches && s.remote.conn.Info().Flavour == transport.ActiveMQ {
		// (The remote broker's consumers come from its advisories, onAdvisory.)
		s.temps.order = true
		s.temps.local = make(map[destination.Destination]bool)
		s.temps.remoteCons = make(map[string]destination.Destination)
		s.temps.consumersOf = make(map[destination.Destination]int)
	}
	return s.tempCapable()
}

// watchTemps subscribes to the temporary destination advisories of the
// remote broker (to mirror them) and of the local one (to order requests);
// the existing ones are replayed first.
func (s *session) watchTemps(ctx context.Context) error {
	if s.temps.order {
		err := s.local.conn.(transport.TempWatcher).WatchTempDestinations(ctx)
		if errors.Is(err, transport.ErrUnsupported) {
			s.temps.order = false
		} else if err != nil {
			return s.local.errorf(err)
		}
	}
	if s.temps.mirror == nil {
		return nil
	}
	err := s.remote.conn.(transport.TempWatcher).WatchTempDestinations(ctx)
	if errors.Is(err, transport.ErrUnsupported) {
		s.log.Warn().Err(err).Msg("temporary destinations are not bridged: the remote broker does not report them")
		s.temps.mirror = nil
		return nil
	}
	if err != nil {
		return s.remote.errorf(err)
	}
	return nil
}

// onLocalTemp records a temporary destination of the local broker appearing
// or going.
func (s *session) onLocalTemp(ev advisory.DestinationEvent) {
	if !s.temps.order {
		return
	}
	d := ev.Destination
	switch {
	case ev.Removed:
		delete(s.temps.local, d)
		if s.temps.waiting == d {
			s.stopWaiting()
		}
	case !slices.Contains(ev.Path, s.remoteID):
		// (A mirror of the remote broker's own is not waited for.)
		s.temps.local[d] = true
	}
}

// awaitReplyTo reports whether the local delivery ev must wait for its
// reply-to's demand on the remote broker, and if so starts the wait.
func (s *session) awaitReplyTo(ev transport.Event) bool {
	if !s.temps.order || ev.Msg == nil || ev.Msg.ReplyTo == "" {
		return false
	}
	if s.temps.waitDue != nil {
		return true
	}
	d, err := destination.FromStomp(ev.Msg.ReplyTo)
	if err != nil || !d.IsTemp() || !s.temps.local[d] || s.temps.consumersOf[d] > 0 {
		return false
	}
	s.temps.waiting = d
	s.temps.waitTimer = time.NewTimer(tempWait)
	s.temps.waitDue = s.temps.waitTimer.C
	return true
}

// waiting reports whether the backlog waits for a reply-to's demand.
func (s *session) waitingReplyTo() bool { return s.temps.waitDue != nil }

// stopWaiting ends the wait: the backlog moves on.
func (s *session) stopWaiting() {
	if s.temps.waitTimer != nil {
		s.temps.waitTimer.Stop()
	}
	s.temps.waiting, s.temps.waitTimer, s.temps.waitDue = destination.Destination{}, nil, nil
}

// onWaitDue ends a wait that ran out: nothing mirrors this broker's temporary
// destinations on the remote one, so none is waited for again this session.
func (s *session) onWaitDue() {
	s.log.Info().Stringer("reply_to", s.temps.waiting).Dur("waited", tempWait).
		Msg("no demand on the remote broker for a request's temporary reply-to: requests no longer wait for it (is the bridge the other way bridging temporary destinations?)")
	s.temps.order = false
	s.stopWaiting()
}

// noteRemoteConsumer counts the remote broker's consumers of temporary
// destinations, and ends a wait for one.
func (s *session) noteRemoteConsumer(ev advisory.Event) {
	if !s.temps.order {
		return
	}
	switch ev.Kind {
	case advisory.ConsumerAdded:
		d := ev.Consumer.Destination
		if !d.IsTemp() {
			return
		}
		if old, ok := s.temps.remoteCons[ev.Consumer.ID]; ok {
			s.temps.consumersOf[old]--
		}
		s.temps.remoteCons[ev.Consumer.ID] = d
		s.temps.consumersOf[d]++
		if s.temps.waiting == d {
			s.stopWaiting()
		}
	case advisory.ConsumerRemoved:
		d, ok := s.temps.remoteCons[ev.Consumer.ID]
		if !ok {
			return
		}
		delete(s.temps.remoteCons, ev.Consumer.ID)
		if s.temps.consumersOf[d]--; s.temps.consumersOf[d] <= 0 {
			delete(s.temps.consumersOf, d)
		}
	}
}

// onRemoteTemp mirrors a remote temporary destination appearing, or removes
// the mirror and its demand when it goes.
func (s *session) onRemoteTemp(ctx context.Context, ev advisory.DestinationEvent) error {
	d := ev.Destination
	if ev.Removed && s.temps.consumersOf[d] > 0 {
		// Its consumers went with it, and ActiveMQ advises no removal of a
		// consumer of a temporary destination already gone.
		for id, cd := range s.temps.remoteCons {
			if cd == d {
				delete(s.temps.remoteCons, id)
			}
		}
		delete(s.temps.consumersOf, d)
	}
	if s.temps.mirror == nil || !d.IsTemp() {
		return nil
	}
	if ev.Removed {
		changes := s.table.TempGone(d)
		if err := s.apply(ctx, changes); err != nil {
			return err
		}
		if !s.temps.live[d] {
			return nil
		}
		s.temps.gone[d] = true
		return s.dropGoneTemp(ctx, d)
	}
	if slices.Contains(ev.Path, s.localID) {
		// Mirrored from here: the original is on the local broker.
		return nil
	}
	if t := s.cfg.Demand.ConsumerTTL; t > -1 && len(ev.Path) >= t {
		// Demand for it could not come back this far (consumerTTL), so
		// neither could a reply.
		return nil
	}
	return s.mirrorTemp(ctx, d, ev.Path)
}

// dropGoneTemp removes the mirror d of a remote temporary destination that
// went, once no demand subscription of it is left (finishUnsubscribe calls
// it again).
func (s *session) dropGoneTemp(ctx context.Context, d destination.Destination) error {
	if !s.temps.gone[d] {
		return nil
	}
	for _, ds := range s.subs {
		if ds.sub.Destination == d {
			return nil
		}
	}
	delete(s.temps.gone, d)
	delete(s.temps.live, d)
	s.b.stats.TempDestinations.Store(int64(len(s.temps.live)))
	if err := s.temps.mirror.DropTemp(ctx, d); err != nil {
		return s.local.errorf(err)
	}
	return nil
}

// mirrorTemp creates the remote temporary destination d on the local broker,
// unless it is there already.
func (s *session) mirrorTemp(ctx context.Context, d destination.Destination, path []string) error {
	if s.temps.live[d] || s.temps.gone[d] {
		return nil
	}
	if err := s.temps.mirror.MirrorTemp(ctx, d, append(slices.Clone(path), s.remoteID)); err != nil {
		if errors.Is(err, transport.ErrClosed) {
			return s.local.errorf(err)
		}
		// A name ActiveMQ cannot give an owner (not made by a JMS client):
		// no mirror, and no demand can consume it.
		s.log.Warn().Err(err).Msg("temporary destination not mirrored")
		return nil
	}
	s.temps.live[d] = true
	s.b.stats.TempDestinations.Store(int64(len(s.temps.live)))
	return nil
}
