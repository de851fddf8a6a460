// Package stomp is brokernet's STOMP 1.2 client: one connection with pipelined
// writes, any number of receipts outstanding, bounded frames and spec-correct heart-beats.
//
// It is built on go-stomp's frame types rather than on go-stomp's Conn because that
// client allows one outstanding receipt per connection, wedges after a late receipt,
// flushes the socket once per frame and misreads a heart-beat answer of 0,0
// (measured; see shared/reference/go-libraries.md §1). A bridge needs hundreds of
// confirmations in flight on one connection.
package stomp

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-stomp/stomp/v3/frame"

	"github.com/brokernet/brokernet/internal/mailbox"
	"github.com/brokernet/brokernet/internal/quickack"
	"github.com/brokernet/brokernet/transport"
)

// ErrClosed is the error of a connection closed by this side.
var ErrClosed = fmt.Errorf("stomp: %w", transport.ErrClosed)

// BrokerError is a STOMP ERROR frame. Brokers close the connection after sending one
// (the spec says they must; ActiveMQ sometimes does not, and brokernet closes it then).
type BrokerError struct {
	Message string // the ERROR frame's message header
	Detail  string // the start of its body
}

func (e *BrokerError) Error() string {
	if e.Detail == "" {
		return "broker error: " + e.Message
	}
	return "broker error: " + e.Message + ": " + e.Detail
}

// Is makes every ERROR frame match transport.ErrRefused.
func (e *BrokerError) Is(target error) bool { return target == transport.ErrRefused }

// Flavour is the broker implementation, learnt from the CONNECTED frame's
// server header or forced with ?flavor=.
type Flavour = transport.Flavour

// Known broker flavours.
const (
	Unknown  = transport.UnknownFlavour
	ActiveMQ = transport.ActiveMQ
	RabbitMQ = transport.RabbitMQ
	Artemis  = transport.Artemis
)

func flavourOf(server string) Flavour {
	s := strings.ToLower(server)
	switch {
	case strings.Contains(s, "artemis"):
		return Artemis
	case strings.HasPrefix(s, "activemq"):
		return ActiveMQ
	case strings.HasPrefix(s, "rabbitmq"):
		return RabbitMQ
	}
	return Unknown
}

// Options tune a connection. The zero value gives the defaults.
type Options struct {
	// ConnectTimeout bounds dialing, TLS and the CONNECT/CONNECTED exchange. Default 10 s.
	ConnectTimeout time.Duration
	// WriteTimeout bounds one socket write of at most 64 KiB (writeChunk): a broker
	// that takes nothing for longer kills the connection instead of stalling it
	// forever, while a long burst to a slow but reading broker never times out.
	// Default 30 s.
	WriteTimeout time.Duration
	// MaxFrameSize bounds the header section and the body of a received frame. Default 64 MiB.
	MaxFrameSize int
	// MaxHeaders bounds the number of headers of a received frame. Default 1000,
	// ActiveMQ's own limit (StompWireFormat.MAX_HEADERS). Each header costs about 40
	// bytes beyond its text, so without a count a frame of tiny headers would take
	// many times its size in memory.
	MaxHeaders int
	// MaxHeaderBytes bounds the header section of a received frame. Default 1 MiB.
	MaxHeaderBytes int
	// WriteQueue is the number of frames queued for the writer. Default 1024.
	WriteQueue int
	// DeliveryQueue is the capacity of Deliveries. Default 1024. Frames beyond it
	// wait in an internal queue, so that a busy consumer never stops the reader
	// from seeing RECEIPTs, ERRORs and heart-beats; the brokers' prefetch limits
	// bound that queue for client-acknowledged subscriptions.
	DeliveryQueue int
	// AutoAckQueue bounds the MESSAGE frames of auto-acknowledged subscriptions
	// (advisories) read but not yet taken from Deliveries. The broker may send those
	// without limit (an advisory flood), so at this bound the reader stops reading:
	// TCP pushes back on the broker. Default 4096. Frames of client-acknowledged
	// subscriptions never stop the reader (the broker's prefetch bounds them), so
	// RECEIPTs keep flowing while a consumer holds its window full — unless the
	// consumer also leaves auto-ack frames unread.
	AutoAckQueue int
	// StallTimeout is how long the reader may be stopped by a full AutoAckQueue
	// before the connection fails: a consumer that stopped taking Deliveries while
	// it waits for a RECEIPT behind those frames would otherwise hang. Default 30 s.
	StallTimeout time.Duration
}

