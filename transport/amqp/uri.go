package amqp

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/brokernet/brokernet/internal/backoff"
	"github.com/brokernet/brokernet/internal/uriredact"
	"github.com/brokernet/brokernet/transport"
	"github.com/brokernet/brokernet/transport/stomp"
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
// duration, default 20s, 0 disables; the broker must send a frame at least that
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
	Reconnect  backoff.Policy
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

const defaultIdleTimeout = 20 * time.Second

// ParseURI parses s. Its errors name the offending part and never contain the password.
func ParseURI(s string) (URI, error) {
	u := URI{IdleTimeout: defaultIdleTimeout, Reconnect: backoff.Default()}
	if !strings.Contains(s, "://") {
		return u, fmt.Errorf("broker URI %q: missing scheme (want amqp://host:port or amqps://host:port)", uriredact.Redact(s))
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
	case "amqp":
		u.Port = DefaultPort
	case "amqps", "amqp+ssl", "amqp+tls":
		u.TLS = true
		u.Port = DefaultTLSPort
	default:
		return u, fmt.Errorf("broker URI %q: unsupported scheme %q (want amqp:// or amqps://)", shown, pu.Scheme)
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
		u.User = pu.User.Username()
		u.Password, _ = pu.User.Password()
	}
	for key, vals := range pu.Query() {
		v := vals[len(vals)-1]
		bad := func(why string) error {
			return fmt.Errorf("broker URI %q: option %s=%q: %s", shown, key, v, why)
		}
		switch key {
		case "vhost":
			if v == "" {
				return u, bad("empty vhost")
			}
			u.VHost = v
		case "containerId", "container-id":
			u.ContainerID = v
		case "idleTimeout", "heartBeat", "heartbeat":
			d, err := backoff.ParseMillis(v)
			if err != nil {
				return u, bad(err.Error())
			}
			u.IdleTimeout = d
		case "flavor", "flavour":
			f, ok := parseFlavour(v)
			if !ok {
				return u, bad("want activemq, rabbitmq or artemis")
			}
			u.Flavour = f
		case "stompPort":
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 || n > 65535 {
				return u, bad("want a port number")
			}
			u.StompPort = n
		case "management":
			mu, err := url.Parse(v)
			if err != nil || (mu.Scheme != "http" && mu.Scheme != "https") || mu.Host == "" {
				return u, bad("want an http:// or https:// URL")
			}
			u.Management = v
		case "ca", "caFile":
			u.CAFile = v
		case "cert", "certFile":
			u.CertFile = v
		case "key", "keyFile":
			u.KeyFile = v
		case "serverName":
			u.ServerName = v
		default:
			known, err := u.Reconnect.SetOption(key, v)
			if err != nil {
				return u, bad(err.Error())
			}
			if !known {
				return u, fmt.Errorf("broker URI %q: unknown option %q", shown, key)
			}
		}
	}
	if err := u.Reconnect.Check(); err != nil {
		return u, fmt.Errorf("broker URI %q: %w", shown, err)
	}
	for _, o := range []struct{ name, v string }{{"ca", u.CAFile}, {"cert", u.CertFile}, {"key", u.KeyFile}, {"serverName", u.ServerName}} {
		if o.v != "" && !u.TLS {
			return u, fmt.Errorf("broker URI %q: option %s needs amqps://", shown, o.name)
		}
	}
	if (u.CertFile == "") != (u.KeyFile == "") {
		return u, fmt.Errorf("broker URI %q: options cert and key go together", shown)
	}
	return u, nil
}

func parseFlavour(v string) (transport.Flavour, bool) {
	for _, f := range []transport.Flavour{transport.ActiveMQ, transport.RabbitMQ, transport.Artemis} {
		if strings.EqualFold(v, f.String()) {
			return f, true
		}
	}
	return transport.UnknownFlavour, false
}

// Addr is host:port for dialing.
func (u URI) Addr() string { return net.JoinHostPort(u.Host, strconv.Itoa(u.Port)) }

// Backoff is the reconnect policy the URI asks for.
func (u URI) Backoff() backoff.Policy { return u.Reconnect }

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
	var b strings.Builder
	b.WriteString("amqp")
	if u.TLS {
		b.WriteString("s")
	}
	b.WriteString("://")
	if u.User != "" {
		b.WriteString(url.User(u.User).String())
		if u.Password != "" {
			b.WriteString(":***")
		}
		b.WriteByte('@')
	}
	b.WriteString(u.Addr())
	if u.VHost != "" {
		b.WriteString("?vhost=" + url.QueryEscape(u.VHost))
	}
	return b.String()
}

// WithSecrets renders the URI with its password and every option, so that another
// process can dial it. Never log it.
func (u URI) WithSecrets() string {
	v := url.URL{Scheme: "amqp", Host: u.Addr()}
	if u.TLS {
		v.Scheme = "amqps"
	}
	if u.User != "" {
		v.User = url.UserPassword(u.User, u.Password)
		if u.Password == "" {
			v.User = url.User(u.User)
		}
	}
	q := url.Values{}
	set := func(k, val string) {
		if val != "" {
			q.Set(k, val)
		}
	}
	set("vhost", u.VHost)
	set("containerId", u.ContainerID)
	set("ca", u.CAFile)
	set("cert", u.CertFile)
	set("key", u.KeyFile)
	set("serverName", u.ServerName)
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
	u.Reconnect.AddOptions(q)
	v.RawQuery = q.Encode()
	return v.String()
}

// tlsConfig builds the client TLS configuration the URI asks for.
func (u URI) tlsConfig() (*tls.Config, error) {
	cfg := &tls.Config{ServerName: u.Host, MinVersion: tls.VersionTLS12}
	if u.ServerName != "" {
		cfg.ServerName = u.ServerName
	}
	if u.CAFile != "" {
		pem, err := os.ReadFile(u.CAFile)
		if err != nil {
			return nil, fmt.Errorf("reading ca %s: %w", u.CAFile, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("ca %s: no PEM certificate in it", u.CAFile)
		}
		cfg.RootCAs = pool
	}
	if u.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(u.CertFile, u.KeyFile)
		if err != nil {
			// The error names the files, never their content.
			return nil, fmt.Errorf("loading client certificate %s / key %s: %w", u.CertFile, u.KeyFile, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// EventsURI is the STOMP address of the same RabbitMQ broker, where its demand
// (the event exchange) is read: port StompPort (default 61613), the same
// credentials, vhost, management URL and back-off.
func (u URI) EventsURI() (stomp.URI, error) {
	host := u.Host
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	su, err := stomp.ParseURI("stomp://" + host + ":" + strconv.Itoa(cmp.Or(u.StompPort, stomp.DefaultPort)))
	if err != nil {
		return su, err
	}
	su.Login, su.Passcode = u.User, u.Password
	if u.VHost != "" {
		su.VHost = u.VHost
	}
	su.Management = u.Management
	su.Flavour = stomp.RabbitMQ
	su.Reconnect = u.Reconnect
	return su, nil
}
