package stomp

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-stomp/stomp/v3/frame"

	"github.com/brokernet/brokernet/transport"
)

// Write queues f for sending. It blocks only while the write queue is full.
func (c *Conn) Write(ctx context.Context, f *frame.Frame) error {
	select {
	case <-c.done:
		return c.err
	default:
	}
	c.noteSubscription(f)
	select {
	case c.out <- f:
		return nil
	case <-c.done:
		return c.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// WriteNow queues frames for sending without ever blocking, ahead of every
// frame Write queues after this call returns (and possibly of some queued
// before). It is for goroutines that must keep draining the connection, such
// as the one releasing settlements held behind a Sync (BrokerConn.Sync): if
// they waited for room in the write queue while the broker waits to write to
// us, neither side would read. The frames are few (one per subscription and
// a Sync), so the queue needs no bound.
func (c *Conn) WriteNow(fs ...*frame.Frame) error {
	select {
	case <-c.done:
		return c.err
	default:
	}
	for _, f := range fs {
		c.noteSubscription(f)
	}
	c.urgent.push(fs)
	return nil
}

// urgentQueue holds WriteNow's frames for the writer.
type urgentQueue struct {
	mu     sync.Mutex
	frames []*frame.Frame
	n      atomic.Int32  // len(frames), read without mu by the writer
	signal chan struct{} // capacity 1: frames were added
}

func (q *urgentQueue) push(fs []*frame.Frame) {
	q.mu.Lock()
	q.frames = append(q.frames, fs...)
	q.n.Store(int32(len(q.frames)))
	q.mu.Unlock()
	wake(q.signal)
}

func (q *urgentQueue) take() []*frame.Frame {
	if q.n.Load() == 0 {
		return nil
	}
	q.mu.Lock()
	fs := q.frames
	q.frames = nil
	q.n.Store(0)
	q.mu.Unlock()
	return fs
}

// noteSubscription records the ack mode of a SUBSCRIBE before it is sent (its first
// MESSAGE cannot arrive earlier) and forgets it on UNSUBSCRIBE. STOMP 1.2: a missing
// ack header means auto.
func (c *Conn) noteSubscription(f *frame.Frame) {
	switch f.Command {
	case frame.SUBSCRIBE:
		id := f.Header.Get(frame.Id)
		if ack := f.Header.Get(frame.Ack); ack == "" || ack == "auto" {
			c.autoSubs.Store(id, struct{}{})
		} else {
			c.autoSubs.Delete(id)
		}
	case frame.UNSUBSCRIBE:
		// Frames already read for it keep their mark in the inbox.
		c.autoSubs.Delete(f.Header.Get(frame.Id))
	}
}

// WriteReceipt adds a receipt header to f and queues it. done is called exactly once:
// with nil when the broker's RECEIPT arrives, or with the error that ended the
// connection. Any number of receipts may be outstanding. A receipt never times out on
// its own: callers that need a bound close the connection, which fails them all.
func (c *Conn) WriteReceipt(ctx context.Context, f *frame.Frame, done func(error)) error {
	id := "r" + strconv.FormatUint(c.seq.Add(1), 10)
	c.mu.Lock()
	if c.receipts == nil {
		c.mu.Unlock()
		return c.errOrClosed()
	}
	c.receipts[id] = done
	c.mu.Unlock()
	f.Header.Set(frame.Receipt, id)
	if err := c.Write(ctx, f); err != nil {
		c.mu.Lock()
		_, pending := c.receipts[id]
		delete(c.receipts, id)
		c.mu.Unlock()
		if !pending {
			// The connection failed meanwhile and already called done.
			return err
		}
		return err
	}
	return nil
}

// streamReceiptPrefix starts the ids of receipts that are delivered in the stream.
const streamReceiptPrefix = "s"

// WriteStreamReceipt adds a receipt header to f, queues it and returns the receipt
// id. The broker's RECEIPT frame arrives on Deliveries, after every MESSAGE frame
// the broker sent before it, so a confirmation never overtakes the deliveries
// that preceded it on the wire.
func (c *Conn) WriteStreamReceipt(ctx context.Context, f *frame.Frame) (string, error) {
	id := c.StreamReceiptID()
	f.Header.Set(frame.Receipt, id)
	return id, c.Write(ctx, f)
}

// StreamReceiptID reserves the id of a receipt delivered in the stream, for a
// caller that must note it before the frame carrying it is written (the
// RECEIPT may arrive before Write returns).
func (c *Conn) StreamReceiptID() string {
	return streamReceiptPrefix + strconv.FormatUint(c.seq.Add(1), 10)
}

// Request writes f with a receipt and waits for it.
func (c *Conn) Request(ctx context.Context, f *frame.Frame) error {
	ch := make(chan error, 1)
	if err := c.WriteReceipt(ctx, f, func(err error) { ch <- err }); err != nil {
		return err
	}
	select {
	case err := <-ch:
		return err
	case <-ctx.Done():
		// The receipt may still come; the callback's channel is buffered so it never blocks.
		return ctx.Err()
	}
}

// writeChunk is the most bytes given to one socket write, so that WriteTimeout
// bounds the time to move writeChunk bytes, never a whole burst.
const writeChunk = 64 << 10

// deadlineWriter gives every socket write its own deadline. A deadline set once per
// flush would cover a whole burst (and bufio writes a frame larger than its buffer
// straight through, under whatever deadline the last flush left — long expired
// after an idle period without heart-beats).
type deadlineWriter struct {
	nc      net.Conn
	timeout time.Duration
}

func (w deadlineWriter) Write(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		end := min(len(p), n+writeChunk)
		w.nc.SetWriteDeadline(time.Now().Add(w.timeout))
		m, err := w.nc.Write(p[n:end])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

func (c *Conn) writeLoop() {
	w := bufio.NewWriterSize(deadlineWriter{c.nc, c.opts.WriteTimeout}, 64<<10)
	enc := encoder{w: w, escape: true}
	var tick <-chan time.Time
	if c.sendEvery > 0 {
		t := time.NewTicker(c.sendEvery / 2)
		defer t.Stop()
		tick = t.C
	}
	flush := func() bool {
		if err := w.Flush(); err != nil {
			c.fail(fmt.Errorf("writing to %s: %w", c.uri, err))
			return false
		}
		c.wrote.Store(true)
		return true
	}
	// write encodes f, after WriteNow's frames: checking them before every
	// queued frame keeps a WriteNow frame ahead of any frame queued after it.
	write := func(f *frame.Frame) bool {
		for _, u := range c.urgent.take() {
			if err := enc.writeFrame(u); err != nil {
				c.fail(fmt.Errorf("writing to %s: %w", c.uri, err))
				return false
			}
		}
		if f == nil {
			return true
		}
		if err := enc.writeFrame(f); err != nil {
			c.fail(fmt.Errorf("writing to %s: %w", c.uri, err))
			return false
		}
		return true
	}
	// burst writes whatever else is queued, then flushes: one syscall per burst.
	burst := func() bool {
		for w.Buffered() < 256<<10 {
			select {
			case f := <-c.out:
				if !write(f) {
					return false
				}
				continue
			default:
			}
			break
		}
		return write(nil) && flush()
	}
	for {
		select {
		case f := <-c.out:
			if !write(f) || !burst() {
				return
			}
		case <-c.urgent.signal:
			if !write(nil) || !burst() {
				return
			}
		case <-tick:
			if c.wrote.Swap(false) {
				continue
			}
			w.WriteByte('\n')
			if !flush() {
				return
			}
			c.wrote.Store(false)
		case <-c.done:
			return
		}
	}
}

// tailFrame is the held last frame (see BrokerConn.tail).
type tailFrame struct {
	f *frame.Frame
	// receipt says the next Sync (an ACK of no persistent message) or Commit
	// (a SEND outside a transaction) may put its receipt on f.
	receipt bool
}

// holdTail makes t the tail, writing the one it replaces.
func (b *BrokerConn) holdTail(ctx context.Context, t *tailFrame) error {
	b.smu.Lock()
	prev := b.tail
	b.tail = t
	if prev != nil || t != nil {
		b.early = nil
	}
	b.smu.Unlock()
	if prev == nil {
		return nil
	}
	return b.c.Write(ctx, prev.f)
}

// write writes f after the held tail frame, if any.
func (b *BrokerConn) write(ctx context.Context, f *frame.Frame) error {
	if err := b.flushTail(ctx); err != nil {
		return err
	}
	b.smu.Lock()
	b.early = nil
	b.smu.Unlock()
	return b.c.Write(ctx, f)
}

// flushTail writes the held tail frame, if any.
func (b *BrokerConn) flushTail(ctx context.Context) error { return b.holdTail(ctx, nil) }

func (b *BrokerConn) streamReceipt(ctx context.Context, f *frame.Frame) (transport.Token, error) {
	if err := b.flushTail(ctx); err != nil {
		return 0, err
	}
	id, err := b.c.WriteStreamReceipt(ctx, f)
	if err != nil {
		return 0, err
	}
	n, _ := strconv.ParseUint(strings.TrimPrefix(id, streamReceiptPrefix), 10, 64)
	return transport.Token(n), nil
}
