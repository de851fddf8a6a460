package stomp

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/brokernet/brokernet/internal/backoff"
	"github.com/brokernet/brokernet/internal/tlsconf"
	"github.com/brokernet/brokernet/internal/uriredact"
	"github.com/brokernet/brokernet/transport"
)

// URI is a parsed broker address:
//
//	stomp://[login:passcode@]host[:port][?option=value&...]
//	stomp+ssl://...    TLS with the system roots, or ?ca=FILE
//
// Options: vhost (the STOMP host header, default "/"), clientId (for durable
// subscriptions), heartBeat (ms or a Go duration, default 10s, 0 disables),
// initialReconnectDelay, maxReconnectDelay (ms or Go durations), backOffMultiplier,
// ca (PEM file of trusted roots), cert and key (PEM client certificate and key),
// serverName (TLS name to verify) for stomp+ssl; flavor (activemq, rabbitmq or
// artemis: overrides the CONNECTED server header), management (RabbitMQ
// management API URL, default http://HOST:15672).
type URI struct {
	TLS        bool
	Host       string
	Port       int
	Login      string
	Passcode   string
	VHost      string
	ClientID   string
	HeartBeat  time.Duration
	CAFile     string
	CertFile   string
	KeyFile    string
	ServerName string
	Reconnect  transport.Reconnect
	// Flavour, when not Unknown, is forced by ?flavor= and wins over the
	// server header.
	Flavour Flavour
	// Management is the ?management= URL; "" means the default.
	Management string
}

// TLSOptions returns the URI's TLS settings (meaningful when TLS is set).
func (u URI) TLSOptions() tlsconf.Options {
	return tlsconf.Options{CAFile: u.CAFile, CertFile: u.CertFile, KeyFile: u.KeyFile, ServerName: u.ServerName}
}

// DefaultPort is the IANA STOMP port, which ActiveMQ, RabbitMQ and Artemis use.
const DefaultPort = 61613

// ParseURI parses s. Its errors name the offending part and never contain the
// passcode, however malformed s is: they show s through Redact. The files a
// stomp+ssl URI names (ca, cert, key) are loaded once here, so a missing one is
// an error at start rather than on every reconnect.
func ParseURI(s string) (URI, error) {
	return parseURI(s, true)
}

// ParseRemoteURI parses a URI another process advertised (gossip metadata): as
// ParseURI, but it never touches the local files the options name, so a peer
// cannot make this process open them.
func ParseRemoteURI(s string) (URI, error) {
	return parseURI(s, false)
}

