package config

import (
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/brokernet/brokernet/admin"
	"github.com/brokernet/brokernet/destination"
	"github.com/brokernet/brokernet/discovery"
	"github.com/brokernet/brokernet/internal/tlsconf"
	"github.com/brokernet/brokernet/internal/uriredact"
	"github.com/brokernet/brokernet/selector"
	"github.com/brokernet/brokernet/transport"
	"github.com/brokernet/brokernet/transport/endpoint"
)

// DecodeSecretKey decodes a base64 gossip key (standard encoding, as
// `head -c 32 /dev/urandom | base64` writes it) and checks that it is 16, 24
// or 32 bytes long (AES-128, -192, -256). Its errors never show the key.
func DecodeSecretKey(s string) ([]byte, error) {
	key, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, errors.New("not base64; want a base64 key (make one with: head -c 32 /dev/urandom | base64)")
	}
	if n := len(key); n != 16 && n != 24 && n != 32 {
		return nil, fmt.Errorf("got a %d-byte key; want 16, 24 or 32 bytes (AES-128, -192, -256)", n)
	}
	return key, nil
}

// Validate checks every rule of a configuration and returns *Errors listing
// every problem, or nil. It is the one place the rules live: Parse runs it on
// what it decoded from a file (problems carry their file:line:col), Flags on
// what the command line set (problems name the flag), and a Config built in
// code (problems name their table and key) gets the same checks. Keys whose
// value could not be decoded were reported by the decoder and are skipped
// here.
func (c *Config) Validate() error {
	v := &validator{c: c, s: c.src}
	v.logAdmin()
	brokers, names := v.brokers()
	v.connectors(brokers, names)
	if len(v.errs) > 0 {
		v.errs.sort()
		return &v.errs
	}
	return nil
}

// validator collects the problems of one Config.
type validator struct {
	c    *Config
	s    *source
	errs Errors
}

// at is one table being validated: its position path, how messages name it,
// and which kind of table it is (for flag names).
type at struct {
	v     *validator
	path  []string
	kind  string
	label string
}

// keyPath is the position path of key (dotted for sub-tables) in t.
func (t at) keyPath(key string) []string {
	p := slices.Clone(t.path)
	if key != "" {
		p = append(p, strings.Split(key, ".")...)
	}
	return p
}

func (t at) written(key string) bool { return t.v.s.isWritten(t.keyPath(key)) }
func (t at) failed(key string) bool  { return t.v.s.isFailed(t.keyPath(key)) }

// errorf reports a problem with key; elemErrorf with element i of the list
// at key. A key that is not written but derived from another (messageTTL
// from networkTTL) is reported as that one.
func (t at) errorf(key string, format string, args ...any) { t.elemErrorf(key, -1, format, args...) }

func (t at) elemErrorf(key string, elem int, format string, args ...any) {
	if o, ok := optionByKey(key); ok && o.derived != "" && t.v.s != nil && !t.written(key) {
		key = o.derived
	}
	e := Error{Table: t.label, Key: key, Msg: fmt.Sprintf(format, args...)}
	if elem >= 0 {
		e.Key += fmt.Sprintf("[%d]", elem)
	}
	t.v.s.locate(&e, t.keyPath(key), t.kind, key, elem)
	t.v.errs = append(t.v.errs, e)
}

