package stomp

import (
	"github.com/brokernet/brokernet/transport"
)

var _ transport.URI = URI{}

// Protocol is "stomp".
func (u URI) Protocol() string { return "stomp" }

// Hostname is the host without the port.
func (u URI) Hostname() string { return u.Host }

// HasPassword reports whether the URI carries a passcode.
func (u URI) HasPassword() bool { return u.Passcode != "" }

// Public is u without credentials, client id, TLS file names or management URL.
func (u URI) Public() transport.URI {
	u.Login, u.Passcode = "", ""
	u.CAFile, u.CertFile, u.KeyFile = "", "", ""
	u.ClientID = ""
	// The management API is where a RabbitMQ broker's id is asked, with the
	// broker credentials: only the advertised broker's own host (the default)
	// may get them.
	u.Management = ""
	return u
}

// WithDefaults fills in credentials, TLS files and the reconnect policy from d.
func (u URI) WithDefaults(d transport.Defaults) transport.URI {
	u.Login, u.Passcode = d.ApplyCredentials(u.Login, u.Passcode)
	if u.TLS {
		u.CAFile, u.CertFile, u.KeyFile = d.ApplyTLS(u.CAFile, u.CertFile, u.KeyFile)
	}
	u.Reconnect = d.ApplyReconnect(u.Reconnect)
	return u
}
