package amqp

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/Azure/go-amqp"

	"github.com/brokernet/brokernet/destination"
	"github.com/brokernet/brokernet/rabbitmq"
	"github.com/brokernet/brokernet/transport"
)

var _ transport.Conn = (*Conn)(nil)

// linkTimeout bounds attaching and detaching a link done in the background
// (Subscribe's attach, Sync's round trip).
const linkTimeout = 30 * time.Second

// Conn is an AMQP 1.0 connection; see transport.Conn for the contract.
//
// Lock order: mu only; it is never held while calling go-amqp, except for the
// non-blocking Receiver.IssueCredit.
type Conn struct {
	uri  URI
	conn *amqp.Conn
	info transport.Info
	// clusterName is RabbitMQ's cluster_name from the open frame, or "".
	clusterName string
	// topics is the connection's shared topic queue on RabbitMQ (topics.go),
	// nil for other brokers; topicsErr why it could not be set up.
	topics    *topicQueue
	topicsErr error

	q      *eventQueue
	events chan transport.Event
	done   chan struct{}
	life   context.Context // ended with the connection; for background link work
	cancel context.CancelFunc
	token  atomic.Uint64

	mu      sync.Mutex
	err     error
	subs    map[string]*subscription
	syncing []transport.Token // Sync tokens not yet taken by syncLoop
	syncSig chan struct{}     // capacity 1: syncing is not empty

	pingMu sync.Mutex // serialises roundTrip; never held with mu

	// Owned by the caller's goroutine (Send, Commit). Sender links live on a
	// session of their own, sendSess, replaced after a refused attach.
	sendSess  *amqp.Session
	senders   map[string]*amqp.Sender
	batch     []pending
	lastBatch chan struct{} // closed when the previous Commit's event was queued
}

// watch ends the Conn when go-amqp's connection ends.
func (c *Conn) watch() {
	select {
	case <-c.conn.Done():
		err := c.conn.Err()
		if err == nil {
			err = errors.New("connection closed by the client library")
		}
		c.fail(fmt.Errorf("connection to %s: %w", c.uri, err))
	case <-c.done:
	}
}

// fail ends the Conn with err (the first error wins).
func (c *Conn) fail(err error) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = err
	c.mu.Unlock()
	c.cancel()
	close(c.done)
	if c.topics != nil {
		c.topics.drop()
	}
}

func (c *Conn) ended() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// closedErr wraps ErrClosed with why the connection ended.
func (c *Conn) closedErr() error {
	err := c.ended()
	if err == nil || errors.Is(err, transport.ErrClosed) {
		return transport.ErrClosed
	}
	return fmt.Errorf("%w: %w", transport.ErrClosed, err)
}

// classify turns a go-amqp error into the caller's error: a dead connection
// wraps ErrClosed.
func (c *Conn) classify(what string, err error) error {
	var ce *amqp.ConnError
	c.sessionLost(err)
	if errors.As(err, &ce) || c.ended() != nil {
		return fmt.Errorf("%s: %w", what, c.closedErr())
	}
	return fmt.Errorf("%s: %w", what, err)
}

// sessionLost ends the connection when err says the session ended (the
// broker ends a session on a protocol error, e.g. RabbitMQ 3.10's session
// process crashing on a publisher nack): every link of this Conn lived on it.
func (c *Conn) sessionLost(err error) bool {
	var se *amqp.SessionError
	if !errors.As(err, &se) {
		return false
	}
	c.fail(fmt.Errorf("%w: session ended: %w", transport.ErrClosed, err))
	go c.conn.Close()
	return true
}

func (c *Conn) nextToken() transport.Token { return transport.Token(c.token.Add(1)) }

// Info describes the broker, learnt from the open frame.
func (c *Conn) Info() transport.Info { return c.info }

// Events is the connection's ordered event stream.
func (c *Conn) Events() <-chan transport.Event { return c.events }

// Done is closed when the connection has ended.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err is why the connection ended.
func (c *Conn) Err() error { return c.ended() }

// BrokerID returns RabbitMQ's cluster name from the open frame. Other brokers
// say nothing usable over AMQP 1.0.
func (c *Conn) BrokerID(context.Context) (string, error) {
	if c.clusterName != "" {
		return c.clusterName, nil
	}
	return "", fmt.Errorf("%s (%s) does not tell its broker id over AMQP 1.0; configure it (--local-id/--remote-id)", c.uri, c.info.Server)
}

// Alarms implements transport.AlarmReporter: RabbitMQ's resource alarms, read
// from its management API. (RabbitMQ 3.10.8's AMQP 1.0 plugin blocks no
// publisher during a memory alarm: it accepts and routes what it is sent,
// measured in bridge TestRemoteAlarmIsReported. The alarms are read for a
// bridge that finds its remote holding messages all the same.)
func (c *Conn) Alarms(ctx context.Context) ([]string, error) {
	if c.topics == nil {
		if c.topicsErr != nil {
			return nil, c.topicsErr
		}
		return nil, fmt.Errorf("%s (%s) is not RabbitMQ: no alarms to read: %w", c.uri, c.info.Server, transport.ErrUnsupported)
	}
	return c.topics.mgmt.Alarms(ctx)
}

// QueueRoom implements transport.QueueLimiter: what a RabbitMQ queue takes
// before it refuses, read from the management API.
func (c *Conn) QueueRoom(ctx context.Context, d destination.Destination) (transport.QueueRoom, error) {
	if c.topics == nil {
		if c.topicsErr != nil {
			return transport.QueueRoom{}, c.topicsErr
		}
		return transport.QueueRoom{}, fmt.Errorf("%s (%s) is not RabbitMQ: %w", c.uri, c.info.Server, transport.ErrUnsupported)
	}
	return rabbitmq.QueueRoom(ctx, c.topics.mgmt, c.topics.vhost, d)
}

// Close makes a round trip (so the broker processed everything written
// before, as Sync), then closes the connection.
func (c *Conn) Close(ctx context.Context) error {
	if err := c.ended(); err != nil {
		if errors.Is(err, transport.ErrClosed) {
			return nil
		}
		return err
	}
	err := c.roundTrip(ctx)
	c.fail(transport.ErrClosed)
	cerr := make(chan error, 1)
	go func() { cerr <- c.conn.Close() }()
	if err != nil {
		return c.classify("closing "+c.uri.String(), err)
	}
	select {
	case <-cerr:
	case <-ctx.Done():
	}
	if c.topics != nil {
		// fail started deleting the topic queue; a failure is the caller's to
		// report (the queue would otherwise collect messages until swept).
		select {
		case <-c.topics.dropped:
			if c.topics.dropErr != nil {
				return fmt.Errorf("closing %s: %w", c.uri, c.topics.dropErr)
			}
		case <-ctx.Done():
		}
	}
	return nil
}

// Abort ends the connection at once; the broker takes unsettled deliveries back.
func (c *Conn) Abort() {
	c.fail(transport.ErrClosed)
	go c.conn.Close()
}
