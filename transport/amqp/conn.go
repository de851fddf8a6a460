// Package amqp is the AMQP 1.0 transport: a transport.Conn over
// github.com/Azure/go-amqp, shaped by what RabbitMQ 3.10's AMQP 1.0 plugin does.
//
// One AMQP connection carries a session per subscription (its receiver link
// and Sync's ping sender) and one for the sender links, one per destination
// sent to. A session per subscription because RabbitMQ 3.10 keeps what a
// detached link had been sent, unacknowledged, on the session's channel until
// the session ends, and ends a session when it refuses an attach on it: ending
// a subscription's session gives all of it back and touches no other. The
// senders' session is replaced after a refusal. RabbitMQ 3.10 backs an
// AMQP 1.0 session with one AMQP 0-9-1 channel and handles the session's
// frames one at a time, settling each disposition with a synchronous call to
// that channel (rabbit_amqp1_0_session_process); Sync relies on that. On
// RabbitMQ, topic subscriptions consume one queue of the connection, bound
// and deleted through the management API (topics.go).
//
// Order of events: a subscription's Confirmed comes before its deliveries, and
// its deliveries keep link order. go-amqp hands each link's frames to a
// goroutine of its own, so across links — and between deliveries and a
// Commit's or Sync's confirmation — events come in the order go-amqp passed
// them on, which can differ from the wire order by what was in flight
// between its goroutines.
package amqp

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/Azure/go-amqp"

	"github.com/brokernet/brokernet/destination"
	"github.com/brokernet/brokernet/internal/quickack"
	"github.com/brokernet/brokernet/transport"
)

var _ transport.Conn = (*Conn)(nil)

// maxCredit caps a subscription's link credit: go-amqp's session takes at most
// 5000 incoming transfers before the peer must wait (its fixed incoming window),
// and a larger credit would only sit in go-amqp's prefetch queue.
const maxCredit = 5000

// syncAddress is where Sync's ping goes: an exchange every RabbitMQ vhost has,
// with a routing key nothing binds, so the ping is confirmed and dropped.
const syncAddress = "/exchange/amq.direct/brokernet.sync.nowhere"

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

// durableTerminus: RabbitMQ 3.10 declares the queue of a "/queue/NAME" address
// durable only when the link's terminus is durable; otherwise it declares it
// exclusive and auto-delete, bound to the session's lifetime
// (rabbit_amqp1_0_link_util:durable/1 feeding rabbit_routing_util's
// queue_declare_method), unlike STOMP's durable default. Queue sources and
// every target therefore ask for a durable terminus; topic sources do not, so
// that their server-named queue goes with the link, as a STOMP topic
// subscriber's does.

// subscription is one receiver link.
type subscription struct {
	id      string
	dest    destination.Destination
	rcv     *amqp.Receiver // nil while attaching
	closing bool           // Unsubscribe was called (guarded by Conn.mu)
	// unsettled are the deliveries handed out as events and not yet settled
	// (guarded by Conn.mu); Unsubscribe releases them.
	unsettled map[*amqp.Message]struct{}
	// stop ends the pump's wait for deliveries; pumped is closed when the
	// pump has returned (or was never started), so that what the link still
	// buffers can be taken and released by one goroutine.
	stop   context.CancelFunc
	life   context.Context
	pumped chan struct{}
	// key is the routing key bound for a topic subscription on the
	// connection's shared topic queue, "" for other subscriptions.
	key string
	// sess is the subscription's own session and ping Sync's sender on it
	// (set with rcv); dirty says a disposition was written on it since the
	// last round trip (guarded by Conn.mu).
	sess  *amqp.Session
	ping  *amqp.Sender
	dirty bool
	// credit is the link's credit accounting (credit.go; guarded by Conn.mu).
	credit *linkCredit
}

// delivery is the Ref of a Delivery event.
type delivery struct {
	sub *subscription
	msg *amqp.Message
}

// pending is one message of the current send batch.
type pending struct {
	receipt *amqp.SendReceipt // nil when refused at once (err says why)
	err     error
}