func (o *Options) defaults() {
	if o.ConnectTimeout <= 0 {
		o.ConnectTimeout = 10 * time.Second
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = 30 * time.Second
	}
	if o.MaxFrameSize <= 0 {
		o.MaxFrameSize = 64 << 20
	}
	if o.WriteQueue <= 0 {
		o.WriteQueue = 1024
	}
	if o.DeliveryQueue <= 0 {
		o.DeliveryQueue = 1024
	}
	if o.MaxHeaders <= 0 {
		o.MaxHeaders = 1000
	}
	if o.MaxHeaderBytes <= 0 {
		o.MaxHeaderBytes = 1 << 20
	}
	if o.AutoAckQueue <= 0 {
		o.AutoAckQueue = 4096
	}
	if o.StallTimeout <= 0 {
		o.StallTimeout = 30 * time.Second
	}
}

// Conn is one STOMP connection. Its methods are safe for concurrent use.
//
// Frames written with Write and Request go out in call order. Receipt callbacks run
// on the connection's reader goroutine, in the order the broker sent the receipts;
// they must not block. MESSAGE frames of all subscriptions arrive on Deliveries.
type Conn struct {
	uri     URI
	opts    Options
	nc      net.Conn
	server  string
	flavour Flavour
	session string

	sendEvery   time.Duration // heart-beat send interval, 0 = none
	expectEvery time.Duration // heart-beat receive interval, 0 = none

	out        chan *frame.Frame
	urgent     urgentQueue // frames written by WriteNow, ahead of out
	inbox      *inbox      // MESSAGE frames read, not yet handed to deliveries
	deliveries chan *frame.Frame
	pumpOnce   sync.Once // starts pump on the first call of Deliveries
	done       chan struct{}
	failOnce   sync.Once
	err        error // set before done is closed

	// closing is set by Close: the broker closing the socket after the
	// DISCONNECT receipt (or any end meanwhile) is then ErrClosed, as asked.
	closing atomic.Bool

	mu       sync.Mutex
	receipts map[string]func(error) // nil once the connection failed
	seq      atomic.Uint64
	autoSubs sync.Map // subscription id → struct{}: subscriptions with ack mode auto

	wrote atomic.Bool // something was written since the last heart-beat tick
}

// Dial connects and completes the STOMP handshake.
func Dial(ctx context.Context, uri URI, opts Options) (*Conn, error) {
	opts.defaults()
	ctx, cancel := context.WithTimeout(ctx, opts.ConnectTimeout)
	defer cancel()

	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", uri.Addr())
	if err != nil {
		return nil, fmt.Errorf("dialing %s: %w", uri, err)
	}
	return newConn(ctx, quickack.Wrap(nc), uri, opts)
}

// newConn runs TLS (if the URI asks for it) and the STOMP handshake over nc and
// starts the connection's goroutines. opts must have its defaults applied.
func newConn(ctx context.Context, nc net.Conn, uri URI, opts Options) (*Conn, error) {
	var err error
	if uri.TLS {
		if nc, err = uri.TLSOptions().Client(ctx, nc, uri.Host, uri); err != nil {
			return nil, err
		}
	}
	c := &Conn{
		uri:        uri,
		opts:       opts,
		nc:         nc,
		out:        make(chan *frame.Frame, opts.WriteQueue),
		urgent:     urgentQueue{signal: make(chan struct{}, 1)},
		deliveries: make(chan *frame.Frame, opts.DeliveryQueue),
		done:       make(chan struct{}),
		receipts:   make(map[string]func(error)),
	}
	dec := &decoder{r: bufio.NewReaderSize(nc, 64<<10), maxFrame: opts.MaxFrameSize,
		maxHeaders: opts.MaxHeaders, maxHeaderBytes: opts.MaxHeaderBytes}
	if err = c.handshake(ctx, dec); err != nil {
		nc.Close()
		return nil, err
	}
	c.inbox = newInbox(opts.AutoAckQueue)
	go c.readLoop(dec)
	go c.writeLoop()
	return c, nil
}

