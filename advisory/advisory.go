// Package advisory turns ActiveMQ consumer advisories into typed demand
// events (the Event type that every demand source emits; RabbitMQ's is
// rabbitmq/events). The brokernet demand tag that brokernet's own demand
// subscriptions carry in their selectors is read with package hop.
//
// ActiveMQ publishes a ConsumerInfo on ActiveMQ.Advisory.Consumer.Queue.<name>
// or ActiveMQ.Advisory.Consumer.Topic.<name> when a consumer opens, and a
// RemoveInfo with the same consumer id when it closes. A STOMP subscriber
// with "transformation:jms-advisory-json" receives them as XStream/Jettison
// JSON (activemq-network.md §6.1). ActiveMQ replays a ConsumerInfo for every
// existing consumer to a new advisory subscriber (§6.2), so consumers of these
// events must treat them idempotently by consumer id.
package advisory

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/go-stomp/stomp/v3/frame"

	"github.com/brokernet/brokernet/destination"
	"github.com/brokernet/brokernet/hop"
)

// Topics returns the STOMP destinations to subscribe to for consumer
// advisories of queues and topics. Temporary queue consumers are published
// under the queue topic too (their destination class is ActiveMQTempQueue).
func Topics() []string {
	return []string{
		"/topic/ActiveMQ.Advisory.Consumer.Queue.>",
		"/topic/ActiveMQ.Advisory.Consumer.Topic.>",
	}
}

// The SUBSCRIBE header that selects the JSON rendering of advisories.
// ActiveMQ uses its advisory translator on advisory topics even without it,
// but stating it keeps the format independent of the broker's default.
const (
	// TransformationHeader is the STOMP header name.
	TransformationHeader = "transformation"
	// TransformationJSON asks for XStream/Jettison JSON bodies.
	TransformationJSON = "jms-advisory-json"
)

// Headers of an advisory MESSAGE frame that ParseActiveMQ reads.
const (
	headerDestination      = "destination"
	headerOriginBrokerID   = "originBrokerId"
	headerOriginBrokerName = "originBrokerName"
	headerConsumerCount    = "consumerCount"
)

// Prefixes of the STOMP destinations of consumer advisory topics
// (AdvisorySupport.getConsumerAdvisoryTopic), followed by the destination's
// physical name.
const (
	queueAdvisoryPrefix = "/topic/ActiveMQ.Advisory.Consumer.Queue."
	topicAdvisoryPrefix = "/topic/ActiveMQ.Advisory.Consumer.Topic."
)

// BridgeTagPrefix starts the STOMP subscription id (RabbitMQ consumer tag
// "T_" + id) and the AMQP 0-9-1 consumer tag of every consumer the bridge
// opens on RabbitMQ. Such consumers are never demand (package rabbitmq
// recognises them: RabbitMQ has no selector to carry a tag in). Every subscription id
// the bridge uses already starts with it (package demand's "bn-d1",
// transport/stomp's "bn-adv-queue").
//
// On RabbitMQ 3.10, AMQP 1.0 consumers get the tag "ctag-" + a binary link
// handle (checked here), whatever the link name: AMQP 1.0 consumers of the
// bridge cannot be recognised by tag, only by BridgeQueuePrefix.
const BridgeTagPrefix = "bn-"

// Kind says whether a consumer appeared or went away, or a durable
// subscription was destroyed.
type Kind uint8