// DialConn connects to u, opens a session and learns who the broker is.
func DialConn(ctx context.Context, u URI) (*Conn, error) {
	opts := &amqp.ConnOptions{
		ContainerID:  u.ContainerID,
		IdleTimeout:  u.IdleTimeout,
		MaxFrameSize: 1 << 20,
		Properties:   map[string]any{"product": "brokernet"},
	}
	if opts.ContainerID == "" {
		opts.ContainerID = "brokernet-" + randomHex(6)
	}
	if u.IdleTimeout == 0 {
		opts.IdleTimeout = -1 // go-amqp: <0 disables; 0 would mean its 1 min default
	}
	if u.VHost != "" {
		// RabbitMQ picks the vhost from the open frame's hostname "vhost:NAME".
		opts.HostName = "vhost:" + u.VHost
	}
	if u.User != "" {
		opts.SASLType = amqp.SASLTypePlain(u.User, u.Password)
	} else {
		opts.SASLType = amqp.SASLTypeAnonymous()
	}
	if opts.HostName == "" {
		opts.HostName = u.Host
	}
	// brokernet dials the socket itself to know its local address: RabbitMQ
	// names a connection "CLIENT:PORT -> SERVER:PORT", and the management API
	// shows that name on every consumer of the connection.
	nd := &net.Dialer{KeepAlive: 30 * time.Second}
	nc, err := nd.DialContext(ctx, "tcp", u.Addr())
	if err != nil {
		return nil, fmt.Errorf("dialing %s: %w", u, err)
	}
	// A broker writing with Nagle's algorithm on would otherwise wait for
	// our delayed ACKs (see quickack); RabbitMQ's default is nodelay, others'
	// may not be.
	nc = quickack.Wrap(nc)
	if u.TLS {
		cfg, terr := u.tlsConfig()
		if terr != nil {
			nc.Close()
			return nil, fmt.Errorf("dialing %s: %w", u, terr)
		}
		tc := tls.Client(nc, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			tc.Close()
			return nil, fmt.Errorf("dialing %s: %w", u, err)
		}
		nc = tc
	}
	connName := nc.LocalAddr().String() + " -> " + nc.RemoteAddr().String()
	// Credentials go through SASLType, never in an address, so no error of
	// go-amqp can repeat them. NewConn owns nc from here on.
	ac, err := amqp.NewConn(ctx, nc, opts)
	if err != nil {
		return nil, fmt.Errorf("dialing %s: %w", u, err)
	}
	sendSess, err := ac.NewSession(ctx, nil)
	if err != nil {
		ac.Close()
		return nil, fmt.Errorf("opening sessions on %s: %w", u, err)
	}
	c := &Conn{
		uri:      u,
		conn:     ac,
		sendSess: sendSess,
		q:        newEventQueue(),
		events:   make(chan transport.Event),
		done:     make(chan struct{}),
		subs:     map[string]*subscription{},
		syncSig:  make(chan struct{}, 1),
		senders:  map[string]*amqp.Sender{},
	}
	c.life, c.cancel = context.WithCancel(context.Background())
	c.info, c.clusterName = describe(ac.Properties(), u.Flavour)
	c.info.ConnectionID = connName
	if c.info.Flavour == transport.RabbitMQ {
		c.topics, c.topicsErr = newTopicQueue(u)
		if c.topicsErr == nil {
			go c.sweepTopicQueues()
		}
	}
	go c.q.run(c.events, c.done)
	go c.watch()
	go c.syncLoop()
	return c, nil
}

