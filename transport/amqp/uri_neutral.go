package amqp

import (
	"github.com/brokernet/brokernet/transport"
)

var _ transport.URI = URI{}

// Protocol is "amqp".
func (u URI) Protocol() string { return "amqp" }

// Hostname is the host without the port.
func (u URI) Hostname() string { return u.Host }

// HasPassword reports whether the URI carries a password.
func (u URI) HasPassword() bool { return u.Password != "" }

// Public is u without credentials, container id, TLS file names or management URL.
func (u URI) Public() transport.URI {
	u.User, u.Password = "", ""
	u.CAFile, u.CertFile, u.KeyFile = "", "", ""
	u.ContainerID = ""
	// The management API receives the broker credentials: only the advertised
	// broker's own host (the default) may get them.
	u.Management = ""
	return u
}

// WithDefaults fills in credentials, TLS files and the reconnect policy from d.
func (u URI) WithDefaults(d transport.Defaults) transport.URI {
	u.User, u.Password = d.ApplyCredentials(u.User, u.Password)
	if u.TLS {
		u.CAFile, u.CertFile, u.KeyFile = d.ApplyTLS(u.CAFile, u.CertFile, u.KeyFile)
	}
	u.Reconnect = d.ApplyReconnect(u.Reconnect)
	return u
}
