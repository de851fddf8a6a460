package bridge

import (
	"context"
	"errors"

	"github.com/brokernet/brokernet/advisory"
	"github.com/brokernet/brokernet/demand"
	"github.com/brokernet/brokernet/transport"
)

// Narrowing wildcard demand: a remote consumer of "queue://>" must not pull the
// messages of an excluded "queue://secret.x". demand.Expander replaces such a
// consumer by one per permitted local destination, and demand.Table does the
// same for a static include such as "queue://orders.>" with
// "queue://orders.secret" excluded; the local broker's destination advisories
// tell which destinations exist.

// watchDestinations sets up the session's Expander and, when the demand rules
// could need narrowing, subscribes to the local broker's destination
// advisories. A broker that cannot report its destinations gets no demand for
// wildcards that need narrowing (safe, and logged).
func (s *session) watchDestinations(ctx context.Context, opts demand.Options) error {
	s.expander = demand.NewExpander(opts)
	if !s.expander.Needed() {
		return nil
	}
	w, ok := s.local.conn.(transport.DestinationWatcher)
	var err error
	if ok {
		err = w.WatchDestinations(ctx)
	}
	if !ok || errors.Is(err, transport.ErrUnsupported) {
		s.log.Warn().Msg("the local broker does not report its destinations: wildcard demand and static includes that include/exclude rules would have to narrow get no subscription")
		return nil
	}
	return err
}

// onDestination feeds a local destination appearing or going to the table,
// for static includes narrowed around exclusions, and to the Expander. The
// table goes first, so that narrowed remote consumers join a static
// subscription made for the same destination.
func (s *session) onDestination(ctx context.Context, ev advisory.DestinationEvent) error {
	if err := s.apply(ctx, s.table.Destination(ev)); err != nil {
		return err
	}
	return s.applyRemote(ctx, s.expander.Destination(ev))
}

// applyRemote applies remote consumer events (after the Expander) to the table
// and writes the changes.
func (s *session) applyRemote(ctx context.Context, evs []advisory.Event) error {
	overlap := false
	for _, ev := range evs {
		changes, decision := s.table.Apply(ev)
		s.log.Debug().Str("consumer", ev.Consumer.ID).Str("decision", decision.String()).Msg("advisory")
		if err := s.apply(ctx, changes); err != nil {
			return err
		}
		overlap = overlap || mayOverlap(changes)
	}
	if overlap {
		s.warnVirtualTopics()
	}
	return nil
}
