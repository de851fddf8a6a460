package stomp

import (
	"context"
	"fmt"
	"strconv"

	"github.com/go-stomp/stomp/v3/frame"

	"github.com/brokernet/brokernet/transport"
)

// earlyReceipt is a receipt Flush put on a held SEND (see BrokerConn.early).
type earlyReceipt struct {
	arrived bool
	waiting []transport.Token // Commits it confirms, waiting for it
}

// Send writes m inside the open transaction, beginning one if needed. To
// RabbitMQ it writes m outside any transaction, with a receipt (confirm.go).
//
// To ActiveMQ a non-persistent message goes outside the transaction: the
// broker dispatches it as soon as it arrives instead of at the COMMIT, which
// spares it a wait for the rest of the batch and for the commit's round trip,
// and spares the broker the transaction's bookkeeping. Commit's receipt still
// confirms it: ActiveMQ handles one connection's frames in order on its
// transport thread, so the receipt follows the sends before it (the bench's
// producer relies on the same). A batch refused halfway may leave some of
// its non-persistent messages on the broker, which are then sent again:
// duplicates, never loss. JMS leaves the order between persistent and
// non-persistent messages undefined (JMS 1.1, 4.4.10.2), so sending them by
// two routes reorders nothing it promises. The last such SEND is held (the
// tail) until the next write: if Commit comes first, its receipt rides on it
// instead of an empty BEGIN and COMMIT (Flush writes it without).
func (b *BrokerConn) Send(ctx context.Context, m *transport.Message) error {
	if b.confirmsBySend() {
		f := SendFrame(m, "")
		if err := toRabbit(m, f); err != nil {
			return fmt.Errorf("sending on %s: %w", b.c.URI(), err)
		}
		return b.sendConfirmed(ctx, f)
	}
	if !m.Persistent && b.c.Flavour() == ActiveMQ {
		// Held as the tail: if it is the batch's last, Commit's receipt
		// rides on it.
		return b.holdTail(ctx, &tailFrame{f: SendFrame(m, ""), receipt: true})
	}
	if b.tx == "" {
		b.txSeq++
		b.tx = "bn-tx-" + strconv.FormatUint(b.txSeq, 10)
		if err := b.write(ctx, frame.New(frame.BEGIN, frame.Transaction, b.tx)); err != nil {
			return err
		}
	}
	return b.write(ctx, SendFrame(m, b.tx))
}

// Flush writes the held tail frame, if any: a caller that will not Commit or
// Sync soon calls it so that the last message sent does not wait.
//
// A held non-persistent SEND to ActiveMQ goes with a receipt of its own, for
// the Commit that follows: until another frame is written, that receipt
// confirms every SEND before it (ActiveMQ handles a connection's frames in
// order), so the Commit writes nothing. Without it the Commit would be an
// empty BEGIN and COMMIT, and a persistent ActiveMQ (KahaDB, as Debian ships
// it) writes and fsyncs its journal for every COMMIT and ABORT, empty ones
// included: 200 empty transactions, 204 fsyncs, measured with strace here.
// A bridge that lingers before committing (bridge.Config.CommitDelay) flushes
// at every idle moment, so at 2,000 msg/s that was one fsync on the remote
// broker every few messages, for messages that are not persistent.
func (b *BrokerConn) Flush(ctx context.Context) error {
	b.smu.Lock()
	t := b.tail
	b.tail = nil
	if t == nil || !t.receipt || t.f.Command != frame.SEND {
		b.early = nil
		b.smu.Unlock()
		if t == nil {
			return nil
		}
		return b.c.Write(ctx, t.f)
	}
	id, _ := b.reserveReceipt()
	t.f.Header.Set(frame.Receipt, id)
	e := &earlyReceipt{}
	b.early = e
	b.earlies[id] = e
	b.smu.Unlock()
	return b.c.Write(ctx, t.f)
}