// describe reads the open frame's properties; RabbitMQ 3.10 sends product
// "RabbitMQ", version and cluster_name (verified-here.md).
func describe(props map[string]any, forced transport.Flavour) (transport.Info, string) {
	str := func(k string) string { s, _ := props[k].(string); return s }
	info := transport.Info{Protocol: "amqp", Flavour: forced, KeepsID: keepsAny}
	product, version := str("product"), str("version")
	info.Server = product
	if version != "" {
		info.Server += "/" + version
	}
	if info.Flavour == transport.UnknownFlavour {
		switch product {
		case "RabbitMQ":
			info.Flavour = transport.RabbitMQ
		case "apache-activemq-artemis":
			info.Flavour = transport.Artemis
		case "ActiveMQ":
			info.Flavour = transport.ActiveMQ
		}
	}
	return info, str("cluster_name")
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
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

// sweepTopicQueues deletes, in the background, the unused topic queues that
// earlier connections left (topics.go). Best effort: without the management
// API nothing is swept.
func (c *Conn) sweepTopicQueues() {
	ctx, cancel := context.WithTimeout(context.Background(), 3*mgmtTimeout)
	defer cancel()
	_, _ = c.topics.sweep(ctx)
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

// WatchConsumers is unsupported: RabbitMQ 3.10's event exchange carries no
// event data over AMQP 1.0 (verified-here.md); its demand is read over STOMP.
func (c *Conn) WatchConsumers(context.Context) error {
	return fmt.Errorf("consumer advisories over AMQP 1.0: %w", transport.ErrUnsupported)
}

// OwnConsumer reports false: RabbitMQ 3.10 tags an AMQP 1.0 consumer "ctag-"
// and the link handle as 4 raw bytes ("ctag-\x00\x00\x00\x00"), the same on
// every connection. (Topic subscriptions consume the connection's own
// "bn_amqp.….topics" queue, which demand sources recognise by its name;
// topics.go.) What identifies this connection's consumers is Info().ConnectionID, which is
// the connection name the management API shows on them
// (channel_details.connection_name of /api/consumers).
func (c *Conn) OwnConsumer(string) bool { return false }

// Subscribe attaches a receiver link in the background; its Confirmed or
// Refused event follows. Link credit is managed by hand: the prefetch at
// attach, then what was settled, granted only once the link's credit is used
// up (credit.go: RabbitMQ 3.10 over-delivers on a flow that arrives while it
// is sending, and go-amqp's credit count wraps on that, which stalled links). The receiver settles first (the
// default): RabbitMQ 3.10 refuses rcv-settle-mode second on its outgoing links.
//
// A refused attach (e.g. a queue that exists with other arguments, or another
// connection's exclusive queue) is Refused; RabbitMQ ends the session with
// it, which is the subscription's own, so the other subscriptions live on.
//
// RabbitMQ 3.10 has no selectors and no consumer priority over AMQP 1.0 (its
// outgoing link passes only a stream offset as consumer argument): a selector
// is refused with ErrUnsupported, Priority is ignored.
func (c *Conn) Subscribe(ctx context.Context, sub transport.Subscription) (transport.Token, error) {
	if err := c.ended(); err != nil {
		return 0, fmt.Errorf("subscribing %s: %w", sub.ID, c.closedErr())
	}
	if sub.Selector != "" {
		return 0, fmt.Errorf("subscription %s to %s: selector %q: AMQP 1.0 on %s has no selectors: %w",
			sub.ID, sub.Destination, sub.Selector, c.info.Server, transport.ErrUnsupported)
	}
	if sub.DurableName != "" {
		return 0, fmt.Errorf("subscription %s to %s: durable subscription %q over AMQP 1.0: %w",
			sub.ID, sub.Destination, sub.DurableName, transport.ErrUnsupported)
	}
	addr, err := address(sub.Destination, true)
	if err != nil {
		return 0, fmt.Errorf("subscription %s: %w", sub.ID, err)
	}
	var key string
	if sub.Destination.Kind == destination.Topic && c.info.Flavour == transport.RabbitMQ && !c.uri.ServerNamedTopics {
		// The connection's shared topic queue, bound with the key (topics.go).
		if c.topicsErr != nil {
			return 0, fmt.Errorf("subscription %s to %s: the topic queue needs the RabbitMQ management API: %w",
				sub.ID, sub.Destination, c.topicsErr)
		}
		if key, err = destination.RabbitKey(sub.Destination.Name); err != nil {
			return 0, fmt.Errorf("subscription %s: %w", sub.ID, err)
		}
		addr = c.topics.address()
	}
	credit := min(max(sub.Prefetch, 1), maxCredit)
	s := &subscription{id: sub.ID, dest: sub.Destination, key: key, unsettled: map[*amqp.Message]struct{}{},
		pumped: make(chan struct{}), credit: newLinkCredit(uint32(credit))}
	s.life, s.stop = context.WithCancel(c.life)
	c.mu.Lock()
	if _, dup := c.subs[sub.ID]; dup {
		c.mu.Unlock()
		return 0, fmt.Errorf("subscription %s: already open", sub.ID)
	}
	c.subs[sub.ID] = s
	c.mu.Unlock()
	tok := c.nextToken()
	go c.attach(s, addr, uint32(credit), tok)
	return tok, nil
}

// attach opens s's receiver link and starts its pump.
func (c *Conn) attach(s *subscription, addr string, credit uint32, tok transport.Token) {
	ctx, cancel := context.WithTimeout(c.life, linkTimeout)
	defer cancel()
	opts := &amqp.ReceiverOptions{
		Credit: -1,
		Name:   "brokernet-" + s.id + "-" + randomHex(4),
	}
	if s.dest.Kind == destination.Queue {
		opts.SourceDurability = amqp.DurabilityUnsettledState // see durableTerminus
	}
	var (
		rcv  *amqp.Receiver
		ping *amqp.Sender
	)
	if s.key != "" {
		// Held until the subscription is bound and confirmed (or refused),
		// so that no release deletes the queue or unbinds the key meanwhile.
		c.topics.mu.Lock()
		defer c.topics.mu.Unlock()
		c.topics.subs++
		c.topics.used = true
	}
	sess, err := c.conn.NewSession(ctx, nil)
	if err == nil {
		rcv, err = sess.NewReceiver(ctx, addr, opts)
		if err == nil {
			ping, err = sess.NewSender(ctx, syncAddress, nil)
		}
		if err == nil && s.key != "" {
			err = c.topics.bind(ctx, s.dest, s.key)
		}
		if err != nil {
			if s.key != "" {
				// Ended before the queue may be deleted, so that no link of
				// ours is on it.
				c.endSession(sess)
			} else {
				go c.endSession(sess)
			}
		}
	}
	if err != nil {
		if s.key != "" {
			_ = c.topics.release(c.life, s.key, false)
		}
		s.stop()
		close(s.pumped)
		c.mu.Lock()
		if c.subs[s.id] == s {
			delete(c.subs, s.id)
		}
		c.mu.Unlock()
		if c.ended() == nil {
			c.q.push(transport.Event{Kind: transport.Refused, Token: tok,
				Err: fmt.Errorf("subscribing %s to %s (%s): %w", s.id, s.dest, addr, err)})
		}
		return
	}
	c.mu.Lock()
	s.rcv, s.sess, s.ping = rcv, sess, ping
	closing := s.closing
	c.mu.Unlock()
	// Confirmed is queued before the pump starts, so it precedes the deliveries.
	c.q.push(transport.Event{Kind: transport.Confirmed, Token: tok})
	if closing {
		// Unsubscribed while attaching: the link never had credit, so nothing
		// was delivered on it.
		close(s.pumped)
		if s.key != "" {
			c.endSession(sess)
			_ = c.topics.release(c.life, s.key, true)
			return
		}
		go c.endSession(sess)
		return
	}
	// Credit only now: a link given credit before Unsubscribe could see it
	// would take deliveries that nobody releases.
	if err := rcv.IssueCredit(credit); err != nil {
		close(s.pumped)
		c.fail(fmt.Errorf("subscription %s to %s: issuing credit: %w", s.id, s.dest, err))
		go c.conn.Close()
		return
	}
	go c.pump(s, rcv)
}

// pump moves s's deliveries, in link order, into the event stream.
func (c *Conn) pump(s *subscription, rcv *amqp.Receiver) {
	defer close(s.pumped)
	rabbit := c.info.Flavour == transport.RabbitMQ
	for {
		msg, err := rcv.Receive(s.life, nil)
		if err != nil {
			c.mu.Lock()
			closing := s.closing
			c.mu.Unlock()
			if closing || c.sessionLost(err) || c.ended() != nil {
				return
			}
			// The broker detached the link (queue deleted, …): end the whole
			// connection, so that the bridge redials and resubscribes rather
			// than wait on a subscription that silently stopped.
			c.fail(fmt.Errorf("subscription %s to %s: link ended: %w", s.id, s.dest, err))
			go c.conn.Close()
			return
		}
		c.mu.Lock()
		closing := s.closing
		grant := s.credit.receive()
		if !closing {
			s.unsettled[msg] = struct{}{}
		}
		c.mu.Unlock()
		if grant > 0 && !closing {
			if err := rcv.IssueCredit(grant); err != nil {
				c.fail(fmt.Errorf("subscription %s to %s: issuing credit: %w", s.id, s.dest, err))
				go c.conn.Close()
				return
			}
		}
		if closing {
			// Unsubscribe is under way: give it back rather than hand it out.
			_ = rcv.ReleaseMessage(c.life, msg)
			continue
		}
		m := fromAMQP(msg, s.dest, rabbit)
		if s.key != "" {
			c.topics.route(m, msg)
		}
		c.q.push(transport.Event{
			Kind: transport.Delivery,
			Sub:  s.id,
			Msg:  m,
			Ref:  &delivery{sub: s, msg: msg},
		})
	}
}

// Unsubscribe releases the subscription's unsettled deliveries and ends its
// session. Ending the session, not only detaching the link, is what gives
// back what the link was sent and nobody took yet: RabbitMQ 3.10 cancels a
// detached AMQP 1.0 link's consumer with basic.cancel, which leaves its
// unacknowledged deliveries held by the session's channel until the session
// ends (measured: a queue's messages prefetched by a link detached that way
// reached no other consumer while the connection lived). Draining the link's
// credit first is no way out: 3.10's session process crashes on it
// (function_clause on send_drained in rabbit_classic_queue, measured).
func (c *Conn) Unsubscribe(ctx context.Context, id string) error {
	c.mu.Lock()
	s, ok := c.subs[id]
	if !ok {
		c.mu.Unlock()
		return fmt.Errorf("unsubscribing %s: no such subscription", id)
	}
	delete(c.subs, id)
	s.closing = true
	rcv := s.rcv
	held := make([]*amqp.Message, 0, len(s.unsettled))
	for m := range s.unsettled {
		held = append(held, m)
	}
	clear(s.unsettled)
	c.mu.Unlock()
	s.stop()
	if rcv == nil {
		return nil // attach will see closing and end the session
	}
	for _, m := range held {
		if err := rcv.ReleaseMessage(ctx, m); err != nil {
			return c.classify("unsubscribing "+id, err)
		}
	}
	go func() {
		select {
		case <-s.pumped:
		case <-c.done:
			return // the topic queue goes with the connection
		}
		c.endSession(s.sess)
		if s.key != "" {
			// Best effort: a queue left is swept by a later connection, a
			// binding left goes with the queue.
			c.topics.mu.Lock()
			_ = c.topics.release(c.life, s.key, true)
			c.topics.mu.Unlock()
		}
	}()
	return nil
}

// endSession ends sess, bounded; the broker takes back what was delivered on
// it and not settled.
func (c *Conn) endSession(sess *amqp.Session) {
	ctx, cancel := context.WithTimeout(c.life, linkTimeout)
	defer cancel()
	_ = sess.Close(ctx)
}

// DestroyDurable is unsupported: durable subscriptions are refused over AMQP 1.0.
func (c *Conn) DestroyDurable(_ context.Context, sub transport.Subscription) error {
	return fmt.Errorf("destroying durable subscription %q over AMQP 1.0: %w", sub.DurableName, transport.ErrUnsupported)
}

// Settle accepts, releases or rejects deliveries of subscription sub, then
// counts them towards the link's next credit (credit.go). The receiver settles first, so each
// disposition is settled when written and RabbitMQ sends no answer (Sync is
// how to know it was processed). RabbitMQ 3.10 maps accepted to basic.ack,
// released to basic.reject requeue=true, rejected to requeue=false, and closes
// the session on modified (rabbit_amqp1_0_session_process), which is never sent.
func (c *Conn) Settle(ctx context.Context, sub string, refs []transport.Ref, outcome transport.Outcome) error {
	if c.ended() != nil {
		return fmt.Errorf("settling on %s: %w", sub, c.closedErr())
	}
	c.mu.Lock()
	s, ok := c.subs[sub]
	var rcv *amqp.Receiver
	if ok {
		rcv = s.rcv
	}
	gone := !ok && unsubscribed(refs)
	c.mu.Unlock()
	if !ok || rcv == nil {
		if gone {
			// Unsubscribe already gave these back to the broker.
			return nil
		}
		return fmt.Errorf("settling on %s: no such subscription", sub)
	}
	settled := 0
	var err error
	for _, r := range refs {
		d, ok := r.(*delivery)
		if !ok || d.sub != s {
			err = fmt.Errorf("settling on %s: a delivery of another subscription (%T)", sub, r)
			break
		}
		switch outcome {
		case transport.Accepted:
			err = rcv.AcceptMessage(ctx, d.msg)
		case transport.Released:
			err = rcv.ReleaseMessage(ctx, d.msg)
		case transport.Rejected:
			err = rcv.RejectMessage(ctx, d.msg, nil)
		default:
			err = fmt.Errorf("settling on %s: unknown outcome %d", sub, outcome)
		}
		if err != nil {
			err = c.classify("settling on "+sub, err)
			break
		}
		c.mu.Lock()
		delete(s.unsettled, d.msg)
		s.dirty = true
		c.mu.Unlock()
		settled++
	}
	c.mu.Lock()
	grant := s.credit.settle(settled)
	c.mu.Unlock()
	if grant > 0 {
		if cerr := rcv.IssueCredit(grant); cerr != nil && err == nil {
			err = c.classify("issuing credit on "+sub, cerr)
		}
	}
	return err
}

// unsubscribed reports whether every ref is a delivery of a subscription
// that Unsubscribe closed. The caller holds mu.
func unsubscribed(refs []transport.Ref) bool {
	for _, r := range refs {
		d, ok := r.(*delivery)
		if !ok || !d.sub.closing {
			return false
		}
	}
	return true
}

// Send writes m as an unsettled transfer and adds its receipt to the current
// batch; it blocks only while the link has no credit. A sender link the broker
// refuses at attach (e.g. amqp:not-found for a missing exchange) makes the
// message Rejected in its batch rather than failing the call.
func (c *Conn) Send(ctx context.Context, m *transport.Message) error {
	if c.ended() != nil {
		return fmt.Errorf("sending to %s: %w", m.Destination, c.closedErr())
	}
	addr, err := address(m.Destination, false)
	if err != nil {
		return fmt.Errorf("sending: %w", err)
	}
	msg := toAMQP(m, addr, time.Now())
	for attempt := 0; ; attempt++ {
		snd, err := c.sender(ctx, addr)
		if err != nil {
			var ae *amqp.Error
			if errors.As(err, &ae) && c.ended() == nil {
				c.batch = append(c.batch, pending{err: fmt.Errorf("attaching to %s: %w", addr, err)})
				return nil
			}
			return c.classify("attaching to "+addr, err)
		}
		rc, err := snd.SendWithReceipt(ctx, msg, nil)
		if err == nil {
			c.batch = append(c.batch, pending{receipt: &rc})
			return nil
		}
		var le *amqp.LinkError
		if errors.As(err, &le) && attempt == 0 && c.ended() == nil {
			// The broker detached this sender: attach a new one, once.
			delete(c.senders, addr)
			continue
		}
		return c.classify("sending to "+addr, err)
	}
}

// sender returns the sender link for addr, attaching it on first use. Senders
// use mixed settlement (go-amqp's default) and send every transfer unsettled;
// RabbitMQ 3.10 then puts the channel in confirm mode and answers with the
// outcome once the message is routed and, if persistent, stored
// (rabbit_amqp1_0_incoming_link).
func (c *Conn) sender(ctx context.Context, addr string) (*amqp.Sender, error) {
	if s, ok := c.senders[addr]; ok {
		return s, nil
	}
	s, err := c.sendSess.NewSender(ctx, addr, &amqp.SenderOptions{TargetDurability: amqp.DurabilityUnsettledState})
	var ae *amqp.Error
	if errors.As(err, &ae) {
		// The broker refused the attach, and RabbitMQ 3.10 ends the session
		// with it: its sender links are gone (their unconfirmed messages come
		// out Released); later senders go on a fresh session.
		clear(c.senders)
		ns, serr := c.conn.NewSession(ctx, nil)
		if serr != nil {
			return nil, c.classify("opening a session", serr)
		}
		c.sendSess = ns
	}
	if err != nil {
		return nil, err
	}
	c.senders[addr] = s
	return s, nil
}

// Commit ends the batch; a goroutine waits for its receipts and queues the
// Confirmed event after the previous batch's, so confirmations keep Commit order.
func (c *Conn) Commit(ctx context.Context) (transport.Token, error) {
	if c.ended() != nil {
		return 0, fmt.Errorf("committing: %w", c.closedErr())
	}
	tok := c.nextToken()
	b := c.batch
	c.batch = nil
	prev := c.lastBatch
	mine := make(chan struct{})
	c.lastBatch = mine
	go c.confirm(tok, b, prev, mine)
	return tok, nil
}

// confirm waits for a batch's outcomes. A transfer the broker released or
// modified is Released (send it again later); rejected is Rejected with the
// broker's error condition; a receipt whose link ended without an outcome is
// Released, so nothing is counted as taken that the broker did not accept.
// When the connection ends no event is queued: the batch stays unconfirmed.
func (c *Conn) confirm(tok transport.Token, b []pending, prev <-chan struct{}, mine chan struct{}) {
	defer close(mine)
	var outcomes []transport.SendOutcome
	all := true
	for i, p := range b {
		o := transport.SendOutcome{Outcome: transport.Accepted}
		if p.receipt == nil {
			o = transport.SendOutcome{Outcome: transport.Rejected, Err: p.err}
		} else {
			state, err := p.receipt.Wait(c.life)
			switch st := state.(type) {
			case nil:
				// A lost connection confirms nothing; a lost sender session or
				// link (after a refused attach) makes the message Released.
				var ce *amqp.ConnError
				if errors.As(err, &ce) || c.ended() != nil {
					return
				}
				o = transport.SendOutcome{Outcome: transport.Released, Err: fmt.Errorf("no outcome: %w", err)}
			case *amqp.StateAccepted:
			case *amqp.StateRejected:
				o = transport.SendOutcome{Outcome: transport.Rejected, Err: rejectErr(st.Error)}
			case *amqp.StateReleased:
				o = transport.SendOutcome{Outcome: transport.Released}
			case *amqp.StateModified:
				o = transport.SendOutcome{Outcome: transport.Released}
			default:
				o = transport.SendOutcome{Outcome: transport.Released, Err: fmt.Errorf("unexpected delivery state %T", state)}
			}
		}
		if o.Outcome != transport.Accepted && all {
			all = false
			outcomes = make([]transport.SendOutcome, i, len(b))
		}
		if !all {
			outcomes = append(outcomes, o)
		}
	}
	if prev != nil {
		select {
		case <-prev:
		case <-c.done:
			return
		}
	}
	if c.ended() != nil {
		return
	}
	c.q.push(transport.Event{Kind: transport.Confirmed, Token: tok, Outcomes: outcomes})
}

func rejectErr(e *amqp.Error) error {
	if e == nil {
		return errors.New("rejected by the broker")
	}
	return fmt.Errorf("rejected by the broker: %w", e)
}

// Sync returns a token confirmed once RabbitMQ has processed every
// disposition of earlier Settles. AMQP 1.0 gives a settled disposition no answer, so Sync
// makes a round trip through the same session instead: it sends one unsettled
// empty message to amq.direct with a routing key nothing is bound to, and
// waits for its outcome, on each subscription's session that settled
// something since the last round trip. RabbitMQ 3.10 handles a session's frames in order in
// one process, settling each disposition with a synchronous call to the
// session's channel (basic.ack / basic.reject, rabbit_amqp1_0_session_process)
// and publishing each transfer on that same channel in confirm mode; so the
// ping's "accepted" (the channel's publisher confirm of an unroutable message)
// proves every earlier disposition was handed to its queue.
//
// (Attaching and detaching a link would be the protocol's natural round trip,
// but RabbitMQ 3.10 answers a detach without closed=true, which go-amqp v1.5.0
// treats as an error and waits on forever.)
func (c *Conn) Sync(ctx context.Context) (transport.Token, error) {
	if c.ended() != nil {
		return 0, fmt.Errorf("syncing: %w", c.closedErr())
	}
	tok := c.nextToken()
	c.mu.Lock()
	c.syncing = append(c.syncing, tok)
	c.mu.Unlock()
	select {
	case c.syncSig <- struct{}{}:
	default:
	}
	return tok, nil
}

// syncLoop answers Sync tokens: one round trip covers every token requested
// before it started.
func (c *Conn) syncLoop() {
	for {
		select {
		case <-c.syncSig:
		case <-c.done:
			return
		}
		c.mu.Lock()
		toks := c.syncing
		c.syncing = nil
		c.mu.Unlock()
		if len(toks) == 0 {
			continue
		}
		err := c.roundTrip(c.life)
		if c.ended() != nil {
			return
		}
		for _, t := range toks {
			if err != nil {
				c.q.push(transport.Event{Kind: transport.Refused, Token: t, Err: fmt.Errorf("syncing: %w", err)})
			} else {
				c.q.push(transport.Event{Kind: transport.Confirmed, Token: t})
			}
		}
	}
}

// roundTrip sends Sync's ping on the session of every subscription that
// settled something since the last round trip, and waits for their outcomes.
// A subscription closed meanwhile needs none: its session's end comes after
// its dispositions. It is called by syncLoop, and by Close.
func (c *Conn) roundTrip(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, linkTimeout)
	defer cancel()
	c.pingMu.Lock()
	defer c.pingMu.Unlock()
	c.mu.Lock()
	var dirty []*subscription
	for _, s := range c.subs {
		if s.dirty && s.ping != nil {
			s.dirty = false
			dirty = append(dirty, s)
		}
	}
	c.mu.Unlock()
	receipts := make([]amqp.SendReceipt, len(dirty))
	errs := make([]error, len(dirty))
	for i, s := range dirty {
		receipts[i], errs[i] = s.ping.SendWithReceipt(ctx, &amqp.Message{Value: ""}, nil)
	}
	for i, s := range dirty {
		if errs[i] == nil {
			var st amqp.DeliveryState
			if st, errs[i] = receipts[i].Wait(ctx); errs[i] == nil {
				if _, ok := st.(*amqp.StateAccepted); !ok {
					errs[i] = fmt.Errorf("sync ping to %s: outcome %T", syncAddress, st)
				}
			}
		}
		if errs[i] != nil && !c.unsubscribed(s) {
			return fmt.Errorf("subscription %s: %w", s.id, errs[i])
		}
	}
	return nil
}

// unsubscribed reports whether s was closed.
func (c *Conn) unsubscribed(s *subscription) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return s.closing
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

// keepsAny is Info.KeepsID: properties message-id takes any id.
func keepsAny(string) bool { return true }
