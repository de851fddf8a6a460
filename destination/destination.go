// Package destination says what a broker destination is and how ActiveMQ
// wildcard patterns and include/exclude filters match it. (How one is
// addressed on RabbitMQ is package rabbitmq's.)
//
// A Destination is a kind (queue, topic, temporary queue, temporary topic)
// plus a physical name. It has two textual forms: the URI form used in
// configuration and logs ("queue://orders") and the STOMP form used on the
// wire ("/queue/orders").
package destination

import (
	"fmt"
	"strings"
)

// Kind is the type of a destination. The zero Kind is invalid, so that a zero
// Destination is never mistaken for a real queue.
type Kind uint8

// The destination kinds. The names follow the STOMP path prefixes that
// ActiveMQ uses ("/queue/", "/topic/", "/temp-queue/", "/temp-topic/").
const (
	// Queue is a point-to-point destination.
	Queue Kind = iota + 1
	// Topic is a publish-subscribe destination.
	Topic
	// TempQueue is a temporary queue, owned by the connection that created it.
	TempQueue
	// TempTopic is a temporary topic, owned by the connection that created it.
	TempTopic
)

// kindNames holds each valid kind's name, which is both its URI scheme and
// the middle of its STOMP prefix.
var kindNames = [...]string{
	Queue:     "queue",
	Topic:     "topic",
	TempQueue: "temp-queue",
	TempTopic: "temp-topic",
}

// String returns "queue", "topic", "temp-queue" or "temp-topic", or
// "Kind(N)" for an invalid kind.
func (k Kind) String() string {
	if k.Valid() {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Valid reports whether k is one of the four defined kinds.
func (k Kind) Valid() bool {
	return k >= Queue && k <= TempTopic
}

// IsTemp reports whether k is a temporary kind.
func (k Kind) IsTemp() bool {
	return k == TempQueue || k == TempTopic
}

// kindByName returns the kind whose name is s.
func kindByName(s string) (Kind, bool) {
	for k := Queue; k <= TempTopic; k++ {
		if kindNames[k] == s {
			return k, true
		}
	}
	return 0, false
}

// Destination is a concrete broker destination: a kind and a physical name.
// Destinations are comparable and can be used as map keys.
type Destination struct {
	// Kind is the destination's type.
	Kind Kind
	// Name is the physical name, for example "orders.eu". Words are
	// separated by '.'.
	Name string
}

// String returns the URI form, for example "queue://orders".
func (d Destination) String() string {
	return d.Kind.String() + "://" + d.Name
}

// StompPath returns the STOMP form, for example "/queue/orders".
//
// For temporary destinations it returns "/temp-queue/NAME" or
// "/temp-topic/NAME". ActiveMQ maps those names per STOMP connection; a
// temporary destination created by another connection is addressed as
// "/remote-temp-queue/NAME" instead, which FromStomp also accepts.
func (d Destination) StompPath() string {
	return "/" + d.Kind.String() + "/" + d.Name
}

// IsTemp reports whether d is a temporary queue or topic.
func (d Destination) IsTemp() bool {
	return d.Kind.IsTemp()
}

// MarshalText implements encoding.TextMarshaler with the URI form, so that a
// Destination can be written to configuration files.
func (d Destination) MarshalText() ([]byte, error) {
	if !d.Kind.Valid() {
		return nil, fmt.Errorf("destination %q: invalid kind %s", d.Name, d.Kind)
	}
	return []byte(d.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler with Parse.
func (d *Destination) UnmarshalText(text []byte) error {
	v, err := Parse(string(text))
	if err != nil {
		return err
	}
	*d = v
	return nil
}

// invalidf returns the error for the destination text s.
func invalidf(s string, format string, args ...any) error {
	return fmt.Errorf("destination %q: %s", s, fmt.Sprintf(format, args...))
}

// Parse reads a destination in URI form ("queue://X", "topic://X",
// "temp-queue://X", "temp-topic://X") or STOMP form (see FromStomp).
// The name must not be empty; it is otherwise taken verbatim.
func Parse(s string) (Destination, error) {
	if strings.HasPrefix(s, "/") {
		return FromStomp(s)
	}
	d, problem := splitURI(s)
	if problem != "" {
		return Destination{}, invalidf(s, "%s", problem)
	}
	return d, nil
}

// FromStomp reads a destination in STOMP form, as a MESSAGE frame's
// destination header holds it: "/queue/X", "/topic/X", "/temp-queue/X",
// "/temp-topic/X", and ActiveMQ's "/remote-temp-queue/X" and
// "/remote-temp-topic/X" for temporary destinations of other connections.
func FromStomp(path string) (Destination, error) {
	d, problem := splitStomp(path)
	if problem != "" {
		return Destination{}, invalidf(path, "%s", problem)
	}
	return d, nil
}

// splitURI splits "kind://name". It returns a description of the problem
// instead of an error so that Parse and ParsePattern can word their errors.
// The name may be empty.
func splitURI(s string) (Destination, string) {
	scheme, name, ok := strings.Cut(s, "://")
	if !ok {
		return Destination{}, `want "queue://NAME", "topic://NAME", "/queue/NAME" or "/topic/NAME"`
	}
	k, ok := kindByName(scheme)
	if !ok {
		return Destination{}, fmt.Sprintf("unknown kind %q (want queue, topic, temp-queue or temp-topic)", scheme)
	}
	if name == "" {
		return Destination{}, "empty name"
	}
	return Destination{Kind: k, Name: name}, ""
}

// splitStomp splits "/kind/name" like splitURI.
func splitStomp(path string) (Destination, string) {
	rest, ok := strings.CutPrefix(path, "/")
	if !ok {
		return Destination{}, `STOMP destination must start with "/"`
	}
	head, name, ok := strings.Cut(rest, "/")
	if !ok {
		return Destination{}, `want "/queue/NAME" or "/topic/NAME"`
	}
	var k Kind
	switch head {
	case "remote-temp-queue":
		k = TempQueue
	case "remote-temp-topic":
		k = TempTopic
	default:
		if k, ok = kindByName(head); !ok {
			return Destination{}, fmt.Sprintf("unknown STOMP prefix %q", "/"+head+"/")
		}
	}
	if name == "" {
		return Destination{}, "empty name"
	}
	return Destination{Kind: k, Name: name}, ""
}
