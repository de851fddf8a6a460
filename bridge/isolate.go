package bridge

import (
	"context"
	"slices"
	"time"

	"github.com/brokernet/brokernet/transport"
)

// Isolation: one destination the remote broker blocks must not stop the
// others. A bridge carries every destination over one connection, so two
// things could couple them, and both are cut here:
//
//   - the remote broker: ActiveMQ's producer flow control blocks the thread
//     that reads the connection when a transacted send, or one asking for no
//     response, reaches a destination at its memory limit. To a broker whose
//     connection confirms messages one by one (transport.EachConfirmer), every
//     message goes alone, asking for its own confirmation, which ActiveMQ
//     parks instead; the window settles each as its confirmation arrives.
//   - the window: a destination may hold at most Config.DestinationWindow of
//     it; deliveries beyond wait in the destination's own queue (parked), so
//     the rest of the window keeps serving the others.
//
// A destination whose oldest message has waited Config.BlockedAfter for its
// confirmation is reported blocked (log, Bridge.Blocked, Stats), and
// reported again as flowing once its confirmations catch up. Nothing is lost:
// a parked delivery is unsettled on the local broker, which redelivers it if
// the session ends.

// destLoad is one destination's part of the window (each-confirmed mode).
type destLoad struct {
	key string
	// sent are its messages sent and not yet confirmed by the remote broker,
	// in send order.
	sent []*entry
	// parked are deliveries for it waiting for its share of the window, in
	// delivery order.
	parked eventQueue
	// blockedSince is when it was found blocked; zero while it flows.
	blockedSince time.Time
}

// eachMode reports whether messages go to the remote broker one by one.
func (s *session) eachMode() bool { return s.each != nil }

// loadKey is what a delivery of ds counts against: its destination for a
// subscription settled message by message, the subscription's otherwise
// (cumulative settlement needs its deliveries taken in order, whatever their
// destination).
func loadKey(ds *demandSub, m *transport.Message) string {
	if ds.individual && m != nil && m.Destination.Name != "" {
		return m.Destination.String()
	}
	return ds.sub.Destination.String()
}

// loadOf returns the load a delivery counts against, nil outside
// each-confirmed mode or for a delivery of no live subscription.
func (s *session) loadOf(ev transport.Event) *destLoad {
	if !s.eachMode() {
		return nil
	}
	ds, ok := s.subs[ev.Sub]
	if !ok {
		return nil
	}
	return s.load(loadKey(ds, ev.Msg))
}

// load returns the load of key, made if new.
func (s *session) load(key string) *destLoad {
	ld := s.loads[key]
	if ld == nil {
		ld = &destLoad{key: key}
		s.loads[key] = ld
	}
	return ld
}

// park queues ev behind its destination's share of the window, if it must
// wait; parked reports whether it did.
func (s *session) park(ev transport.Event) (parked bool) {
	ld := s.loadOf(ev)
	if ld == nil || ld.parked.len() == 0 && len(ld.sent) < s.cfg.DestinationWindow {
		return false
	}
	ld.parked.push(ev)
	s.parked++
	return true
}

// unpark forwards parked deliveries of ld while its share and the window
// have room.
func (s *session) unpark(ctx context.Context, ld *destLoad) error {
	for ld.parked.len() > 0 && len(ld.sent) < s.cfg.DestinationWindow && s.inFlight < s.cfg.Window && !s.draining && !s.isolating {
		ev := ld.parked.pop()
		s.parked--
		if err := s.onLocalMessage(ctx, ev); err != nil {
			return err
		}
	}
	return nil
}

// waitFront puts ev, a delivery that must wait (a suspect waiting to go
// alone), back at the head of its queue: its destination's parked deliveries
// if it came from there (they are all newer), the backlog otherwise.
func (s *session) waitFront(ev transport.Event, load string) {
	if ld := s.loads[load]; ld != nil && ld.parked.len() > 0 {
		ld.parked.pushFront(ev)
		s.parked++
		return
	}
	s.backlog.pushFront(ev)
}

// unparkAll gives every destination with parked deliveries its turn.
func (s *session) unparkAll(ctx context.Context) error {
	if s.parked == 0 {
		return nil
	}
	for _, ld := range s.loads {
		if err := s.unpark(ctx, ld); err != nil {
			return err
		}
	}
	return nil
}

// sendEach sends e's message on its own and settles it when the remote
// broker confirms it.
func (s *session) sendEach(ctx context.Context, e *entry) error {
	ld := s.load(e.load)
	tok, err := s.each.SendConfirmed(ctx, e.out)
	if err != nil {
		return s.remote.errorf(err)
	}
	e.sentAt = time.Now()
	ld.sent = append(ld.sent, e)
	s.unconfirmed++
	s.b.stats.InFlight.Store(int64(s.inFlight))
	s.remote.await(tok, func(ev transport.Event) error { return s.onConfirmedEach(ctx, ld, e, ev) })
	return nil
}

