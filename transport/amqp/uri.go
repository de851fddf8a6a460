package amqp

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/url"
	"strconv"
	"time"

	"github.com/brokernet/brokernet/internal/backoff"
	"github.com/brokernet/brokernet/internal/brokeruri"
	"github.com/brokernet/brokernet/internal/tlsconf"
	"github.com/brokernet/brokernet/transport"
)

var _ transport.Endpoint = URI{}

// URI is a parsed AMQP 1.0 broker address:
//
//	amqp://[user:password@]host[:port][?option=value&...]
//	amqps://...    TLS with the system roots, or ?ca=FILE
//
// Options: vhost (RabbitMQ virtual host, sent as the open frame's hostname
// "vhost:NAME"; default: the broker's default vhost), containerId (default
// "brokernet-" and a random suffix), idleTimeout (alias heartBeat; ms or a Go
// duration, default 10s, 0 disables; the broker must send a frame at least that
// often, and go-amqp sends empty frames every half of the broker's own timeout),
// flavor (activemq, rabbitmq, artemis: overrides what the open frame says),
// initialReconnectDelay, maxReconnectDelay, backOffMultiplier (as for STOMP
// URIs), and for amqps: ca (PEM file of trusted roots), cert and key (PEM client
// certificate and its key, both or neither), serverName (TLS name to verify).
type URI struct {
	TLS         bool
	Host        string
	Port        int
	User        string
	Password    string
	VHost       string
	ContainerID string
	IdleTimeout time.Duration
	// Flavour forced by ?flavor=, or UnknownFlavour to learn it at connect.
	Flavour    transport.Flavour
	CAFile     string
	CertFile   string
	KeyFile    string
	ServerName string
	Reconnect  transport.Reconnect
	// StompPort is where a RabbitMQ broker's STOMP plugin listens: its demand
	// (the event exchange) is read over STOMP, because RabbitMQ 3.10's events
	// carry no data over AMQP 1.0. Default 61613 (?stompPort=).
	StompPort int
	// Management is the RabbitMQ management API URL (?management=); "" is
	// http://HOST:15672.
	Management string
	// ServerNamedTopics makes topic subscriptions on RabbitMQ attach to
	// "/exchange/amq.topic/KEY" as third-party clients do, each getting a
	// server-named queue that RabbitMQ 3.10 leaves behind (the caller deletes
	// it), instead of the connection's shared topic queue (topics.go), which
	// demand sources take for the bridge's own. For test clients; no URI
	// option sets it.
	ServerNamedTopics bool
}

// Default ports (AMQP 1.0 §2.2: 5672, and 5671 for TLS).
const (
	DefaultPort    = 5672
	DefaultTLSPort = 5671
)

// defaultIdleTimeout is the idle time-out brokernet announces: the broker
// sends a frame at least this often (RabbitMQ every half of it), and a
// connection silent this long ends, so a half-open one is noticed within 10 s.
const defaultIdleTimeout = 10 * time.Second

// syntax is how AMQP 1.0 URIs are spelt.
var syntax = brokeruri.Syntax{
	Plain: "amqp", TLS: "amqps", TLSAliases: []string{"amqp+ssl", "amqp+tls"},
	Port: DefaultPort, TLSPort: DefaultTLSPort,
	Secret: "password", PathHint: "use ?vhost= for a virtual host", ClientCert: true,
}

// ParseURI parses s. Its errors name the offending part and never contain the
// password. It reads none of the files the TLS options name: peers' URIs
// (gossip) are parsed here too, and must not make this process open files.
func ParseURI(s string) (URI, error) {
	u := URI{IdleTimeout: defaultIdleTimeout, Reconnect: transport.DefaultReconnect()}
	p, err := brokeruri.Parse(s, syntax)
	if err != nil {
		return u, err
	}
	u.TLS, u.Host, u.Port, u.User, u.Password = p.TLS, p.Host, p.Port, p.User, p.Password
	var tlsOpts tlsconf.Options
	err = p.Options(&tlsOpts, &u.Reconnect, func(name, v string) (bool, error) {
		switch name {
		case "vhost":
			if v == "" {
				return true, errors.New("empty vhost")
			}
			u.VHost = v
		case "containerId", "container-id":
			u.ContainerID = v
		case "idleTimeout", "heartBeat", "heartbeat":
			d, err := backoff.ParseMillis(v)
			if err != nil {
				return true, err
			}
			u.IdleTimeout = d
		case "flavor", "flavour":
			f, err := transport.ParseFlavour(v)
			if err != nil {
				return true, err
			}
			u.Flavour = f
		case "stompPort":
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 || n > 65535 {
				return true, errors.New("want a port number")
			}
			u.StompPort = n
		case "management":
			if err := brokeruri.ManagementURL(v); err != nil {
				return true, err
			}
			u.Management = v
		default:
			return false, nil
		}
		return true, nil
	})
	u.CAFile, u.CertFile, u.KeyFile, u.ServerName = tlsOpts.CAFile, tlsOpts.CertFile, tlsOpts.KeyFile, tlsOpts.ServerName
	if err != nil {
		return u, err
	}
	return u, p.CheckTLS(tlsOpts, false)
}

// Addr is host:port for dialing.
func (u URI) Addr() string { return net.JoinHostPort(u.Host, strconv.Itoa(u.Port)) }

// Backoff is the reconnect policy the URI asks for.
func (u URI) Backoff() transport.Reconnect { return u.Reconnect }

// Dial connects; see DialConn. opts.ClientID becomes the container-id unless
// the URI sets containerId.
func (u URI) Dial(ctx context.Context, opts transport.DialOptions) (transport.Conn, error) {
	if opts.ClientID != "" && u.ContainerID == "" {
		u.ContainerID = opts.ClientID
	}
	c, err := DialConn(ctx, u)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// String renders the URI with the password redacted; it is safe to log.
func (u URI) String() string {
	s := brokeruri.Logged(syntax.Scheme(u.TLS), u.User, u.Password, u.Addr())
	if u.VHost != "" {
		s += "?vhost=" + url.QueryEscape(u.VHost)
	}
	return s
}

// WithSecrets renders the URI with its password and every option, so that another
// process can dial it. Never log it.
func (u URI) WithSecrets() string {
	v := url.URL{Scheme: syntax.Scheme(u.TLS), Host: u.Addr(), User: brokeruri.Userinfo(u.User, u.Password)}
	q := url.Values{}
	set := func(k, val string) {
		if val != "" {
			q.Set(k, val)
		}
	}
	set("vhost", u.VHost)
	set("containerId", u.ContainerID)
	set("management", u.Management)
	if u.StompPort != 0 {
		q.Set("stompPort", strconv.Itoa(u.StompPort))
	}
	if u.Flavour != transport.UnknownFlavour {
		q.Set("flavor", u.Flavour.String())
	}
	if u.IdleTimeout != defaultIdleTimeout {
		q.Set("idleTimeout", u.IdleTimeout.String())
	}
	brokeruri.SetOptions(q, u.TLSOptions(), u.Reconnect)
	v.RawQuery = q.Encode()
	return v.String()
}

// TLSOptions returns the URI's TLS settings (meaningful when TLS is set).
func (u URI) TLSOptions() tlsconf.Options {
	return tlsconf.Options{CAFile: u.CAFile, CertFile: u.CertFile, KeyFile: u.KeyFile, ServerName: u.ServerName}
}

// tlsConfig builds the client TLS configuration the URI asks for.
func (u URI) tlsConfig() (*tls.Config, error) { return u.TLSOptions().Config(u.Host) }
