// Package transport is the seam between the bridge and broker protocols: a broker
// connection as the bridge uses it, whatever the protocol (STOMP, AMQP 1.0, OpenWire).
//
// A Conn is used by one goroutine (the bridge session), except Events, Done, Err and
// Abort, which any goroutine may call. Every method that writes takes a context;
// cancelling it abandons that call only (the connection stays usable unless the
// method returned an error wrapping ErrClosed). Methods that the broker confirms
// later (Subscribe, Commit, Sync) return a Token at once and never wait: the
// confirmation arrives as an Event on the connection's one ordered stream, after
// every delivery the broker sent before it, so a confirmation can never overtake
// the deliveries that preceded it on the wire.
//
// A broker whose connections carry no consumer advisories has a DemandSource
// beside them, which its Endpoint names (DemandEndpoint): RabbitMQ's event
// exchange, read by rabbitmq/events.
//
// Layering, from the bottom: destination and hop name things; advisory turns
// broker events into demand events; the rabbitmq family (rabbitmq,
// rabbitmq/mgmt, rabbitmq/events) speaks to RabbitMQ and imports no
// transport; transport (this package) is the seam, importing only advisory
// and destination; the protocol packages transport/stomp, transport/amqp and
// transport/openwire implement Conn and Endpoint (stomp and amqp name
// rabbitmq/events as a RabbitMQ broker's DemandSource, and amqp reads it over
// stomp); transport/endpoint parses any broker URI and composes the
// protocols. The bridge and demand use this package and never a protocol
// package.
package transport

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/brokernet/brokernet/advisory"
	"github.com/brokernet/brokernet/destination"
)

// Conn is one connection to a broker.
//
// Delivery semantics: deliveries of a subscription arrive in the broker's order and
// stay owned by the broker until settled (Settle); a connection that ends unsettled
// deliveries is taken back by the broker and redelivered elsewhere. Sends are
// confirmed per batch (Commit): the broker has taken responsibility for a message
// only when its batch's Confirmed event says so. Close is graceful (everything
// written before it was processed by the broker when it returns nil), Abort is
// immediate; both are idempotent.
type Conn interface {
	// Info describes the broker and connection, learnt at connect.
	Info() Info

	// Events is the connection's single ordered stream of deliveries,
	// confirmations and refusals. It is closed when the connection ends; Err
	// then tells why. The reader never blocks on a slow consumer of Events for
	// confirmations, so a full window can always be released.
	Events() <-chan Event
	// Done is closed when the connection has ended.
	Done() <-chan struct{}
	// Err is why the connection ended (nil while it is up; ErrClosed after Close).
	Err() error

	// BrokerID returns the broker's id: what the broker says about itself
	// (ActiveMQ: brokerId; RabbitMQ: cluster name), or an error naming the
	// option that sets it when the protocol cannot tell.
	BrokerID(ctx context.Context) (string, error)

	// Subscribe opens a subscription. Its deliveries arrive as Delivery events;
	// the broker's acceptance arrives as Confirmed with the returned token, or
	// Refused (the subscription then does not exist).
	Subscribe(ctx context.Context, sub Subscription) (Token, error)
	// Unsubscribe closes subscription id. Its unsettled deliveries return to the
	// broker; a durable subscription keeps existing (see DestroyDurable).
	Unsubscribe(ctx context.Context, id string) error
	// DestroyDurable removes the durable subscription sub names, with whatever
	// it retained.
	DestroyDurable(ctx context.Context, sub Subscription) error
	// WatchConsumers subscribes to the broker's consumer advisories: their
	// events arrive as Consumer events (or BadConsumer for malformed ones), and
	// the broker's existing consumers are replayed first. A connection whose
	// protocol cannot carry advisories returns ErrUnsupported.
	WatchConsumers(ctx context.Context) error
	// OwnConsumer reports whether a consumer id seen in advisories belongs to a
	// subscription of this connection.
	OwnConsumer(consumerID string) bool

	// Send writes m as part of the current batch. It is not confirmed until the
	// batch is committed.
	Send(ctx context.Context, m *Message) error
	// Commit ends the current batch: a Confirmed event with the token says the
	// broker took responsibility for every message sent since the previous
	// Commit (per-message Outcomes when some were released or rejected); a
	// Refused event says none was taken.
	Commit(ctx context.Context) (Token, error)

	// Settle accepts (acknowledges) or releases the given deliveries of one
	// subscription, given in delivery order. A transport whose acknowledgement
	// is cumulative may acknowledge only the last one.
	Settle(ctx context.Context, sub string, refs []Ref, outcome Outcome) error
	// Sync returns a token confirmed once the broker has processed everything
	// written on this connection before it (in particular earlier Settles) and,
	// where the broker stores settlements on disk as it goes (a persistent
	// ActiveMQ), stored them: a crash of the broker after the confirmation does
	// not bring those messages back. (RabbitMQ 3.10 cannot promise that: its
	// classic queues journal acknowledgements lazily, and a SIGKILL can bring
	// back messages it had confirmed as settled.)
	Sync(ctx context.Context) (Token, error)

	// Close ends the connection gracefully: it returns once the broker has
	// processed everything written before, or ctx ends.
	Close(ctx context.Context) error
	// Abort ends the connection at once. Unsettled deliveries return to the broker.
	Abort()
}

