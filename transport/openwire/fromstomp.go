package openwire

import (
	"context"
	"net"
	"strconv"

	"github.com/brokernet/brokernet/destination"
	"github.com/brokernet/brokernet/transport"
	"github.com/brokernet/brokernet/transport/stomp"
)

// A STOMP URI naming the broker's OpenWire port (?openwirePort=) lists the
// broker's durable subscriptions over OpenWire (transport/stomp/durables.go)
// through its OpenWireLister, which transport/endpoint sets to STOMPLister.
// Package stomp cannot import this one (this package's tests import stomp).

var _ stomp.OpenWireLister = STOMPLister{}

// STOMPLister lists the durable subscriptions of a broker reached over STOMP
// on the broker's OpenWire port (stomp.URI.OpenWireLister).
type STOMPLister struct{}

// ListDurables lists the durable subscriptions on topics matching include of
// the broker at t (URI.DurableSubscriptions).
func (STOMPLister) ListDurables(ctx context.Context, t stomp.OpenWireTarget, broker string, include []destination.Destination) ([]transport.DurableSubscription, error) {
	u, err := FromSTOMP(t)
	if err != nil {
		return nil, err
	}
	return u.DurableSubscriptions(ctx, broker, include)
}

// FromSTOMP is the OpenWire URI of a STOMP URI's OpenWire side: t's address,
// credentials and TLS settings (ssl:// when t is TLS), default options.
func FromSTOMP(t stomp.OpenWireTarget) (URI, error) {
	scheme := syntax.Scheme(t.TLS)
	u, err := ParseURI(scheme + "://" + net.JoinHostPort(t.Host, strconv.Itoa(t.Port)))
	if err != nil {
		return u, err
	}
	u.User, u.Password = t.User, t.Password
	if t.TLS {
		u.CAFile, u.ServerName = t.CAFile, t.ServerName
	}
	return u, nil
}
