package amqp

import (
	"context"
	"fmt"

	"github.com/Azure/go-amqp"

	"github.com/brokernet/brokernet/transport"
)

// syncAddress is where Sync's ping goes: an exchange every RabbitMQ vhost has,
// with a routing key nothing binds, so the ping is confirmed and dropped.
const syncAddress = "/exchange/amq.direct/brokernet.sync.nowhere"

// delivery is the Ref of a Delivery event.
type delivery struct {
	sub *subscription
	msg *amqp.Message
}

// Settle accepts, releases or rejects deliveries of subscription sub, then
// counts them towards the link's next credit (credit.go). The receiver settles first, so each
// disposition is settled when written and RabbitMQ sends no answer (Sync is
// how to know it was processed). RabbitMQ 3.10 maps accepted to basic.ack,
// released to basic.reject requeue=true, rejected to requeue=false, and closes
// the session on modified (rabbit_amqp1_0_session_process), which is never sent.
func (c *Conn) Settle(ctx context.Context, sub string, refs []transport.Ref, outcome transport.Outcome) error {
	if c.ended() != nil {
		return fmt.Errorf("settling on %s: %w", sub, c.closedErr())
	}
	c.mu.Lock()
	s, ok := c.subs[sub]
	var rcv *amqp.Receiver
	if ok {
		rcv = s.rcv
	}
	gone := !ok && unsubscribed(refs)
	c.mu.Unlock()
	if !ok || rcv == nil {
		if gone {
			// Unsubscribe already gave these back to the broker.
			return nil
		}
		return fmt.Errorf("settling on %s: no such subscription", sub)
	}
	settled := 0
	var err error
	for _, r := range refs {
		d, ok := r.(*delivery)
		if !ok || d.sub != s {
			err = fmt.Errorf("settling on %s: a delivery of another subscription (%T)", sub, r)
			break
		}
		switch outcome {
		case transport.Accepted:
			err = rcv.AcceptMessage(ctx, d.msg)
		case transport.Released:
			err = rcv.ReleaseMessage(ctx, d.msg)
		case transport.Rejected:
			err = rcv.RejectMessage(ctx, d.msg, nil)
		default:
			err = fmt.Errorf("settling on %s: unknown outcome %d", sub, outcome)
		}
		if err != nil {
			err = c.classify("settling on "+sub, err)
			break
		}
		c.mu.Lock()
		delete(s.unsettled, d.msg)
		s.dirty = true
		c.mu.Unlock()
		settled++
	}
	c.mu.Lock()
	grant := s.credit.settle(settled)
	c.mu.Unlock()
	if grant > 0 {
		if cerr := rcv.IssueCredit(grant); cerr != nil && err == nil {
			err = c.classify("issuing credit on "+sub, cerr)
		}
	}
	return err
}

// unsubscribed reports whether every ref is a delivery of a subscription
// that Unsubscribe closed. The caller holds mu.
func unsubscribed(refs []transport.Ref) bool {
	for _, r := range refs {
		d, ok := r.(*delivery)
		if !ok || !d.sub.closing {
			return false
		}
	}
	return true
}

// Sync returns a token confirmed once RabbitMQ has processed every
// disposition of earlier Settles. AMQP 1.0 gives a settled disposition no answer, so Sync
// makes a round trip through the same session instead: it sends one unsettled
// empty message to amq.direct with a routing key nothing is bound to, and
// waits for its outcome, on each subscription's session that settled
// something since the last round trip. RabbitMQ 3.10 handles a session's frames in order in
// one process, settling each disposition with a synchronous call to the
// session's channel (basic.ack / basic.reject, rabbit_amqp1_0_session_process)
// and publishing each transfer on that same channel in confirm mode; so the
// ping's "accepted" (the channel's publisher confirm of an unroutable message)
// proves every earlier disposition was handed to its queue.
//
// (Attaching and detaching a link would be the protocol's natural round trip,
// but RabbitMQ 3.10 answers a detach without closed=true, which go-amqp v1.5.0
// treats as an error and waits on forever.)
func (c *Conn) Sync(ctx context.Context) (transport.Token, error) {
	if c.ended() != nil {
		return 0, fmt.Errorf("syncing: %w", c.closedErr())
	}
	tok := c.nextToken()
	c.mu.Lock()
	c.syncing = append(c.syncing, tok)
	c.mu.Unlock()
	select {
	case c.syncSig <- struct{}{}:
	default:
	}
	return tok, nil
}

// syncLoop answers Sync tokens: one round trip covers every token requested
// before it started.
func (c *Conn) syncLoop() {
	for {
		select {
		case <-c.syncSig:
		case <-c.done:
			return
		}
		c.mu.Lock()
		toks := c.syncing
		c.syncing = nil
		c.mu.Unlock()
		if len(toks) == 0 {
			continue
		}
		err := c.roundTrip(c.life)
		if c.ended() != nil {
			return
		}
		for _, t := range toks {
			if err != nil {
				c.q.push(transport.Event{Kind: transport.Refused, Token: t, Err: fmt.Errorf("syncing: %w", err)})
			} else {
				c.q.push(transport.Event{Kind: transport.Confirmed, Token: t})
			}
		}
	}
}

// roundTrip sends Sync's ping on the session of every subscription that
// settled something since the last round trip, and waits for their outcomes.
// A subscription closed meanwhile needs none: its session's end comes after
// its dispositions. It is called by syncLoop, and by Close.
func (c *Conn) roundTrip(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, linkTimeout)
	defer cancel()
	c.pingMu.Lock()
	defer c.pingMu.Unlock()
	c.mu.Lock()
	var dirty []*subscription
	for _, s := range c.subs {
		if s.dirty && s.ping != nil {
			s.dirty = false
			dirty = append(dirty, s)
		}
	}
	c.mu.Unlock()
	receipts := make([]amqp.SendReceipt, len(dirty))
	errs := make([]error, len(dirty))
	for i, s := range dirty {
		receipts[i], errs[i] = s.ping.SendWithReceipt(ctx, &amqp.Message{Value: ""}, nil)
	}
	for i, s := range dirty {
		if errs[i] == nil {
			var st amqp.DeliveryState
			if st, errs[i] = receipts[i].Wait(ctx); errs[i] == nil {
				if _, ok := st.(*amqp.StateAccepted); !ok {
					errs[i] = fmt.Errorf("sync ping to %s: outcome %T", syncAddress, st)
				}
			}
		}
		if errs[i] != nil && !c.unsubscribed(s) {
			return fmt.Errorf("subscription %s: %w", s.id, errs[i])
		}
	}
	return nil
}

// unsubscribed reports whether s was closed.
func (c *Conn) unsubscribed(s *subscription) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return s.closing
}
