package openwire

import (
	"context"
	"fmt"

	"github.com/brokernet/brokernet/transport"
)

// heldAck is an ack held back (see Conn.heldAcks and Conn.ackTail);
// persistent says it acknowledges a persistent message.
type heldAck struct {
	a          *messageAck
	persistent bool
}

// ref is the transport.Ref of an OpenWire delivery.
type ref struct {
	sub *subscription
	seq uint64
	id  *messageID
}

// Settle implements transport.Conn. Accepted: a standard (cumulative range)
// ack from the first unsettled delivery to the last ref for a Cumulative
// subscription, individual acks otherwise. Rejected: poison acks (the broker
// moves the messages to its DLQ). Released is not expressible in OpenWire
// short of closing the consumer (Unsubscribe), which returns them.
func (c *Conn) Settle(ctx context.Context, subID string, refs []transport.Ref, outcome transport.Outcome) error {
	if len(refs) == 0 {
		return nil
	}
	if outcome == transport.Released {
		return fmt.Errorf("settle %q: released: %w (unsubscribe to return deliveries)", subID, transport.ErrUnsupported)
	}
	var acks []*messageAck
	last, ok := refs[len(refs)-1].(ref)
	if !ok || last.sub == nil {
		return fmt.Errorf("settle %q: foreign ref %T", subID, refs[len(refs)-1])
	}
	sub := last.sub
	sub.mu.Lock()
	closed := sub.closed
	sub.mu.Unlock()
	if closed {
		// An ack for a removed consumer would be an error on the broker's
		// side; its deliveries are the broker's again anyway.
		return fmt.Errorf("settle %q: subscription closed, its deliveries return to the broker", subID)
	}
	if outcome == transport.Accepted && sub.ack == transport.Cumulative {
		sub.mu.Lock()
		n := 0
		persistent := false
		for n < len(sub.unacked) && sub.unacked[n].seq <= last.seq {
			persistent = persistent || sub.unacked[n].persistent
			n++
		}
		if n == 0 {
			sub.mu.Unlock()
			return nil // already settled
		}
		first, end := sub.unacked[0], sub.unacked[n-1]
		sub.unacked = append(sub.unacked[:0], sub.unacked[n:]...)
		sub.mu.Unlock()
		a := &messageAck{Destination: end.dest, ConsumerID: sub.cid, AckType: ackStandard,
			FirstID: first.id, LastID: end.id, MessageCount: int32(n)}
		c.smu.Lock()
		if c.syncing {
			c.holdAck(a, persistent)
			c.smu.Unlock()
			return nil
		}
		// Held as the tail: the next Sync may ride on it.
		prev := c.ackTail
		c.ackTail = &heldAck{a: a, persistent: persistent}
		c.smu.Unlock()
		if prev == nil {
			return nil
		}
		acks = append(acks, prev.a)
	} else {
		// Held cumulative acks go first, in order.
		c.smu.Lock()
		if c.ackTail != nil {
			acks = append(acks, c.ackTail.a)
			c.ackTail = nil
		}
		for _, h := range c.heldAcks {
			acks = append(acks, h.a)
		}
		c.heldAcks = nil
		c.smu.Unlock()
		typ := byte(ackIndividual)
		if outcome == transport.Rejected {
			typ = ackPoison
		}
		sub.mu.Lock()
		for _, r := range refs {
			rr, ok := r.(ref)
			if !ok || rr.sub != sub {
				sub.mu.Unlock()
				return fmt.Errorf("settle %q: ref of another subscription", subID)
			}
			for i, d := range sub.unacked {
				if d.seq == rr.seq {
					acks = append(acks, &messageAck{Destination: d.dest, ConsumerID: sub.cid, AckType: typ,
						FirstID: d.id, LastID: d.id, MessageCount: 1})
					sub.unacked = append(sub.unacked[:i], sub.unacked[i+1:]...)
					break
				}
			}
		}
		sub.mu.Unlock()
	}
	for _, a := range acks {
		if err := c.write(ctx, a, nil); err != nil {
			return fmt.Errorf("settle %q: %w", subID, err)
		}
	}
	return nil
}

