package bridge

import (
	"context"
	"fmt"
	"time"

	"github.com/brokernet/brokernet/transport"
)

// The window: a message inbound.go hands over, from its Send to the remote
// broker through the batch's Commit and confirmation to its Settle on the local
// broker, with what the remote's answer may ask for instead (a release: send
// again; a rejection or repeated refusals: the dead-letter queue).
//
// A local delivery forwarded to the remote broker is an entry of its
// demand subscription from the moment it is sent until the local broker has
// confirmed its settlement. Sends stream in batches; a batch is committed when
// the local side goes idle, the batch is full or the window is exhausted, with up
// to MaxCommits batches awaiting confirmation, so batches grow with load. When a
// batch is confirmed, each subscription settles the longest run of confirmed
// entries at its head (one cumulative acknowledgement where the transport has
// them), followed by a Sync on that connection; only when the Sync is confirmed
// (for a persistent ActiveMQ: the settlements are on its disk) do the entries
// leave the window. A crash at any moment, of the bridge or of the local broker,
// therefore leaves at most Window messages forwarded but unsettled — the most
// that can be delivered twice.

// entry is one local delivery the session took.
type entry struct {
	ds  *demandSub
	ref transport.Ref
	id  string // the local broker's message id
	// out is what was sent to the remote broker; nil for an acknowledgement-only
	// entry (a topic copy another subscription forwarded).
	out *transport.Message
	// done: the entry may be settled (remote confirmed it, it was dead-lettered,
	// or it is acknowledgement-only).
	done         bool
	deadLettered bool
	releases     int       // times the remote released it
	taken        time.Time // when it was taken from the local broker
	// load is the destination share it counts against and sentAt when it
	// was sent, in each-confirmed mode (isolate.go).
	load   string
	sentAt time.Time
}

// txn is one batch sent to the remote broker.
type txn struct {
	entries []*entry // in send order
	// solo marks a batch of one suspect message, sent with nothing else in
	// flight, so that a refusal can be pinned on it.
	solo bool
	// opened is when its first message was sent; persistent says one of its
	// messages is (Config.CommitDelay).
	opened     time.Time
	persistent bool
	// committed is when its Commit went (remotehold.go).
	committed time.Time
}

// admit puts e, a checked delivery with the message to send for it
// (inbound.go), in the window and sends that in the open batch; taken reports
// whether e went in.
// A message the remote broker refused before goes to the dead-letter queue
// once refused MaxRefusals times; until then it is a suspect, sent in a batch
// of its own once nothing else is in flight (ev goes back to the head of the
// backlog meanwhile, not taken), so that a refusal is pinned on it.
func (s *session) admit(ctx context.Context, ev transport.Event, e *entry) (taken bool, err error) {
	ds := e.ds
	switch n := s.b.refusals.count(e.id); {
	case n >= s.cfg.MaxRefusals:
		ds.pending = append(ds.pending, e)
		s.inFlight++
		return true, s.deadLetter(ctx, e, fmt.Errorf("refused by the remote broker %d times, last: %s", n, s.b.refusals.last))
	case n > 0:
		if s.open != nil || s.committing > 0 || s.unconfirmed > 0 {
			// Sent alone once nothing else is in flight, so that a refusal is
			// pinned on it.
			s.isolating = true
			s.waitFront(ev, e.load)
			return false, nil
		}
		ds.pending = append(ds.pending, e)
		s.inFlight++
		if !s.eachMode() {
			s.open = &txn{solo: true}
		}
		s.isolating = true
		return true, s.send(ctx, e)
	}
	ds.pending = append(ds.pending, e)
	s.inFlight++
	return true, s.send(ctx, e)
}

// settleUnsent puts e, a delivery taken without forwarding (a topic copy that
// must not travel or that another subscription forwarded), among its
// subscription's entries, to be settled in order with the others.
func (s *session) settleUnsent(e *entry) {
	e.done = true
	e.ds.pending = append(e.ds.pending, e)
	s.markDirty(e.ds)
}