func (c *Conn) handshake(ctx context.Context, dec *decoder) error {
	deadline, _ := ctx.Deadline()
	c.nc.SetDeadline(deadline)
	defer c.nc.SetDeadline(time.Time{})

	// heart-beat is "send,receive" (STOMP 1.1). We ask the broker for heart-beats
	// twice as often as the configured interval, so that a silent (half-open)
	// connection is declared dead within 1.5 intervals (see readLoop) while
	// leaving room for ActiveMQ's write check, which skips one heart-beat after any
	// data and so may leave up to two of its intervals between frames.
	send, recv := c.uri.HeartBeat, c.uri.HeartBeat/2
	if recv < time.Millisecond {
		recv = send
	}
	f := frame.New(frame.CONNECT,
		frame.AcceptVersion, "1.2,1.1",
		frame.Host, c.uri.VHost,
		frame.HeartBeat, strconv.FormatInt(send.Milliseconds(), 10)+","+strconv.FormatInt(recv.Milliseconds(), 10))
	if c.uri.Login != "" {
		f.Header.Add(frame.Login, c.uri.Login)
		f.Header.Add(frame.Passcode, c.uri.Passcode)
	}
	if c.uri.ClientID != "" {
		f.Header.Add("client-id", c.uri.ClientID)
	}
	w := bufio.NewWriter(c.nc)
	enc := encoder{w: w}
	if err := enc.writeFrame(f); err != nil {
		return fmt.Errorf("connecting to %s: %w", c.uri, err)
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("connecting to %s: %w", c.uri, err)
	}
	for {
		r, err := dec.readFrame()
		if err == errHeartBeat {
			continue
		}
		if err != nil {
			return fmt.Errorf("connecting to %s: %w", c.uri, err)
		}
		switch r.Command {
		case frame.ERROR:
			return fmt.Errorf("connecting to %s: %w", c.uri, brokerError(r))
		case frame.CONNECTED:
		default:
			return fmt.Errorf("connecting to %s: unexpected %s frame", c.uri, r.Command)
		}
		c.server = r.Header.Get(frame.Server)
		c.flavour = flavourOf(c.server)
		if c.uri.Flavour != Unknown {
			c.flavour = c.uri.Flavour
		}
		if c.uri.Flavour != Unknown {
			c.flavour = c.uri.Flavour // ?flavor= wins over the server header
		}
		c.session = r.Header.Get(frame.Session)
		switch v := r.Header.Get(frame.Version); v {
		case "1.1", "1.2":
			dec.unescape = true
		case "", "1.0":
			return fmt.Errorf("connecting to %s: broker speaks only STOMP 1.0", c.uri)
		}
		// Heart-beats per STOMP 1.1: a side sends only if both agree, at the larger of
		// the two intervals. A broker answering 0,0 means none in either direction.
		if v, ok := r.Header.Contains(frame.HeartBeat); ok && c.uri.HeartBeat > 0 {
			sx, sy, err := frame.ParseHeartBeat(v)
			if err != nil {
				return fmt.Errorf("connecting to %s: bad heart-beat header %q", c.uri, v)
			}
			if sy > 0 {
				c.sendEvery = max(send, sy)
			}
			if sx > 0 {
				c.expectEvery = max(recv, sx)
			}
		}
		return nil
	}
}

