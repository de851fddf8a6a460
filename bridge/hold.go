package bridge

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"time"

	"github.com/brokernet/brokernet/transport"
)

// Held messages: a queue message that must not travel, on a local broker
// without selectors (inbound.go's hopVerdict), stays where it is, for the
// local broker's own consumers: the bridge holds it unsettled and releases it
// later, so that it goes back to the queue. Demand subscriptions get a
// priority below local consumers, so a released message goes to a local
// consumer when there is one; when there is none it can come back to the
// bridge, which holds it again: the release delay of a message grows by half
// each time it comes back (100 ms up to 30 s), so a message that can go
// nowhere costs one delivery per delay, never a busy loop. Where RabbitMQ
// cannot prioritise (no x-priority over AMQP 1.0 in 3.10), a released message
// goes round-robin, back to the bridge about every other time: k holds in a
// row happen to one message in 2^k, so the delay must grow slowly for that
// tail to stay short (doubling, 1 in 512 of the messages of a
// RabbitMQ⇄RabbitMQ duplex waited 51 s; by half, 7.7 s).

// Delays of releasing held messages: per message, growing by half with each
// time the same message (by its BrokernetID) was held, from minHoldDelay to
// maxHoldDelay (reached after 15 holds).
const (
	minHoldDelay = 100 * time.Millisecond
	maxHoldDelay = 30 * time.Second
	// maxHoldCounts bounds the remembered hold counts.
	maxHoldCounts = 1 << 16
)

// holdKey identifies a held message across its redeliveries: IDHeader, else
// its id, else (a message from a bridge that stamped nothing) a hash of its
// content, which identical messages share (their delays then grow together).
func holdKey(m *transport.Message) string {
	if k := m.PropString(IDHeader); k != "" {
		return k
	}
	if m.ID != "" {
		return m.ID
	}
	h := sha256.New()
	h.Write([]byte(m.Destination.String()))
	h.Write([]byte{0})
	h.Write(m.Body)
	for _, p := range m.Props {
		fmt.Fprintf(h, "\x00%s=%v", p.Name, p.Value)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// heldMsg is a local delivery the bridge holds because it must stay local.
type heldMsg struct {
	ds  *demandSub
	ref transport.Ref
	due time.Time
	// again: the message was held and released before, and came back: no
	// local consumer took it meanwhile (a stuck message, stuck.go).
	again bool
}

// hold keeps a delivery unsettled until its release is due.
func (s *session) hold(ds *demandSub, m *transport.Message, ref transport.Ref) {
	key := holdKey(m)
	if s.holdCounts == nil || len(s.holdCounts) >= maxHoldCounts {
		s.holdCounts = make(map[string]int)
	}
	n := s.holdCounts[key]
	s.holdCounts[key] = n + 1
	delay := min(maxHoldDelay, time.Duration(float64(minHoldDelay)*math.Pow(1.5, float64(min(n, 20)))))
	s.held = append(s.held, heldMsg{ds: ds, ref: ref, due: time.Now().Add(delay), again: n > 0})
	s.b.stats.Held.Store(int64(len(s.held)))
	s.heldStuck()
	s.armHoldTimer()
}

// armHoldTimer makes releaseDue fire when the earliest held message is due.
func (s *session) armHoldTimer() {
	if len(s.held) == 0 {
		return
	}
	next := s.held[0].due
	for _, h := range s.held[1:] {
		if h.due.Before(next) {
			next = h.due
		}
	}
	if s.holdTimer != nil {
		if !s.holdTimer.Stop() {
			return // fired; its signal is on the way
		}
	}
	s.holdTimer = time.AfterFunc(time.Until(next), func() {
		select {
		case s.releaseDue <- struct{}{}:
		default:
		}
	})
}

// releaseHeld gives the held deliveries that are due back to the local broker.
func (s *session) releaseHeld(ctx context.Context) error {
	s.holdTimer = nil
	now := time.Now()
	bySub := make(map[*demandSub][]transport.Ref)
	var order []*demandSub
	keep := s.held[:0]
	for _, h := range s.held {
		if h.due.After(now) {
			keep = append(keep, h)
			continue
		}
		if _, live := s.subs[h.ds.sub.ID]; !live {
			continue // unsubscribed: the broker took it back already
		}
		if _, ok := bySub[h.ds]; !ok {
			order = append(order, h.ds)
		}
		bySub[h.ds] = append(bySub[h.ds], h.ref)
	}
	clear(s.held[len(keep):])
	s.held = keep
	s.b.stats.Held.Store(int64(len(s.held)))
	s.heldStuck()
	for _, ds := range order {
		if err := ds.peer.conn.Settle(ctx, ds.sub.ID, bySub[ds], transport.Released); err != nil {
			s.localFailed = true
			return ds.peer.errorf(err)
		}
	}
	s.armHoldTimer()
	return nil
}

// localConsumerChanged releases held messages now: a new local consumer may
// take them.
func (s *session) localConsumerChanged() {
	if len(s.held) == 0 {
		return
	}
	now := time.Now()
	for i := range s.held {
		s.held[i].due = now
	}
	s.armHoldTimer()
}
