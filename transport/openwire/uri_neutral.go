package openwire

import (
	"github.com/brokernet/brokernet/transport"
)

var _ transport.URI = URI{}

// Protocol is "openwire".
func (u URI) Protocol() string { return "openwire" }

// Hostname is the host without the port.
func (u URI) Hostname() string { return u.Host }

// HasPassword reports whether the URI carries a password.
func (u URI) HasPassword() bool { return u.Password != "" }

// Public is u without credentials, client id or CA file name.
func (u URI) Public() transport.URI {
	u.User, u.Password = "", ""
	u.CAFile = ""
	u.ClientID = ""
	return u
}

// WithDefaults fills in credentials, the CA file (OpenWire URIs take no client
// certificate) and the reconnect policy from d.
func (u URI) WithDefaults(d transport.Defaults) transport.URI {
	u.User, u.Password = d.ApplyCredentials(u.User, u.Password)
	if u.TLS {
		u.CAFile, _, _ = d.ApplyTLS(u.CAFile, "", "")
	}
	u.Reconnect = d.ApplyReconnect(u.Reconnect)
	return u
}