// Endpoint is a broker address that can be dialled: a parsed broker URI.
type Endpoint interface {
	// Dial connects. Its errors never contain credentials.
	Dial(ctx context.Context, opts DialOptions) (Conn, error)
	// String is the URI with credentials redacted, for logs.
	String() string
	// Addr is host:port.
	Addr() string
	// Backoff is the reconnect policy the URI asks for.
	Backoff() Reconnect
}

// Endpoints converts a slice of some Endpoint type to []Endpoint.
func Endpoints[E Endpoint](es []E) []Endpoint {
	out := make([]Endpoint, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

// DialOptions ask for connection properties beyond the URI's.
type DialOptions struct {
	// ClientID is a stable client id, needed for durable subscriptions
	// (ActiveMQ: client-id / ConnectionInfo.clientId; AMQP: container-id).
	// "" keeps the URI's or the transport's default.
	ClientID string
}

// Info describes a connected broker.
type Info struct {
	Protocol string  // "stomp", "amqp", "openwire"
	Server   string  // the broker's product/version as it reports it
	Flavour  Flavour // which broker it is
	// ConnectionID is the broker's id for this connection, as it appears in the
	// consumer ids of advisories (ActiveMQ), or "".
	ConnectionID string
	// Selectors reports whether subscriptions may carry a JMS selector.
	Selectors bool
	// Transactions reports whether Commit is atomic over a batch.
	Transactions bool
	// KeepsID reports whether Send gives a message whose Message.ID is id
	// that id as its own (OpenWire: an ActiveMQ MessageId; AMQP 1.0: any
	// properties message-id); nil means never (STOMP: the broker assigns the
	// id). The bridge carries an id the remote cannot keep in a property
	// instead (bridge.IDHeader).
	KeepsID func(id string) bool
}

// Flavour is a broker product, which decides the demand source, addressing and identity.
type Flavour int

// Flavours.
const (
	UnknownFlavour Flavour = iota
	ActiveMQ
	RabbitMQ
	Artemis
)

func (f Flavour) String() string {
	switch f {
	case ActiveMQ:
		return "activemq"
	case RabbitMQ:
		return "rabbitmq"
	case Artemis:
		return "artemis"
	}
	return "unknown"
}

// ParseFlavour reads a flavour name as ?flavor= gives it: activemq, rabbitmq
// or artemis, in any case.
func ParseFlavour(s string) (Flavour, error) {
	s = strings.TrimSpace(s)
	for _, f := range []Flavour{ActiveMQ, RabbitMQ, Artemis} {
		if strings.EqualFold(s, f.String()) {
			return f, nil
		}
	}
	return UnknownFlavour, errors.New("want activemq, rabbitmq or artemis")
}

// Subscription is a subscription the bridge opens.
type Subscription struct {
	ID          string
	Destination destination.Destination
	// Selector is a JMS selector, "" for none. Transports without selectors
	// (Info.Selectors false) refuse a non-empty one.
	Selector string
	// Prefetch is how many unsettled deliveries the broker may send (AMQP link credit).
	Prefetch int
	// Priority is the consumer priority (ActiveMQ: -5 for a demand subscription
	// two brokers away; RabbitMQ: x-priority).
	Priority int
	// DurableName makes a durable topic subscription with that name.
	DurableName string
	// Exclusive makes an exclusive queue consumer: the broker dispatches to
	// it alone while it is there (the first, or the highest-priority,
	// exclusive consumer of a queue). ActiveMQ only (STOMP
	// activemq.exclusive, OpenWire ConsumerInfo.exclusive); RabbitMQ's STOMP
	// and AMQP 1.0 subscriptions have no such consumer property and ignore it.
	Exclusive bool
	// Retroactive makes a retroactive topic consumer: the broker first
	// replays the recent messages its subscription recovery policy kept.
	// ActiveMQ only (activemq.retroactive, ConsumerInfo.retroactive); ignored
	// by RabbitMQ.
	Retroactive bool
	// Ack is how deliveries are settled.
	Ack AckMode
}

// AckMode is how a subscription's deliveries are settled.
type AckMode int

const (
	// Cumulative: settling a delivery may settle every earlier one of the subscription.
	Cumulative AckMode = iota
	// Individual: each delivery is settled on its own.
	Individual
)

// Token identifies a request confirmed later by an Event.
type Token uint64

// Ref identifies a delivery for Settle. It is opaque to the bridge.
type Ref any

// Outcome is what became of a delivery or a sent message.
type Outcome int

const (
	// Accepted: the message is taken (acknowledged, stored).
	Accepted Outcome = iota
	// Released: not taken; it may be delivered again (AMQP released/modified).
	Released
	// Rejected: refused for good (AMQP rejected); see the event's Err.
	Rejected
)

func (o Outcome) String() string {
	switch o {
	case Accepted:
		return "accepted"
	case Released:
		return "released"
	case Rejected:
		return "rejected"
	}
	return "unknown"
}

// EventKind tells what an Event carries.
type EventKind int

const (
	// Delivery: a message on a subscription (Sub, Msg, Ref).
	Delivery EventKind = iota
	// Confirmed: the request with Token was done (Outcomes for a Commit where not
	// every message was accepted).
	Confirmed
	// Refused: the request with Token was refused (Err says why); the connection
	// stays up.
	Refused
	// Consumer: a consumer advisory of the broker (Consumer).
	Consumer
	// BadConsumer: an advisory that could not be read, or that the broker did not
	// generate (Err says which); it is skipped.
	BadConsumer
	// DestinationChanged: a destination of the broker appeared or went
	// (Destination); see DestinationWatcher.
	DestinationChanged
	// BrowseDone: a queue browse (QueueBrowser) has sent every message it
	// will send (Sub is the browse's id).
	BrowseDone
)

// Event is one item of a connection's ordered stream.
type Event struct {
	Kind  EventKind
	Sub   string   // Delivery: the subscription id
	Msg   *Message // Delivery
	Ref   Ref      // Delivery: for Settle
	Token Token    // Confirmed, Refused
	// Outcomes, for a Commit's Confirmed, has one entry per message sent in the
	// batch (in send order) when some were not Accepted; nil when all were.
	Outcomes []SendOutcome
	Consumer advisory.Event // Consumer
	Err      error          // Refused, BadConsumer
	// Destination, for DestinationChanged.
	Destination advisory.DestinationEvent
}

// DestinationWatcher is implemented by connections that can report the
// broker's destinations (ActiveMQ's destination advisories). A bridge needs
// them to narrow wildcard demand to the destinations its rules permit
// (demand.Expander).
type DestinationWatcher interface {
	// WatchDestinations subscribes to the broker's destination advisories: the
	// existing queues and topics arrive first, then changes, as
	// DestinationChanged events (BadConsumer for unreadable or forged ones).
	WatchDestinations(ctx context.Context) error
}

// TempWatcher is implemented by connections that can report the broker's
// temporary destinations (ActiveMQ's temporary destination advisories), which
// a bridge mirrors on its local broker for request/reply across the network
// (ActiveMQ's bridgeTempDestinations).
type TempWatcher interface {
	// WatchTempDestinations subscribes to the broker's temporary destination
	// advisories: the existing temporary queues and topics arrive first, then
	// changes, as DestinationChanged events whose Destination is temporary
	// (BadConsumer for unreadable or forged ones).
	WatchTempDestinations(ctx context.Context) error
}

// TempMirror is implemented by connections that can create, on their broker,
// a temporary destination of another broker under the same name, owned so
// that the bridge's subscriptions may consume it (OpenWire to ActiveMQ). A
// reply sent there by a local responder is then taken by the demand of the
// remote requester's consumer.
type TempMirror interface {
	// MirrorTemp creates the temporary destination d, with path (the brokers
	// it comes from, ActiveMQ's brokerPath) so that a bridge the other way
	// does not mirror it back. It is idempotent. Subscriptions to d made
	// afterwards on this connection are allowed to consume it. The broker's
	// answer is not awaited: a refusal is logged, and the subscription that
	// follows is refused in turn.
	MirrorTemp(ctx context.Context, d destination.Destination, path []string) error
	// DropTemp removes the mirrored d (with whatever it holds); its
	// subscriptions end with it. Unknown destinations are ignored.
	DropTemp(ctx context.Context, d destination.Destination) error
}

// QueueBrowser is implemented by connections that can look at a queue's
// messages without taking them (ActiveMQ's queue browsers). The bridge uses it
// to count the messages its demand cannot take (stuck messages).
type QueueBrowser interface {
	// Browse opens a browser on queue with a JMS selector ("" for none): the
	// messages it selects arrive as Delivery events for subscription id, copies
	// that need no settling, then one BrowseDone event. At most max messages
	// are sent (ActiveMQ itself sends at most its maxBrowsePageSize, 400 by
	// default). Unsubscribe ends the browser.
	Browse(ctx context.Context, id string, queue destination.Destination, selector string, max int) error
}

// SendOutcome is the fate of one sent message.
type SendOutcome struct {
	Outcome Outcome
	Err     error // why, for Rejected
}

// Errors callers branch on.
var (
	// ErrClosed: the connection has ended.
	ErrClosed = errors.New("connection closed")
	// ErrUnsupported: the protocol or broker cannot do what was asked.
	ErrUnsupported = errors.New("not supported by this transport")
	// ErrRefused: the broker refused something written on the connection and
	// ended it (a STOMP ERROR frame: frame too large, not authorised). The bridge
	// counts such refusals per message to dead-letter a message that is refused
	// again and again.
	ErrRefused = errors.New("refused by the broker")
)

// Message is a broker message as the bridge moves it, protocol-neutral. The
// header mapping table in docs/protocols.md says how each protocol's fields map here.
type Message struct {
	// ID is the message's id (used to recognise copies of one topic
	// message). A transport whose Info.KeepsID keeps it sends it as the
	// message's own id, so that a forwarded message keeps its identity (as
	// ActiveMQ's networkConnector keeps the MessageId) and the receiving
	// broker and its clients can tell a message sent again from a new one;
	// "" lets the transport assign one.
	ID          string
	Destination destination.Destination
	// Persistent is JMS delivery mode PERSISTENT / AMQP durable.
	Persistent bool
	// Priority is 0–9; -1 when the message has none.
	Priority int
	// Expires is when the message expires; zero for never.
	Expires time.Time
	// Timestamp is when the producer sent it; zero if unknown.
	Timestamp     time.Time
	CorrelationID string
	// ReplyTo is the reply destination in the source protocol's spelling,
	// mapped by the sending transport. "" for none.
	ReplyTo     string
	Type        string // JMSType / AMQP subject
	ContentType string
	// Bytes says the body is binary (JMS BytesMessage, STOMP content-length
	// given, AMQP data section) rather than text.
	Bytes       bool
	Redelivered bool
	// Props are the application properties (and brokernet's own path headers),
	// in order. Values are string, bool, int8, int16, int32, int64, float32,
	// float64 or []byte; STOMP carries only strings.
	Props []Property
	Body  []byte
	// Native is the message in its source protocol's own form, for a transport
	// that can pass it through unchanged (same protocol on both sides, e.g.
	// OpenWire's marshalled typed property map). Transports ignore a Native they
	// do not know.
	Native any
}

// Property is one application property.
type Property struct {
	Name  string
	Value any
}

// Prop returns the first property named name and whether there is one.
func (m *Message) Prop(name string) (any, bool) {
	for i := range m.Props {
		if m.Props[i].Name == name {
			return m.Props[i].Value, true
		}
	}
	return nil, false
}

// PropString returns property name as a string ("" if absent or not a string).
func (m *Message) PropString(name string) string {
	v, _ := m.Prop(name)
	s, _ := v.(string)
	return s
}

// Flusher is a Conn that may hold back the last frame written for a while, so
// that the confirmation asked for next can ride on it (STOMP to ActiveMQ: a
// receipt on the last SEND or ACK instead of frames of its own). A caller that
// will not Commit or Sync soon calls Flush, so that the frame does not wait.
type Flusher interface {
	Flush(ctx context.Context) error
}

// DurableLister is an Endpoint whose broker can list the durable topic
// subscriptions it holds, online or offline (OpenWire to ActiveMQ 5.15+, the
// networkConnector's syncDurableSubs exchange): the one way a bridge can tell
// a remote durable subscription destroyed while it was away from one whose
// subscriber is only offline.
type DurableLister interface {
	// ListsDurables reports whether this endpoint is set up to list: an
	// OpenWire URI always is, a STOMP URI only when it names the broker's
	// OpenWire port (?openwirePort=). Callers ask before relying on
	// DurableSubscriptions.
	ListsDurables() bool
	// DurableSubscriptions lists the durable subscriptions on topics matching
	// include (wildcards allowed), on a connection of its own. It fails when
	// ListsDurables is false. broker, if not "", is the id of the broker
	// meant: an answer from another broker (a port of another broker on the
	// same host) is an error, never a listing, since demand is destroyed on
	// what the listing lacks.
	DurableSubscriptions(ctx context.Context, broker string, include []destination.Destination) ([]DurableSubscription, error)
}

// ListsDurables reports whether ep can list its broker's durable
// subscriptions (a DurableLister set up to list).
func ListsDurables(ep Endpoint) (DurableLister, bool) {
	dl, ok := ep.(DurableLister)
	if !ok || !dl.ListsDurables() {
		return nil, false
	}
	return dl, true
}

// DurableSubscription is a durable topic subscription a broker holds.
type DurableSubscription struct {
	ClientID    string
	Name        string // the subscription name
	Destination destination.Destination
	Selector    string
}

// EachConfirmer is a Conn that can send a message confirmed on its own,
// outside any batch (ActiveMQ over OpenWire or STOMP). The bridge sends
// every message this way to such a broker, so that one destination the
// broker blocks holds back only its own messages.
//
// ActiveMQ's producer flow control, when a destination's memory limit is
// reached, parks a send that asks for a response and answers it once there
// is room; a send that asks for none, or is part of a transaction, blocks the
// thread that reads the connection, and with it every later frame: messages
// to other destinations, commits, acknowledgements (Queue.send, ActiveMQ 5.17;
// measured in bridge TestIsolationBlockedDestination).
type EachConfirmer interface {
	// ConfirmsEach reports whether SendConfirmed may be used on this
	// connection (false: it returns ErrUnsupported).
	ConfirmsEach() bool
	// SendConfirmed sends m outside any batch: a Confirmed event with the
	// returned token says the broker took responsibility for it, a Refused
	// event that it did not (the connection stays up). Confirmations of
	// messages to one destination come in send order.
	SendConfirmed(ctx context.Context, m *Message) (Token, error)
}

// AlarmReporter is a Conn whose broker can say why it confirms nothing of
// what is sent to it: RabbitMQ's memory and disk alarms block every
// connection that publishes, on every node of the cluster, and say so on
// none of them (STOMP, AMQP 1.0).
type AlarmReporter interface {
	// Alarms lists the broker's alarms in force, one line each ("memory
	// alarm on rabbit@host"); none: empty.
	Alarms(ctx context.Context) ([]string, error)
}

// QueueLimiter is a Conn whose broker can say how much more a queue takes
// before it refuses what is sent to it: a RabbitMQ queue with a length limit
// and x-overflow reject-publish, whose refusal RabbitMQ 3.10 answers by
// ending the publishing connection (STOMP and AMQP 1.0 alike), so that every
// destination the connection carries is interrupted.
type QueueLimiter interface {
	// QueueRoom says what queue d takes now. A destination that is not a
	// limited queue (a topic, a queue without limits, a missing queue) has
	// Limited false.
	QueueRoom(ctx context.Context, d destination.Destination) (QueueRoom, error)
}

// QueueRoom is what a queue takes before it refuses.
type QueueRoom struct {
	// Limited: the queue refuses what overflows its limits.
	Limited bool
	// MaxMessages and MaxBytes are its limits (0: none); Messages and Bytes
	// what it holds, as the broker reported them (RabbitMQ's statistics lag
	// by up to their collection interval, 5 s by default).
	MaxMessages, MaxBytes int
	Messages, Bytes       int
	// Policy names the limit for people ("max-length 100, overflow
	// reject-publish").
	Policy string
}

// ConfirmsEach returns c as an EachConfirmer if it can confirm messages one
// by one.
func ConfirmsEach(c Conn) (EachConfirmer, bool) {
	ec, ok := c.(EachConfirmer)
	if !ok || !ec.ConfirmsEach() {
		return nil, false
	}
	return ec, true
}
