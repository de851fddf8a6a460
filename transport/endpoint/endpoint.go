// Package endpoint parses a broker URI of any protocol, dispatching on its
// scheme to the transport that owns it, and composes what one transport needs
// of another: a STOMP URI lists its broker's durable subscriptions over
// OpenWire (durables.go).
//
// It is the top of the transport family: transport (the seam: Conn,
// Endpoint, DemandSource) is below every protocol package; transport/stomp,
// transport/amqp and transport/openwire implement it; endpoint imports them
// all. A RabbitMQ broker's demand source (rabbitmq/events) sits below
// transport; the protocol packages name it (stomp and amqp URIs are
// transport.DemandEndpoints). The bridge imports none of them: it sees
// transport.Conn, transport.Endpoint and transport.DemandSource only.
package endpoint

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/brokernet/brokernet/internal/uriredact"
	"github.com/brokernet/brokernet/transport"
	"github.com/brokernet/brokernet/transport/amqp"
	"github.com/brokernet/brokernet/transport/openwire"
	"github.com/brokernet/brokernet/transport/stomp"
)

// Schemes lists the accepted schemes, for messages.
const Schemes = "stomp://, stomp+ssl:// (STOMP), amqp://, amqps:// (AMQP 1.0), tcp://, ssl:// (OpenWire)"

// Parse parses a broker URI given locally (command line, configuration): the
// TLS files it names are checked now. Errors never contain the passcode.
func Parse(s string) (transport.URI, error) { return parse(s, true) }

// ParseRemote parses a broker URI another process advertised (gossip
// metadata): as Parse, but it never touches the local files the URI names,
// so a peer cannot make this process open them.
func ParseRemote(s string) (transport.URI, error) { return parse(s, false) }

func parse(s string, local bool) (transport.URI, error) {
	scheme, rest, ok := strings.Cut(s, ":")
	if !ok || !validScheme.MatchString(scheme) || rest != "" && rest[0] >= '0' && rest[0] <= '9' {
		// No scheme at all, or host:port.
		return nil, fmt.Errorf("broker URI %q: missing scheme (want one of %s)", uriredact.Redact(s), Schemes)
	}
	switch strings.ToLower(scheme) {
	case "stomp", "stomp+ssl", "stomp+tls", "stomps":
		parse := stomp.ParseRemoteURI
		if local {
			parse = stomp.ParseURI
		}
		u, err := parse(s)
		if err != nil {
			return nil, err
		}
		// A STOMP URI with ?openwirePort= lists the broker's durable
		// subscriptions over OpenWire.
		u.OpenWireLister = stompDurables{}
		return u, nil
	case "amqp", "amqps", "amqp+ssl", "amqp+tls":
		return ok1(amqp.ParseURI(s))
	case "tcp", "ssl":
		return ok1(openwire.ParseURI(s))
	}
	return nil, fmt.Errorf("broker URI %q: unsupported scheme %q (want one of %s)", uriredact.Redact(s), scheme, Schemes)
}

// validScheme is RFC 3986's scheme syntax: it cannot hold a ':', so a scheme
// shown in an error never holds a passcode.
var validScheme = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*$`)

// ok1 turns a concrete URI and error into a transport.URI, nil on error.
func ok1[U transport.URI](u U, err error) (transport.URI, error) {
	if err != nil {
		return nil, err
	}
	return u, nil
}
