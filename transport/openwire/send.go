package openwire

import (
	"context"
	"fmt"

	"github.com/brokernet/brokernet/transport"
)

// Send implements transport.Conn: a persistent message joins the open local
// transaction (begun with the first persistent Send after a Commit). A
// non-persistent one goes outside it: the broker dispatches it on arrival
// instead of at the COMMIT, and a response after it confirms it, as the broker
// handles a connection's commands in order. The last one is held (the tail)
// until the next write: the Commit's request for a response then rides on it
// instead of an empty transaction, and Flush writes it asking for one (see
// Flush). A refusal comes as a ConnectionError, which ends the connection
// (Refused), as a refused COMMIT does; messages of the batch that did arrive
// are then sent again, duplicates rather than loss. JMS leaves the order
// between persistent and non-persistent messages undefined (JMS 1.1,
// 4.4.10.2).
func (c *Conn) Send(ctx context.Context, tm *transport.Message) error {
	m, err := fromMessage(tm)
	if err != nil {
		return fmt.Errorf("sending to %s: %w", tm.Destination, err)
	}
	if err := c.writeTail(ctx, nil); err != nil {
		return fmt.Errorf("sending to %s: %w", tm.Destination, err)
	}
	if tm.Persistent && c.tx == nil {
		tx := &localTxID{Value: c.txSeq.Add(1), ConnectionID: c.connID}
		if err := c.write(ctx, &transactionInfo{ConnectionID: c.connID, TransactionID: tx, Type: txBegin}, nil); err != nil {
			return fmt.Errorf("beginning transaction: %w", err)
		}
		c.tx = tx
	}
	c.identify(m, tm)
	if !tm.Persistent {
		c.untx = true
		c.tail = m
		return nil
	}
	m.TransactionID = c.tx
	if err := c.write(ctx, m, nil); err != nil {
		return fmt.Errorf("sending to %s: %w", tm.Destination, err)
	}
	return nil
}

// identify gives m, made from tm, this connection's producer and its id.
func (c *Conn) identify(m *message, tm *transport.Message) {
	c.msgSeq++
	// The message keeps its id, as ActiveMQ's networkConnector keeps the
	// MessageId of what it forwards; the producer is this connection's.
	m.ProducerID = c.prodID
	if id, ok := sentID(tm); ok {
		m.MessageID = id
	} else {
		m.MessageID = &messageID{ProducerID: c.prodID, ProducerSeq: c.msgSeq}
	}
}

// ConfirmsEach implements transport.EachConfirmer: every OpenWire
// connection can.
func (c *Conn) ConfirmsEach() bool { return true }

// SendConfirmed implements transport.EachConfirmer: m goes outside any
// transaction, asking for a response, which ActiveMQ sends once the message
// is stored (persistent) or dispatched; a destination at its memory limit
// parks it and answers when there is room, instead of blocking the
// connection (see transport.EachConfirmer). The held tail, if any, goes
// first.
func (c *Conn) SendConfirmed(ctx context.Context, tm *transport.Message) (transport.Token, error) {
	m, err := fromMessage(tm)
	if err != nil {
		return 0, fmt.Errorf("sending to %s: %w", tm.Destination, err)
	}
	if err := c.writeTail(ctx, nil); err != nil {
		return 0, fmt.Errorf("sending to %s: %w", tm.Destination, err)
	}
	c.identify(m, tm)
	tok := transport.Token(c.tokens.Add(1))
	if err := c.write(ctx, m, c.confirm(tok, nil)); err != nil {
		return 0, fmt.Errorf("sending to %s: %w", tm.Destination, err)
	}
	return tok, nil
}

// writeTail writes the held message, if any, asking for a response if
// onResponse is set.
func (c *Conn) writeTail(ctx context.Context, onResponse func(command)) error {
	m := c.tail
	if m == nil {
		return nil
	}
	c.tail = nil
	return c.write(ctx, m, onResponse)
}

// Flush implements transport.Flusher: it writes the held message, asking
// for nothing. A bridge that lingers before committing
// (bridge.Config.CommitDelay) flushes at every idle moment, which at full
// speed is every few messages; a response asked for at each of them was
// most of what made the OpenWire bridge spend more CPU per message than the
// STOMP one (TestBridgeCPU, 100,000 messages, three interleaved pairs:
// 31.6–44.7 µs with a response per Flush, 25.2–28.5 with a ping per Commit
// instead). The Commit that follows confirms what Flush wrote with one ping
// (see Commit).
func (c *Conn) Flush(ctx context.Context) error {
	return c.writeTail(ctx, nil)
}

// Commit implements transport.Conn: TransactionInfo COMMIT_ONE_PHASE asking
// for a response. Without messages since the last Commit it is confirmed at
// once.
func (c *Conn) Commit(ctx context.Context) (transport.Token, error) {
	tok := transport.Token(c.tokens.Add(1))
	untx := c.untx
	c.untx = false
	if c.tx == nil && untx {
		// Only messages outside a transaction since the last Commit: the
		// broker handles a connection's commands in order, so an answer to
		// anything after the last of them confirms them all. If the last is
		// still held, it asks for the response itself; if it went out
		// (Flush), a KeepAliveInfo asking for a response does: a round trip
		// that touches no store, where an empty transaction would have a
		// persistent ActiveMQ fsync its journal for the ROLLBACK.
		if c.tail != nil {
			if err := c.writeTail(ctx, c.confirm(tok, nil)); err != nil {
				return 0, fmt.Errorf("committing: %w", err)
			}
			return tok, nil
		}
		if err := c.ping(ctx, c.confirm(tok, nil)); err != nil {
			return 0, fmt.Errorf("committing: %w", err)
		}
		return tok, nil
	}
	if c.tx == nil {
		if c.Err() != nil {
			return 0, c.closedErr()
		}
		c.events.push(transport.Event{Kind: transport.Confirmed, Token: tok})
		return tok, nil
	}
	tx := c.tx
	if err := c.writeTail(ctx, nil); err != nil {
		return 0, fmt.Errorf("committing: %w", err)
	}
	if err := c.write(ctx, &transactionInfo{ConnectionID: c.connID, TransactionID: tx, Type: txCommitOnePhase}, c.confirm(tok, nil)); err != nil {
		return 0, fmt.Errorf("committing: %w", err)
	}
	c.tx = nil
	return tok, nil
}