// send writes e's message in the open batch.
func (s *session) send(ctx context.Context, e *entry) error {
	if s.eachMode() {
		return s.sendEach(ctx, e)
	}
	if s.open == nil {
		s.open = &txn{}
	}
	if s.open.opened.IsZero() {
		s.open.opened = time.Now()
	}
	s.rh.sendStart.Store(time.Now().UnixNano()) // a send may block (remotehold.go)
	err := s.remote.conn.Send(ctx, e.out)
	s.rh.sendStart.Store(0)
	if err != nil {
		return s.remote.errorf(err)
	}
	s.open.entries = append(s.open.entries, e)
	s.open.persistent = s.open.persistent || e.out.Persistent
	s.b.stats.InFlight.Store(int64(s.inFlight))
	return nil
}

// maybeCommit commits the open batch when the local side is idle, the batch is
// full or the window is exhausted, provided fewer than MaxCommits are pending.
func (s *session) maybeCommit(ctx context.Context, idle bool) error {
	tx := s.open
	if tx == nil {
		return nil
	}
	if s.committing >= s.cfg.MaxCommits {
		if f, ok := s.remote.conn.(transport.Flusher); ok && idle {
			// The batch's last message may be held for the commit's
			// receipt; it must not wait for a commit slot.
			if err := f.Flush(ctx); err != nil {
				return s.remote.errorf(err)
			}
		}
		return nil
	}
	full := tx.solo || len(tx.entries) >= s.cfg.MaxBatch || s.inFlight >= s.cfg.Window
	if !idle && !full {
		return nil
	}
	if !full && s.linger(tx) {
		// Its messages must not wait with their confirmation.
		if f, ok := s.remote.conn.(transport.Flusher); ok {
			if err := f.Flush(ctx); err != nil {
				return s.remote.errorf(err)
			}
		}
		return nil
	}
	s.open = nil
	s.committing++
	tx.committed = time.Now()
	s.inCommit = append(s.inCommit, tx)
	s.noteCommits()
	tok, err := s.remote.conn.Commit(ctx)
	if err != nil {
		return s.remote.errorf(err)
	}
	s.remote.await(tok, func(ev transport.Event) error { return s.onCommitted(ctx, tx, ev) })
	return nil
}

// linger reports whether the open batch tx waits for company before its
// commit (Config.CommitDelay), and sets the timer that ends the wait.
func (s *session) linger(tx *txn) bool {
	if s.cfg.CommitDelay <= 0 || s.draining || tx.persistent && s.remoteTx {
		return false
	}
	wait := time.Until(tx.opened.Add(s.cfg.CommitDelay))
	if wait <= 0 {
		return false
	}
	if s.lingerDue == nil {
		if s.lingerTimer == nil {
			s.lingerTimer = time.NewTimer(wait)
		} else {
			s.lingerTimer.Reset(wait)
		}
		s.lingerDue = s.lingerTimer.C
	}
	return true
}

// onCommitted records the remote's verdict on a batch and settles what it allows.
func (s *session) onCommitted(ctx context.Context, tx *txn, ev transport.Event) error {
	s.committing--
	s.inCommit = removeTxn(s.inCommit, tx)
	s.noteCommits()
	if ev.Kind == transport.Refused {
		s.inCommit = append(s.inCommit, tx) // still unsettled: suspects all
		return fmt.Errorf("remote broker: committing %d messages: %w", len(tx.entries), ev.Err)
	}
	s.observeCommitted(tx, ev)
	if tx.solo {
		s.isolating = false
	}
	for i, e := range tx.entries {
		o := transport.SendOutcome{Outcome: transport.Accepted}
		if ev.Outcomes != nil && i < len(ev.Outcomes) {
			o = ev.Outcomes[i]
		}
		switch o.Outcome {
		case transport.Accepted:
			e.done = true
			s.b.refusals.forget(e.id)
			s.markDirty(e.ds)
		case transport.Released:
			e.releases++
			s.retry = append(s.retry, e)
		case transport.Rejected:
			if err := s.deadLetter(ctx, e, o.Err); err != nil {
				return err
			}
		}
	}
	s.scheduleRetry()
	return s.settleReady(ctx)
}