// Sync implements transport.Conn: a request for a response after the acks
// written so far (the broker answers commands in order, so its response
// proves they were processed). When the last of them acknowledges no
// persistent message, the request rides on it: Settle holds its last
// cumulative ack unwritten until then (the ack tail). Otherwise it is a
// TransactionInfo BEGIN, then the ROLLBACK of that empty transaction asking
// for the response, which a persistent ActiveMQ sends once the acks before it
// are on disk (see syncPair). Either way a persistent ActiveMQ (KahaDB) syncs its
// journal to disk for an ack of persistent messages that asks for a response,
// and for every COMMIT and ROLLBACK, empty ones included; an ack of
// non-persistent messages never touches the store.
//
// At most one Sync is on the wire. While it awaits its response, cumulative
// acks (Settle) are merged, one per consumer, and further Syncs wait; the
// response releases them as one ack per consumer and one Sync. This bounds
// the settlements the broker may have left unread to one Sync and one
// cumulative ack per consumer.
// Why it matters (measured on ActiveMQ 5.17, Linux 6.18, 127.0.0.1): the
// broker's transport thread stops reading while it waits to write to us (a
// response needs the write lock its dispatch thread holds while blocked in
// a socket write, MutexTransport.oneway), and what we write meanwhile piles
// up in its fixed 128 KiB receive buffer (socketBufferSize 64 KiB, doubled by
// the kernel). With that buffer full the kernel dropped our segments (skmem
// d, TCPRcvQDrop), the broker's data to us stayed unacknowledged, its
// retransmissions backed off (rto 52 s, backoff 8, cwnd 1) and the
// connection stood still, keepalives included, until our read deadline
// ended it (bench/history/2026-12-01.md). A Sync per settled batch, with
// its ack, filled those 128 KiB within about a second at 4,000 msg/s.
func (c *Conn) Sync(ctx context.Context) (transport.Token, error) {
	if err := c.writeTail(ctx, nil); err != nil {
		return 0, fmt.Errorf("syncing: %w", err)
	}
	tok := transport.Token(c.tokens.Add(1))
	c.smu.Lock()
	if c.syncing {
		c.heldTokens = append(c.heldTokens, tok)
		c.smu.Unlock()
		return tok, nil
	}
	c.syncing = true
	t := c.ackTail
	c.ackTail = nil
	c.smu.Unlock()
	if t != nil && !t.persistent {
		// The request for a response rides on the ack itself.
		if err := c.write(ctx, t.a, c.syncDone([]transport.Token{tok})); err != nil {
			return 0, c.syncFailed(err)
		}
		return tok, nil
	}
	if t != nil {
		if err := c.write(ctx, t.a, nil); err != nil {
			return 0, c.syncFailed(err)
		}
	}
	begin, rollback := c.syncPair([]transport.Token{tok})
	if err := c.write(ctx, begin, nil); err != nil {
		return 0, c.syncFailed(err)
	}
	if err := c.write(ctx, rollback.cmd, rollback.onResponse); err != nil {
		return 0, c.syncFailed(err)
	}
	return tok, nil
}

// syncFailed ends the Sync whose request could not be written.
func (c *Conn) syncFailed(err error) error {
	c.smu.Lock()
	c.syncing = false
	c.smu.Unlock()
	return fmt.Errorf("syncing: %w", err)
}

// holdAck merges a into the held acks (c.smu held): a cumulative ack of the
// same consumer extends the range to a's last message.
func (c *Conn) holdAck(a *messageAck, persistent bool) {
	for i := range c.heldAcks {
		h := &c.heldAcks[i]
		if h.a.ConsumerID == a.ConsumerID {
			h.a.LastID, h.a.Destination = a.LastID, a.Destination
			h.a.MessageCount += a.MessageCount
			h.persistent = h.persistent || persistent
			return
		}
	}
	c.heldAcks = append(c.heldAcks, heldAck{a: a, persistent: persistent})
}

type request struct {
	cmd        command
	onResponse func(command)
}

// syncPair builds a Sync's BEGIN and its ROLLBACK, whose response confirms
// toks and releases what was held meanwhile.
//
// The response is asked of the ROLLBACK, not the BEGIN: ActiveMQ answers a
// command once it has handled it, and handling an ack of persistent messages
// only queues their removal for KahaDB's journal writer, so the BEGIN's
// response may leave before the removals reach the file and a SIGKILL then
// loses them (the broker delivers again messages whose settlement was
// confirmed). The rollback record is written and synced before its response
// leaves, after everything queued before it (see transport/stomp's syncPair
// for what was measured).
func (c *Conn) syncPair(toks []transport.Token) (command, request) {
	tx := &localTxID{Value: c.txSeq.Add(1), ConnectionID: c.connID}
	begin := &transactionInfo{ConnectionID: c.connID, TransactionID: tx, Type: txBegin}
	rollback := &transactionInfo{ConnectionID: c.connID, TransactionID: tx, Type: txRollback}
	return begin, request{cmd: rollback, onResponse: c.syncDone(toks)}
}

// syncDone returns what handles a Sync's response: it confirms toks and
// releases what was held meanwhile.
func (c *Conn) syncDone(toks []transport.Token) func(command) {
	return func(r command) {
		for _, tok := range toks {
			c.confirm(tok, nil)(r)
		}
		if r == nil {
			return // the connection ended
		}
		c.releaseHeld()
	}
}

// releaseHeld runs on the reader goroutine when a Sync's response arrived:
// it writes the held acks and, if Syncs were asked for meanwhile, one Sync
// for all of them. The frames are queued under c.smu, so a command the
// session writes after taking c.smu (Unsubscribe) follows them.
func (c *Conn) releaseHeld() {
	c.smu.Lock()
	defer c.smu.Unlock()
	acks, toks := c.heldAcks, c.heldTokens
	c.heldAcks, c.heldTokens = nil, nil
	last := len(acks) - 1
	onAck := len(toks) > 0 && last >= 0 && !acks[last].persistent
	for i, h := range acks {
		if i == last && onAck {
			// The next Sync's request rides on the last ack (see Sync).
			c.writeFromReaderAwaiting(h.a, c.syncDone(toks))
			return
		}
		c.writeFromReader(h.a)
	}
	if len(toks) == 0 {
		c.syncing = false
		return
	}
	begin, rollback := c.syncPair(toks)
	c.writeFromReader(begin)
	c.writeFromReaderAwaiting(rollback.cmd, rollback.onResponse)
}
