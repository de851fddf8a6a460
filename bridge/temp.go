package bridge

import (
	"context"
	"errors"
	"slices"

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

// tempState is a session's view of the remote broker's temporary destinations.
type tempState struct {
	mirror transport.TempMirror // the local connection, nil when not mirroring
	// live are the remote temporary destinations mirrored on the local broker.
	live map[destination.Destination]bool
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
		why := "the remote broker does not report its temporary destinations"
		if watches {
			why = "the local connection cannot create another broker's temporary destinations (ActiveMQ lets only a temporary queue's owner consume it, and only OpenWire can register a connection as that owner): use tcp:// for the local broker"
		}
		s.log.Info().Str("local_protocol", s.local.conn.Info().Protocol).Str("remote_protocol", s.remote.conn.Info().Protocol).
			Msg("temporary destinations are not bridged (request/reply to remote temporary queues): " + why)
		return false
	}
	s.temps = tempState{mirror: m, live: make(map[destination.Destination]bool)}
	return true
}

// watchTemps subscribes to the remote broker's temporary destination
// advisories; the existing ones are replayed first.
func (s *session) watchTemps(ctx context.Context) error {
	if s.temps.mirror == nil {
		return nil
	}
	err := s.remote.conn.(transport.TempWatcher).WatchTempDestinations(ctx)
	if errors.Is(err, transport.ErrUnsupported) {
		s.log.Warn().Err(err).Msg("temporary destinations are not bridged: the remote broker does not report them")
		s.temps.mirror = nil
		return nil
	}
	return err
}

// onRemoteTemp mirrors a remote temporary destination appearing, or removes
// the mirror and its demand when it goes.
func (s *session) onRemoteTemp(ctx context.Context, ev advisory.DestinationEvent) error {
	d := ev.Destination
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
		delete(s.temps.live, d)
		s.b.stats.TempDestinations.Store(int64(len(s.temps.live)))
		if err := s.temps.mirror.DropTemp(ctx, d); err != nil {
			return s.local.errorf(err)
		}
		s.log.Debug().Stringer("destination", d).Int("demand_removed", len(changes)).Msg("remote temporary destination gone")
		return nil
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

// mirrorTemp creates the remote temporary destination d on the local broker,
// unless it is there already.
func (s *session) mirrorTemp(ctx context.Context, d destination.Destination, path []string) error {
	if s.temps.live[d] {
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