func removeTxn(list []*txn, tx *txn) []*txn {
	for i, t := range list {
		if t == tx {
			return append(list[:i], list[i+1:]...)
		}
	}
	return list
}

// markDirty notes that ds may have entries to settle.
func (s *session) markDirty(ds *demandSub) {
	if s.dirty == nil {
		s.dirty = make(map[*demandSub]struct{})
	}
	s.dirty[ds] = struct{}{}
}

// settled is what one Sync confirms for one subscription.
type settled struct {
	ds        *demandSub
	n         int // entries settled
	window    int // of them, counted in the window
	forwarded int // of them, forwarded and confirmed
	oldest    time.Time
}

// settleReady settles, per subscription, the run of done entries at its head,
// then asks each connection involved to confirm it processed the settlements.
func (s *session) settleReady(ctx context.Context) error {
	if len(s.dirty) == 0 {
		return nil
	}
	byPeer := make(map[*peer][]settled)
	var refs []transport.Ref
	for ds := range s.dirty {
		delete(s.dirty, ds)
		// Cumulative settlement covers everything before: only the run of done
		// entries at the head may go. Individual settlement takes every done one.
		var done, rest []*entry
		if ds.individual {
			for _, e := range ds.pending {
				if e.done {
					done = append(done, e)
				} else {
					rest = append(rest, e)
				}
			}
		} else {
			n := 0
			for n < len(ds.pending) && ds.pending[n].done {
				n++
			}
			done, rest = ds.pending[:n], append([]*entry(nil), ds.pending[n:]...)
		}
		if len(done) == 0 {
			continue
		}
		n := len(done)
		st := settled{ds: ds, n: n}
		refs = refs[:0]
		for _, e := range done {
			refs = append(refs, e.ref)
			if e.out != nil {
				st.window++
				if !e.deadLettered {
					st.forwarded++
				}
			}
		}
		ds.pending = rest
		ds.settling += n
		if err := ds.peer.conn.Settle(ctx, ds.sub.ID, refs, transport.Accepted); err != nil {
			s.localFailed = true
			return ds.peer.errorf(err)
		}
		byPeer[ds.peer] = append(byPeer[ds.peer], st)
	}
	for p, sts := range byPeer {
		tok, err := p.conn.Sync(ctx)
		if err != nil {
			s.localFailed = true
			return p.errorf(err)
		}
		p.await(tok, func(ev transport.Event) error {
			if ev.Kind == transport.Refused {
				s.localFailed = true
				return p.errorf(ev.Err)
			}
			return s.onSettled(ctx, sts)
		})
	}
	return nil
}

// settling reports whether settlements await their confirmation.
func (s *session) settling() bool {
	for _, ds := range s.subs {
		if ds.busy() {
			return true
		}
	}
	return false
}

