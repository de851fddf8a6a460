package stomp

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-stomp/stomp/v3/frame"

	"github.com/brokernet/brokernet/advisory"
	"github.com/brokernet/brokernet/internal/mailbox"
	"github.com/brokernet/brokernet/transport"
)

// Deliveries carries the MESSAGE frames of every subscription, and the RECEIPT
// frames of WriteStreamReceipt, in the order the broker sent them. It is closed
// after the connection ended.
// A connection is read either through Deliveries or through next, never both.
func (c *Conn) Deliveries() <-chan *frame.Frame {
	c.pumpOnce.Do(func() { go c.pump() })
	return c.deliveries
}

// next returns the next frame Deliveries would carry, waiting for it; false
// once the connection ended. BrokerConn reads this way, which spares every
// message a hand-over between goroutines (pump) on its way to the bridge.
func (c *Conn) next() (*frame.Frame, bool) { return c.inbox.pop(c.done) }

func (c *Conn) readLoop(dec *decoder) {
	defer c.inbox.close()
	var timeout time.Duration
	if c.expectEvery > 0 {
		// The broker may skip one heart-beat right after sending data (ActiveMQ's
		// write check does), so two of its intervals can pass between frames; a
		// third allows for scheduling and network delay, as the spec suggests.
		// With the broker honouring our request that is 1.5 × the URI's heartBeat.
		timeout = 3 * c.expectEvery
	}
	var deadline time.Time
	for {
		if timeout > 0 {
			// Moving the deadline costs more than reading a small frame, so
			// it moves at most every timeout/8: a silent connection is then
			// noticed between 7/8 and 8/8 of timeout after its last frame,
			// still beyond the two broker intervals a live one may leave.
			if now := time.Now(); deadline.Sub(now) < timeout-timeout/8 {
				deadline = now.Add(timeout)
				c.nc.SetReadDeadline(deadline)
			}
		}
		f, err := dec.readFrame()
		if err == errHeartBeat {
			continue
		}
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				err = fmt.Errorf("no data or heart-beat from %s for %s", c.uri, timeout)
			} else {
				err = fmt.Errorf("reading from %s: %w", c.uri, err)
			}
			c.fail(err)
			return
		}
		switch f.Command {
		case frame.MESSAGE:
			// Frames of client-acknowledged subscriptions never block here:
			// RECEIPTs and ERRORs behind them must be read even while the consumer
			// of Deliveries is busy, and the broker's prefetch bounds how many pile
			// up. Auto-acknowledged frames have no such bound, so a full quota of
			// them stops the reader (Options.AutoAckQueue).
			_, auto := c.autoSubs.Load(f.Header.Get(frame.Subscription))
			if err := c.inbox.push(f, auto, c.done, c.opts.StallTimeout); err != nil {
				c.fail(fmt.Errorf("reading from %s: %w", c.uri, err))
				return
			}
		case frame.RECEIPT:
			id := f.Header.Get(frame.ReceiptId)
			if strings.HasPrefix(id, streamReceiptPrefix) {
				// Never blocks: only auto-acknowledged MESSAGE frames count.
				if err := c.inbox.push(f, false, c.done, c.opts.StallTimeout); err != nil {
					c.fail(fmt.Errorf("reading from %s: %w", c.uri, err))
					return
				}
				continue
			}
			if cb := c.takeReceipt(id); cb != nil {
				cb(nil)
			}
		case frame.ERROR:
			berr := brokerError(f)
			if id, ok := f.Header.Contains(frame.ReceiptId); ok {
				if cb := c.takeReceipt(id); cb != nil {
					cb(berr)
				}
			}
			c.fail(fmt.Errorf("%s: %w", c.uri, berr))
			return
		}
	}
}

// takeReceipt removes and returns the callback of receipt id, nil if there
// is none (or the connection failed, which called them all).
func (c *Conn) takeReceipt(id string) func(error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cb := c.receipts[id]
	delete(c.receipts, id)
	return cb
}

