package bridge

import (
	"context"
	"fmt"

	"github.com/brokernet/brokernet/advisory"
	"github.com/brokernet/brokernet/transport"
)

// A broker whose connections carry no consumer advisories (RabbitMQ) has a
// demand source beside them, which its endpoint names
// (transport.DemandEndpoint; for RabbitMQ, its event exchange read by
// rabbitmq/events, whatever protocol carries the messages). The source runs
// beside the session and feeds the loop through a channel; each of its
// (re)connections is a snapshot, after which the consumers it no longer lists
// are gone. Until its first snapshot, and whenever it lost its broker, the
// bridge cannot see demand and says so (Bridge.DemandBlind: /readyz, status).

// sourceEvent is one item of a demand source running beside the session.
type sourceEvent struct {
	ev  advisory.Event
	err error // the source stopped for good
}

// watchDemandSource starts the demand source of the broker behind ep; it
// stops when ctx ends.
func (s *session) watchDemandSource(ctx context.Context, ep transport.Endpoint) error {
	de, ok := ep.(transport.DemandEndpoint)
	if !ok {
		return fmt.Errorf("%s is RabbitMQ, but its URI cannot name the STOMP listener of its event exchange", ep)
	}
	src, err := de.DemandSource(s.log)
	if err != nil {
		return err
	}
	s.b.setDemandBlind("waiting for the remote broker's demand source (RabbitMQ: its event exchange, read over STOMP)")
	ch := make(chan sourceEvent, 256)
	s.sourceEvents = ch
	s.sourceKnown = make(map[string]bool)
	go func() {
		err := src.Run(ctx, func(ev advisory.Event) {
			select {
			case ch <- sourceEvent{ev: ev}:
			case <-ctx.Done():
			}
		})
		if err != nil {
			select {
			case ch <- sourceEvent{err: err}:
			case <-ctx.Done():
			}
		}
	}()
	return nil
}

// onSourceEvent applies one event of the remote broker's demand source.
func (s *session) onSourceEvent(ctx context.Context, se sourceEvent) error {
	if se.err != nil {
		return fmt.Errorf("remote broker demand: %w", se.err)
	}
	ev := se.ev
	switch ev.Kind {
	case advisory.SnapshotStart:
		s.sourceSnap = make(map[string]bool)
		return nil
	case advisory.SourceLost:
		s.b.setDemandBlind(fmt.Sprintf("the remote broker's demand is not visible: %v", ev.Err))
		return nil
	case advisory.SnapshotDone:
		s.b.setDemandBlind("")
		for id := range s.sourceKnown {
			if !s.sourceSnap[id] {
				delete(s.sourceKnown, id)
				if err := s.onAdvisory(ctx, advisory.Event{Kind: advisory.ConsumerRemoved, ConsumerCount: -1,
					Consumer: advisory.Consumer{ID: id}}); err != nil {
					return err
				}
			}
		}
		s.sourceSnap = nil
		return nil
	case advisory.ConsumerAdded:
		s.sourceKnown[ev.Consumer.ID] = true
		if s.sourceSnap != nil {
			s.sourceSnap[ev.Consumer.ID] = true
		}
	case advisory.ConsumerRemoved:
		delete(s.sourceKnown, ev.Consumer.ID)
	}
	return s.onAdvisory(ctx, ev)
}
