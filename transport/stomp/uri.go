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
)

// URI is a parsed broker address:
//
//	stomp://[login:passcode@]host[:port][?option=value&...]
//	stomp+ssl://...    TLS with the system roots, or ?ca=FILE
//
// Options: vhost (the STOMP host header, default "/"), clientId (for durable
// subscriptions), heartBeat (ms or a Go duration, default 10s, 0 disables),
// initialReconnectDelay, maxReconnectDelay (ms or Go durations), backOffMultiplier,
// ca (PEM file of trusted roots), serverName (TLS name to verify),
// flavor (activemq, rabbitmq or artemis: overrides the CONNECTED server
// header), management (RabbitMQ management API URL, default http://HOST:15672).
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
	ServerName string
	Reconnect  backoff.Policy
	// Flavour, when not Unknown, is forced by ?flavor= and wins over the
	// server header.
	Flavour Flavour
	// Management is the ?management= URL; "" means the default.
	Management string
}

// DefaultPort is the IANA STOMP port, which ActiveMQ, RabbitMQ and Artemis use.
const DefaultPort = 61613

// ParseURI parses s. Its errors name the offending part and never contain the passcode.
func ParseURI(s string) (URI, error) {
	u := URI{VHost: "/", HeartBeat: 10 * time.Second, Reconnect: backoff.Default(), Port: DefaultPort}
	if !strings.Contains(s, "://") {
		return u, fmt.Errorf("broker URI %q: missing scheme (want stomp://host:port or stomp+ssl://host:port)", redactRaw(s))
	}
	pu, err := url.Parse(s)
	if err != nil {
		return u, fmt.Errorf("broker URI %q: cannot parse", redactRaw(s))
	}
	shown := redact(pu)
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
			d, err := parseMillis(v)
			if err != nil {
				return u, bad(err.Error())
			}
			u.HeartBeat = d
		case "initialReconnectDelay":
			d, err := parseMillis(v)
			if err != nil || d <= 0 {
				return u, bad("want a positive duration (ms or e.g. 500ms)")
			}
			u.Reconnect.Initial = d
		case "maxReconnectDelay":
			d, err := parseMillis(v)
			if err != nil || d <= 0 {
				return u, bad("want a positive duration (ms or e.g. 30s)")
			}
			u.Reconnect.Max = d
		case "backOffMultiplier":
			f, err := strconv.ParseFloat(v, 64)
			if err != nil || f < 1 {
				return u, bad("want a number >= 1")
			}
			u.Reconnect.Multiplier = f
		default:
			return u, fmt.Errorf("broker URI %q: unknown option %q", shown, key)
		}
	}
	if u.Reconnect.Max < u.Reconnect.Initial {
		return u, fmt.Errorf("broker URI %q: maxReconnectDelay %s is below initialReconnectDelay %s", shown, u.Reconnect.Max, u.Reconnect.Initial)
	}
	if u.CAFile != "" && !u.TLS {
		return u, fmt.Errorf("broker URI %q: option ca needs stomp+ssl://", shown)
	}
	return u, nil
}

// parseMillis reads ActiveMQ-style integer milliseconds or a Go duration.
func parseMillis(v string) (time.Duration, error) {
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n < 0 {
			return 0, fmt.Errorf("negative duration")
		}
		return time.Duration(n) * time.Millisecond, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("want milliseconds or a duration such as 10s")
	}
	return d, nil
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
	def := backoff.Default()
	if u.Reconnect.Initial != def.Initial {
		q.Set("initialReconnectDelay", u.Reconnect.Initial.String())
	}
	if u.Reconnect.Max != def.Max {
		q.Set("maxReconnectDelay", u.Reconnect.Max.String())
	}
	if u.Reconnect.Multiplier != def.Multiplier {
		q.Set("backOffMultiplier", strconv.FormatFloat(u.Reconnect.Multiplier, 'g', -1, 64))
	}
	v.RawQuery = q.Encode()
	return v.String()
}

func redact(pu *url.URL) string {
	c := *pu
	if c.User != nil {
		if _, ok := c.User.Password(); ok {
			c.User = url.UserPassword(c.User.Username(), "***")
		}
	}
	s := c.String()
	return strings.Replace(s, "%2A%2A%2A", "***", 1)
}

// redactRaw hides anything between "://" and "@" in a string url.Parse rejected.
func redactRaw(s string) string {
	i := strings.Index(s, "://")
	if i < 0 {
		return s
	}
	rest := s[i+3:]
	j := strings.LastIndex(rest, "@")
	if j < 0 {
		return s
	}
	return s[:i+3] + "***@" + rest[j+1:]
}
