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
// broker's durable subscriptions over OpenWire (transport/stomp/durables.go).
// Package stomp cannot import this one (this package's tests import stomp), so
// the listing is installed from here.
func init() {
	stomp.SetOpenWireLister(func(ctx context.Context, t stomp.OpenWireTarget, broker string, include []destination.Destination) ([]transport.DurableSubscription, error) {
		u, err := FromSTOMP(t)
		if err != nil {
			return nil, err
		}
		return u.DurableSubscriptions(ctx, broker, include)
	})
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
