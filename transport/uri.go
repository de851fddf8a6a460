package transport

import (
	"context"
	"time"

	"github.com/brokernet/brokernet/internal/backoff"
)

// URI is a parsed broker URI of any protocol (stomp://, amqp://, tcp://, ...):
// what configuration, discovery and the command line hold, so that every place
// that takes a broker address takes all of them. Package transport/endpoint
// parses one. Two URIs are the same broker address when their WithSecrets are
// equal.
type URI interface {
	Endpoint
	// Protocol is "stomp", "amqp" or "openwire" (Info.Protocol of its connections).
	Protocol() string
	// Hostname is the host without the port (an IPv6 address without brackets).
	Hostname() string
	// HasPassword reports whether the URI carries a passcode of its own.
	HasPassword() bool
	// WithSecrets renders the URI with its passcode and every option, so that
	// another process can dial it. Never log it.
	WithSecrets() string
	// Public is what another brokernet member may learn of the URI (gossip
	// metadata): where the broker is and how to verify it, never how to log in,
	// which client id to use, which local files to read, or a management URL
	// (which would receive the credentials).
	Public() URI
	// WithDefaults fills in what the URI leaves open from the local
	// configuration; see Defaults.
	WithDefaults(d Defaults) URI
}

// Defaults are the local configuration's answers for a broker URI that does
// not say (a URI learnt from discovery never does).
type Defaults struct {
	// User and Password apply when the URI has no password; a login in the URI
	// wins over User.
	User, Password string
	// CAFile, CertFile and KeyFile apply to a TLS URI that names neither a CA
	// nor a client certificate. A transport without client certificates
	// (OpenWire) takes only CAFile.
	CAFile, CertFile, KeyFile string
	// Reconnect, when not zero, is the reconnect policy: a connector's
	// back-off options apply to every broker it dials.
	Reconnect Reconnect
}

// Reconnect is an exponential reconnect back-off, with ActiveMQ's option
// names: initialReconnectDelay (Initial), maxReconnectDelay (Max) and
// backOffMultiplier (Multiplier). Broker URIs carry one; the zero value means
// none given.
type Reconnect struct {
	// Initial is the delay before the first reconnect attempt.
	Initial time.Duration
	// Max caps the delay.
	Max time.Duration
	// Multiplier grows the delay after each failed attempt.
	Multiplier float64
}

// DefaultReconnect is the back-off of a URI that sets none: 1 s doubling to
// 30 s (ActiveMQ's failover defaults, with a longer first delay).
func DefaultReconnect() Reconnect { return Reconnect(backoff.Default()) }

// Delay is the delay before attempt n (0-based), with jitter.
func (r Reconnect) Delay(n int) time.Duration { return backoff.Policy(r).Delay(n) }

// Sleep waits Delay(n) or until ctx ends, reporting whether the delay passed.
func (r Reconnect) Sleep(ctx context.Context, n int) bool { return backoff.Policy(r).Sleep(ctx, n) }

// ApplyCredentials returns the login and password a URI with the given ones
// should use under d: the URI's own when it has a password.
func (d Defaults) ApplyCredentials(login, password string) (string, string) {
	if password != "" || d.User == "" && d.Password == "" {
		return login, password
	}
	if login == "" {
		login = d.User
	}
	return login, d.Password
}

// ApplyTLS returns the CA, certificate and key files a TLS URI with the given
// ones should use under d: d's when the URI names neither a CA nor a client
// certificate.
func (d Defaults) ApplyTLS(ca, cert, key string) (string, string, string) {
	if ca != "" || cert != "" {
		return ca, cert, key
	}
	return d.CAFile, d.CertFile, d.KeyFile
}

// ApplyReconnect returns the reconnect policy a URI with p should use under d:
// d's when it has one.
func (d Defaults) ApplyReconnect(p Reconnect) Reconnect {
	if d.Reconnect != (Reconnect{}) {
		return d.Reconnect
	}
	return p
}