// earlyDone is called by the converter for every RECEIPT that is not a
// Sync's: for a receipt Flush asked for it returns the Commits it confirms
// (maybe none yet; non-nil), nil for other receipts.
func (b *BrokerConn) earlyDone(id string) []transport.Token {
	b.smu.Lock()
	defer b.smu.Unlock()
	e, ok := b.earlies[id]
	if !ok {
		return nil
	}
	delete(b.earlies, id)
	e.arrived = true
	toks := e.waiting
	e.waiting = nil
	if toks == nil {
		toks = []transport.Token{}
	}
	return toks
}

// commitEarly returns a token for a Commit confirmed by the early receipt,
// if there is one: confirmed at once if it arrived, when it arrives
// otherwise.
func (b *BrokerConn) commitEarly() (transport.Token, bool) {
	b.smu.Lock()
	e := b.early
	if e == nil || b.tail != nil {
		b.smu.Unlock()
		return 0, false
	}
	tok := transport.Token(b.c.seq.Add(1))
	if !e.arrived {
		e.waiting = append(e.waiting, tok)
		b.smu.Unlock()
		return tok, true
	}
	b.smu.Unlock()
	// Already here: the event goes out now. The session consumes events on
	// the goroutine calling Commit, so this must not block: with the queue
	// full the Commit takes the long way.
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.eventsClosed {
		return 0, false
	}
	select {
	case b.events <- transport.Event{Kind: transport.Confirmed, Token: tok}:
		return tok, true
	default:
		return 0, false
	}
}

// Commit commits the open transaction with a receipt. A commit with nothing
// sent is confirmed at once (an empty transaction). To RabbitMQ the batch is
// confirmed by its SENDs' receipts instead (confirm.go).
func (b *BrokerConn) Commit(ctx context.Context) (transport.Token, error) {
	if b.confirmsBySend() {
		return b.commitConfirmed(ctx)
	}
	if b.tx == "" {
		// Only non-persistent messages since the last Commit: if the last
		// of them is still held, the receipt rides on it (ActiveMQ handles
		// a connection's frames in order, so it answers once every SEND
		// before was processed), instead of an empty BEGIN and COMMIT; if
		// Flush wrote it, with a receipt, that receipt confirms the batch.
		if tok, ok := b.commitEarly(); ok {
			return tok, nil
		}
		b.smu.Lock()
		t := b.tail
		if t != nil && t.receipt && t.f.Command == frame.SEND {
			b.tail = nil
		} else {
			t = nil
		}
		b.smu.Unlock()
		if t != nil {
			return b.streamReceipt(ctx, t.f)
		}
		b.txSeq++
		tx := "bn-tx-" + strconv.FormatUint(b.txSeq, 10)
		if err := b.write(ctx, frame.New(frame.BEGIN, frame.Transaction, tx)); err != nil {
			return 0, err
		}
		b.tx = tx
	}
	tx := b.tx
	b.tx = ""
	return b.streamReceipt(ctx, frame.New(frame.COMMIT, frame.Transaction, tx))
}

// ConfirmsEach implements transport.EachConfirmer: to ActiveMQ, whose SEND
// with a receipt is a send asking for a response. RabbitMQ confirms every
// SEND already (confirm.go), and a queue that refuses one ends the
// connection, so one by one would isolate nothing there.
func (b *BrokerConn) ConfirmsEach() bool { return b.c.Flavour() == ActiveMQ }

// SendConfirmed implements transport.EachConfirmer: m goes outside any
// transaction with a receipt of its own, which ActiveMQ writes once the
// message is stored (persistent) or dispatched; a destination at its memory
// limit parks it and writes the receipt when there is room, instead of
// blocking the connection (see transport.EachConfirmer). An ERROR frame ends
// the connection, as for any refusal.
func (b *BrokerConn) SendConfirmed(ctx context.Context, m *transport.Message) (transport.Token, error) {
	if !b.ConfirmsEach() {
		return 0, transport.ErrUnsupported
	}
	return b.streamReceipt(ctx, SendFrame(m, ""))
}