// The event kinds. The zero Kind is invalid.
const (
	// ConsumerAdded reports a ConsumerInfo: a consumer opened, or an existing
	// one was replayed.
	ConsumerAdded Kind = iota + 1
	// ConsumerRemoved reports a RemoveInfo for a consumer id. For a durable
	// topic subscriber it means the subscriber went offline; its durable
	// subscription stays until a DurableRemoved.
	ConsumerRemoved
	// DurableRemoved reports a RemoveSubscriptionInfo: a durable topic
	// subscription was destroyed (unsubscribed). The Consumer carries only
	// SubscriptionName, ClientID and, when the advisory's destination header
	// names it, Destination; its ID is empty.
	DurableRemoved
	// SnapshotStart opens a complete list of a demand source's current
	// consumers (rabbitmq/events's Source, on every connection): the ConsumerAdded
	// events up to SnapshotDone are all there is; anything the receiver
	// knew from the source and that is not re-added is gone. Only Kind and
	// OriginBrokerID are set.
	SnapshotStart
	// SnapshotDone closes the list SnapshotStart opened.
	SnapshotDone
	// SourceLost reports that a demand source lost its broker (Err says
	// why): it tries again and starts a new snapshot when it is back; until
	// then the receiver sees no demand from it. Only Kind and Err are set.
	SourceLost
)

