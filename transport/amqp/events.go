package amqp

import (
	"github.com/brokernet/brokernet/internal/mailbox"
	"github.com/brokernet/brokernet/transport"
)

// eventQueue is the connection's one ordered event stream: producers (link
// pumps, confirmation waiters) append without ever blocking, and run copies
// the events, in order, to the Events channel. Deliveries are bounded by link
// credit and confirmations by the caller's requests, so the queue is unbounded
// only in name.
type eventQueue struct {
	mailbox.Mailbox[transport.Event]
}

func newEventQueue() *eventQueue { return &eventQueue{} }

func (q *eventQueue) push(ev transport.Event) { q.Push(ev) }

// run copies events to out until done is closed, then closes out. Events still
// queued when the connection ended are dropped: their deliveries return to the
// broker with the connection, and an unconfirmed batch is not confirmed.
func (q *eventQueue) run(out chan<- transport.Event, done <-chan struct{}) {
	defer close(out)
	for {
		select {
		case <-q.Signal():
		case <-done:
			return
		}
		items := q.Take()
		for _, ev := range items {
			select {
			case out <- ev:
			case <-done:
				return
			}
		}
		q.Recycle(items)
	}
}
