package amqp

import (
	"fmt"

	"github.com/Azure/go-amqp"

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

// pump moves s's deliveries, in link order, into the event stream.
func (c *Conn) pump(s *subscription, rcv *amqp.Receiver) {
	defer close(s.pumped)
	rabbit := c.info.Flavour == transport.RabbitMQ
	for {
		msg, err := rcv.Receive(s.life, nil)
		if err != nil {
			c.mu.Lock()
			closing := s.closing
			c.mu.Unlock()
			if closing || c.sessionLost(err) || c.ended() != nil {
				return
			}
			// The broker detached the link (queue deleted, …): end the whole
			// connection, so that the bridge redials and resubscribes rather
			// than wait on a subscription that silently stopped.
			c.fail(fmt.Errorf("subscription %s to %s: link ended: %w", s.id, s.dest, err))
			go c.conn.Close()
			return
		}
		c.mu.Lock()
		closing := s.closing
		grant := s.credit.receive()
		if !closing {
			s.unsettled[msg] = struct{}{}
		}
		c.mu.Unlock()
		if grant > 0 && !closing {
			if err := rcv.IssueCredit(grant); err != nil {
				c.fail(fmt.Errorf("subscription %s to %s: issuing credit: %w", s.id, s.dest, err))
				go c.conn.Close()
				return
			}
		}
		if closing {
			// Unsubscribe is under way: give it back rather than hand it out.
			_ = rcv.ReleaseMessage(c.life, msg)
			continue
		}
		m := fromAMQP(msg, s.dest, rabbit)
		if s.key != "" {
			c.topics.route(m, msg)
		}
		c.q.push(transport.Event{
			Kind: transport.Delivery,
			Sub:  s.id,
			Msg:  m,
			Ref:  &delivery{sub: s, msg: msg},
		})
	}
}
