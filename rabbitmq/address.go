package rabbitmq

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/brokernet/brokernet/destination"
)

// RabbitMQ addressing (3.10). Both its STOMP plugin and its AMQP 1.0 plugin
// (the pre-4.0 "v1" address format) parse addresses with
// rabbit_routing_util:parse_endpoint, so the forms are shared:
//
//	/queue/Q              declare durable queue Q, then consume / publish to it
//	/amq/queue/Q          queue Q, which must exist (not declared)
//	/topic/KEY            amq.topic with routing key KEY (a subscriber gets a
//	                      queue bound with KEY)
//	/exchange/X/KEY       exchange X with routing key KEY
//	/temp-queue/Q         STOMP only: a reply queue private to the connection
//
// A '/' inside a name is written "%2F", the only escape RabbitMQ decodes
// (rabbit_routing_util:unescape/1); any other '%' is literal. The AMQP 1.0 plugin has
// no /temp-queue/ (nor /reply-queue/) forms. RabbitMQ 4.0's AMQP 1.0 "v2"
// format (/queues/Q, /exchanges/X/KEY) is also read, so that a 4.x peer's
// addresses are understood.
//
// The forms are shared, their effects are not (RabbitMQ 3.10.8): STOMP's
// /queue/Q declares Q durable; AMQP 1.0's declares it durable only when the
// link's terminus is durable (transport/amqp asks for that), otherwise
// exclusive and auto-delete; and declaring an existing queue with the other
// durability fails (PRECONDITION_FAILED "inequivalent arg 'durable'", checked
// here in both directions). /amq/queue/Q does not declare: an AMQP 1.0
// transfer to a missing queue there is settled "accepted" and dropped
// (verified-here.md), so Address never produces it.
//
// An ActiveMQ topic is RabbitMQ's amq.topic exchange: topic "prices.eu" is
// routing key "prices.eu". ActiveMQ wildcard words "*" (one word) and ">"
// (zero or more words, last only) are RabbitMQ's "*" and "#".

// Protocol says which RabbitMQ plugin an address is for.
type Protocol uint8

// The RabbitMQ protocols with their own address rules.
const (
	// STOMP is the rabbitmq_stomp plugin.
	STOMP Protocol = iota + 1
	// AMQP10 is the rabbitmq_amqp1_0 plugin.
	AMQP10
)

func (p Protocol) String() string {
	switch p {
	case STOMP:
		return "STOMP"
	case AMQP10:
		return "AMQP 1.0"
	}
	return "Protocol(" + strconv.Itoa(int(p)) + ")"
}

// TopicExchange is the exchange ActiveMQ topics map to.
const TopicExchange = "amq.topic"

// RestWildcard is RabbitMQ's topic wildcard for zero or more words.
const RestWildcard = "#"

// Address returns the RabbitMQ address of an ActiveMQ destination: a queue
// is "/queue/NAME", a topic "/topic/KEY" with the wildcards translated, a
// temporary queue "/temp-queue/NAME" (STOMP only). Temporary topics have no
// RabbitMQ counterpart.
func Address(d destination.Destination, p Protocol) (string, error) {
	switch d.Kind {
	case destination.Queue:
		if d.Name == "" {
			return "", invalidf(d.String(), "empty name")
		}
		return "/queue/" + escape(d.Name), nil
	case destination.Topic:
		key, err := RoutingKey(d.Name)
		if err != nil {
			return "", err
		}
		return "/topic/" + escape(key), nil
	case destination.TempQueue:
		if p != STOMP {
			return "", invalidf(d.String(), "temporary queues have no RabbitMQ %s address", p)
		}
		return "/temp-queue/" + escape(d.Name), nil
	}
	return "", invalidf(d.String(), "no RabbitMQ address for a %s", d.Kind)
}