// logAdmin checks [log] and [admin].
func (v *validator) logAdmin() {
	c := v.c
	lg := at{v: v, path: []string{"log"}, kind: "log", label: "log"}
	if _, ok := oneOf(c.Log.Level, "trace", "debug", "info", "warn", "error"); (!ok || c.Log.Level == "") && !lg.failed("level") {
		lg.errorf("level", "unknown level %q; want trace, debug, info, warn or error", uriredact.Shorten(c.Log.Level))
	}
	if _, ok := oneOf(c.Log.Format, "json", "console"); !ok && !lg.failed("format") {
		lg.errorf("format", "unknown format %q; want json or console", uriredact.Shorten(c.Log.Format))
	}
	ad := at{v: v, path: []string{"admin"}, kind: "admin", label: "admin"}
	a := c.Admin
	if a.Listen != "" && !ad.failed("listen") {
		if why := hostPort(a.Listen, true, false); why != "" {
			ad.errorf("listen", "%s, got %q (or \"\" for no listener)", why, uriredact.Shorten(a.Listen))
		} else if a.Token != "" || a.TokenFile == "" {
			// A token file that could not be read was reported on its own.
			if err := admin.CheckExposure(a.Listen, admin.Security{Token: a.Token, Insecure: a.Insecure}); err != nil {
				ad.errorf("listen", "%v", err)
			}
		}
	}
	for _, f := range []struct{ key, path string }{{"certFile", a.CertFile}, {"keyFile", a.KeyFile}} {
		if f.path != "" && !ad.failed(f.key) {
			if _, err := os.Stat(f.path); err != nil {
				ad.errorf(f.key, "%v", err)
			}
		}
	}
	if (a.CertFile == "") != (a.KeyFile == "") {
		ad.errorf("", "certFile and keyFile go together")
	}
}

// brokers checks the [[broker]] tables and returns the usable ones by name,
// and their names in order.
func (v *validator) brokers() (map[string]Broker, []string) {
	c := v.c
	if len(c.Brokers) == 0 && !v.s.isFailed([]string{"broker"}) {
		root := at{v: v, kind: "broker"}
		root.errorf("broker", "missing: want at least one [[broker]] table with the uri of the local broker")
	}
	byName := map[string]Broker{}
	first := map[string]int{}
	var names []string
	for i, b := range c.Brokers {
		t := at{v: v, path: v.s.brokerPath(i), kind: "broker", label: label("broker", validName(b.Name), i)}
		switch {
		case t.failed("name"):
		case b.Name == "" && !t.written("name") && len(c.Brokers) > 1:
			t.errorf("name", "missing: with %d [[broker]] tables, each needs a name", len(c.Brokers))
		case ValidName(b.Name) != "":
			t.errorf("name", "%s", ValidName(b.Name))
		case first[b.Name] > 0:
			t.errorf("name", "duplicate broker name %q%s", b.Name, v.firstAt(v.s.brokerPath(first[b.Name]-1)))
		default:
			first[b.Name] = i + 1
			byName[b.Name] = b
			names = append(names, b.Name)
		}
		switch u := b.URI; {
		case t.failed("uri"):
		case u.Kind == 0 && len(u.URIs) == 0:
			t.errorf("uri", "missing: want the local broker's URI (stomp://, amqp://, tcp://, ...)")
		case u.Kind == discovery.Gossip:
			t.errorf("uri", "want a broker URI (stomp://, amqp://, tcp://, ...) or masterslave:(...); gossip: finds remote brokers and belongs in a [[networkConnector]]")
		case u.Kind == discovery.Static && len(u.URIs) == 1:
		case u.Kind == discovery.Static && len(u.URIs) > 1:
			t.errorf("uri", "static:(...) with %d URIs: a [[broker]] is one broker; use masterslave:(...) for a master/slave pair, or one [[broker]] each", len(u.URIs))
		case u.Kind == discovery.MasterSlave && len(u.URIs) >= 2:
		default:
			t.errorf("uri", "want one broker URI or masterslave:(...) with at least two, got %v with %d URI(s)", u.Kind, len(u.URIs))
		}
		if b.ID != "" && ValidName(b.ID) != "" && !t.failed("id") {
			t.errorf("id", "%s", ValidName(b.ID))
		}
	}
	return byName, names
}

// firstAt is " (first at line N)" when the line of the table at path is known.
func (v *validator) firstAt(path []string) string {
	if l := v.s.line(path); l > 0 {
		return fmt.Sprintf(" (first at line %d)", l)
	}
	return ""
}

