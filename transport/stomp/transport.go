package stomp

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
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

// Subscription ids of the advisory subscriptions a BrokerConn makes.
const (
	advisorySubQueue = "bn-adv-queue"
	advisorySubTopic = "bn-adv-topic"
	destSubQueue     = "bn-dest-queue"
	destSubTopic     = "bn-dest-topic"
	identitySub      = "bn-identity"
)

// connectionAdvisory is where ActiveMQ announces connections. It replays one
// for every open connection — ours included — to a new subscriber, with the
// broker's id as originBrokerId.
const connectionAdvisory = "/topic/ActiveMQ.Advisory.Connection"

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

// heldAck is the newest cumulative ACK of one subscription, held while a Sync
// is on the wire.
type heldAck struct {
	sub        string
	ref        ackRef
	persistent bool // it acknowledges a persistent message
}

// earlyReceipt is a receipt Flush put on a held SEND (see BrokerConn.early).
type earlyReceipt struct {
	arrived bool
	waiting []transport.Token // Commits it confirms, waiting for it
}

// tailFrame is the held last frame (see BrokerConn.tail).
type tailFrame struct {
	f *frame.Frame
	// receipt says the next Sync (an ACK of no persistent message) or Commit
	// (a SEND outside a transaction) may put its receipt on f.
	receipt bool
}

type subInfo struct {
	// persistent counts the persistent messages delivered (ackRef.persistent).
	persistent  uint64
	individual  bool
	advisory    bool
	destAdvisor bool // destination advisories
	browser     bool // a queue browser (Browse)
}

// RabbitMQ shows the bridge's own consumers in its events; brokernet's naming
// convention (advisory.BridgeTagPrefix for subscription ids, which every
// subscription id here already starts with, and rabbitmq.BridgeQueuePrefix for
// the queues it declares) keeps them from being taken for demand.

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

// ackRef is what an ACK needs of a MESSAGE: its STOMP 1.2 "ack" header, or for
// STOMP 1.1 its subscription and message-id.
type ackRef struct {
	id, sub, msgID string
	// persistent is how many persistent messages the subscription had
	// delivered up to and including this one: a cumulative ACK of it
	// acknowledges a persistent message iff that exceeds the count of the
	// subscription's previous ACK.
	persistent uint64
}

func (a ackRef) frame(cmd string) *frame.Frame {
	if a.id != "" {
		return frame.New(cmd, frame.Id, a.id)
	}
	return frame.New(cmd, frame.Subscription, a.sub, frame.MessageId, a.msgID)
}

// BrokerID returns the broker's id. ActiveMQ tells it on its connection
// advisory (originBrokerId); other brokers do not over STOMP.
func (b *BrokerConn) BrokerID(ctx context.Context) (string, error) {
	b.idOnce.Do(func() { b.brokerID, b.idErr = b.learnBrokerID(ctx) })
	return b.brokerID, b.idErr
}

