// Package brokeruri parses what every broker URI holds whatever its protocol
// (scheme, host, port, credentials, the TLS and reconnect options), so that the
// transports' parsers differ only in their own options and all say the same
// errors, which never show a password.
package brokeruri

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/brokernet/brokernet/internal/backoff"
	"github.com/brokernet/brokernet/internal/tlsconf"
	"github.com/brokernet/brokernet/internal/uriredact"
	"github.com/brokernet/brokernet/transport"
)

// Syntax is how one transport spells its URIs.
type Syntax struct {
	// Plain and TLS are the schemes without and with TLS ("stomp",
	// "stomp+ssl"); errors name them.
	Plain, TLS string
	// TLSAliases are further schemes that mean TLS ("stomps").
	TLSAliases []string
	// Port and TLSPort are the default ports without and with TLS.
	Port, TLSPort int
	// Secret is what errors call the password ("passcode" in STOMP).
	Secret string
	// PathHint, when set, follows the unexpected-path error ("use ?vhost= for
	// a virtual host").
	PathHint string
	// ClientCert tells whether the URI takes a client certificate (cert, key);
	// OpenWire's does not.
	ClientCert bool
}

// URI is the protocol-neutral part of a parsed broker URI.
type URI struct {
	TLS  bool
	Host string
	// Port is the port the URI names, or the syntax's default.
	Port           int
	User, Password string

	syntax Syntax
	shown  string // the URI as errors show it: through uriredact.Redact
	query  url.Values
}

// Parse parses s as far as every protocol agrees: scheme, host, port and
// credentials. Its errors show s through uriredact.Redact, so they never
// contain the password however malformed s is.
func Parse(s string, syn Syntax) (URI, error) {
	u := URI{syntax: syn, shown: uriredact.Redact(s)}
	if !strings.Contains(s, "://") {
		return u, u.Errorf("missing scheme (want %s://host:port or %s://host:port)", syn.Plain, syn.TLS)
	}
	if err := uriredact.CheckUserinfo(s); err != nil {
		return u, err
	}
	pu, err := url.Parse(s)
	if err != nil {
		return u, u.Errorf("cannot parse (percent-encode special characters in the %s)", syn.Secret)
	}
	switch {
	case pu.Scheme == syn.Plain:
	case pu.Scheme == syn.TLS || slices.Contains(syn.TLSAliases, pu.Scheme):
		u.TLS = true
	case pu.Scheme == "":
		return u, u.Errorf("missing scheme (want %s:// or %s://)", syn.Plain, syn.TLS)
	default:
		return u, u.Errorf("unsupported scheme %q (want %s:// or %s://)", pu.Scheme, syn.Plain, syn.TLS)
	}
	if pu.Opaque != "" || pu.Host == "" {
		return u, u.Errorf("missing host")
	}
	if pu.Path != "" && pu.Path != "/" {
		if syn.PathHint != "" {
			return u, u.Errorf("unexpected path %q (%s)", pu.Path, syn.PathHint)
		}
		return u, u.Errorf("unexpected path %q", pu.Path)
	}
	u.Host = pu.Hostname()
	if _, err := netip.ParseAddr(u.Host); u.Host == "" || strings.Contains(u.Host, ":") && err != nil {
		return u, u.Errorf("missing or malformed host")
	}
	u.Port = syn.Port
	if u.TLS {
		u.Port = syn.TLSPort
	}
	if p := pu.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n <= 0 || n > 65535 {
			return u, u.Errorf("bad port %q", p)
		}
		u.Port = n
	}
	if pu.User != nil {
		u.User = pu.User.Username()
		u.Password, _ = pu.User.Password()
	}
	u.query = pu.Query()
	return u, nil
}

// Errorf returns an error about the URI: `broker URI "<redacted URI>": ` and
// the message.
func (u URI) Errorf(format string, args ...any) error {
	return fmt.Errorf("broker URI %q: %w", u.shown, fmt.Errorf(format, args...))
}

