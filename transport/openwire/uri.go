package openwire

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/brokernet/brokernet/internal/backoff"
	"github.com/brokernet/brokernet/internal/uriredact"
	"github.com/brokernet/brokernet/transport"
)

// URI is a parsed OpenWire broker address, in ActiveMQ's own spelling:
//
//	tcp://[user:password@]host[:port][?option=value&...]
//	ssl://...    TLS with the system roots, or ?ca=FILE
//
// Options: clientId (the JMS client id, needed for durable subscriptions),
// ca (PEM file of trusted roots), serverName (TLS name to verify),
// wireFormat.maxInactivityDuration (ms or a Go duration, default 30s, 0
// disables keep-alives), wireFormat.maxFrameSize (bytes, default 64 MiB),
// wireFormat.tightEncodingEnabled (default true), and the reconnect options named as ActiveMQ's failover transport names
// them: initialReconnectDelay, maxReconnectDelay, backOffMultiplier.
type URI struct {
	TLS           bool
	Host          string
	Port          int
	User          string
	Password      string
	ClientID      string
	CAFile        string
	ServerName    string
	MaxInactivity time.Duration
	MaxFrameSize  int
	// Tight asks for OpenWire's tight encoding (wireFormat.tightEncodingEnabled):
	// smaller frames for a little more work on both sides.
	Tight     bool
	Reconnect transport.Reconnect
}

// defaultTight is the default of wireFormat.tightEncodingEnabled.
const defaultTight = true

// Default ports of ActiveMQ's openwire and ssl transport connectors.
const (
	DefaultPort    = 61616
	DefaultTLSPort = 61617
)

// Schemes reports whether scheme names OpenWire ("tcp", "ssl"), so that a
// front end can route a URI to ParseURI.
func Schemes(scheme string) bool { return scheme == "tcp" || scheme == "ssl" }

// ParseURI parses s. Its errors name the offending part and never contain the password.
func ParseURI(s string) (URI, error) {
	u := URI{MaxInactivity: 30 * time.Second, MaxFrameSize: DefaultMaxFrameSize, Tight: defaultTight, Reconnect: transport.DefaultReconnect()}
	if !strings.Contains(s, "://") {
		return u, fmt.Errorf("broker URI %q: missing scheme (want tcp://host:port or ssl://host:port)", uriredact.Redact(s))
	}
	if err := uriredact.CheckUserinfo(s); err != nil {
		return u, err
	}
	pu, err := url.Parse(s)
	if err != nil {
		return u, fmt.Errorf("broker URI %q: cannot parse (percent-encode special characters in the password)", uriredact.Redact(s))
	}
	shown := uriredact.Redact(s)
	switch pu.Scheme {
	case "tcp":
		u.Port = DefaultPort
	case "ssl":
		u.TLS, u.Port = true, DefaultTLSPort
	default:
		return u, fmt.Errorf("broker URI %q: unsupported scheme %q (want tcp:// or ssl://)", shown, pu.Scheme)
	}
	if pu.Opaque != "" || pu.Host == "" {
		return u, fmt.Errorf("broker URI %q: missing host", shown)
	}
	if pu.Path != "" && pu.Path != "/" {
		return u, fmt.Errorf("broker URI %q: unexpected path %q", shown, pu.Path)
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
		u.User = pu.User.Username()
		u.Password, _ = pu.User.Password()
	}
	for key, vals := range pu.Query() {
		v := vals[len(vals)-1]
		bad := func(why string) error {
			return fmt.Errorf("broker URI %q: option %s=%q: %s", shown, key, v, why)
		}
		switch key {
		case "clientId", "jms.clientID":
			if !fitsUTF(v) {
				return u, bad("too long")
			}
			u.ClientID = v
		case "ca", "caFile":
			u.CAFile = v
		case "serverName":
			u.ServerName = v
		case "wireFormat.maxInactivityDuration":
			d, err := backoff.ParseMillis(v)
			if err != nil {
				return u, bad(err.Error())
			}
			u.MaxInactivity = d
		case "wireFormat.maxFrameSize":
			n, err := strconv.Atoi(v)
			if err != nil || n < 1024 {
				return u, bad("want a number of bytes >= 1024")
			}
			u.MaxFrameSize = n
		case "wireFormat.tightEncodingEnabled":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return u, bad("want true or false")
			}
			u.Tight = b
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
	if (u.CAFile != "" || u.ServerName != "") && !u.TLS {
		return u, fmt.Errorf("broker URI %q: options ca and serverName need ssl://", shown)
	}
	if !fitsUTF(u.User) || !fitsUTF(u.Password) {
		return u, fmt.Errorf("broker URI %q: user or password too long", shown)
	}
	return u, nil
}

// Addr is host:port for dialing.
func (u URI) Addr() string { return net.JoinHostPort(u.Host, strconv.Itoa(u.Port)) }

// String renders the URI with the password redacted; it is safe to log.
func (u URI) String() string {
	v := u.url()
	if u.Password != "" {
		v.User = url.UserPassword(u.User, "***")
	}
	return strings.Replace(v.String(), "%2A%2A%2A", "***", 1)
}

// WithSecrets renders the URI with its password and every option, so that
// another process can dial it. Never log it.
func (u URI) WithSecrets() string {
	v := u.url()
	return v.String()
}

func (u URI) url() url.URL {
	v := url.URL{Scheme: "tcp", Host: u.Addr()}
	if u.TLS {
		v.Scheme = "ssl"
	}
	if u.User != "" || u.Password != "" {
		v.User = url.UserPassword(u.User, u.Password)
		if u.Password == "" {
			v.User = url.User(u.User)
		}
	}
	q := url.Values{}
	if u.ClientID != "" {
		q.Set("clientId", u.ClientID)
	}
	if u.CAFile != "" {
		q.Set("ca", u.CAFile)
	}
	if u.ServerName != "" {
		q.Set("serverName", u.ServerName)
	}
	if u.MaxInactivity != 30*time.Second {
		q.Set("wireFormat.maxInactivityDuration", strconv.FormatInt(u.MaxInactivity.Milliseconds(), 10))
	}
	if u.MaxFrameSize != DefaultMaxFrameSize {
		q.Set("wireFormat.maxFrameSize", strconv.Itoa(u.MaxFrameSize))
	}
	if u.Tight != defaultTight {
		q.Set("wireFormat.tightEncodingEnabled", strconv.FormatBool(u.Tight))
	}
	(*backoff.Policy)(&u.Reconnect).AddOptions(q)
	v.RawQuery = q.Encode()
	return v
}