func (b *BrokerConn) learnBrokerID(ctx context.Context) (string, error) {
	if b.c.Flavour() == RabbitMQ {
		// RabbitMQ tells its cluster name through the management API.
		u := b.c.URI()
		m, err := mgmt.New(cmp.Or(u.Management, mgmt.DefaultURL(u.Host)), u.Login, u.Passcode, nil)
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

// Subscribe sends SUBSCRIBE with a receipt that arrives as Confirmed. A refused
// SUBSCRIBE comes back as an ERROR frame, which ends the connection (STOMP has
// no per-request refusal).
func (b *BrokerConn) Subscribe(ctx context.Context, sub transport.Subscription) (transport.Token, error) {
	ack := "client"
	if sub.Ack == transport.Individual {
		ack = "client-individual"
	}
	dest := sub.Destination.StompPath()
	if b.c.Flavour() == RabbitMQ {
		var err error
		if dest, err = destination.ToRabbit(sub.Destination, destination.RabbitSTOMP); err != nil {
			return 0, fmt.Errorf("subscribing on %s: %w", b.c.URI(), err)
		}
	}
	f := frame.New(frame.SUBSCRIBE,
		frame.Id, sub.ID,
		frame.Destination, dest,
		frame.Ack, ack)
	switch b.c.Flavour() {
	case RabbitMQ:
		f.Header.Add("prefetch-count", strconv.Itoa(sub.Prefetch))
		if sub.Priority != 0 {
			// Ignored by RabbitMQ 3.10's STOMP plugin (verified-here.md); newer
			// versions honour it.
			f.Header.Add("x-priority", strconv.Itoa(sub.Priority))
		}
		if sub.Destination.Kind == destination.Topic {
			// The queue RabbitMQ binds to amq.topic for this subscription: named,
			// so that its binding events show it as the bridge's own. All
			// non-durable topic subscriptions of a connection share one queue,
			// bound once per routing key: RabbitMQ puts a message in a queue once
			// however many of its bindings match (prices.eu and prices.*), and
			// its delivery ids differ per copy, so copies in separate queues
			// could not be told apart.
			q := rabbitmq.BridgeQueuePrefix + sanitizeQueue(b.c.Session()) + ".topics"
			if sub.DurableName != "" {
				q = rabbitmq.BridgeQueuePrefix + sanitizeQueue(sub.DurableName)
				f.Header.Add("durable", "true")
				f.Header.Add("auto-delete", "false")
			}
			f.Header.Add("x-queue-name", q)
		}
	default:
		f.Header.Add("activemq.prefetchSize", strconv.Itoa(sub.Prefetch))
		f.Header.Add("activemq.priority", strconv.Itoa(sub.Priority))
		if sub.DurableName != "" {
			f.Header.Add("activemq.subscriptionName", sub.DurableName)
		}
		// ActiveMQ sets these ConsumerInfo properties from activemq.* headers
		// (ProtocolConverter, IntrospectionSupport; activemq-network.md §6.3).
		if sub.Exclusive {
			f.Header.Add("activemq.exclusive", "true")
		}
		if sub.Retroactive {
			f.Header.Add("activemq.retroactive", "true")
		}
	}
	if sub.Selector != "" {
		if !b.Info().Selectors {
			return 0, fmt.Errorf("subscribing to %s: %s has no selectors: %w", sub.Destination, b.c.Server(), transport.ErrUnsupported)
		}
		f.Header.Add("selector", sub.Selector)
	}
	b.mu.Lock()
	b.subs[sub.ID] = subInfo{individual: sub.Ack == transport.Individual}
	b.mu.Unlock()
	return b.streamReceipt(ctx, f)
}

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

// Unsubscribe sends UNSUBSCRIBE; the broker takes back what was not acknowledged.
func (b *BrokerConn) Unsubscribe(ctx context.Context, id string) error {
	b.mu.Lock()
	delete(b.subs, id)
	b.mu.Unlock()
	b.smu.Lock()
	delete(b.acked, id)
	b.smu.Unlock()
	// An ACK held for it (see Sync) goes first: after the UNSUBSCRIBE the
	// broker would refuse it.
	if a, ok := b.takeHeld(id); ok {
		if err := b.write(ctx, a.frame(frame.ACK)); err != nil {
			return err
		}
	}
	return b.write(ctx, frame.New(frame.UNSUBSCRIBE, frame.Id, id))
}

// browserHeader asks ActiveMQ for a queue browser on SUBSCRIBE; on a MESSAGE
// its value "end" marks the end of the browse (ActiveMQ's STOMP
// ProtocolConverter and StompSubscription, since 5.6).
const browserHeader = "browser"

// Browse opens an ActiveMQ queue browser: SUBSCRIBE with browser:true, ack
// auto (a browser takes nothing, so there is nothing to settle).
func (b *BrokerConn) Browse(ctx context.Context, id string, queue destination.Destination, selector string, max int) error {
	if b.c.Flavour() != ActiveMQ {
		return fmt.Errorf("browsing %s on %s: %w", queue, b.c.Server(), transport.ErrUnsupported)
	}
	if queue.Kind != destination.Queue {
		return fmt.Errorf("browsing %s: only queues can be browsed", queue)
	}
	f := frame.New(frame.SUBSCRIBE, frame.Id, id, frame.Destination, queue.StompPath(),
		frame.Ack, "auto", browserHeader, "true", "activemq.prefetchSize", strconv.Itoa(max))
	if selector != "" {
		f.Header.Add("selector", selector)
	}
	b.mu.Lock()
	b.subs[id] = subInfo{browser: true}
	b.mu.Unlock()
	return b.write(ctx, f)
}

// DestroyDurable removes a durable subscription (ActiveMQ: UNSUBSCRIBE carrying
// activemq.subscriptionName, on a connection with the subscription's client-id).
func (b *BrokerConn) DestroyDurable(ctx context.Context, sub transport.Subscription) error {
	f := frame.New(frame.UNSUBSCRIBE, frame.Id, sub.ID)
	switch b.c.Flavour() {
	case RabbitMQ:
		// RabbitMQ deletes a durable subscription's queue on an UNSUBSCRIBE
		// with the subscription's durable headers.
		f.Header.Add("durable", "true")
		f.Header.Add("persistent", "true")
		f.Header.Add("x-queue-name", rabbitmq.BridgeQueuePrefix+sanitizeQueue(sub.DurableName))
	default:
		f.Header.Add("activemq.subscriptionName", sub.DurableName)
	}
	return b.write(ctx, f)
}

// WatchConsumers subscribes to ActiveMQ's consumer advisories as JSON (which
// needs XStream and Jettison on the broker's classpath).
func (b *BrokerConn) WatchConsumers(ctx context.Context) error {
	if b.c.Flavour() != ActiveMQ {
		return fmt.Errorf("consumer advisories from %s: %w", b.c.Server(), transport.ErrUnsupported)
	}
	for i, id := range []string{advisorySubQueue, advisorySubTopic} {
		b.mu.Lock()
		b.subs[id] = subInfo{advisory: true}
		b.mu.Unlock()
		if err := b.write(ctx, frame.New(frame.SUBSCRIBE, frame.Id, id,
			frame.Destination, advisory.Topics()[i], frame.Ack, "auto",
			advisory.TransformationHeader, advisory.TransformationJSON)); err != nil {
			return err
		}
	}
	return nil
}

var _ transport.DestinationWatcher = (*BrokerConn)(nil)
var _ transport.QueueBrowser = (*BrokerConn)(nil)

// WatchDestinations subscribes to ActiveMQ's queue and topic destination
// advisories, which the broker replays for every existing destination first.
func (b *BrokerConn) WatchDestinations(ctx context.Context) error {
	if b.c.Flavour() != ActiveMQ {
		return fmt.Errorf("destination advisories from %s: %w", b.c.Server(), transport.ErrUnsupported)
	}
	for i, id := range []string{destSubQueue, destSubTopic} {
		b.mu.Lock()
		b.subs[id] = subInfo{destAdvisor: true}
		b.mu.Unlock()
		if err := b.write(ctx, frame.New(frame.SUBSCRIBE, frame.Id, id,
			frame.Destination, advisory.DestinationTopics()[i], frame.Ack, "auto",
			advisory.TransformationHeader, advisory.TransformationJSON)); err != nil {
			return err
		}
	}
	return nil
}

// BrokerConn does not watch ActiveMQ's temporary destination advisories
// (transport.TempWatcher): with a STOMP subscription to
// ActiveMQ.Advisory.TempQueue on a broker, ActiveMQ 5.17.2 closed a JMS
// requester's OpenWire connection there in 3 runs of 3, failing to marshal a
// message to it (NullPointerException in MessageMarshaller.tightMarshal2);
// without that subscription, never. Temporary destinations are bridged over
// OpenWire only (bridge/temp.go).

// OwnConsumer reports whether consumerID belongs to this connection: ActiveMQ's
// consumer ids start with the connection id it sent as the CONNECTED session.
func (b *BrokerConn) OwnConsumer(consumerID string) bool {
	s := b.c.Session()
	return s != "" && len(consumerID) > len(s) && strings.HasPrefix(consumerID, s) && consumerID[len(s)] == ':'
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

// Settle acknowledges (ACK) or releases (NACK) deliveries. A subscription in
// ack mode "client" is acknowledged cumulatively: one ACK for the last. While a
// Sync is on the wire that ACK is held, replacing an older one held for the
// same subscription, and written when the Sync's receipt arrives (see Sync).
func (b *BrokerConn) Settle(ctx context.Context, sub string, refs []transport.Ref, outcome transport.Outcome) error {
	if len(refs) == 0 {
		return nil
	}
	cmd := frame.ACK
	if outcome != transport.Accepted {
		cmd = frame.NACK
	}
	b.mu.Lock()
	individual := b.subs[sub].individual
	b.mu.Unlock()
	if !individual && cmd == frame.ACK {
		a, ok := refs[len(refs)-1].(ackRef)
		if !ok {
			return fmt.Errorf("settling on %s: foreign delivery reference %T", b.c.URI(), refs[len(refs)-1])
		}
		b.smu.Lock()
		persistent := a.persistent > b.acked[sub]
		b.acked[sub] = a.persistent
		if b.syncing {
			b.holdAck(sub, a, persistent)
			b.smu.Unlock()
			return nil
		}
		// Only Sync, called by this goroutine too, sets syncing.
		b.smu.Unlock()
		return b.holdTail(ctx, &tailFrame{f: a.frame(cmd), receipt: !persistent && b.c.Flavour() == ActiveMQ})
	}
	// Held cumulative ACKs go first, in order: in ack mode client a NACK
	// covers the messages before it too.
	b.smu.Lock()
	held := b.heldAcks
	b.heldAcks = nil
	b.smu.Unlock()
	for _, h := range held {
		if err := b.write(ctx, h.ref.frame(frame.ACK)); err != nil {
			return err
		}
	}
	if err := b.flushTail(ctx); err != nil {
		return err
	}
	for _, r := range refs {
		a, ok := r.(ackRef)
		if !ok {
			return fmt.Errorf("settling on %s: foreign delivery reference %T", b.c.URI(), r)
		}
		if err := b.write(ctx, a.frame(cmd)); err != nil {
			return err
		}
	}
	return nil
}

// holdAck keeps a as sub's held cumulative ACK (b.smu held); persistent says
// a acknowledges a persistent message, and stays true for the subscription's
// held ACK once it was (the held one replaced covered it too).
func (b *BrokerConn) holdAck(sub string, a ackRef, persistent bool) {
	for i := range b.heldAcks {
		if b.heldAcks[i].sub == sub {
			b.heldAcks[i].ref = a
			b.heldAcks[i].persistent = b.heldAcks[i].persistent || persistent
			return
		}
	}
	b.heldAcks = append(b.heldAcks, heldAck{sub: sub, ref: a, persistent: persistent})
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

// takeHeld removes and returns the ACK held for sub, if any.
func (b *BrokerConn) takeHeld(sub string) (ackRef, bool) {
	b.smu.Lock()
	defer b.smu.Unlock()
	for i, h := range b.heldAcks {
		if h.sub == sub {
			b.heldAcks = append(b.heldAcks[:i], b.heldAcks[i+1:]...)
			return h.ref, true
		}
	}
	return ackRef{}, false
}

// Sync asks for a receipt after everything written so far: the broker handles
// a connection's frames in order, so the receipt means everything before was
// processed and, for a persistent ActiveMQ, that the settlements before it are
// on disk (see syncPair). To ActiveMQ, when the last frame is a cumulative ACK that
// acknowledges no persistent message, the receipt rides on that ACK (Settle
// keeps its last ACK unwritten until the Sync or any other write: the tail):
// one frame instead of three per settled batch, which is most of what a bridge
// at a moderate rate makes the local broker do besides its deliveries.
// Otherwise it is an empty transaction (BEGIN, then ABORT with the receipt)
// rather than a receipt on an ACK of persistent messages: ActiveMQ turns a
// cumulative ACK into one removal per message, each keeping the request for a
// response, and syncs each to disk on its own.
//
// At most one Sync is on the wire, as in transport/openwire (whose Sync says
// what an unbounded stream of ACK + Sync pairs did to ActiveMQ under load: its
// transport thread stops reading while it waits to write to us, and the pairs
// filled its receive buffer until the connection stood still). While a Sync
// awaits its receipt, cumulative ACKs are merged, one per subscription, and
// further Syncs wait; the receipt releases them as one ACK per subscription
// and one Sync, written without waiting for room in the write queue
// (Conn.WriteNow). Besides bounding what the broker may have left unread, this
// cuts the frames per settled batch under load to about one ACK per
// subscription per round trip.
func (b *BrokerConn) Sync(ctx context.Context) (transport.Token, error) {
	b.smu.Lock()
	if b.syncing {
		tok := transport.Token(b.c.seq.Add(1))
		b.heldTokens = append(b.heldTokens, tok)
		b.smu.Unlock()
		return tok, nil
	}
	b.syncing = true
	t := b.tail
	b.tail = nil
	if t != nil {
		b.early = nil
	}
	if t != nil && t.receipt && t.f.Command == frame.ACK {
		// The receipt rides on the ACK itself: one frame instead of three.
		id, tok := b.reserveReceipt()
		t.f.Header.Set(frame.Receipt, id)
		b.syncs[id] = []transport.Token{tok}
		b.smu.Unlock()
		return tok, b.c.Write(ctx, t.f)
	}
	begin, abort, tok := b.syncPair()
	b.syncs[abort.Header.Get(frame.Receipt)] = []transport.Token{tok}
	b.smu.Unlock()
	if t != nil {
		if err := b.c.Write(ctx, t.f); err != nil {
			return 0, err
		}
	}
	if err := b.c.Write(ctx, begin); err != nil {
		return 0, err
	}
	return tok, b.c.Write(ctx, abort)
}

// syncPair builds a Sync's BEGIN and its ABORT, which carries a stream
// receipt; the token is the receipt's number.
//
// The receipt is on the ABORT, not the BEGIN, because ActiveMQ answers a
// frame once it has handled it, and handling an ACK of persistent messages
// only queues their removal for KahaDB's journal writer: the BEGIN's receipt
// may leave before those removals reach the file, and a SIGKILL then loses
// them, so the broker delivers again messages whose settlement was confirmed.
// The ABORT's rollback record is written and synced to disk before its
// receipt leaves, after everything queued before it. Measured with strace
// here: the BEGIN's receipt was written 8 ms before the journal's write and
// fsync that followed. With the receipt on the BEGIN, transport/endpoint's
// crash test (a SIGKILL as a Sync's confirmation arrives, the journal kept
// busy) saw 25 to 100 confirmed messages come back in half its rounds.
func (b *BrokerConn) syncPair() (begin, abort *frame.Frame, tok transport.Token) {
	mark := "bn-sync-" + strconv.FormatUint(b.syncSeq.Add(1), 10)
	id, tok := b.reserveReceipt()
	begin = frame.New(frame.BEGIN, frame.Transaction, mark)
	return begin, frame.New(frame.ABORT, frame.Transaction, mark, frame.Receipt, id), tok
}

// syncDone is called by the converter for every RECEIPT: for a Sync's receipt
// it releases what was held meanwhile (the ACKs, and one Sync for the held
// tokens) and returns the tokens the receipt confirms; nil for other receipts.
func (b *BrokerConn) syncDone(id string) []transport.Token {
	b.smu.Lock()
	defer b.smu.Unlock()
	toks, ok := b.syncs[id]
	if !ok {
		return nil
	}
	delete(b.syncs, id)
	fs := make([]*frame.Frame, 0, len(b.heldAcks)+2)
	for _, h := range b.heldAcks {
		fs = append(fs, h.ref.frame(frame.ACK))
	}
	last := len(b.heldAcks) - 1
	onAck := last >= 0 && !b.heldAcks[last].persistent && b.c.Flavour() == ActiveMQ
	b.heldAcks = nil
	switch {
	case len(b.heldTokens) == 0:
		b.syncing = false
	case onAck:
		// The receipt rides on the last ACK (see Sync).
		id, _ := b.reserveReceipt()
		fs[last].Header.Set(frame.Receipt, id)
		b.syncs[id] = b.heldTokens
		b.heldTokens = nil
	default:
		begin, abort, _ := b.syncPair()
		b.syncs[abort.Header.Get(frame.Receipt)] = b.heldTokens
		b.heldTokens = nil
		fs = append(fs, begin, abort)
	}
	if len(fs) > 0 {
		// Under smu, so that frames the session writes after it saw the
		// Sync finished follow these.
		b.c.WriteNow(fs...)
	}
	return toks
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

// deliveryHeader reports whether a MESSAGE frame's header belongs to the
// delivery, not to the message, or maps to a Message field. (A switch: this
// runs for every header of every message, and beats a map lookup.)
func deliveryHeader(k string) bool {
	switch k {
	case frame.Subscription, frame.MessageId, frame.Ack,
		frame.Destination, frame.ContentLength, frame.ContentType,
		frame.Receipt, frame.Transaction, "redelivered",
		"persistent", "priority", "expires", "timestamp",
		"correlation-id", "reply-to", "type":
		return true
	}
	return false
}

// MessageOf maps a MESSAGE frame to a transport.Message (see the README's header
// mapping table). Of repeated headers the first wins, as STOMP says.
func MessageOf(f *frame.Frame) *transport.Message {
	h := f.Header
	m := &transport.Message{
		ID:            h.Get(frame.MessageId),
		Persistent:    h.Get("persistent") == "true",
		Priority:      -1,
		CorrelationID: h.Get("correlation-id"),
		ReplyTo:       h.Get("reply-to"),
		Type:          h.Get("type"),
		ContentType:   h.Get(frame.ContentType),
		Redelivered:   h.Get("redelivered") == "true",
		Body:          f.Body,
	}
	m.Destination, _ = destination.FromStomp(h.Get(frame.Destination))
	if _, ok := h.Contains(frame.ContentLength); ok {
		m.Bytes = true
	}
	if p, err := strconv.Atoi(h.Get("priority")); err == nil {
		m.Priority = p
	}
	if ms, err := strconv.ParseInt(h.Get("expires"), 10, 64); err == nil && ms > 0 {
		m.Expires = time.UnixMilli(ms)
	}
	if ms, err := strconv.ParseInt(h.Get("timestamp"), 10, 64); err == nil && ms > 0 {
		m.Timestamp = time.UnixMilli(ms)
	}
	n := h.Len()
	m.Props = make([]transport.Property, 0, n)
	var seen map[string]struct{}
	if n > 16 {
		seen = make(map[string]struct{}, n)
	}
	for i := 0; i < n; i++ {
		k, v := h.GetAt(i)
		if deliveryHeader(k) {
			continue
		}
		if seen != nil {
			if _, dup := seen[k]; dup {
				continue
			}
			seen[k] = struct{}{}
		} else if hasProp(m.Props, k) {
			continue
		}
		m.Props = append(m.Props, transport.Property{Name: k, Value: v})
	}
	return m
}

func hasProp(ps []transport.Property, name string) bool {
	for i := range ps {
		if ps[i].Name == name {
			return true
		}
	}
	return false
}

// kvPool holds SendFrame's scratch header lists.
var kvPool = sync.Pool{New: func() any { s := make([]string, 0, 64); return &s }}

// sendPath is where a SEND to d goes. ActiveMQ reads "/temp-queue/NAME" as a
// temporary queue of the sending connection, named per connection; a
// temporary destination of another connection (a reply-to the bridge
// forwards to) is "/remote-temp-queue/NAME" (destination.StompPath).
func sendPath(d destination.Destination) string {
	if d.IsTemp() {
		return "/remote-" + d.Kind.String() + "/" + d.Name
	}
	return d.StompPath()
}

// SendFrame maps m to a SEND frame inside transaction tx ("" for none).
func SendFrame(m *transport.Message, tx string) *frame.Frame {
	kvp := kvPool.Get().(*[]string)
	kv := append((*kvp)[:0], frame.Destination, sendPath(m.Destination))
	if tx != "" {
		kv = append(kv, frame.Transaction, tx)
	}
	if m.Bytes {
		// A content-length makes ActiveMQ build a BytesMessage, its absence a
		// TextMessage: keep whichever the producer chose. (Without one ActiveMQ
		// reads the body a byte at a time, about 13 µs per KiB message on the
		// bench's broker; "amq-msg-type:text" would keep a length-announced
		// body text, but ActiveMQ 5.17 then keeps both headers as properties.
		// bench/RESULTS.md, 2026-12-03.)
		kv = append(kv, frame.ContentLength, strconv.Itoa(len(m.Body)))
	}
	if m.ContentType != "" {
		kv = append(kv, frame.ContentType, m.ContentType)
	}
	if m.Persistent {
		kv = append(kv, "persistent", "true")
	}
	if m.Priority >= 0 {
		kv = append(kv, "priority", strconv.Itoa(m.Priority))
	}
	if !m.Expires.IsZero() {
		kv = append(kv, "expires", strconv.FormatInt(m.Expires.UnixMilli(), 10))
	}
	if !m.Timestamp.IsZero() {
		kv = append(kv, "timestamp", strconv.FormatInt(m.Timestamp.UnixMilli(), 10))
	}
	if m.CorrelationID != "" {
		kv = append(kv, "correlation-id", m.CorrelationID)
	}
	if m.ReplyTo != "" {
		kv = append(kv, "reply-to", m.ReplyTo)
	}
	if m.Type != "" {
		kv = append(kv, "type", m.Type)
	}
	for _, p := range m.Props {
		if deliveryHeader(p.Name) {
			continue
		}
		kv = append(kv, p.Name, PropText(p.Value))
	}
	// frame.Header has no way to take a slice as it is; NewHeader copies it
	// once, exactly sized, so the scratch slice goes back to the pool.
	f := &frame.Frame{Command: frame.SEND, Header: frame.NewHeader(kv...), Body: m.Body}
	clear(kv)
	*kvp = kv
	kvPool.Put(kvp)
	return f
}

// PropText renders a property value as STOMP carries it: text.
func PropText(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case nil:
		return ""
	case bool:
		return strconv.FormatBool(x)
	case int8:
		return strconv.FormatInt(int64(x), 10)
	case int16:
		return strconv.FormatInt(int64(x), 10)
	case int32:
		return strconv.FormatInt(int64(x), 10)
	case int64:
		return strconv.FormatInt(x, 10)
	case int:
		return strconv.Itoa(x)
	case float32:
		return strconv.FormatFloat(float64(x), 'g', -1, 32)
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	case []byte:
		return string(x)
	}
	return fmt.Sprint(v)
}

// sanitizeQueue keeps queue names to characters every broker accepts.
func sanitizeQueue(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '-', r == '_':
			return r
		}
		return '_'
	}, s)
}

// fromRabbit corrects what MessageOf read from a RabbitMQ MESSAGE frame:
// RabbitMQ addresses, "expiration" (a time to live in ms, relative) instead of
// "expires", "timestamp" in seconds, and its own headers that are not the
// message's.
func fromRabbit(f *frame.Frame, m *transport.Message) {
	h := f.Header
	if d, err := destination.FromRabbit(h.Get(frame.Destination), destination.RabbitSTOMP); err == nil {
		m.Destination = d
	}
	m.Timestamp = time.Time{}
	if s, err := strconv.ParseInt(h.Get("timestamp"), 10, 64); err == nil && s > 0 {
		m.Timestamp = time.Unix(s, 0)
	}
	props := m.Props[:0]
	for _, p := range m.Props {
		switch p.Name {
		case "expiration":
			if ms, err := strconv.ParseInt(PropText(p.Value), 10, 64); err == nil && ms >= 0 {
				m.Expires = time.Now().Add(time.Duration(ms) * time.Millisecond)
			}
			continue
		case "amqp-message-id", "content-encoding", "user-id", "app-id", "x-queue-name":
			continue
		}
		props = append(props, p)
	}
	m.Props = props
}

// toRabbit adapts a SEND frame for RabbitMQ: its address form, and "expiration"
// (relative ms) instead of "expires". A message already expired is sent with a
// time to live of 0 ms, so that RabbitMQ drops it as ActiveMQ would.
func toRabbit(m *transport.Message, f *frame.Frame) error {
	dest, err := destination.ToRabbit(m.Destination, destination.RabbitSTOMP)
	if err != nil {
		return err
	}
	f.Header.Set(frame.Destination, dest)
	f.Header.Del("timestamp")
	if !m.Expires.IsZero() {
		f.Header.Del("expires")
		f.Header.Set("expiration", strconv.FormatInt(max(0, time.Until(m.Expires).Milliseconds()), 10))
	}
	return nil
}
