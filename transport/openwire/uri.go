package openwire

import (
	"errors"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/brokernet/brokernet/internal/backoff"
	"github.com/brokernet/brokernet/internal/brokeruri"
	"github.com/brokernet/brokernet/internal/tlsconf"
	"github.com/brokernet/brokernet/transport"
)

// DefaultMaxInactivity is the wireFormat.maxInactivityDuration brokernet asks
// for: the broker and the bridge each write a KeepAliveInfo when idle for a
// third of it, and the bridge gives up on a connection silent for twice it,
// so that a half-open connection is noticed within 10 s.
const DefaultMaxInactivity = 5 * time.Second

// URI is a parsed OpenWire broker address, in ActiveMQ's own spelling:
//
//	tcp://[user:password@]host[:port][?option=value&...]
//	ssl://...    TLS with the system roots, or ?ca=FILE
//
// Options: clientId (the JMS client id, needed for durable subscriptions),
// ca (PEM file of trusted roots), serverName (TLS name to verify),
// wireFormat.maxInactivityDuration (ms or a Go duration, default 5s, 0
// disables keep-alives; ActiveMQ's own clients default to 30s, which leaves a
// half-open connection unnoticed for over a minute), wireFormat.maxFrameSize (bytes, default 64 MiB),
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

// syntax is how OpenWire URIs are spelt (ActiveMQ's tcp and ssl transport
// connectors). They take no client certificate.
var syntax = brokeruri.Syntax{Plain: "tcp", TLS: "ssl", Port: DefaultPort, TLSPort: DefaultTLSPort, Secret: "password"}

// ParseURI parses s. Its errors name the offending part and never contain the password.
func ParseURI(s string) (URI, error) {
	u := URI{MaxInactivity: DefaultMaxInactivity, MaxFrameSize: DefaultMaxFrameSize, Tight: defaultTight, Reconnect: transport.DefaultReconnect()}
	p, err := brokeruri.Parse(s, syntax)
	if err != nil {
		return u, err
	}
	u.TLS, u.Host, u.Port, u.User, u.Password = p.TLS, p.Host, p.Port, p.User, p.Password
	var tlsOpts tlsconf.Options
	err = p.Options(&tlsOpts, &u.Reconnect, func(name, v string) (bool, error) {
		switch name {
		case "clientId", "jms.clientID":
			if !fitsUTF(v) {
				return true, errors.New("too long")
			}
			u.ClientID = v
		case "wireFormat.maxInactivityDuration":
			d, err := backoff.ParseMillis(v)
			if err != nil {
				return true, err
			}
			u.MaxInactivity = d
		case "wireFormat.maxFrameSize":
			n, err := strconv.Atoi(v)
			if err != nil || n < 1024 {
				return true, errors.New("want a number of bytes >= 1024")
			}
			u.MaxFrameSize = n
		case "wireFormat.tightEncodingEnabled":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return true, errors.New("want true or false")
			}
			u.Tight = b
		default:
			return false, nil
		}
		return true, nil
	})
	u.CAFile, u.ServerName = tlsOpts.CAFile, tlsOpts.ServerName
	if err != nil {
		return u, err
	}
	if err := p.CheckTLS(tlsOpts, false); err != nil {
		return u, err
	}
	if !fitsUTF(u.User) || !fitsUTF(u.Password) {
		return u, p.Errorf("user or password too long")
	}
	return u, nil
}

// TLSOptions returns the URI's TLS settings (meaningful when TLS is set).
func (u URI) TLSOptions() tlsconf.Options {
	return tlsconf.Options{CAFile: u.CAFile, ServerName: u.ServerName}
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
	v := url.URL{Scheme: syntax.Scheme(u.TLS), Host: u.Addr()}
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
	if u.MaxInactivity != DefaultMaxInactivity {
		q.Set("wireFormat.maxInactivityDuration", strconv.FormatInt(u.MaxInactivity.Milliseconds(), 10))
	}
	if u.MaxFrameSize != DefaultMaxFrameSize {
		q.Set("wireFormat.maxFrameSize", strconv.Itoa(u.MaxFrameSize))
	}
	if u.Tight != defaultTight {
		q.Set("wireFormat.tightEncodingEnabled", strconv.FormatBool(u.Tight))
	}
	brokeruri.SetOptions(q, u.TLSOptions(), u.Reconnect)
	v.RawQuery = q.Encode()
	return v
}