// Options reads the URI's options, in the order of their names; of an option
// given more than once the last value counts. Each goes to set first, which
// reports whether it knows the name and what is wrong with the value; then,
// unknown to set, to tls (ca, serverName, and cert and key when the syntax
// takes a client certificate) and reconnect (the back-off options). A name none
// of them knows is an error, as is a reconnect policy that does not hold
// together. Errors name the option and show its value, unless set's error came
// from HideValue.
func (u URI) Options(tls *tlsconf.Options, r *transport.Reconnect, set func(name, v string) (bool, error)) error {
	reconnect := (*backoff.Policy)(r)
	for _, name := range slices.Sorted(maps.Keys(u.query)) {
		vals := u.query[name]
		v := vals[len(vals)-1]
		known, err := set(name, v)
		if !known {
			known = u.setTLS(tls, name, v)
		}
		if !known {
			known, err = reconnect.SetOption(name, v)
		}
		if err != nil {
			var h hidden
			if errors.As(err, &h) {
				return u.Errorf("option %s: %s", name, h.why)
			}
			return u.Errorf("option %s=%q: %s", name, v, err)
		}
		if !known {
			return u.Errorf("unknown option %q", name)
		}
	}
	if err := reconnect.Check(); err != nil {
		return u.Errorf("%w", err)
	}
	return nil
}

// setTLS sets the TLS option name to v, reporting whether the syntax takes one
// so named.
func (u URI) setTLS(o *tlsconf.Options, name, v string) bool {
	switch name {
	case "ca", "caFile":
		o.CAFile = v
	case "serverName":
		o.ServerName = v
	case "cert", "certFile":
		if !u.syntax.ClientCert {
			return false
		}
		o.CertFile = v
	case "key", "keyFile":
		if !u.syntax.ClientCert {
			return false
		}
		o.KeyFile = v
	default:
		return false
	}
	return true
}

// CheckTLS checks the TLS options Options read: without TLS there may be
// none; with TLS cert and key come together, and with loadFiles the files are
// read now, so that a missing one is an error at start rather than on every
// reconnect. Peers' URIs (gossip) are checked without loadFiles, so that a
// peer cannot make this process open files.
func (u URI) CheckTLS(o tlsconf.Options, loadFiles bool) error {
	if !u.TLS {
		for _, opt := range []struct{ name, v string }{{"ca", o.CAFile}, {"cert", o.CertFile}, {"key", o.KeyFile}, {"serverName", o.ServerName}} {
			if opt.v != "" {
				return u.Errorf("option %s needs %s://", opt.name, u.syntax.TLS)
			}
		}
		return nil
	}
	if err := o.Validate(); err != nil {
		return u.Errorf("%w", err)
	}
	if loadFiles {
		if err := o.Check(); err != nil {
			return u.Errorf("%w", err)
		}
	}
	return nil
}

// hidden is an option error that must not show the value, which may hold
// credentials.
type hidden struct{ why string }

func (h hidden) Error() string { return h.why }

// HideValue returns an error for set (see Options) whose message shows the
// option's name and why, never its value.
func HideValue(why string) error { return hidden{why} }

// ManagementURL checks the value of a management option (a RabbitMQ management
// API URL). Its error does not show the value, which may hold credentials.
func ManagementURL(v string) error {
	mu, err := url.Parse(v)
	if err != nil || (mu.Scheme != "http" && mu.Scheme != "https") || mu.Host == "" {
		return HideValue("want http://HOST:PORT or https://HOST:PORT")
	}
	return nil
}

// Scheme is the syntax's scheme without or with TLS, as URIs are rendered.
func (syn Syntax) Scheme(tls bool) string {
	if tls {
		return syn.TLS
	}
	return syn.Plain
}

// Logged renders scheme://login:***@addr for a URI's String: the login
// readable, the password (if any) as ***, nothing of either without a login.
func Logged(scheme, login, password, addr string) string {
	var b strings.Builder
	b.WriteString(scheme + "://")
	if login != "" {
		b.WriteString(url.User(login).String())
		if password != "" {
			b.WriteString(":***")
		}
		b.WriteByte('@')
	}
	b.WriteString(addr)
	return b.String()
}

// Userinfo is the credentials a URI's WithSecrets renders: nil without a
// login.
func Userinfo(login, password string) *url.Userinfo {
	switch {
	case login == "":
		return nil
	case password == "":
		return url.User(login)
	}
	return url.UserPassword(login, password)
}

// SetOptions adds to q the TLS and reconnect options, those that differ from
// their defaults: what Options reads back.
func SetOptions(q url.Values, tls tlsconf.Options, r transport.Reconnect) {
	reconnect := backoff.Policy(r)
	for _, o := range []struct{ name, v string }{{"ca", tls.CAFile}, {"cert", tls.CertFile}, {"key", tls.KeyFile}, {"serverName", tls.ServerName}} {
		if o.v != "" {
			q.Set(o.name, o.v)
		}
	}
	reconnect.AddOptions(q)
}
