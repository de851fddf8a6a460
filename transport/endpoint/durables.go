package endpoint

import (
	"context"
	"net"
	"strconv"

	"github.com/brokernet/brokernet/destination"
	"github.com/brokernet/brokernet/transport"
	"github.com/brokernet/brokernet/transport/openwire"
	"github.com/brokernet/brokernet/transport/stomp"
)

// A STOMP URI naming the broker's OpenWire port (?openwirePort=) lists the
// broker's durable subscriptions over OpenWire (transport/stomp/durables.go),
// through the OpenWireLister this package gives every STOMP URI it parses:
// package stomp cannot import openwire (openwire's tests import stomp), and
// neither transport knows the other.

var _ stomp.OpenWireLister = stompDurables{}

// stompDurables lists the durable subscriptions of a broker reached over
// STOMP, on the broker's OpenWire port.
type stompDurables struct{}

// ListDurables lists the durable subscriptions on topics matching include of
// the broker at t (openwire.URI.DurableSubscriptions).
func (stompDurables) ListDurables(ctx context.Context, t stomp.OpenWireTarget, broker string, include []destination.Destination) ([]transport.DurableSubscription, error) {
	u, err := openWireOf(t)
	if err != nil {
		return nil, err
	}
	return u.DurableSubscriptions(ctx, broker, include)
}

// openWireOf is the OpenWire URI of a STOMP URI's OpenWire side: t's address,
// credentials and TLS settings (ssl:// when t is TLS), default options.
func openWireOf(t stomp.OpenWireTarget) (openwire.URI, error) {
	scheme := "tcp"
	if t.TLS {
		scheme = "ssl"
	}
	u, err := openwire.ParseURI(scheme + "://" + net.JoinHostPort(t.Host, strconv.Itoa(t.Port)))
	if err != nil {
		return u, err
	}
	u.User, u.Password = t.User, t.Password
	if t.TLS {
		u.CAFile, u.ServerName = t.CAFile, t.ServerName
	}
	return u, nil
}