// pump hands MESSAGE frames from the inbox to Deliveries, in order, and closes
// Deliveries once the reader ended and the inbox is empty, or the connection failed.
func (c *Conn) pump() {
	defer close(c.deliveries)
	for {
		f, ok := c.inbox.pop(c.done)
		if !ok {
			return
		}
		select {
		case c.deliveries <- f:
		case <-c.done:
			return
		}
	}
}

// ErrInboxStalled means the consumer of Deliveries left a full quota of
// auto-acknowledged frames unread for Options.StallTimeout.
var ErrInboxStalled = errors.New("deliveries not taken: auto-ack queue full")

// inbox is the FIFO between the reader and the pump. Frames of client-acknowledged
// subscriptions are not counted (the broker's prefetch bounds them); frames of
// auto-acknowledged ones are, and push blocks while autoLimit of them wait, so
// that a flood of advisories stops the reader (and TCP pushes back on the
// broker) instead of growing without bound.
type inbox struct {
	box mailbox.Mailbox[inboxItem]

	mu        sync.Mutex
	auto      int // auto-acknowledged frames pushed and not yet popped
	autoLimit int
	room      chan struct{} // an auto-acknowledged item was popped
	closeOnce sync.Once
	closed    chan struct{} // closed by close: nothing more will be pushed

	// taken are items taken from box and not yet popped, from head on; only
	// pop's goroutine touches them.
	taken []inboxItem
	head  int
}

type inboxItem struct {
	f    *frame.Frame
	auto bool
}

func newInbox(autoLimit int) *inbox {
	return &inbox{autoLimit: autoLimit, room: make(chan struct{}, 1), closed: make(chan struct{})}
}

// push appends f. For an auto-acknowledged frame it first waits, at most stall,
// until fewer than autoLimit of them are queued; it gives up when done closes.
func (q *inbox) push(f *frame.Frame, auto bool, done <-chan struct{}, stall time.Duration) error {
	var timer *time.Timer
	for {
		q.mu.Lock()
		if !auto || q.auto < q.autoLimit {
			if auto {
				q.auto++
			}
			q.mu.Unlock()
			break
		}
		n := q.auto
		q.mu.Unlock()
		if timer == nil {
			timer = time.NewTimer(stall)
			defer timer.Stop()
		}
		select {
		case <-q.room:
		case <-done:
			return ErrClosed
		case <-timer.C:
			return fmt.Errorf("%w (%d frames for %s)", ErrInboxStalled, n, stall)
		}
	}
	q.box.Push(inboxItem{f, auto})
	return nil
}

// autoQueued is how many auto-acknowledged frames wait.
func (q *inbox) autoQueued() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.auto
}

// close says nothing more will be pushed; pop still returns what is queued.
func (q *inbox) close() { q.closeOnce.Do(func() { close(q.closed) }) }