// String returns "added", "removed", "durable-removed", or "Kind(N)".
func (k Kind) String() string {
	switch k {
	case ConsumerAdded:
		return "added"
	case ConsumerRemoved:
		return "removed"
	case DurableRemoved:
		return "durable-removed"
	case SnapshotStart:
		return "snapshot-start"
	case SnapshotDone:
		return "snapshot-done"
	case SourceLost:
		return "source-lost"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Consumer is what a consumer advisory says about one consumer.
type Consumer struct {
	// ID is the canonical consumer id "connectionId:sessionId:value", the
	// same string for a ConsumerInfo's consumerId and the matching
	// RemoveInfo's objectId (ActiveMQ's ConsumerId.toString form).
	ID string
	// Destination is the destination consumed from.
	Destination destination.Destination
	// Selector is the consumer's own selector, with the
	// hop.ConvertStringPrefix and any brokernet tag removed; "" when none (a
	// selector of only white space counts as none).
	Selector string
	// Priority is the consumer priority (-128..127 in ActiveMQ).
	Priority int
	// Prefetch is prefetchSize. ActiveMQ reports 0 when the SUBSCRIBE asked
	// for a receipt and fixes it later without a new advisory, so it is
	// informational only.
	Prefetch int
	// Browser is true for a queue browser.
	Browser bool
	// Exclusive is true for an exclusive queue consumer.
	Exclusive bool
	// NoLocal is true when the consumer does not want its own connection's
	// messages.
	NoLocal bool
	// Retroactive is true for a retroactive topic consumer.
	Retroactive bool
	// SubscriptionName is the durable topic subscription name, if any.
	SubscriptionName string
	// ClientID is the consumer's connection client id when the advisory
	// shows it: OpenWire consumers only, never STOMP ones (§6.1). For a
	// DurableRemoved event it is the RemoveSubscriptionInfo's clientId,
	// which ActiveMQ's STOMP 1.0 support fills with the subscription name.
	ClientID string
	// Path lists the brokers the demand already came through, the original
	// consumer's broker first: the brokernet tag's path followed by the
	// ActiveMQ brokerPath (native hops made after the last brokernet hop).
	// It is empty for a plain consumer.
	Path []string
	// Origin is the original consumer id carried by a brokernet tag; "" for
	// other consumers.
	Origin string
	// Bridge is true when the consumer is a brokernet demand subscription
	// (its selector carries a tag).
	Bridge bool
	// Native is true when the consumer is an ActiveMQ network consumer: it
	// has a brokerPath or a NetworkBridgeFilter additionalPredicate.
	Native bool
	// Replay is true when the consumer is a brokernet replay subscription
	// (its tag says so; Bridge is true too). It takes back messages that
	// came from elsewhere and is not demand.
	Replay bool
}

// Event is one parsed consumer advisory.
type Event struct {
	// Kind says whether the consumer was added or removed.
	Kind Kind
	// Consumer describes the consumer; for ConsumerRemoved only ID is set,
	// for DurableRemoved see there.
	Consumer Consumer
	// OriginBrokerID is the originBrokerId header: the broker that
	// published the advisory.
	OriginBrokerID string
	// OriginBrokerName is the originBrokerName header.
	OriginBrokerName string
	// ConsumerCount is the consumerCount header: the destination's consumers
	// after the event, network consumers included; -1 if absent or invalid.
	ConsumerCount int
	// Err is why a SourceLost event's source lost its broker.
	Err error
}

// ErrNotConsumerAdvisory is returned (wrapped, with the payload's name) for a
// well-formed advisory that is not about a consumer, such as DestinationInfo.
// Callers skip such messages silently. (RemoveSubscriptionInfo, the removal
// of a durable subscription, is parsed as a DurableRemoved event.)
var ErrNotConsumerAdvisory = errors.New("not a consumer advisory")

// ParseActiveMQ parses an ActiveMQ consumer advisory received over STOMP with
// TransformationJSON: h is the MESSAGE frame's header (nil is allowed) and
// body its body.
//
// ActiveMQ publishes RemoveSubscriptionInfo (a durable subscription was
// destroyed) on the consumer advisory topic of the subscription's topic
// (AdvisoryBroker.removeSubscription); it becomes a DurableRemoved event
// whose Consumer.Destination is taken from h's destination header.
//
// A message the broker did not generate yields ErrForged (CheckBrokerGenerated).
// Malformed bodies yield a descriptive error; ParseActiveMQ never panics.
// Numbers and booleans are accepted both as JSON values and as strings,
// because Jettison may render either, and a one-element list may appear as
// a bare object, because Jettison renders it so.
func ParseActiveMQ(h *frame.Header, body []byte) (Event, error) {
	ev := Event{ConsumerCount: -1}
	if h != nil {
		if err := CheckBrokerGenerated(h.Get("message-id")); err != nil {
			return Event{}, err
		}
		ev.OriginBrokerID = h.Get(headerOriginBrokerID)
		ev.OriginBrokerName = h.Get(headerOriginBrokerName)
		if v, ok := h.Contains(headerConsumerCount); ok {
			if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && n >= 0 {
				ev.ConsumerCount = n
			}
		}
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return Event{}, errors.New("parsing advisory: empty body")
	}
	var root map[string]json.RawMessage
	if err := json.Unmarshal(body, &root); err != nil {
		return Event{}, fmt.Errorf("parsing advisory: %w", err)
	}
	if len(root) != 1 {
		return Event{}, fmt.Errorf("parsing advisory: want one root element, got %d", len(root))
	}
	for name, raw := range root {
		switch simpleName(name) {
		case "ConsumerInfo":
			c, err := parseConsumerInfo(raw)
			if err != nil {
				return Event{}, fmt.Errorf("parsing advisory ConsumerInfo: %w", err)
			}
			ev.Kind, ev.Consumer = ConsumerAdded, c
		case "RemoveInfo":
			id, err := parseRemoveInfo(raw)
			if err != nil {
				return Event{}, fmt.Errorf("parsing advisory RemoveInfo: %w", err)
			}
			ev.Kind, ev.Consumer = ConsumerRemoved, Consumer{ID: id}
		case "RemoveSubscriptionInfo":
			c, err := parseRemoveSubscriptionInfo(raw)
			if err != nil {
				return Event{}, fmt.Errorf("parsing advisory RemoveSubscriptionInfo: %w", err)
			}
			if h != nil {
				c.Destination = advisedDestination(h.Get(headerDestination))
			}
			ev.Kind, ev.Consumer = DurableRemoved, c
		default:
			return Event{}, fmt.Errorf("%w: %s", ErrNotConsumerAdvisory, name)
		}
	}
	return ev, nil
}

// simpleName strips a Java package from a class name; XStream omits it when
// the package alias is set, as ActiveMQ does, but tolerating it costs
// nothing.
func simpleName(class string) string {
	return class[strings.LastIndexByte(class, '.')+1:]
}

// parseConsumerInfo reads the body of a ConsumerInfo element.
func parseConsumerInfo(raw json.RawMessage) (Consumer, error) {
	obj, err := object(raw, "ConsumerInfo")
	if err != nil {
		return Consumer{}, err
	}
	var c Consumer
	idRaw, ok := obj["consumerId"]
	if !ok {
		return Consumer{}, errors.New("missing consumerId")
	}
	if c.ID, err = consumerID(idRaw, "consumerId"); err != nil {
		return Consumer{}, err
	}
	destRaw, ok := obj["destination"]
	if !ok {
		return Consumer{}, errors.New("missing destination")
	}
	if c.Destination, err = parseDestination(destRaw); err != nil {
		return Consumer{}, err
	}
	f := fields{obj: obj}
	c.Priority = f.int("priority")
	c.Prefetch = f.int("prefetchSize")
	c.Browser = f.bool("browser")
	c.Exclusive = f.bool("exclusive")
	c.NoLocal = f.bool("noLocal")
	c.Retroactive = f.bool("retroactive")
	c.SubscriptionName, _ = f.string("subscriptionName")
	c.ClientID, _ = f.string("clientId")
	sel, _ := f.string("selector")
	if f.err != nil {
		return Consumer{}, f.err
	}

	brokerPath, err := brokerIDs(obj["brokerPath"], "brokerPath", 0)
	if err != nil {
		return Consumer{}, err
	}
	filter, filterBroker, err := parsePredicate(obj["additionalPredicate"])
	if err != nil {
		return Consumer{}, err
	}
	c.SetRoute(sel, brokerPath, filter, filterBroker)
	return c, nil
}

// SetRoute fills in what a ConsumerInfo says about where the consumer's
// demand came from: Selector, Bridge, Replay, Origin, Path and Native. It is
// the one reading of those fields, whether the ConsumerInfo came as JSON
// (ParseActiveMQ) or as OpenWire (transport/openwire). selector is the
// ConsumerInfo's selector, brokerPath its brokerPath, filter whether its
// additionalPredicate is a NetworkBridgeFilter and filterBroker that filter's
// networkBrokerId ("" for none).
//
// The selector loses hop.ConvertStringPrefix and its brokernet tag; a
// selector of only white space counts as none. Path is the tag's path
// followed by brokerPath. A network consumer (Native) has a brokerPath or a
// NetworkBridgeFilter.
func (c *Consumer) SetRoute(selector string, brokerPath []string, filter bool, filterBroker string) {
	c.Native = filter || len(brokerPath) > 0
	if filter && len(brokerPath) == 0 && filterBroker != "" {
		// A NetworkBridgeFilter's networkBrokerId is the broker the demand
		// came from: the last brokerPath entry, should brokerPath be missing.
		brokerPath = []string{filterBroker}
	}
	sel := strings.TrimPrefix(selector, hop.ConvertStringPrefix)
	user, tag, isBridge := hop.ParseSelector(sel)
	if strings.TrimSpace(user) == "" {
		user = ""
	}
	c.Selector = user
	if isBridge {
		c.Bridge = true
		c.Replay = tag.Replay
		c.Origin = tag.Origin
		c.Path = append(c.Path, tag.Path...)
	}
	c.Path = append(c.Path, brokerPath...)
}

// parseRemoveInfo reads the body of a RemoveInfo element and returns the
// canonical consumer id. A RemoveInfo for another kind of object (a
// producer, session or connection id) is not a consumer advisory.
func parseRemoveInfo(raw json.RawMessage) (string, error) {
	obj, err := object(raw, "RemoveInfo")
	if err != nil {
		return "", err
	}
	idRaw, ok := obj["objectId"]
	if !ok {
		return "", errors.New("missing objectId")
	}
	id, err := object(idRaw, "objectId")
	if err != nil {
		return "", err
	}
	f := fields{obj: id}
	if class, ok := f.string("@class"); ok && simpleName(class) != "ConsumerId" {
		if f.err != nil {
			return "", f.err
		}
		return "", fmt.Errorf("%w: RemoveInfo of %s", ErrNotConsumerAdvisory, class)
	}
	if f.err != nil {
		return "", f.err
	}
	return consumerID(idRaw, "objectId")
}

// parseRemoveSubscriptionInfo reads the body of a RemoveSubscriptionInfo:
// {"connectionId":{...},"subcriptionName":"NAME","clientId":"ID"}. The Java
// field is misspelt "subcriptionName" in the ActiveMQ versions whose
// XStream rendering uses field names, "subscriptionName" in others; both are
// accepted, the correct spelling first.
func parseRemoveSubscriptionInfo(raw json.RawMessage) (Consumer, error) {
	obj, err := object(raw, "RemoveSubscriptionInfo")
	if err != nil {
		return Consumer{}, err
	}
	f := fields{obj: obj}
	name, ok := f.string("subscriptionName")
	if !ok {
		name, ok = f.string("subcriptionName")
	}
	clientID, _ := f.string("clientId")
	switch {
	case f.err != nil:
		return Consumer{}, f.err
	case !ok || name == "":
		return Consumer{}, errors.New("missing subscriptionName")
	}
	return Consumer{SubscriptionName: name, ClientID: clientID}, nil
}

// advisedDestination returns the destination a consumer advisory topic is
// about, from the STOMP destination of the advisory MESSAGE
// ("/topic/ActiveMQ.Advisory.Consumer.Topic.NAME"), or the zero Destination
// when dest is not such a topic.
func advisedDestination(dest string) destination.Destination {
	if name, ok := strings.CutPrefix(dest, topicAdvisoryPrefix); ok && name != "" {
		return destination.Destination{Kind: destination.Topic, Name: name}
	}
	if name, ok := strings.CutPrefix(dest, queueAdvisoryPrefix); ok && name != "" {
		return destination.Destination{Kind: destination.Queue, Name: name}
	}
	return destination.Destination{}
}

// consumerID reads {connectionId, sessionId, value} and returns
// "connectionId:sessionId:value".
func consumerID(raw json.RawMessage, name string) (string, error) {
	obj, err := object(raw, name)
	if err != nil {
		return "", err
	}
	f := fields{obj: obj, prefix: name + "."}
	conn, hasConn := f.string("connectionId")
	session, hasSession := f.int64("sessionId")
	value, hasValue := f.int64("value")
	switch {
	case f.err != nil:
		return "", f.err
	case !hasConn || conn == "":
		return "", fmt.Errorf("%s: missing connectionId", name)
	case !hasSession:
		return "", fmt.Errorf("%s: missing sessionId", name)
	case !hasValue:
		return "", fmt.Errorf("%s: missing value", name)
	}
	return conn + ":" + strconv.FormatInt(session, 10) + ":" + strconv.FormatInt(value, 10), nil
}

// destinationClasses maps XStream's class alias of an ActiveMQDestination to
// its kind.
var destinationClasses = map[string]destination.Kind{
	"ActiveMQQueue":     destination.Queue,
	"ActiveMQTopic":     destination.Topic,
	"ActiveMQTempQueue": destination.TempQueue,
	"ActiveMQTempTopic": destination.TempTopic,
}

// parseDestination reads {"@class":"ActiveMQQueue","string":"NAME","null":""}
// (the Externalizable form; "physicalName" is accepted in place of
// "string").
func parseDestination(raw json.RawMessage) (destination.Destination, error) {
	obj, err := object(raw, "destination")
	if err != nil {
		return destination.Destination{}, err
	}
	f := fields{obj: obj, prefix: "destination."}
	class, hasClass := f.string("@class")
	name, hasName := f.string("string")
	if !hasName {
		name, hasName = f.string("physicalName")
	}
	switch {
	case f.err != nil:
		return destination.Destination{}, f.err
	case !hasClass:
		return destination.Destination{}, errors.New("destination: missing @class")
	case !hasName || name == "":
		return destination.Destination{}, errors.New("destination: missing name")
	}
	kind, ok := destinationClasses[simpleName(class)]
	if !ok {
		return destination.Destination{}, fmt.Errorf("destination: unknown class %q", class)
	}
	return destination.Destination{Kind: kind, Name: name}, nil
}

// maxPathDepth bounds the nesting brokerIDs accepts. Jettison nests at most
// three levels (array, BrokerId, array).
const maxPathDepth = 6

// brokerIDs collects broker ids from a brokerPath in any of Jettison's
// renderings: [{"BrokerId":{"value":"R1"}}] for one hop,
// [{"BrokerId":[{"value":"R1"},{"value":"R2"}]}] for several, and the same
// with the outer array collapsed to an object. Bare strings are accepted as
// ids. Absent or null means no path.
func brokerIDs(raw json.RawMessage, name string, depth int) ([]string, error) {
	if isNull(raw) {
		return nil, nil
	}
	if depth > maxPathDepth {
		return nil, fmt.Errorf("%s: nested too deeply", name)
	}
	switch firstByte(raw) {
	case '[':
		var items []json.RawMessage
		if err := json.Unmarshal(raw, &items); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		var ids []string
		for _, item := range items {
			sub, err := brokerIDs(item, name, depth+1)
			if err != nil {
				return nil, err
			}
			ids = append(ids, sub...)
		}
		return ids, nil
	case '{':
		obj, err := object(raw, name)
		if err != nil {
			return nil, err
		}
		if inner, ok := obj["BrokerId"]; ok {
			return brokerIDs(inner, name, depth+1)
		}
		f := fields{obj: obj, prefix: name + "."}
		id, ok := f.string("value")
		if f.err != nil {
			return nil, f.err
		}
		if !ok {
			return nil, fmt.Errorf("%s: want BrokerId or value, got %s", name, Trim(raw, 80))
		}
		return []string{id}, nil
	case '"':
		var id string
		if err := json.Unmarshal(raw, &id); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		return []string{id}, nil
	}
	return nil, fmt.Errorf("%s: unexpected %s", name, Trim(raw, 80))
}

// parsePredicate reads additionalPredicate. It reports whether it is a
// NetworkBridgeFilter (or a subclass such as ConditionalNetworkBridgeFilter)
// and, if so, its networkBrokerId.
func parsePredicate(raw json.RawMessage) (native bool, networkBroker string, err error) {
	if isNull(raw) {
		return false, "", nil
	}
	obj, err := object(raw, "additionalPredicate")
	if err != nil {
		return false, "", err
	}
	f := fields{obj: obj, prefix: "additionalPredicate."}
	class, _ := f.string("@class")
	if f.err != nil {
		return false, "", f.err
	}
	if !strings.Contains(class, "NetworkBridgeFilter") {
		return false, "", nil
	}
	ids, err := brokerIDs(obj["networkBrokerId"], "additionalPredicate.networkBrokerId", 0)
	if err != nil {
		return false, "", err
	}
	if len(ids) > 0 {
		networkBroker = ids[0]
	}
	return true, networkBroker, nil
}

// Trim returns body cut to at most n bytes for a log line, as valid UTF-8
// (invalid bytes become U+FFFD), with "…" appended when it was cut. The cut
// never splits a UTF-8 sequence.
func Trim(body []byte, n int) string {
	if n < 0 {
		n = 0
	}
	if len(body) <= n {
		return strings.ToValidUTF8(string(body), "\uFFFD")
	}
	cut := n
	// Back up to the start of the rune that straddles n, if it is a whole,
	// valid rune; a broken sequence is replaced below anyway.
	for i := cut; i > 0 && i > cut-utf8.UTFMax; i-- {
		if utf8.RuneStart(body[i]) {
			if r, size := utf8.DecodeRune(body[i:]); r != utf8.RuneError && i+size > cut {
				cut = i
			}
			break
		}
	}
	return strings.ToValidUTF8(string(body[:cut]), "\uFFFD") + "…"
}
