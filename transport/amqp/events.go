package amqp

import (
	"sync"

	"github.com/brokernet/brokernet/transport"
)

// eventQueue is the connection's one ordered event stream: producers (link
// pumps, confirmation waiters) append without ever blocking, and run copies
// the events, in order, to the Events channel. Deliveries are bounded by link
// credit and confirmations by the caller's requests, so the queue is unbounded
// only in name.
type eventQueue struct {
	mu     sync.Mutex
	items  []transport.Event
	signal chan struct{} // capacity 1: "items is not empty"
}

func newEventQueue() *eventQueue {
	return &eventQueue{signal: make(chan struct{}, 1)}
}

func (q *eventQueue) push(ev transport.Event) {
	q.mu.Lock()
	q.items = append(q.items, ev)
	q.mu.Unlock()
	select {
	case q.signal <- struct{}{}:
	default:
	}
}

// take removes and returns every queued event.
func (q *eventQueue) take() []transport.Event {
	q.mu.Lock()
	defer q.mu.Unlock()
	items := q.items
	q.items = nil
	return items
}

// run copies events to out until done is closed, then closes out. Events still
// queued when the connection ended are dropped: their deliveries return to the
// broker with the connection, and an unconfirmed batch is not confirmed.
func (q *eventQueue) run(out chan<- transport.Event, done <-chan struct{}) {
	defer close(out)
	for {
		select {
		case <-q.signal:
		case <-done:
			return
		}
		for _, ev := range q.take() {
			select {
			case out <- ev:
			case <-done:
				return
			}
		}
	}
}