// onSettled releases settled entries from the window once the local broker
// confirmed their settlement, and retires subscriptions that were waiting for them.
func (s *session) onSettled(ctx context.Context, sts []settled) error {
	for _, st := range sts {
		st.ds.settling -= st.n
		s.inFlight -= st.window
		s.b.stats.Forwarded.Add(int64(st.forwarded))
	}
	s.b.stats.InFlight.Store(int64(s.inFlight))
	for _, st := range sts {
		ds := st.ds
		if ds.removing && !ds.busy() {
			if _, live := s.subs[ds.sub.ID]; live {
				if err := s.finishUnsubscribe(ctx, ds); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// scheduleRetry arms the timer that sends released messages again.
func (s *session) scheduleRetry() {
	if len(s.retry) == 0 || s.retryTimer != nil {
		return
	}
	releases := 0
	for _, e := range s.retry {
		releases = max(releases, e.releases)
	}
	// 100 ms, doubling per release of the most released one, at most 5 s: a
	// remote that keeps releasing is not hammered, and nothing is dropped.
	d := min(5*time.Second, 100*time.Millisecond<<min(releases-1, 6))
	s.retryTimer = time.AfterFunc(d, func() {
		select {
		case s.retryDue <- struct{}{}:
		default:
		}
	})
}

// sendRetries sends released messages again, in a batch of their own.
func (s *session) sendRetries(ctx context.Context) error {
	s.retryTimer = nil
	retry := s.retry
	s.retry = nil
	for _, e := range retry {
		if err := s.send(ctx, e); err != nil {
			return err
		}
	}
	return s.maybeCommit(ctx, true)
}

// deadLetter moves a message the remote broker rejected to the local broker's
// dead-letter queue, with headers saying why and where it was going; the
// original is settled once the dead-letter copy is confirmed.
func (s *session) deadLetter(ctx context.Context, e *entry, reason error) error {
	dl := *e.out
	dl.Props = append(append([]transport.Property(nil), e.out.Props...),
		transport.Property{Name: DeadLetterReasonHeader, Value: errText(reason)},
		transport.Property{Name: DeadLetterDestinationHeader, Value: e.out.Destination.String()},
		transport.Property{Name: DeadLetterBrokerHeader, Value: s.remoteID})
	dl.Destination = s.cfg.DeadLetterQueue
	if err := s.local.conn.Send(ctx, &dl); err != nil {
		s.localFailed = true
		return s.local.errorf(err)
	}
	tok, err := s.local.conn.Commit(ctx)
	if err != nil {
		s.localFailed = true
		return s.local.errorf(err)
	}
	s.local.await(tok, func(ev transport.Event) error {
		if ev.Kind == transport.Refused {
			s.localFailed = true
			return s.local.errorf(fmt.Errorf("dead-lettering %s: %w", e.id, ev.Err))
		}
		e.done, e.deadLettered = true, true
		s.b.refusals.forget(e.id)
		s.b.stats.DeadLettered.Add(1)
		s.log.Error().Str("message_id", e.id).Str("destination", e.out.Destination.String()).
			Str("dead_letter_queue", s.cfg.DeadLetterQueue.String()).Str("reason", errText(reason)).
			Msg("message dead-lettered")
		s.markDirty(e.ds)
		return s.settleReady(ctx)
	})
	return nil
}

func errText(err error) string {
	if err == nil {
		return "rejected"
	}
	return err.Error()
}

// Headers of a dead-lettered message.
const (
	DeadLetterReasonHeader      = "BrokernetDeadLetterReason"
	DeadLetterDestinationHeader = "BrokernetDeadLetterDestination"
	DeadLetterBrokerHeader      = "BrokernetDeadLetterBroker"
)

// suspects returns the ids of the messages in flight on the remote broker: when
// the remote ends the connection with a refusal, one of them caused it.
func (s *session) suspects() []string {
	var ids []string
	s.eachInFlight(func(e *entry) {
		if e.id != "" {
			ids = append(ids, e.id)
		}
	})
	return ids
}

// eachInFlight calls f for each entry sent to the remote broker and not yet
// settled: the batches awaiting their confirmation, the open batch and, in
// each-confirmed mode, every destination's unconfirmed messages.
func (s *session) eachInFlight(f func(*entry)) {
	for _, tx := range s.inCommit {
		for _, e := range tx.entries {
			f(e)
		}
	}
	if s.open != nil {
		for _, e := range s.open.entries {
			f(e)
		}
	}
	for _, ld := range s.loads {
		for _, e := range ld.sent {
			f(e)
		}
	}
}