func wake(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// pop returns the oldest frame, waiting for one; false once the inbox is closed
// and empty, or done is closed.
func (q *inbox) pop(done <-chan struct{}) (*frame.Frame, bool) {
	for {
		if q.head < len(q.taken) {
			it := q.taken[q.head]
			q.taken[q.head] = inboxItem{}
			q.head++
			if it.auto {
				q.mu.Lock()
				q.auto--
				q.mu.Unlock()
				wake(q.room)
			}
			return it.f, true
		}
		q.box.Recycle(q.taken) // every item popped and cleared
		q.taken, q.head = q.box.Take(), 0
		if len(q.taken) > 0 {
			continue
		}
		select {
		case <-q.box.Signal():
		case <-q.closed:
			// Items pushed before close are in the box by now.
			if q.taken = q.box.Take(); len(q.taken) == 0 {
				return nil, false
			}
		case <-done:
			return nil, false
		}
	}
}

// convert turns the connection's frames into events, in order.
func (b *BrokerConn) convert() {
	defer func() {
		b.mu.Lock()
		b.eventsClosed = true
		close(b.events)
		b.mu.Unlock()
	}()
	for {
		f, ok := b.c.next()
		if !ok {
			return
		}
		if f.Command == frame.RECEIPT {
			toks := b.syncDone(f.Header.Get(frame.ReceiptId))
			if toks == nil {
				toks = b.earlyDone(f.Header.Get(frame.ReceiptId))
			}
			if toks != nil {
				for _, tok := range toks {
					select {
					case b.events <- transport.Event{Kind: transport.Confirmed, Token: tok}:
					case <-b.c.Done():
						return
					}
				}
				continue
			}
		}
		ev, ok := b.event(f)
		if !ok {
			continue
		}
		select {
		case b.events <- ev:
		case <-b.c.Done():
			return
		}
	}
}

func (b *BrokerConn) event(f *frame.Frame) (transport.Event, bool) {
	if f.Command == frame.RECEIPT {
		id := f.Header.Get(frame.ReceiptId)
		n, err := strconv.ParseUint(strings.TrimPrefix(id, streamReceiptPrefix), 10, 64)
		if err != nil {
			return transport.Event{}, false
		}
		tok := transport.Token(n)
		b.mu.Lock()
		done, complete, known := b.rabbit.receipt(tok)
		b.mu.Unlock()
		if known {
			// Part of a batch sent to RabbitMQ: only its last receipt confirms it.
			return transport.Event{Kind: transport.Confirmed, Token: done}, complete
		}
		return transport.Event{Kind: transport.Confirmed, Token: tok}, true
	}
	sub := f.Header.Get(frame.Subscription)
	if sub == identitySub {
		// Only the broker's own advisory may tell its id (a client could
		// publish a connection advisory naming another broker).
		if id := f.Header.Get("originBrokerId"); id != "" && advisory.CheckBrokerGenerated(f.Header.Get(frame.MessageId)) == nil {
			select {
			case b.identity <- id:
			default:
			}
		}
		return transport.Event{}, false
	}
	// ActiveMQ marks persistent messages so (StompFrame headers); their
	// count is what a later ACK of this delivery covers (ackRef.persistent).
	persistent := f.Header.Get("persistent") == "true"
	b.mu.Lock()
	info, known := b.subs[sub]
	if persistent && known {
		info.persistent++
		b.subs[sub] = info
	}
	b.mu.Unlock()
	if info.destAdvisor {
		ev, err := advisory.ParseDestinationInfo(f.Header, f.Body)
		if err != nil {
			return transport.Event{Kind: transport.BadConsumer,
				Err: fmt.Errorf("%w (body %s)", err, advisory.Trim(f.Body, 300))}, true
		}
		return transport.Event{Kind: transport.DestinationChanged, Destination: ev}, true
	}
	if info.advisory {
		ev, err := advisory.ParseActiveMQ(f.Header, f.Body)
		if errors.Is(err, advisory.ErrNotConsumerAdvisory) {
			return transport.Event{}, false
		}
		if err != nil {
			return transport.Event{Kind: transport.BadConsumer,
				Err: fmt.Errorf("%w (body %s)", err, advisory.Trim(f.Body, 300))}, true
		}
		return transport.Event{Kind: transport.Consumer, Consumer: ev}, true
	}
	if info.browser && f.Header.Get(browserHeader) == "end" {
		return transport.Event{Kind: transport.BrowseDone, Sub: sub}, true
	}
	ref := ackRef{sub: sub, persistent: info.persistent}
	if id, ok := f.Header.Contains(frame.Ack); ok {
		ref.id = id
	} else {
		ref.msgID = f.Header.Get(frame.MessageId)
	}
	m := MessageOf(f)
	if b.c.Flavour() == RabbitMQ {
		fromRabbit(f, m)
	}
	return transport.Event{Kind: transport.Delivery, Sub: sub, Msg: m, Ref: ref}, true
}