// connectors checks the [[networkConnector]] tables.
func (v *validator) connectors(brokers map[string]Broker, brokerNames []string) {
	c := v.c
	first := map[string]int{}
	type bind struct{ host, port, name string }
	var binds []bind
	for i, nc := range c.Connectors {
		t := at{v: v, path: v.s.connPath(i), kind: "networkConnector", label: label("networkConnector", validName(nc.Name), i)}
		switch {
		case t.failed("name"):
		case nc.Name == "" && !t.written("name"):
			t.errorf("name", "missing: every [[networkConnector]] needs a unique name")
		case ValidName(nc.Name) != "":
			t.errorf("name", "%s", ValidName(nc.Name))
		case first[nc.Name] > 0:
			t.errorf("name", "duplicate connector name %q%s", nc.Name, v.firstAt(v.s.connPath(first[nc.Name]-1)))
		default:
			first[nc.Name] = i + 1
		}

		b, haveBroker := brokers[nc.Broker]
		switch {
		case haveBroker, t.failed("broker"), len(brokerNames) == 0:
		case nc.Broker == "" && !t.written("broker") && len(c.Brokers) > 1:
			t.errorf("broker", "missing: with %d [[broker]] tables, name the one to bridge from (%s)", len(c.Brokers), quoteList(brokerNames))
		default:
			msg := fmt.Sprintf("unknown broker %q", uriredact.Shorten(nc.Broker))
			if s := suggest(nc.Broker, brokerNames); s != "" {
				msg += fmt.Sprintf("; did you mean %q?", s)
			} else {
				msg += fmt.Sprintf("; the [[broker]] names are %s", quoteList(brokerNames))
			}
			t.errorf("broker", "%s", msg)
		}

		u := nc.URI
		uriOK := false
		switch {
		case t.failed("uri"):
		case u.Kind == 0 && len(u.URIs) == 0:
			t.errorf("uri", "missing: want a broker URI (stomp://, amqp://, tcp://, ...), static:(...), masterslave:(...) or gossip:")
		case u.Kind == discovery.Static && len(u.URIs) >= 1,
			u.Kind == discovery.MasterSlave && len(u.URIs) >= 2,
			u.Kind == discovery.Gossip && len(u.URIs) == 0:
			uriOK = true
		default:
			t.errorf("uri", "%v discovery with %d URI(s) is not a valid discovery URI", u.Kind, len(u.URIs))
		}
		if uriOK && haveBroker {
			for _, ru := range u.URIs {
				for _, lu := range b.URI.URIs {
					if sameBroker(ru, lu) {
						t.errorf("uri", "%s is the local broker %q itself", ru, b.Name)
					}
				}
			}
		}

		for _, ttl := range []struct {
			key string
			v   int
		}{{"networkTTL", nc.NetworkTTL}, {"messageTTL", nc.MessageTTL}, {"consumerTTL", nc.ConsumerTTL}} {
			if (ttl.v < -1 || ttl.v == 0) && !t.failed(ttl.key) {
				t.errorf(ttl.key, "want -1 (unlimited) or a hop count of at least 1, got %d", ttl.v)
			}
		}
		if nc.ConsumerPriorityBase < -128 || nc.ConsumerPriorityBase > 127 {
			t.errorf("consumerPriorityBase", "want a priority in -128..127, got %d", nc.ConsumerPriorityBase)
		}
		if nc.PrefetchSize < 1 && !t.failed("prefetchSize") {
			t.errorf("prefetchSize", "want at least 1 (network consumers do not poll), got %d", nc.PrefetchSize)
		}
		if nc.Window < 1 && !t.failed("window") {
			t.errorf("window", "want at least 1 unconfirmed message, got %d", nc.Window)
		}
		if (nc.DestinationWindow < 0 || nc.Window >= 1 && nc.DestinationWindow > nc.Window) && !t.failed("destinationWindow") {
			t.errorf("destinationWindow", "want 0 (a quarter of window) or 1..window (%d), got %d", nc.Window, nc.DestinationWindow)
		}
		if nc.BlockedAfter <= 0 && !t.failed("blockedAfter") {
			t.errorf("blockedAfter", "want more than 0, got %s", nc.BlockedAfter)
		}
		var renames []destination.Rename
		for j, r := range nc.Renames {
			// Each rename is checked with those before it, so that the one
			// that clashes is the one reported.
			if err := destination.CheckRenames(append(slices.Clone(renames), r)); err != nil {
				t.elemErrorf("renames", j, "%v", err)
				continue
			}
			renames = append(renames, r)
		}
		v.reconnect(t, nc.Reconnect)
		for _, d := range []struct {
			key string
			v   time.Duration
		}{{"replayDelay", nc.ReplayDelay}, {"durableOfflineTimeout", nc.DurableOfflineTimeout}} {
			if d.v < 0 {
				t.errorf(d.key, "want a duration of at least 0, got %s", d.v)
			}
		}
		if s := nc.StuckInterval; s != Off && (s < 0 || s > 0 && s < MinStuckInterval) {
			t.errorf("stuckInterval", "want 0 (off) or at least %s, got %s", MinStuckInterval, s)
		}
		if nc.DrainTimeout <= 0 && !t.failed("drainTimeout") {
			t.errorf("drainTimeout", "want more than 0, got %s", nc.DrainTimeout)
		}
		if nc.MaxReplays < 0 {
			t.errorf("maxReplays", "want 0 (no cap) or a number of replays, got %d", nc.MaxReplays)
		}
		if c := nc.ReplayCooldown; c != Off && c < 0 {
			t.errorf("replayCooldown", "want 0 (none) or a duration, got %s", c)
		}
		if nc.ReplayRateLimit < 0 {
			t.errorf("replayRateLimit", "want 0 (no limit) or messages per second, got %d", nc.ReplayRateLimit)
		}
		if nc.Filter != "" && !t.failed("filter") {
			if err := selector.Check(nc.Filter); err != nil {
				t.errorf("filter", "%v", err)
			}
		}
		if nc.RateLimit < 0 {
			t.errorf("rateLimit", "want 0 (no limit) or messages per second, got %d", nc.RateLimit)
		}
		if nc.ByteRateLimit < 0 {
			t.errorf("byteRateLimit", "want 0 (no limit) or bytes per second, got %d", nc.ByteRateLimit)
		}
		if id := nc.RemoteID; id != "" && !t.failed("remoteId") {
			switch {
			case ValidName(id) != "":
				t.errorf("remoteId", "%s", ValidName(id))
			case uriOK && u.Kind == discovery.Gossip:
				t.errorf("remoteId", "only for a connector to one broker (one broker URI or static:(one URI)); gossip: finds any number")
			case uriOK && (u.Kind != discovery.Static || len(u.URIs) != 1):
				t.errorf("remoteId", "only for a connector to one broker (one broker URI or static:(one URI)); %s has %d", u, len(u.URIs))
			case haveBroker && id == b.ID:
				t.errorf("remoteId", "%q is also the id of the local broker %q: local and remote broker would have the same id", id, b.Name)
			}
		}
		if strings.ContainsFunc(nc.UserName, func(r rune) bool { return r < ' ' || r == 0x7f }) {
			t.errorf("userName", "must not contain control characters")
		}
		if nc.Password != "" && nc.UserName == "" {
			t.errorf("passwordFile", "a password needs userName too")
		}
		if err := (tlsconf.Options{CAFile: nc.CAFile, CertFile: nc.CertFile, KeyFile: nc.KeyFile}).Check(); err != nil {
			t.errorf("", "%v", err)
		}

		g := nc.Gossip
		switch {
		case t.failed("gossip"):
		case u.Kind == discovery.Gossip && g == nil:
			t.errorf("uri", "gossip: needs a [networkConnector.gossip] table (bind, join, ...) after this connector")
		case uriOK && u.Kind != discovery.Gossip && g != nil:
			t.errorf("gossip", "a gossip table belongs only to a connector with uri = \"gossip:\"; this uri is %s", u.Kind)
			continue
		}
		if g == nil {
			continue
		}
		bindOK := false
		switch {
		case t.failed("gossip.bind"):
		case hostPort(g.Bind, true, false) != "":
			t.errorf("gossip.bind", "%s, got %q", hostPort(g.Bind, true, false), uriredact.Shorten(g.Bind))
		default:
			bindOK = true
			if host, port, _ := net.SplitHostPort(g.Bind); port != "0" {
				for _, o := range binds {
					if o.port == port && (o.host == host || isAnyHost(host) || isAnyHost(o.host)) {
						t.errorf("gossip.bind", "gossip bind %s clashes with connector %q's %s", g.Bind, o.name, net.JoinHostPort(o.host, o.port))
						break
					}
				}
				binds = append(binds, bind{host, port, nc.Name})
			}
		}
		if g.Advertise != "" && !t.failed("gossip.advertise") {
			if why := hostPort(g.Advertise, false, true); why != "" {
				t.errorf("gossip.advertise", "%s, got %q (or \"\" to let memberlist choose)", why, uriredact.Shorten(g.Advertise))
			}
		}
		for j, s := range g.Join {
			if why := joinAddr(s); why != "" {
				t.elemErrorf("gossip.join", j, "%s, got %q", why, uriredact.Shorten(s))
			}
		}
		switch g.Timings {
		case "", GossipTimingsLAN, GossipTimingsFast:
		default:
			t.errorf("gossip.timings", "unknown timings %q; want %q or %q", uriredact.Shorten(g.Timings), GossipTimingsLAN, GossipTimingsFast)
		}
		if g.NodeName != "" && ValidName(g.NodeName) != "" {
			t.errorf("gossip.nodeName", "%s", ValidName(g.NodeName))
		}
		if n := len(g.SecretKey); n != 0 && n != 16 && n != 24 && n != 32 {
			t.errorf("gossip.secretKeyFile", "got a %d-byte key; want 16, 24 or 32 bytes", n)
		}
		// A bind or secretKeyFile that failed is reported on its own.
		if bindOK && !t.failed("gossip.secretKeyFile") {
			if err := discovery.CheckGossipExposure(g.Bind, g.SecretKey, g.Insecure); err != nil {
				t.errorf("gossip.bind", "%v", err)
			}
		}
		for j, s := range g.AllowedBrokers {
			if _, err := discovery.ParseAllowList([]string{s}); err != nil {
				t.elemErrorf("gossip.allowedBrokers", j, "%v", err)
			}
		}
		if g.AdvertiseBrokerURI != "" {
			if _, err := endpoint.Parse(g.AdvertiseBrokerURI); err != nil {
				t.errorf("gossip.advertiseBrokerURI", "%v", err)
			}
		}
	}
}