// Server is the CONNECTED frame's server header, for example "ActiveMQ/5.17.2".
func (c *Conn) Server() string { return c.server }

// Session is the CONNECTED frame's session header. ActiveMQ puts its connection id
// there, which prefixes the ids of this connection's consumers in advisories.
func (c *Conn) Session() string { return c.session }

// Flavour is the broker implementation named by Server.
func (c *Conn) Flavour() Flavour { return c.flavour }

// URI is the address this connection was dialed with.
func (c *Conn) URI() URI { return c.uri }

// Done is closed when the connection has failed or was closed.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err is why the connection ended; nil while it is up.
func (c *Conn) Err() error {
	select {
	case <-c.done:
		return c.err
	default:
		return nil
	}
}

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

// Subscribe sends SUBSCRIBE and waits for the broker's receipt, so that the
// subscription is in place when it returns. headers are extra key, value pairs.
func (c *Conn) Subscribe(ctx context.Context, id, destination, ack string, headers ...string) error {
	f := frame.New(frame.SUBSCRIBE, frame.Id, id, frame.Destination, destination, frame.Ack, ack)
	for i := 0; i+1 < len(headers); i += 2 {
		f.Header.Add(headers[i], headers[i+1])
	}
	if err := c.Request(ctx, f); err != nil {
		return fmt.Errorf("subscribing to %s: %w", destination, err)
	}
	return nil
}

// Unsubscribe sends UNSUBSCRIBE and waits for the receipt. The broker returns the
// subscription's unacknowledged messages to their destination.
func (c *Conn) Unsubscribe(ctx context.Context, id string) error {
	if err := c.Request(ctx, frame.New(frame.UNSUBSCRIBE, frame.Id, id)); err != nil {
		return fmt.Errorf("unsubscribing %s: %w", id, err)
	}
	return nil
}

// Close disconnects gracefully: DISCONNECT with a receipt (so that every frame
// written before it was processed), bounded by ctx, then closes the socket.
func (c *Conn) Close(ctx context.Context) error {
	select {
	case <-c.done:
		return nil
	default:
	}
	c.closing.Store(true)
	err := c.Request(ctx, frame.New(frame.DISCONNECT))
	c.fail(ErrClosed)
	if err == ErrClosed {
		err = nil
	}
	return err
}

// Abort closes the socket at once. Unacknowledged messages go back to the broker.
func (c *Conn) Abort() { c.fail(ErrClosed) }

func (c *Conn) errOrClosed() error {
	if err := c.Err(); err != nil {
		return err
	}
	return ErrClosed
}

// fail ends the connection once, with err as its cause.
func (c *Conn) fail(err error) {
	c.failOnce.Do(func() {
		c.err = err
		if c.closing.Load() {
			c.err = ErrClosed
		}
		close(c.done)
		c.nc.Close()
		c.mu.Lock()
		pending := c.receipts
		c.receipts = nil
		c.mu.Unlock()
		for _, cb := range pending {
			cb(err)
		}
	})
}

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
			c.mu.Lock()
			cb := c.receipts[id]
			delete(c.receipts, id)
			c.mu.Unlock()
			if cb != nil {
				cb(nil)
			}
		case frame.ERROR:
			berr := brokerError(f)
			if id, ok := f.Header.Contains(frame.ReceiptId); ok {
				c.mu.Lock()
				cb := c.receipts[id]
				delete(c.receipts, id)
				c.mu.Unlock()
				if cb != nil {
					cb(berr)
				}
			}
			c.fail(fmt.Errorf("%s: %w", c.uri, berr))
			return
		}
	}
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

func brokerError(f *frame.Frame) *BrokerError {
	e := &BrokerError{Message: f.Header.Get(frame.Message)}
	body := strings.TrimSpace(string(f.Body))
	if i := strings.IndexByte(body, '\n'); i >= 0 {
		body = body[:i]
	}
	if len(body) > 200 {
		body = body[:200] + "…"
	}
	e.Detail = body
	return e
}
