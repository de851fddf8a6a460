package stomp

import (
	"context"
	"errors"
	"fmt"

	"github.com/brokernet/brokernet/destination"
	"github.com/brokernet/brokernet/transport"
)

// Durable subscription listing for a remote reached over STOMP. Nothing a
// STOMP client reads tells an offline durable subscription from a destroyed
// one: ActiveMQ's consumer advisories replay online consumers only, and the
// RemoveSubscriptionInfo of one destroyed while nobody listened is gone. Every
// ActiveMQ also speaks OpenWire, where a network connection is told every
// durable subscription the broker holds, online or offline (syncDurableSubs,
// 5.15+; transport/openwire/durablesync.go). So a STOMP URI that names the
// broker's OpenWire port (?openwirePort=) lists them there: same host, same
// login and passcode, TLS (ssl://) when the STOMP URI is stomp+ssl with the
// same ca and serverName. OpenWire URIs take no client certificate, so a cert
// and key are not presented there.

var _ transport.DurableLister = URI{}

// OpenWireTarget is where and how the OpenWire side of a STOMP URI is dialled.
type OpenWireTarget struct {
	TLS            bool
	Host           string
	Port           int
	User, Password string
	CAFile         string
	ServerName     string
}

// OpenWireLister lists a broker's durable subscriptions over OpenWire; a
// URI's OpenWireLister field holds it (transport/endpoint sets it).
type OpenWireLister interface {
	ListDurables(ctx context.Context, t OpenWireTarget, broker string, include []destination.Destination) ([]transport.DurableSubscription, error)
}

// errNoOpenWire is DurableSubscriptions' error for a URI without an
// OpenWireLister.
var errNoOpenWire = errors.New("listing durable subscriptions needs an OpenWire lister: parse the URI with transport/endpoint")

// ListsDurables reports whether u names the broker's OpenWire port, where its
// durable subscriptions are listed.
func (u URI) ListsDurables() bool { return u.OpenWirePort != 0 }

// OpenWire is the OpenWire address of the broker u names: port OpenWirePort on
// the same host, with u's credentials and TLS settings.
func (u URI) OpenWire() OpenWireTarget {
	return OpenWireTarget{TLS: u.TLS, Host: u.Host, Port: u.OpenWirePort, User: u.Login, Password: u.Passcode,
		CAFile: u.CAFile, ServerName: u.ServerName}
}

// DurableSubscriptions lists the durable subscriptions the broker holds on
// topics matching include, online or offline, over OpenWire on a connection of
// its own (openwire.URI.DurableSubscriptions). It fails without an
// openwirePort.
func (u URI) DurableSubscriptions(ctx context.Context, broker string, include []destination.Destination) ([]transport.DurableSubscription, error) {
	if !u.ListsDurables() {
		return nil, fmt.Errorf("%s: no openwirePort to list durable subscriptions on", u)
	}
	if u.OpenWireLister == nil {
		return nil, errNoOpenWire
	}
	return u.OpenWireLister.ListDurables(ctx, u.OpenWire(), broker, include)
}
