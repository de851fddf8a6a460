package stomp

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/go-stomp/stomp/v3/frame"

	"github.com/brokernet/brokernet/internal/quickack"
	"github.com/brokernet/brokernet/transport"
)

// Dial connects to the broker at u as a transport.Conn.
func (u URI) Dial(ctx context.Context, opts transport.DialOptions) (transport.Conn, error) {
	if opts.ClientID != "" && u.ClientID == "" {
		u.ClientID = opts.ClientID
	}
	c, err := Dial(ctx, u, Options{})
	if err != nil {
		return nil, err
	}
	return NewBrokerConn(c), nil
}

// Backoff is the reconnect policy of u.
func (u URI) Backoff() transport.Reconnect { return u.Reconnect }

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

// NewBrokerConn wraps an established connection.
func NewBrokerConn(c *Conn) *BrokerConn {
	b := &BrokerConn{
		c:        c,
		events:   make(chan transport.Event, 256),
		subs:     make(map[string]subInfo),
		identity: make(chan string, 1),
		syncs:    make(map[string][]transport.Token),
		acked:    make(map[string]uint64),
		earlies:  make(map[string]*earlyReceipt),
	}
	go b.convert()
	return b
}
