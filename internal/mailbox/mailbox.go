// Package mailbox is the unbounded, ordered queue between goroutines that
// brokernet uses wherever a producer must never wait for its consumer: a
// connection's reader for the bridge session, memberlist's callbacks for the
// gossip agent, timers for the session loop.
//
// Unbounded only in name: every user bounds what it pushes by other means (a
// broker's prefetch, the requests the session made, the members of a
// cluster), and says so where it uses one.
package mailbox

import "sync"

// Mailbox is an unbounded FIFO. Push never blocks; the consumer waits on
// Signal and then takes everything queued with Take. The zero value is an
// empty mailbox ready to use. A Mailbox must not be copied after first use.
type Mailbox[T any] struct {
	mu     sync.Mutex
	items  []T
	spare  []T           // a slice given back with Recycle, for the next Push
	signal chan struct{} // capacity 1: items may be waiting
}

// maxSpare is the largest capacity Recycle keeps: a rare burst's slice is
// left to the collector.
const maxSpare = 4096

// signalLocked returns the signal channel, making it on first use. Caller
// holds mu.
func (m *Mailbox[T]) signalLocked() chan struct{} {
	if m.signal == nil {
		m.signal = make(chan struct{}, 1)
	}
	return m.signal
}

// Push appends v and wakes the consumer. It never blocks.
func (m *Mailbox[T]) Push(v T) {
	m.mu.Lock()
	if m.items == nil && m.spare != nil {
		m.items, m.spare = m.spare, nil
	}
	m.items = append(m.items, v)
	ch := m.signalLocked()
	m.mu.Unlock()
	select {
	case ch <- struct{}{}:
	default:
	}
}

// Take removes and returns everything queued, oldest first (nil when empty).
func (m *Mailbox[T]) Take() []T {
	m.mu.Lock()
	defer m.mu.Unlock()
	items := m.items
	m.items = nil
	return items
}

// Len is the number of items queued.
// Recycle gives back a slice that Take returned, once the consumer is done
// with its items, for Push to fill again: a consumer that recycles what it
// takes makes a steady stream allocate no slices. The items are cleared (no
// references kept); the caller must not use the slice afterwards.
func (m *Mailbox[T]) Recycle(items []T) {
	if cap(items) == 0 || cap(items) > maxSpare {
		return
	}
	clear(items)
	m.mu.Lock()
	if m.spare == nil {
		m.spare = items[:0]
	}
	m.mu.Unlock()
}

func (m *Mailbox[T]) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.items)
}

// Signal receives a value after a Push; one value may stand for several
// pushes, and a value may be left over from items already taken, so the
// consumer takes and then waits again. Only one goroutine should consume.
func (m *Mailbox[T]) Signal() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.signalLocked()
}
