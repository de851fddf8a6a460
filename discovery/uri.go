package discovery

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/brokernet/brokernet/internal/uriredact"
	"github.com/brokernet/brokernet/transport"
	"github.com/brokernet/brokernet/transport/endpoint"
)

// Kind names a discovery agent.
type Kind int

// Discovery kinds, named as in ActiveMQ discovery URIs.
const (
	// Static reports a fixed list of brokers, each bridged on its own.
	Static Kind = iota + 1
	// MasterSlave reports one logical broker reachable at one of several URIs.
	MasterSlave
	// Gossip reports the brokers that other brokernet members advertise.
	Gossip
)

// String names the kind as discovery URIs spell it.
func (k Kind) String() string {
	switch k {
	case Static:
		return "static"
	case MasterSlave:
		return "masterslave"
	case Gossip:
		return "gossip"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Spec is a parsed discovery URI.
//
//	stomp://host:port                        one static peer (or amqp://, tcp://, ...: any broker URI)
//	static:(stomp://a:61613,stomp://b:61613) one peer per URI, each reconnecting on its own
//	masterslave:(stomp://m:61613,stomp://s:61613) one logical peer, the first URI that answers
//	gossip:                                  peers found by gossip (configured separately)
type Spec struct {
	// Kind picks the agent.
	Kind Kind
	// URIs are the brokers of a static or masterslave spec, in the order given;
	// gossip specs have none.
	URIs []transport.URI
}

// ParseURI parses a discovery URI. Errors name the part at fault; passcodes in
// member URIs are never shown. A broker listed twice in static:(...) or
// masterslave:(...) is an error.
func ParseURI(s string) (Spec, error) {
	s = strings.TrimSpace(s)
	scheme, rest, ok := strings.Cut(s, ":")
	if !ok {
		return Spec{}, fmt.Errorf("discovery URI %q: missing scheme (want static:(...), masterslave:(...), gossip: or a broker URI such as stomp://, amqp:// or tcp://)", uriredact.Redact(s))
	}
	switch scheme {
	case "static", "masterslave":
		kind := Static
		if scheme == "masterslave" {
			kind = MasterSlave
		}
		if !strings.HasPrefix(rest, "(") || !strings.HasSuffix(rest, ")") {
			return Spec{}, fmt.Errorf("discovery URI %s:...: want %s:(URI,URI,...)", scheme, scheme)
		}
		inner := strings.TrimSpace(rest[1 : len(rest)-1])
		if inner == "" {
			return Spec{}, fmt.Errorf("discovery URI %s:(): no broker URIs", scheme)
		}
		spec := Spec{Kind: kind}
		end := 0
		for i, part := range splitMembers(inner) {
			end += len(part) + 1
			u, err := endpoint.Parse(strings.TrimSpace(part))
			if err != nil {
				if end < len(inner) && strings.Contains(inner[end:], "@") {
					// A later '@' may end a passcode that the split cut at a
					// ',' ("u:a,,b@h"): this member may hold its start, which
					// the member's own error would show.
					return Spec{}, fmt.Errorf("discovery URI %s: member %d is not a valid broker URI (not shown, since a later '@' may end a passcode it holds; percent-encode ',' in passcodes as %%2C)", scheme, i+1)
				}
				return Spec{}, fmt.Errorf("discovery URI %s: member %d: %w", scheme, i+1, err)
			}
			// Two bridges to one broker would forward every message twice.
			for j, prev := range spec.URIs {
				if prev.String() == u.String() {
					return Spec{}, fmt.Errorf("discovery URI %s: member %d (%s) repeats member %d", scheme, i+1, u, j+1)
				}
			}
			spec.URIs = append(spec.URIs, u)
		}
		if kind == MasterSlave && len(spec.URIs) < 2 {
			return Spec{}, fmt.Errorf("discovery URI masterslave:(...): want at least two broker URIs, got %d", len(spec.URIs))
		}
		return spec, nil
	case "gossip":
		if r := strings.TrimPrefix(rest, "//"); r != "" {
			return Spec{}, fmt.Errorf("discovery URI %q: gossip takes no address here; configure it in the gossip settings", uriredact.Redact(s))
		}
		return Spec{Kind: Gossip}, nil
	default:
		u, err := endpoint.Parse(s)
		if err != nil {
			return Spec{}, err
		}
		return Spec{Kind: Static, URIs: []transport.URI{u}}, nil
	}
}

// memberStart matches what follows a comma that ends a member: the scheme of
// the next URI, or an empty member.
var memberStart = regexp.MustCompile(`^\s*([A-Za-z][A-Za-z0-9+.-]*://|,|$)`)

// splitMembers splits static:(...) and masterslave:(...) lists at the commas
// that start another URI, so a comma inside a passcode stays in its URI (and
// never lands, cut off, in an error).
func splitMembers(inner string) []string {
	var out []string
	start := 0
	for i := 0; i < len(inner); i++ {
		if inner[i] == ',' && memberStart.MatchString(inner[i+1:]) {
			out = append(out, inner[start:i])
			start = i + 1
		}
	}
	return append(out, inner[start:])
}

// String renders the spec with passcodes redacted.
func (s Spec) String() string {
	if s.Kind == Gossip {
		return "gossip:"
	}
	if s.Kind == Static && len(s.URIs) == 1 {
		return s.URIs[0].String()
	}
	parts := make([]string, len(s.URIs))
	for i, u := range s.URIs {
		parts[i] = u.String()
	}
	return s.Kind.String() + ":(" + strings.Join(parts, ",") + ")"
}
