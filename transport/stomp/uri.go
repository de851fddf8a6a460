package stomp

import (
	"errors"
	"net"
	"net/url"
	"strconv"
	"time"

	"github.com/brokernet/brokernet/internal/backoff"
	"github.com/brokernet/brokernet/internal/brokeruri"
	"github.com/brokernet/brokernet/internal/tlsconf"
	"github.com/brokernet/brokernet/internal/uriredact"
	"github.com/brokernet/brokernet/transport"
)

// DefaultHeartBeat is the heart-beat interval brokernet offers: a silent
// (half-open) connection is noticed within 1.5 intervals, 12 s (readLoop).
const DefaultHeartBeat = 8 * time.Second

// URI is a parsed broker address:
//
//	stomp://[login:passcode@]host[:port][?option=value&...]
//	stomp+ssl://...    TLS with the system roots, or ?ca=FILE
//
// Options: vhost (the STOMP host header, default "/"), clientId (for durable
// subscriptions), heartBeat (ms or a Go duration, default 8s, 0 disables),
// initialReconnectDelay, maxReconnectDelay (ms or Go durations), backOffMultiplier,
// ca (PEM file of trusted roots), cert and key (PEM client certificate and key),
// serverName (TLS name to verify) for stomp+ssl; flavor (activemq, rabbitmq or
// artemis: overrides the CONNECTED server header), management (RabbitMQ
// management API URL, default http://HOST:15672), openwirePort (the ActiveMQ
// broker's OpenWire port on the same host, where its durable subscriptions are
// listed: durables.go).
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
	// OpenWirePort, when not 0, is the ActiveMQ broker's OpenWire port on the
	// same host (?openwirePort=): the bridge lists the broker's durable
	// subscriptions there (durables.go).
	OpenWirePort int
	// OpenWireLister lists them there, over OpenWire: transport/endpoint
	// gives one to every STOMP URI it parses (this package cannot import
	// transport/openwire). nil: DurableSubscriptions fails.
	OpenWireLister OpenWireLister
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

// syntax is how STOMP URIs are spelt.
var syntax = brokeruri.Syntax{
	Plain: "stomp", TLS: "stomp+ssl", TLSAliases: []string{"stomp+tls", "stomps"},
	Port: DefaultPort, TLSPort: DefaultPort,
	Secret: "passcode", PathHint: "use ?vhost= for a virtual host", ClientCert: true,
}

func parseURI(s string, checkFiles bool) (URI, error) {
	u := URI{VHost: "/", HeartBeat: DefaultHeartBeat, Reconnect: transport.DefaultReconnect()}
	p, err := brokeruri.Parse(s, syntax)
	if err != nil {
		return u, err
	}
	u.TLS, u.Host, u.Port, u.Login, u.Passcode = p.TLS, p.Host, p.Port, p.User, p.Password
	var tlsOpts tlsconf.Options
	err = p.Options(&tlsOpts, &u.Reconnect, func(name, v string) (bool, error) {
		switch name {
		case "vhost", "host":
			u.VHost = v
		case "clientId", "client-id":
			u.ClientID = v
		case "flavor", "flavour":
			f, err := transport.ParseFlavour(v)
			if err != nil {
				return true, err
			}
			u.Flavour = f
		case "management":
			if err := brokeruri.ManagementURL(v); err != nil {
				return true, err
			}
			u.Management = v
		case "openwirePort", "openWirePort":
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 || n > 65535 {
				return true, errors.New("want a port number from 1 to 65535")
			}
			u.OpenWirePort = n
		case "heartBeat", "heartbeat":
			d, err := backoff.ParseMillis(v)
			if err != nil {
				return true, err
			}
			u.HeartBeat = d
		default:
			return false, nil
		}
		return true, nil
	})
	u.CAFile, u.CertFile, u.KeyFile, u.ServerName = tlsOpts.CAFile, tlsOpts.CertFile, tlsOpts.KeyFile, tlsOpts.ServerName
	if err != nil {
		return u, err
	}
	if u.OpenWirePort != 0 && u.Flavour == RabbitMQ {
		return u, p.Errorf("option openwirePort=%d: a RabbitMQ broker speaks no OpenWire (flavor=rabbitmq)", u.OpenWirePort)
	}
	return u, p.CheckTLS(tlsOpts, checkFiles)
}

// Addr is host:port for dialing.
func (u URI) Addr() string { return net.JoinHostPort(u.Host, strconv.Itoa(u.Port)) }

// String renders the URI with the passcode redacted; it is safe to log.
func (u URI) String() string {
	s := brokeruri.Logged(syntax.Scheme(u.TLS), u.Login, u.Passcode, u.Addr())
	q := url.Values{}
	if u.VHost != "/" {
		q.Set("vhost", u.VHost)
	}
	if u.OpenWirePort != 0 {
		q.Set("openwirePort", strconv.Itoa(u.OpenWirePort))
	}
	if len(q) > 0 {
		s += "?" + q.Encode()
	}
	return s
}

// WithSecrets renders the URI with its passcode and every option, so that another
// process can dial it. Never log it.
func (u URI) WithSecrets() string {
	v := url.URL{Scheme: syntax.Scheme(u.TLS), Host: u.Addr(), User: brokeruri.Userinfo(u.Login, u.Passcode)}
	q := url.Values{}
	if u.VHost != "/" {
		q.Set("vhost", u.VHost)
	}
	if u.ClientID != "" {
		q.Set("clientId", u.ClientID)
	}
	if u.Flavour != Unknown {
		q.Set("flavor", u.Flavour.String())
	}
	if u.Management != "" {
		q.Set("management", u.Management)
	}
	if u.HeartBeat != DefaultHeartBeat {
		q.Set("heartBeat", u.HeartBeat.String())
	}
	if u.OpenWirePort != 0 {
		q.Set("openwirePort", strconv.Itoa(u.OpenWirePort))
	}
	brokeruri.SetOptions(q, u.TLSOptions(), u.Reconnect)
	v.RawQuery = q.Encode()
	return v.String()
}

// Redact hides the passcode of a URI-looking string however malformed it is
// (see uriredact.Redact).
func Redact(s string) string { return uriredact.Redact(s) }
