package amqp

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/Azure/go-amqp"

	"github.com/brokernet/brokernet/transport"
)

// pending is one message of the current send batch.
type pending struct {
	receipt *amqp.SendReceipt // nil when refused at once (err says why)
	err     error
}

// Send writes m as an unsettled transfer and adds its receipt to the current
// batch; it blocks only while the link has no credit. A sender link the broker
// refuses at attach (e.g. amqp:not-found for a missing exchange) makes the
// message Rejected in its batch rather than failing the call.
func (c *Conn) Send(ctx context.Context, m *transport.Message) error {
	if c.ended() != nil {
		return fmt.Errorf("sending to %s: %w", m.Destination, c.closedErr())
	}
	addr, err := address(m.Destination, false)
	if err != nil {
		return fmt.Errorf("sending: %w", err)
	}
	msg := toAMQP(m, addr, time.Now())
	for attempt := 0; ; attempt++ {
		snd, err := c.sender(ctx, addr)
		if err != nil {
			var ae *amqp.Error
			if errors.As(err, &ae) && c.ended() == nil {
				c.batch = append(c.batch, pending{err: fmt.Errorf("attaching to %s: %w", addr, err)})
				return nil
			}
			return c.classify("attaching to "+addr, err)
		}
		rc, err := snd.SendWithReceipt(ctx, msg, nil)
		if err == nil {
			c.batch = append(c.batch, pending{receipt: &rc})
			return nil
		}
		var le *amqp.LinkError
		if errors.As(err, &le) && attempt == 0 && c.ended() == nil {
			// The broker detached this sender: attach a new one, once.
			delete(c.senders, addr)
			continue
		}
		return c.classify("sending to "+addr, err)
	}
}

// sender returns the sender link for addr, attaching it on first use. Senders
// use mixed settlement (go-amqp's default) and send every transfer unsettled;
// RabbitMQ 3.10 then puts the channel in confirm mode and answers with the
// outcome once the message is routed and, if persistent, stored
// (rabbit_amqp1_0_incoming_link).
func (c *Conn) sender(ctx context.Context, addr string) (*amqp.Sender, error) {
	if s, ok := c.senders[addr]; ok {
		return s, nil
	}
	s, err := c.sendSess.NewSender(ctx, addr, &amqp.SenderOptions{TargetDurability: amqp.DurabilityUnsettledState})
	var ae *amqp.Error
	if errors.As(err, &ae) {
		// The broker refused the attach, and RabbitMQ 3.10 ends the session
		// with it: its sender links are gone (their unconfirmed messages come
		// out Released); later senders go on a fresh session.
		clear(c.senders)
		ns, serr := c.conn.NewSession(ctx, nil)
		if serr != nil {
			return nil, c.classify("opening a session", serr)
		}
		c.sendSess = ns
	}
	if err != nil {
		return nil, err
	}
	c.senders[addr] = s
	return s, nil
}

// Commit ends the batch; a goroutine waits for its receipts and queues the
// Confirmed event after the previous batch's, so confirmations keep Commit order.
func (c *Conn) Commit(ctx context.Context) (transport.Token, error) {
	if c.ended() != nil {
		return 0, fmt.Errorf("committing: %w", c.closedErr())
	}
	tok := c.nextToken()
	b := c.batch
	c.batch = nil
	prev := c.lastBatch
	mine := make(chan struct{})
	c.lastBatch = mine
	go c.confirm(tok, b, prev, mine)
	return tok, nil
}

// confirm waits for a batch's outcomes. A transfer the broker released or
// modified is Released (send it again later); rejected is Rejected with the
// broker's error condition; a receipt whose link ended without an outcome is
// Released, so nothing is counted as taken that the broker did not accept.
// When the connection ends no event is queued: the batch stays unconfirmed.
func (c *Conn) confirm(tok transport.Token, b []pending, prev <-chan struct{}, mine chan struct{}) {
	defer close(mine)
	var outcomes []transport.SendOutcome
	all := true
	for i, p := range b {
		o := transport.SendOutcome{Outcome: transport.Accepted}
		if p.receipt == nil {
			o = transport.SendOutcome{Outcome: transport.Rejected, Err: p.err}
		} else {
			state, err := p.receipt.Wait(c.life)
			switch st := state.(type) {
			case nil:
				// A lost connection confirms nothing; a lost sender session or
				// link (after a refused attach) makes the message Released.
				var ce *amqp.ConnError
				if errors.As(err, &ce) || c.ended() != nil {
					return
				}
				o = transport.SendOutcome{Outcome: transport.Released, Err: fmt.Errorf("no outcome: %w", err)}
			case *amqp.StateAccepted:
			case *amqp.StateRejected:
				o = transport.SendOutcome{Outcome: transport.Rejected, Err: rejectErr(st.Error)}
			case *amqp.StateReleased:
				o = transport.SendOutcome{Outcome: transport.Released}
			case *amqp.StateModified:
				o = transport.SendOutcome{Outcome: transport.Released}
			default:
				o = transport.SendOutcome{Outcome: transport.Released, Err: fmt.Errorf("unexpected delivery state %T", state)}
			}
		}
		if o.Outcome != transport.Accepted && all {
			all = false
			outcomes = make([]transport.SendOutcome, i, len(b))
		}
		if !all {
			outcomes = append(outcomes, o)
		}
	}
	if prev != nil {
		select {
		case <-prev:
		case <-c.done:
			return
		}
	}
	if c.ended() != nil {
		return
	}
	c.q.push(transport.Event{Kind: transport.Confirmed, Token: tok, Outcomes: outcomes})
}

func rejectErr(e *amqp.Error) error {
	if e == nil {
		return errors.New("rejected by the broker")
	}
	return fmt.Errorf("rejected by the broker: %w", e)
}
