package stomp

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-stomp/stomp/v3/frame"

	"github.com/brokernet/brokernet/advisory"
	"github.com/brokernet/brokernet/destination"
	"github.com/brokernet/brokernet/rabbitmq"
	"github.com/brokernet/brokernet/rabbitmq/mgmt"
	"github.com/brokernet/brokernet/transport"
)

// Compile-time guards: a URI is a transport.Endpoint, a BrokerConn a transport.Conn.
var (
	_ transport.Endpoint = URI{}
	_ transport.Conn     = (*BrokerConn)(nil)
	_ transport.Flusher  = (*BrokerConn)(nil)
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

// BrokerConn is a Conn seen through transport.Conn: the STOMP mapping of
// subscriptions, batches (transactions committed with a receipt), settlements
// (ACK/NACK) and advisories (JSON consumer advisories).
type BrokerConn struct {
	c      *Conn
	events chan transport.Event

	// mu guards subs, rabbit and eventsClosed, used by the session
	// goroutine and read by the converter goroutine.
	mu           sync.Mutex
	subs         map[string]subInfo
	rabbit       rabbitBatches // batches confirmed by SEND receipts (RabbitMQ)
	eventsClosed bool          // the converter closed events

	tx    string // open transaction, "" if none
	txSeq uint64

	// Settlement coalescing, see Sync. smu is never held with mu.
	smu        sync.Mutex
	syncing    bool                         // a Sync's BEGIN awaits its receipt
	heldAcks   []heldAck                    // cumulative ACKs held meanwhile, one per subscription
	heldTokens []transport.Token            // Syncs asked for meanwhile
	syncs      map[string][]transport.Token // a Sync's receipt id → the tokens it confirms
	syncSeq    atomic.Uint64                // Sync transaction names (also used by the converter)
	// tail is the last frame written, held back so that the confirmation
	// that follows can ride on it: a cumulative ACK taken by Settle, carrying
	// the next Sync's receipt when it acknowledges no persistent message; a
	// non-persistent SEND to ActiveMQ, carrying the next Commit's receipt. Any
	// other write writes it first; Flush writes it. acked is, per
	// subscription, the persistent count (ackRef.persistent) of the last ACK
	// taken.
	tail  *tailFrame
	acked map[string]uint64
	// early is the receipt on the last frame written, when Flush wrote a held
	// SEND with one and nothing was written since: the next Commit is
	// confirmed by it (see Flush). earlies are those whose RECEIPT has not
	// arrived, by receipt id.
	early   *earlyReceipt
	earlies map[string]*earlyReceipt

	identity chan string // broker ids seen on the identity subscription
	idOnce   sync.Once
	brokerID string
	idErr    error
}

// Raw is the underlying STOMP connection.
func (b *BrokerConn) Raw() *Conn { return b.c }

// Info describes the broker.
func (b *BrokerConn) Info() transport.Info {
	f := b.c.Flavour()
	return transport.Info{
		Protocol:     "stomp",
		Server:       b.c.Server(),
		Flavour:      f,
		ConnectionID: b.c.Session(),
		Selectors:    f == transport.ActiveMQ || f == transport.Artemis,
		Transactions: !b.confirmsBySend(),
		// The broker assigns a sent message's id: ActiveMQ's STOMP converter
		// discards a SEND's message-id header (FrameTranslator).
		KeepsID: nil, // the broker assigns the id
	}
}

// Events is the ordered stream of deliveries, receipts and advisories.
func (b *BrokerConn) Events() <-chan transport.Event { return b.events }

// Done is closed when the connection ended.
func (b *BrokerConn) Done() <-chan struct{} { return b.c.Done() }

// Err is why the connection ended.
func (b *BrokerConn) Err() error { return b.c.Err() }

// connectionAdvisory is where ActiveMQ announces connections. It replays one
// for every open connection — ours included — to a new subscriber, with the
// broker's id as originBrokerId.
const connectionAdvisory = "/topic/ActiveMQ.Advisory.Connection"

// BrokerID returns the broker's id. ActiveMQ tells it on its connection
// advisory (originBrokerId); other brokers do not over STOMP.
func (b *BrokerConn) BrokerID(ctx context.Context) (string, error) {
	b.idOnce.Do(func() { b.brokerID, b.idErr = b.learnBrokerID(ctx) })
	return b.brokerID, b.idErr
}

// management returns a client of RabbitMQ's management API for the
// connection's broker.
func (b *BrokerConn) management() (*mgmt.Client, error) {
	if b.c.Flavour() != RabbitMQ {
		return nil, fmt.Errorf("%s (%s) is not RabbitMQ: %w", b.c.URI(), b.c.Server(), transport.ErrUnsupported)
	}
	u := b.c.URI()
	return mgmt.New(cmp.Or(u.Management, mgmt.DefaultURL(u.Host)), u.Login, u.Passcode, nil)
}

// Alarms implements transport.AlarmReporter: RabbitMQ's resource alarms, read
// from its management API.
func (b *BrokerConn) Alarms(ctx context.Context) ([]string, error) {
	m, err := b.management()
	if err != nil {
		return nil, err
	}
	return m.Alarms(ctx)
}

// QueueRoom implements transport.QueueLimiter: what a RabbitMQ queue takes
// before it refuses, read from the management API.
func (b *BrokerConn) QueueRoom(ctx context.Context, d destination.Destination) (transport.QueueRoom, error) {
	m, err := b.management()
	if err != nil {
		return transport.QueueRoom{}, err
	}
	return rabbitmq.QueueRoom(ctx, m, b.c.URI().VHost, d)
}

func (b *BrokerConn) learnBrokerID(ctx context.Context) (string, error) {
	if b.c.Flavour() == RabbitMQ {
		// RabbitMQ tells its cluster name through the management API.
		m, err := b.management()
		if err != nil {
			return "", err
		}
		id, err := m.BrokerID(ctx)
		if err != nil {
			return "", fmt.Errorf("%w (or configure --local-id/--remote-id)", err)
		}
		return id, nil
	}
	if b.c.Flavour() != ActiveMQ {
		return "", fmt.Errorf("%s (%s) does not tell its broker id over STOMP; configure it (--local-id/--remote-id)", b.c.URI(), b.c.Server())
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := b.write(ctx, frame.New(frame.SUBSCRIBE, frame.Id, identitySub,
		frame.Destination, connectionAdvisory, frame.Ack, "auto",
		advisory.TransformationHeader, advisory.TransformationJSON)); err != nil {
		return "", err
	}
	defer b.write(context.WithoutCancel(ctx), frame.New(frame.UNSUBSCRIBE, frame.Id, identitySub))
	select {
	case id := <-b.identity:
		return id, nil
	case <-b.c.Done():
		return "", b.c.Err()
	case <-ctx.Done():
		return "", fmt.Errorf("waiting for the broker id on %s: %w", connectionAdvisory, ctx.Err())
	}
}

// Close disconnects gracefully, after writing any ACKs held for a Sync.
func (b *BrokerConn) Close(ctx context.Context) error {
	b.smu.Lock()
	held := b.heldAcks
	b.heldAcks = nil
	b.smu.Unlock()
	// The tail frame goes first (a tail and held ACKs never coexist: Sync
	// takes the tail as it starts holding).
	err := b.flushTail(ctx)
	for _, h := range held {
		if err != nil {
			break // the connection is gone; the broker takes the messages back
		}
		err = b.c.Write(ctx, h.ref.frame(frame.ACK))
	}
	return b.c.Close(ctx)
}

// Abort closes at once.
func (b *BrokerConn) Abort() { b.c.Abort() }