// ParseAddress reads a RabbitMQ address (see the forms above) as the ActiveMQ
// destination it stands for: /queue/Q, /amq/queue/Q and /queues/Q are queue
// Q; /topic/KEY, /exchange/amq.topic/KEY and /exchanges/amq.topic/KEY are
// the topic named by KEY with "#" turned into ">". Other exchanges, and
// forms the protocol lacks, give an error naming the address.
func ParseAddress(addr string, p Protocol) (destination.Destination, error) {
	bad := func(format string, args ...any) (destination.Destination, error) {
		return destination.Destination{}, fmt.Errorf("RabbitMQ %s address %q: %s", p, addr, fmt.Sprintf(format, args...))
	}
	rest, ok := strings.CutPrefix(addr, "/")
	if !ok {
		return bad(`must start with "/" (e.g. /queue/NAME or /topic/KEY)`)
	}
	segs := strings.Split(rest, "/")
	for i, s := range segs {
		segs[i] = unescape(s)
	}
	one := func(kind destination.Kind, name string) (destination.Destination, error) {
		if name == "" {
			return bad("empty name")
		}
		return destination.Destination{Kind: kind, Name: name}, nil
	}
	topic := func(key string) (destination.Destination, error) {
		if key == "" {
			return bad("empty routing key")
		}
		name, err := TopicFromKey(key)
		if err != nil {
			return bad("%v", err)
		}
		return destination.Destination{Kind: destination.Topic, Name: name}, nil
	}
	switch {
	case len(segs) == 2 && (segs[0] == "queue" || segs[0] == "queues"):
		return one(destination.Queue, segs[1])
	case len(segs) == 3 && segs[0] == "amq" && segs[1] == "queue":
		return one(destination.Queue, segs[2])
	case len(segs) == 2 && segs[0] == "topic":
		return topic(segs[1])
	case len(segs) == 3 && (segs[0] == "exchange" || segs[0] == "exchanges"):
		if segs[1] != TopicExchange {
			return bad("exchange %q: only %s maps to ActiveMQ topics", segs[1], TopicExchange)
		}
		return topic(segs[2])
	case len(segs) == 2 && segs[0] == "temp-queue":
		if p != STOMP {
			return bad("/temp-queue/ is a STOMP-only form")
		}
		return one(destination.TempQueue, segs[1])
	}
	return bad("unknown form (want /queue/NAME, /amq/queue/NAME, /topic/KEY or /exchange/%s/KEY)", TopicExchange)
}

// RoutingKey translates an ActiveMQ topic name or pattern into an amq.topic
// routing key or binding key: the word ">" becomes "#". A name holding the
// word "#" is refused: RabbitMQ would read it as a wildcard.
func RoutingKey(name string) (string, error) {
	if name == "" {
		return "", invalidf("topic://", "empty name")
	}
	words := strings.Split(name, ".")
	for i, w := range words {
		switch w {
		case RestWildcard:
			return "", invalidf("topic://"+name, "the word %q is a RabbitMQ wildcard; it cannot be sent as a literal", RestWildcard)
		case destination.AnyRest:
			if i != len(words)-1 {
				return "", invalidf("topic://"+name, "%q must be the last word", destination.AnyRest)
			}
			words[i] = RestWildcard
		}
	}
	return strings.Join(words, "."), nil
}

// TopicFromKey inverts RoutingKey: "#" becomes ">". A "#" that is not
// the last word, or a literal word ">", has no ActiveMQ counterpart.
func TopicFromKey(key string) (string, error) {
	words := strings.Split(key, ".")
	for i, w := range words {
		switch w {
		case destination.AnyRest:
			return "", fmt.Errorf("routing key %q: the word %q would be an ActiveMQ wildcard", key, destination.AnyRest)
		case RestWildcard:
			if i != len(words)-1 {
				return "", fmt.Errorf("routing key %q: %q is only translatable as the last word", key, RestWildcard)
			}
			words[i] = destination.AnyRest
		}
	}
	return strings.Join(words, "."), nil
}

// escape writes '/' inside a name segment as "%2F", the only escape
// rabbit_routing_util:unescape/1 (3.10) decodes.
func escape(s string) string {
	return strings.ReplaceAll(s, "/", "%2F")
}

// unescape inverts escape exactly as RabbitMQ does: "%2F" is a
// '/', every other '%' is literal.
func unescape(s string) string {
	return strings.ReplaceAll(s, "%2F", "/")
}

func invalidf(s string, format string, args ...any) error {
	return fmt.Errorf("destination %q: %s", s, fmt.Sprintf(format, args...))
}
