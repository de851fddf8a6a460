package openwire

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/brokernet/brokernet/transport"
)

// Compile-time guards.
var (
	_ transport.Conn     = (*Conn)(nil)
	_ transport.Endpoint = URI{}
)

// BrokerError is an ExceptionResponse or ConnectionError from the broker:
// the Java exception class and message.
type BrokerError struct{ Exception string }

func (e *BrokerError) Error() string { return "broker error: " + e.Exception }

// Timeouts and defaults.
const (
	connectTimeout  = 10 * time.Second
	writeTimeout    = 30 * time.Second
	defaultPrefetch = 1000
)

// Conn is one OpenWire connection. See transport.Conn for the contract.
type Conn struct {
	uri  URI
	log  zerolog.Logger
	nc   net.Conn
	info transport.Info

	brokerID, brokerName string
	connID               *connectionID
	sessID               *sessionID
	prodID               *producerID
	clientID             string
	traces               bool          // stackTraceEnabled negotiated
	tight                bool          // tightEncodingEnabled negotiated
	names                names         // the reader goroutine's interned identifiers
	inactivity           time.Duration // negotiated maxInactivityDuration, 0 = none

	out      chan outFrame
	urgent   urgentQueue // the reader's own writes; see writeFromReader
	wrote    atomic.Bool
	cmdID    atomic.Int32
	tokens   atomic.Uint64
	done     chan struct{}
	failOnce sync.Once
	err      error // set before done is closed

	// closing is set by Close once it asks the broker to remove the
	// connection: the broker closing the socket then (or any end meanwhile)
	// is ErrClosed, as asked.
	closing atomic.Bool

	// subInfo takes the broker's BrokerSubscriptionInfo (durablesync.go).
	subInfo chan *brokerSubscriptionInfo

	events *queue

	mu      sync.Mutex                // guards waiters, subs, byValue, advisor, temps and their owners; never held with a subscription's mu
	waiters map[int32]func(c command) // responses awaited, by command id
	subs    map[string]*subscription  // by subscription id
	byValue map[int64]*subscription   // by consumer id value
	advisor map[int64]bool            // advisory consumer values
	temps   map[string]*tempOwner     // owners of mirrored temporary destinations, by connection id (temp.go)
	tempSeq int64                     // numbers their client ids

	// Settlement coalescing, see Sync. smu is never held with c.mu.
	smu      sync.Mutex
	syncing  bool      // a Sync's BEGIN awaits its response
	heldAcks []heldAck // cumulative acks held meanwhile, one per consumer
	// ackTail is the last cumulative ack Settle took while no Sync was on
	// the wire, held unwritten so that the next Sync's request for a
	// response can ride on it (see Sync); any other settlement, Sync,
	// Unsubscribe or Close writes it.
	ackTail    *heldAck
	heldTokens []transport.Token // Syncs asked for meanwhile
	txSeq      atomic.Int64      // transaction ids (Send's and Sync's)

	// Owned by the calling goroutine (the bridge session).
	nextConsumer int64
	tx           *localTxID // the open send transaction, nil if none
	untx         bool       // messages sent outside a transaction since the last Commit
	msgSeq       int64
	// tail is the last non-persistent message sent, held unwritten so that
	// the response the next Commit asks for rides on it (see Send).
	tail *message
}

// Info implements transport.Conn.
func (c *Conn) Info() transport.Info { return c.info }

// Events implements transport.Conn.
func (c *Conn) Events() <-chan transport.Event { return c.events.out }

// Done implements transport.Conn.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err implements transport.Conn.
func (c *Conn) Err() error {
	select {
	case <-c.done:
		return c.err
	default:
		return nil
	}
}

// BrokerID implements transport.Conn with the brokerId of the broker's
// BrokerInfo, sent at connect.
func (c *Conn) BrokerID(context.Context) (string, error) {
	if c.brokerID == "" {
		return "", errors.New("the broker sent no brokerId in its BrokerInfo")
	}
	return c.brokerID, nil
}

// BrokerName is the brokerName of the broker's BrokerInfo.
func (c *Conn) BrokerName() string { return c.brokerName }

func (c *Conn) fail(err error) {
	c.failOnce.Do(func() {
		c.err = err
		if c.closing.Load() {
			c.err = transport.ErrClosed
		}
		close(c.done)
		c.nc.Close()
	})
}

func (c *Conn) closedErr() error {
	if err := c.Err(); err != nil && !errors.Is(err, transport.ErrClosed) {
		return fmt.Errorf("%w: %w", transport.ErrClosed, err)
	}
	return transport.ErrClosed
}

// Close implements transport.Conn: RemoveInfo of the connection, awaited,
// then ShutdownInfo.
func (c *Conn) Close(ctx context.Context) error {
	if c.Err() != nil {
		return nil
	}
	if err := c.writeTail(ctx, nil); err != nil {
		return err
	}
	c.smu.Lock()
	t := c.ackTail
	c.ackTail = nil
	c.smu.Unlock()
	if t != nil {
		if err := c.write(ctx, t.a, nil); err != nil {
			return err
		}
	}
	c.closing.Store(true)
	res := make(chan error, 1)
	err := c.write(ctx, &removeInfo{ObjectID: c.connID, LastDeliveredSequenceID: -1}, func(r command) { res <- respErr(r) })
	if err == nil {
		select {
		case err = <-res:
		case <-ctx.Done():
			err = ctx.Err()
		case <-c.done:
		}
	}
	if err == nil {
		err = c.write(ctx, &shutdownInfo{}, nil)
		if err == nil {
			// Let the writer flush the ShutdownInfo before the socket closes.
			flushed := make(chan struct{})
			select {
			case c.out <- outFrame{flushed: flushed}:
				select {
				case <-flushed:
				case <-ctx.Done():
				case <-c.done:
				}
			case <-ctx.Done():
			case <-c.done:
			}
		}
	}
	c.fail(transport.ErrClosed)
	if err != nil && !errors.Is(err, transport.ErrClosed) {
		return fmt.Errorf("closing: %w", err)
	}
	return nil
}

// Abort implements transport.Conn.
func (c *Conn) Abort() { c.fail(transport.ErrClosed) }