func parseURI(s string, checkFiles bool) (URI, error) {
	u := URI{VHost: "/", HeartBeat: 10 * time.Second, Reconnect: transport.DefaultReconnect(), Port: DefaultPort}
	shown := Redact(s)
	if !strings.Contains(s, "://") {
		return u, fmt.Errorf("broker URI %q: missing scheme (want stomp://host:port or stomp+ssl://host:port)", shown)
	}
	if err := uriredact.CheckUserinfo(s); err != nil {
		return u, err
	}
	pu, err := url.Parse(s)
	if err != nil {
		return u, fmt.Errorf("broker URI %q: cannot parse (percent-encode special characters in the passcode)", shown)
	}
	switch pu.Scheme {
	case "stomp":
	case "stomp+ssl", "stomp+tls", "stomps":
		u.TLS = true
	case "":
		return u, fmt.Errorf("broker URI %q: missing scheme (want stomp:// or stomp+ssl://)", shown)
	default:
		return u, fmt.Errorf("broker URI %q: unsupported scheme %q (want stomp:// or stomp+ssl://)", shown, pu.Scheme)
	}
	if pu.Opaque != "" || pu.Host == "" {
		return u, fmt.Errorf("broker URI %q: missing host", shown)
	}
	if pu.Path != "" && pu.Path != "/" {
		return u, fmt.Errorf("broker URI %q: unexpected path %q (use ?vhost= for a virtual host)", shown, pu.Path)
	}
	u.Host = pu.Hostname()
	if _, err := netip.ParseAddr(u.Host); u.Host == "" || strings.Contains(u.Host, ":") && err != nil {
		return u, fmt.Errorf("broker URI %q: missing or malformed host", shown)
	}
	if p := pu.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n <= 0 || n > 65535 {
			return u, fmt.Errorf("broker URI %q: bad port %q", shown, p)
		}
		u.Port = n
	}
	if pu.User != nil {
		u.Login = pu.User.Username()
		u.Passcode, _ = pu.User.Password()
	}
	for key, vals := range pu.Query() {
		v := vals[len(vals)-1]
		bad := func(why string) error {
			return fmt.Errorf("broker URI %q: option %s=%q: %s", shown, key, v, why)
		}
		switch key {
		case "vhost", "host":
			u.VHost = v
		case "clientId", "client-id":
			u.ClientID = v
		case "ca", "caFile":
			u.CAFile = v
		case "cert", "certFile":
			u.CertFile = v
		case "key", "keyFile":
			u.KeyFile = v
		case "serverName":
			u.ServerName = v
		case "flavor", "flavour":
			f, err := ParseFlavour(v)
			if err != nil {
				return u, bad(err.Error())
			}
			u.Flavour = f
		case "management":
			mu, err := url.Parse(v)
			if err != nil || (mu.Scheme != "http" && mu.Scheme != "https") || mu.Host == "" {
				return u, fmt.Errorf("broker URI %q: option management: want http://HOST:PORT or https://HOST:PORT", shown)
			}
			u.Management = v
		case "heartBeat", "heartbeat":
			d, err := backoff.ParseMillis(v)
			if err != nil {
				return u, bad(err.Error())
			}
			u.HeartBeat = d
		default:
			known, err := (*backoff.Policy)(&u.Reconnect).SetOption(key, v)
			if err != nil {
				return u, bad(err.Error())
			}
			if !known {
				return u, fmt.Errorf("broker URI %q: unknown option %q", shown, key)
			}
		}
	}
	if err := (*backoff.Policy)(&u.Reconnect).Check(); err != nil {
		return u, fmt.Errorf("broker URI %q: %w", shown, err)
	}
	if !u.TLS {
		for _, o := range []struct{ name, v string }{{"ca", u.CAFile}, {"cert", u.CertFile}, {"key", u.KeyFile}, {"serverName", u.ServerName}} {
			if o.v != "" {
				return u, fmt.Errorf("broker URI %q: option %s needs stomp+ssl://", shown, o.name)
			}
		}
		return u, nil
	}
	if err := u.TLSOptions().Validate(); err != nil {
		return u, fmt.Errorf("broker URI %q: %w", shown, err)
	}
	if !checkFiles {
		return u, nil
	}
	if err := u.TLSOptions().Check(); err != nil {
		return u, fmt.Errorf("broker URI %q: %w", shown, err)
	}
	return u, nil
}

// Addr is host:port for dialing.
func (u URI) Addr() string { return net.JoinHostPort(u.Host, strconv.Itoa(u.Port)) }

// String renders the URI with the passcode redacted; it is safe to log.
func (u URI) String() string {
	var b strings.Builder
	b.WriteString("stomp")
	if u.TLS {
		b.WriteString("+ssl")
	}
	b.WriteString("://")
	if u.Login != "" {
		b.WriteString(url.User(u.Login).String())
		if u.Passcode != "" {
			b.WriteString(":***")
		}
		b.WriteByte('@')
	}
	b.WriteString(u.Addr())
	if u.VHost != "/" {
		b.WriteString("?vhost=" + url.QueryEscape(u.VHost))
	}
	return b.String()
}

// WithSecrets renders the URI with its passcode and every option, so that another
// process can dial it. Never log it.
func (u URI) WithSecrets() string {
	v := url.URL{Scheme: "stomp", Host: u.Addr()}
	if u.TLS {
		v.Scheme = "stomp+ssl"
	}
	if u.Login != "" {
		v.User = url.UserPassword(u.Login, u.Passcode)
		if u.Passcode == "" {
			v.User = url.User(u.Login)
		}
	}
	q := url.Values{}
	if u.VHost != "/" {
		q.Set("vhost", u.VHost)
	}
	if u.ClientID != "" {
		q.Set("clientId", u.ClientID)
	}
	if u.CAFile != "" {
		q.Set("ca", u.CAFile)
	}
	if u.CertFile != "" {
		q.Set("cert", u.CertFile)
	}
	if u.KeyFile != "" {
		q.Set("key", u.KeyFile)
	}
	if u.ServerName != "" {
		q.Set("serverName", u.ServerName)
	}
	if u.Flavour != Unknown {
		q.Set("flavor", u.Flavour.String())
	}
	if u.Management != "" {
		q.Set("management", u.Management)
	}
	if u.HeartBeat != 10*time.Second {
		q.Set("heartBeat", u.HeartBeat.String())
	}
	(*backoff.Policy)(&u.Reconnect).AddOptions(q)
	v.RawQuery = q.Encode()
	return v.String()
}

// Redact hides the passcode of a URI-looking string however malformed it is
// (see uriredact.Redact).
func Redact(s string) string { return uriredact.Redact(s) }

// EventsURI is u itself: a RabbitMQ broker's demand is read over STOMP.
func (u URI) EventsURI() (URI, error) { return u, nil }