// onConfirmedEach records the remote's verdict on one message.
func (s *session) onConfirmedEach(ctx context.Context, ld *destLoad, e *entry, ev transport.Event) error {
	if i := slices.Index(ld.sent, e); i >= 0 {
		ld.sent = slices.Delete(ld.sent, i, i+1)
	}
	s.unconfirmed--
	if ev.Kind == transport.Refused {
		// Refused on its own, the connection up (ActiveMQ: not authorised, a
		// full destination that fails sends): sent again after a pause, to
		// the dead-letter queue once refused MaxRefusals times.
		s.b.refusals.add([]string{e.id}, ev.Err)
		if s.b.refusals.count(e.id) >= s.cfg.MaxRefusals {
			if err := s.deadLetter(ctx, e, ev.Err); err != nil {
				return err
			}
		} else {
			e.releases++
			s.retry = append(s.retry, e)
			s.scheduleRetry()
		}
	} else {
		now := time.Now()
		st := &s.b.stats
		st.ForwardLatency.Observe(now.Sub(e.taken).Seconds())
		st.ForwardedBytes.Add(int64(len(e.out.Body)))
		e.done = true
		s.b.refusals.forget(e.id)
		s.markDirty(e.ds)
	}
	if !ld.blockedSince.IsZero() && !s.isBlocked(ld, time.Now()) {
		s.unblocked(ld)
	}
	if err := s.unpark(ctx, ld); err != nil {
		return err
	}
	return s.settleReady(ctx)
}

// isBlocked reports whether ld's oldest message has waited BlockedAfter for
// its confirmation.
func (s *session) isBlocked(ld *destLoad, now time.Time) bool {
	return len(ld.sent) > 0 && now.Sub(ld.sent[0].sentAt) >= s.cfg.BlockedAfter
}

// checkBlocked reports destinations that became blocked, and drops the loads
// that are idle.
func (s *session) checkBlocked() {
	now := time.Now()
	for k, ld := range s.loads {
		switch blocked := s.isBlocked(ld, now); {
		case blocked && ld.blockedSince.IsZero():
			ld.blockedSince = now
			s.log.Warn().Str("destination", ld.key).Int("unconfirmed", len(ld.sent)).Int("waiting", ld.parked.len()).
				Dur("oldest", now.Sub(ld.sent[0].sentAt)).
				Msg("the remote broker holds this destination's messages without confirming them (flow control, full queue?): they wait on the local broker, other destinations keep flowing")
		case !blocked && !ld.blockedSince.IsZero():
			s.unblocked(ld)
		case len(ld.sent) == 0 && ld.parked.len() == 0:
			delete(s.loads, k)
		}
	}
	s.publishBlocked()
}

// unblocked reports that ld flows again.
func (s *session) unblocked(ld *destLoad) {
	s.log.Info().Str("destination", ld.key).Dur("blocked_for", time.Since(ld.blockedSince)).
		Msg("the remote broker confirms this destination's messages again")
	ld.blockedSince = time.Time{}
	s.publishBlocked()
}

// BlockedInfo is a destination the remote broker holds back, for /status.
type BlockedInfo struct {
	// Destination is the local destination ("queue://slow"), or the demand
	// subscription's for messages it settles cumulatively.
	Destination string `json:"destination"`
	// Since is when it was found blocked.
	Since time.Time `json:"since"`
	// Unconfirmed are its messages sent and not yet confirmed; Waiting those
	// delivered by the local broker and not sent.
	Unconfirmed int `json:"unconfirmed"`
	Waiting     int `json:"waiting"`
	// Reason says why, where the bridge knows: a remote queue that refuses
	// what overflows it is reported with its limits (fullqueue.go).
	Reason string `json:"reason,omitempty"`
}

// publishBlocked makes the blocked destinations visible to Blocked and Stats.
func (s *session) publishBlocked() {
	var list []BlockedInfo
	for _, ld := range s.loads {
		if !ld.blockedSince.IsZero() {
			list = append(list, BlockedInfo{Destination: ld.key, Since: ld.blockedSince, Unconfirmed: len(ld.sent), Waiting: ld.parked.len()})
		}
	}
	slices.SortFunc(list, func(a, b BlockedInfo) int { return a.Since.Compare(b.Since) })
	s.b.setBlocked(list)
}

// setBlocked records the blocked destinations of the current session.
func (b *Bridge) setBlocked(list []BlockedInfo) {
	b.blockedMu.Lock()
	b.blocked = list
	b.blockedMu.Unlock()
	b.publishBlockedCount()
}

// publishBlockedCount sets the gauge of blocked destinations: the session's
// and the full remote queues.
func (b *Bridge) publishBlockedCount() {
	b.blockedMu.Lock()
	n := len(b.blocked)
	b.blockedMu.Unlock()
	b.stats.BlockedDestinations.Store(int64(n + b.full.nFull()))
}

// Blocked lists the destinations whose messages the remote broker holds back
// without confirming them, oldest first, then the remote queues that are full
// and refuse what is sent to them (named as on the remote broker).
func (b *Bridge) Blocked() []BlockedInfo {
	b.blockedMu.Lock()
	list := slices.Clone(b.blocked)
	b.blockedMu.Unlock()
	return append(list, b.full.blocked()...)
}