// reconnect checks initialReconnectDelay, maxReconnectDelay and
// backOffMultiplier. A zero Reconnect (possible only in code and from
// `brokernet bridge`) leaves each broker URI its own.
func (v *validator) reconnect(t at, r transport.Reconnect) {
	if r == (transport.Reconnect{}) {
		return
	}
	good := !t.failed("initialReconnectDelay") && !t.failed("maxReconnectDelay")
	if r.Initial <= 0 && !t.failed("initialReconnectDelay") {
		t.errorf("initialReconnectDelay", "want more than 0, got %s", r.Initial)
		good = false
	}
	if r.Max <= 0 && !t.failed("maxReconnectDelay") {
		t.errorf("maxReconnectDelay", "want more than 0, got %s", r.Max)
		good = false
	}
	if good && r.Max < r.Initial {
		if v.s != nil && v.s.flags == nil && !t.written("maxReconnectDelay") {
			t.errorf("initialReconnectDelay", "%s is above maxReconnectDelay (default %s); raise maxReconnectDelay too", r.Initial, r.Max)
		} else {
			t.errorf("maxReconnectDelay", "%s is below initialReconnectDelay %s", r.Max, r.Initial)
		}
	}
	if f := r.Multiplier; (math.IsNaN(f) || math.IsInf(f, 0) || f < 1) && !t.failed("backOffMultiplier") {
		t.errorf("backOffMultiplier", "want a number of at least 1 (1 keeps the delay constant), got %v", f)
	}
}

// validName is name when it is a usable name, else "" (messages then name
// the table by its position).
func validName(name string) string {
	if ValidName(name) != "" {
		return ""
	}
	return name
}
