package config

import (
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/brokernet/brokernet/admin"
	"github.com/brokernet/brokernet/destination"
	"github.com/brokernet/brokernet/discovery"
	"github.com/brokernet/brokernet/internal/tlsconf"
	"github.com/brokernet/brokernet/internal/uriredact"
	"github.com/brokernet/brokernet/transport"
	"github.com/brokernet/brokernet/transport/amqp"
	"github.com/brokernet/brokernet/transport/endpoint"
	"github.com/brokernet/brokernet/transport/stomp"
)

// Keys each table accepts.
var (
	topKeys    = []string{"log", "admin", "broker", "networkConnector"}
	logKeys    = []string{"level", "format"}
	adminKeys  = []string{"listen", "tokenFile", "certFile", "keyFile", "insecure"}
	brokerKeys = []string{"name", "uri", "id"}
	// ConnectorKeys are the keys of a [[networkConnector]] table, in the
	// order a written file lists them (the ActiveMQ importer's); read only.
	ConnectorKeys = []string{
		"name", "broker", "uri", "duplex", "networkTTL", "messageTTL", "consumerTTL",
		"conduitSubscriptions", "dynamicOnly", "bridgeTempDestinations", "decreaseNetworkConsumerPriority", "consumerPriorityBase",
		"suppressDuplicateQueueSubscriptions", "suppressDuplicateTopicSubscriptions", "prefetchSize", "window",
		"staticallyIncludedDestinations", "dynamicallyIncludedDestinations", "excludedDestinations",
		"initialReconnectDelay", "maxReconnectDelay", "backOffMultiplier",
		"replayWhenNoConsumers", "replayDelay", "replayRateLimit", "remoteId", "gossip",
		"durableOfflineTimeout", "stuckInterval", "renames",
		"userName", "passwordFile", "caFile", "certFile", "keyFile",
	}
	gossipKeys = []string{"bind", "advertise", "join", "nodeName", "secretKeyFile", "advertiseBrokerURI", "timings",
		"insecure", "allowedBrokers"}
)

// activemqOnly explains ActiveMQ networkConnector attributes (and discovery
// URI options) that brokernet does not take, for the unknown-key message.
var activemqOnly = func() map[string]string {
	m := map[string]string{}
	noEquivalent := "an ActiveMQ networkConnector option brokernet has no equivalent for"
	for _, k := range []string{
		"conduitNetworkQueueSubscriptions", "dispatchAsync", "advisoryPrefetchSize", "advisoryAckPercentage",
		"destinationFilter", "staticBridge", "syncDurableSubs", "useVirtualDestSubs",
		"advisoryForFailedForward", "useBrokerNameAsIdSees", "gcDestinationViews", "gcSweepTime",
		"checkDuplicateMessagesOnDuplex", "useCompression", "clientIdToken", "brokerName", "brokerURL",
		"sslContext", "localUri", "connectionFilter", "durableDestinations", "minConnectTime",
	} {
		m[k] = noEquivalent
	}
	creds := "use userName and passwordFile (a file holding the password), or credentials in the uri"
	for _, k := range []string{"password", "remoteUserName", "remotePassword"} {
		m[k] = creds
	}
	m["alwaysSyncSend"] = "brokernet always waits for the remote broker's confirmation"
	m["useExponentialBackOff"] = "set backOffMultiplier = 1 for a constant delay"
	m["maxReconnectAttempts"] = "brokernet retries for as long as it runs"
	return m
}()

// Parse parses and validates a federation file; name is used in messages
// and to resolve relative secretKeyFile paths. On any problem it returns
// *Errors with every problem found, and nothing is half-configured.
func Parse(name string, data []byte) (*Config, error) {
	var raw map[string]any
	if _, err := toml.Decode(string(data), &raw); err != nil {
		return nil, syntaxError(name, err)
	}
	d := &decoder{file: name, pos: scanPositions(string(data))}
	cfg := Default()
	root := &table{d: d, m: raw}
	root.check(topKeys, nil)
	d.logAdmin(root, &cfg)
	brokers := d.brokers(root)
	conns := d.connectors(root)
	d.link(brokers, conns)

	if len(d.errs) > 0 {
		d.errs.sort()
		return nil, &d.errs
	}
	for _, b := range brokers {
		cfg.Brokers = append(cfg.Brokers, b.b)
	}
	for _, c := range conns {
		cfg.Connectors = append(cfg.Connectors, c.nc)
	}
	if len(cfg.Connectors) == 0 {
		d.warns = append(d.warns, fmt.Sprintf("%s: no [[networkConnector]]: nothing will be bridged", name))
	}
	cfg.Warnings = d.warns
	return &cfg, nil
}

// syntaxError turns the TOML parser's error into *Errors with its position.
func syntaxError(file string, err error) error {
	var pe toml.ParseError
	if errors.As(err, &pe) {
		return &Errors{{File: file, Line: pe.Position.Line, Col: pe.Position.Col,
			Msg: "TOML syntax: " + uriredact.All(pe.Message)}}
	}
	return &Errors{{File: file, Msg: "TOML: " + uriredact.All(err.Error())}}
}

// logAdmin decodes [log] and [admin].
func (d *decoder) logAdmin(root *table, cfg *Config) {
	if t, ok := root.sub("log"); ok {
		t.label, t.prefix = "log", ""
		t.check(logKeys, nil)
		if s, ok := t.str("level"); ok {
			if v, ok := oneOf(s, "trace", "debug", "info", "warn", "error"); ok {
				cfg.Log.Level = v
			} else {
				t.errorf("level", "unknown level %q; want trace, debug, info, warn or error", uriredact.Shorten(s))
			}
		}
		if s, ok := t.str("format"); ok {
			if v, ok := oneOf(s, "json", "console"); ok {
				cfg.Log.Format = v
			} else {
				t.errorf("format", "unknown format %q; want json or console", uriredact.Shorten(s))
			}
		}
	}
	if t, ok := root.sub("admin"); ok {
		t.label, t.prefix = "admin", ""
		t.check(adminKeys, nil)
		if s, ok := t.str("listen"); ok && s != "" {
			if why := hostPort(s, true, false); why != "" {
				t.errorf("listen", "%s, got %q (or \"\" for no listener)", why, uriredact.Shorten(s))
			} else {
				cfg.Admin.Listen = s
			}
		}
		if s, ok := t.str("tokenFile"); ok && s != "" {
			if !filepath.IsAbs(s) {
				s = filepath.Join(filepath.Dir(d.file), s)
			}
			tok, warn, err := ReadPasswordFile(s)
			if err != nil {
				t.errorf("tokenFile", "%v", err)
			} else {
				cfg.Admin.Token = tok
				if warn != "" {
					d.warns = append(d.warns, d.file+": "+warn)
				}
			}
		}
		for key, dst := range map[string]*string{"certFile": &cfg.Admin.CertFile, "keyFile": &cfg.Admin.KeyFile} {
			if s, ok := t.str(key); ok && s != "" {
				if !filepath.IsAbs(s) {
					s = filepath.Join(filepath.Dir(d.file), s)
				}
				if _, err := os.Stat(s); err != nil {
					t.errorf(key, "%v", err)
				}
				*dst = s
			}
		}
		if (cfg.Admin.CertFile == "") != (cfg.Admin.KeyFile == "") {
			t.errorf("", "certFile and keyFile go together")
		}
		t.boolean("insecure", &cfg.Admin.Insecure)
		if cfg.Admin.Listen != "" && !t.has("tokenFile") {
			if err := admin.CheckExposure(cfg.Admin.Listen, admin.Security{Insecure: cfg.Admin.Insecure}); err != nil {
				t.errorf("listen", "%v", err)
			}
		}
	}
}

// brokerEntry is a decoded [[broker]] with what linking needs.
type brokerEntry struct {
	b     Broker
	t     *table
	uri   string // as written, for gossip's default advertiseBrokerURI
	uriOK bool
}

// brokers decodes the [[broker]] tables.
func (d *decoder) brokers(root *table) []*brokerEntry {
	tabs := root.array("broker")
	if len(tabs) == 0 && !root.has("broker") {
		d.errs = append(d.errs, Error{File: d.file, Key: "broker",
			Msg: "missing: want at least one [[broker]] table with the uri of the local broker"})
	}
	var out []*brokerEntry
	for i, t := range tabs {
		t.label = label("broker", "", i)
		e := &brokerEntry{t: t}
		if s, ok := t.str("name"); ok {
			if why := ValidName(s); why != "" {
				t.errorf("name", "%s", why)
			} else {
				e.b.Name = s
				t.label = label("broker", s, i)
			}
		} else if !t.has("name") {
			if len(tabs) == 1 {
				e.b.Name = DefaultBrokerName
			} else {
				t.missingf("name", "missing: with %d [[broker]] tables, each needs a name", len(tabs))
			}
		}
		t.check(brokerKeys, nil)
		if s, ok := t.str("uri"); ok {
			spec, err := discovery.ParseURI(s)
			switch {
			case err != nil:
				t.errorf("uri", "%v", err)
			case spec.Kind == discovery.Gossip:
				t.errorf("uri", "want a broker URI (stomp://, amqp://, tcp://, ...) or masterslave:(...); gossip: finds remote brokers and belongs in a [[networkConnector]]")
			case spec.Kind == discovery.Static && len(spec.URIs) != 1:
				t.errorf("uri", "static:(...) with %d URIs: a [[broker]] is one broker; use masterslave:(...) for a master/slave pair, or one [[broker]] each", len(spec.URIs))
			default:
				e.b.URI, e.uri, e.uriOK = spec, s, true
			}
		} else if !t.has("uri") {
			t.missingf("uri", "missing: want the local broker's URI (stomp://, amqp://, tcp://, ...)")
		}
		if s, ok := t.str("id"); ok && s != "" {
			if why := ValidName(s); why != "" {
				t.errorf("id", "%s", why)
			} else {
				e.b.ID = s
			}
		}
		out = append(out, e)
	}
	return out
}

// connEntry is a decoded [[networkConnector]] with what linking needs.
type connEntry struct {
	nc          NetworkConnector
	t           *table
	gossip      *table
	brokerGiven bool
	uriOK       bool
}

// connectors decodes the [[networkConnector]] tables.
func (d *decoder) connectors(root *table) []*connEntry {
	var out []*connEntry
	for i, t := range root.array("networkConnector") {
		out = append(out, d.connector(t, i))
	}
	return out
}

// connector decodes one [[networkConnector]].
func (d *decoder) connector(t *table, i int) *connEntry {
	e := &connEntry{t: t, nc: DefaultConnector()}
	nc := &e.nc
	nc.Line = t.at("", -1).line
	t.label = label("networkConnector", "", i)
	if s, ok := t.str("name"); ok {
		if why := ValidName(s); why != "" {
			t.errorf("name", "%s", why)
		} else {
			nc.Name = s
			t.label = label("networkConnector", s, i)
		}
	} else if !t.has("name") {
		t.missingf("name", "missing: every [[networkConnector]] needs a unique name")
	}
	t.check(ConnectorKeys, activemqOnly)

	if s, ok := t.str("broker"); ok {
		nc.Broker, e.brokerGiven = s, true
	}
	if s, ok := t.str("uri"); ok {
		if spec, err := discovery.ParseURI(s); err != nil {
			t.errorf("uri", "%v", err)
		} else {
			nc.URI, e.uriOK = spec, true
		}
	} else if !t.has("uri") {
		t.missingf("uri", "missing: want a broker URI (stomp://, amqp://, tcp://, ...), static:(...), masterslave:(...) or gossip:")
	}

	t.boolean("duplex", &nc.Duplex)
	ttl := func(key string) (int, bool) {
		n, ok := t.integer(key)
		if ok && (n < -1 || n == 0) {
			t.errorf(key, "want -1 (unlimited) or a hop count of at least 1, got %d", n)
			return 0, false
		}
		return n, ok
	}
	if n, ok := ttl("networkTTL"); ok {
		nc.NetworkTTL = n
	}
	nc.MessageTTL, nc.ConsumerTTL = nc.NetworkTTL, nc.NetworkTTL
	if n, ok := ttl("messageTTL"); ok {
		nc.MessageTTL = n
	}
	if n, ok := ttl("consumerTTL"); ok {
		nc.ConsumerTTL = n
	}
	t.boolean("conduitSubscriptions", &nc.ConduitSubscriptions)
	t.boolean("dynamicOnly", &nc.DynamicOnly)
	t.boolean("bridgeTempDestinations", &nc.BridgeTempDestinations)
	t.boolean("decreaseNetworkConsumerPriority", &nc.DecreaseNetworkConsumerPriority)
	if n, ok := t.integer("consumerPriorityBase"); ok {
		if n < -128 || n > 127 {
			t.errorf("consumerPriorityBase", "want a priority in -128..127, got %d", n)
		} else {
			nc.ConsumerPriorityBase = n
		}
	}
	t.boolean("suppressDuplicateQueueSubscriptions", &nc.SuppressDuplicateQueueSubscriptions)
	t.boolean("suppressDuplicateTopicSubscriptions", &nc.SuppressDuplicateTopicSubscriptions)
	if n, ok := t.integer("prefetchSize"); ok {
		if n < 1 {
			t.errorf("prefetchSize", "want at least 1 (network consumers do not poll), got %d", n)
		} else {
			nc.PrefetchSize = n
		}
	}
	if n, ok := t.integer("window"); ok {
		if n < 1 {
			t.errorf("window", "want at least 1 unconfirmed message, got %d", n)
		} else {
			nc.Window = n
		}
	}
	nc.StaticallyIncludedDestinations = patterns(t, "staticallyIncludedDestinations")
	nc.DynamicallyIncludedDestinations = patterns(t, "dynamicallyIncludedDestinations")
	nc.ExcludedDestinations = patterns(t, "excludedDestinations")
	nc.Renames = renames(t, "renames")
	reconnect(t, nc)
	t.boolean("replayWhenNoConsumers", &nc.ReplayWhenNoConsumers)
	if v, ok := t.duration("replayDelay"); ok {
		nc.ReplayDelay = v
	}
	if v, ok := t.duration("durableOfflineTimeout"); ok {
		nc.DurableOfflineTimeout = v
	}
	if v, ok := t.duration("stuckInterval"); ok {
		if v != 0 && v < MinStuckInterval {
			t.errorf("stuckInterval", "want 0 (off) or at least %s, got %s", MinStuckInterval, v)
		} else {
			nc.StuckInterval = v
		}
	}
	if n, ok := t.integer("replayRateLimit"); ok {
		if n < 0 {
			t.errorf("replayRateLimit", "want 0 (no limit) or messages per second, got %d", n)
		} else {
			nc.ReplayRateLimit = n
		}
	}
	if s, ok := t.str("remoteId"); ok && s != "" {
		switch {
		case ValidName(s) != "":
			t.errorf("remoteId", "%s", ValidName(s))
		case e.uriOK && (nc.URI.Kind != discovery.Static || len(nc.URI.URIs) != 1):
			t.errorf("remoteId", "only for a connector to one broker (one broker URI or static:(one URI)); this uri finds several")
		default:
			nc.RemoteID = s
		}
	}
	if s, ok := t.str("userName"); ok && s != "" {
		if strings.ContainsFunc(s, func(r rune) bool { return r < ' ' || r == 0x7f }) {
			t.errorf("userName", "must not contain control characters")
		} else {
			nc.UserName = s
		}
	}
	if s, ok := t.str("passwordFile"); ok && s != "" {
		path := s
		if !filepath.IsAbs(path) {
			path = filepath.Join(filepath.Dir(d.file), path)
		}
		pw, warn, err := ReadPasswordFile(path)
		switch {
		case err != nil:
			t.errorf("passwordFile", "%v", err)
		case !t.has("userName"):
			t.errorf("passwordFile", "a password needs userName too")
		default:
			nc.Password = pw
			if warn != "" {
				d.warns = append(d.warns, d.file+": "+warn)
			}
		}
	}
	for key, dst := range map[string]*string{"caFile": &nc.CAFile, "certFile": &nc.CertFile, "keyFile": &nc.KeyFile} {
		if s, ok := t.str(key); ok && s != "" {
			if !filepath.IsAbs(s) {
				s = filepath.Join(filepath.Dir(d.file), s)
			}
			*dst = s
		}
	}
	if err := (tlsconf.Options{CAFile: nc.CAFile, CertFile: nc.CertFile, KeyFile: nc.KeyFile}).Check(); err != nil {
		t.errorf("", "%v", err)
	}
	if g, ok := t.sub("gossip"); ok {
		e.gossip = g
		g.check(gossipKeys, nil)
		gs, checkable := d.gossipTable(g)
		if e.uriOK && nc.URI.Kind != discovery.Gossip {
			t.errorf("gossip", "a gossip table belongs only to a connector with uri = \"gossip:\"; this uri is %s", nc.URI.Kind)
		} else {
			nc.Gossip = gs
			if err := discovery.CheckGossipExposure(gs.Bind, gs.SecretKey, gs.Insecure); checkable && err != nil {
				key := "bind"
				if !g.has("bind") {
					key = ""
				}
				g.errorf(key, "%v", err)
			}
		}
	} else if e.uriOK && nc.URI.Kind == discovery.Gossip && !t.has("gossip") {
		t.errorf("uri", "gossip: needs a [networkConnector.gossip] table (bind, join, ...) after this connector")
	}
	return e
}

// patterns decodes a list of destination patterns.
func patterns(t *table, key string) []destination.Pattern {
	vals, idx, _ := t.stringList(key)
	var out []destination.Pattern
	for j, s := range vals {
		p, err := destination.ParsePattern(s)
		if err != nil {
			t.elemErrorf(key, idx[j], "%v", err)
			continue
		}
		out = append(out, p)
	}
	return out
}

// renames decodes a list of "LOCAL=REMOTE" destination renames, each checked
// on its own line and the set as a whole.
func renames(t *table, key string) []destination.Rename {
	vals, idx, _ := t.stringList(key)
	var out []destination.Rename
	for j, s := range vals {
		r, err := destination.ParseRename(s)
		if err != nil {
			t.elemErrorf(key, idx[j], "%v", err)
			continue
		}
		if err := destination.CheckRenames(append(out, r)); err != nil {
			t.elemErrorf(key, idx[j], "%v", err)
			continue
		}
		out = append(out, r)
	}
	return out
}

// reconnect decodes initialReconnectDelay, maxReconnectDelay and backOffMultiplier.
func reconnect(t *table, nc *NetworkConnector) {
	good := true
	if v, ok := t.duration("initialReconnectDelay"); ok {
		if v <= 0 {
			t.errorf("initialReconnectDelay", "want more than 0, got %s", v)
			good = false
		} else {
			nc.Reconnect.Initial = v
		}
	} else if t.has("initialReconnectDelay") {
		good = false
	}
	if v, ok := t.duration("maxReconnectDelay"); ok {
		if v <= 0 {
			t.errorf("maxReconnectDelay", "want more than 0, got %s", v)
			good = false
		} else {
			nc.Reconnect.Max = v
		}
	} else if t.has("maxReconnectDelay") {
		good = false
	}
	if f, ok := t.number("backOffMultiplier"); ok {
		if math.IsNaN(f) || math.IsInf(f, 0) || f < 1 {
			t.errorf("backOffMultiplier", "want a number of at least 1 (1 keeps the delay constant), got %v", f)
		} else {
			nc.Reconnect.Multiplier = f
		}
	}
	if good && nc.Reconnect.Max < nc.Reconnect.Initial {
		if t.has("maxReconnectDelay") {
			t.errorf("maxReconnectDelay", "%s is below initialReconnectDelay %s", nc.Reconnect.Max, nc.Reconnect.Initial)
		} else {
			t.errorf("initialReconnectDelay", "%s is above maxReconnectDelay (default %s); raise maxReconnectDelay too", nc.Reconnect.Initial, nc.Reconnect.Max)
		}
	}
}

// gossipTable decodes [networkConnector.gossip].
func (d *decoder) gossipTable(g *table) (gs *Gossip, checkable bool) {
	gs = &Gossip{Bind: DefaultGossipBind}
	bindOK := !g.has("bind")
	if s, ok := g.str("bind"); ok {
		if why := hostPort(s, true, false); why != "" {
			g.errorf("bind", "%s, got %q", why, uriredact.Shorten(s))
		} else {
			bindOK = true
			gs.Bind = s
		}
	}
	if s, ok := g.str("advertise"); ok && s != "" {
		if why := hostPort(s, false, true); why != "" {
			g.errorf("advertise", "%s, got %q (or \"\" to let memberlist choose)", why, uriredact.Shorten(s))
		} else {
			gs.Advertise = s
		}
	}
	vals, idx, _ := g.stringList("join")
	for j, s := range vals {
		if why := joinAddr(s); why != "" {
			g.elemErrorf("join", idx[j], "%s, got %q", why, uriredact.Shorten(s))
			continue
		}
		gs.Join = append(gs.Join, s)
	}
	if s, ok := g.str("timings"); ok && s != "" {
		switch s {
		case GossipTimingsLAN, GossipTimingsFast:
			gs.Timings = s
		default:
			g.errorf("timings", "unknown timings %q; want %q or %q", uriredact.Shorten(s), GossipTimingsLAN, GossipTimingsFast)
		}
	}
	if s, ok := g.str("nodeName"); ok && s != "" {
		if why := ValidName(s); why != "" {
			g.errorf("nodeName", "%s", why)
		} else {
			gs.NodeName = s
		}
	}
	keyFailed := false
	if s, ok := g.str("secretKeyFile"); ok && s != "" {
		key, why := d.readSecretKey(s)
		if why != "" {
			g.errorf("secretKeyFile", "%s", why)
			keyFailed = true
		} else {
			gs.SecretKey = key
		}
	}
	g.boolean("insecure", &gs.Insecure)
	vals, idx, _ = g.stringList("allowedBrokers")
	for j, s := range vals {
		if _, err := discovery.ParseAllowList([]string{s}); err != nil {
			g.elemErrorf("allowedBrokers", idx[j], "%v", err)
			continue
		}
		gs.AllowedBrokers = append(gs.AllowedBrokers, s)
	}
	if s, ok := g.str("advertiseBrokerURI"); ok && s != "" {
		// The gossip agent advertises one broker URI (discovery's
		// LocalBroker.URI), which the other members dial as it is.
		if _, err := endpoint.Parse(s); err != nil {
			g.errorf("advertiseBrokerURI", "%v", err)
		} else {
			gs.AdvertiseBrokerURI = s
		}
	}
	// A bind or secretKeyFile that failed is reported on its own.
	return gs, bindOK && !keyFailed
}

// joinAddr validates a seed member: host or host:port.
func joinAddr(s string) string {
	switch {
	case s == "":
		return "want host or host:port"
	case strings.ContainsAny(s, " \t\r\n"):
		return "must not contain blanks"
	}
	if strings.Contains(s, ":") && net.ParseIP(s) == nil {
		return hostPort(s, false, true)
	}
	return ""
}

// readSecretKey reads a base64 AES key; why says what is wrong, never
// showing the key.
func (d *decoder) readSecretKey(path string) (key []byte, why string) {
	if !filepath.IsAbs(path) {
		path = filepath.Join(filepath.Dir(d.file), path)
	}
	// Stat first: opening a FIFO or a device could block or never end.
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Sprintf("reading key: %v", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Sprintf("%s is not a regular file", path)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Sprintf("reading key: %v", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, 4096))
	if err != nil {
		return nil, fmt.Sprintf("reading key: %v", err)
	}
	key, err = DecodeSecretKey(strings.TrimSpace(string(data)))
	if err != nil {
		return nil, fmt.Sprintf("%s: %v", path, err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		d.warns = append(d.warns, fmt.Sprintf("%s: gossip key file %s is readable by other users (mode %v); chmod 600 it", d.file, path, fi.Mode().Perm()))
	}
	return key, ""
}

// link checks what spans tables: unique names, connectors' brokers,
// connectors to their own broker, gossip ports; and fills in defaults that
// come from a connector's broker.
func (d *decoder) link(brokers []*brokerEntry, conns []*connEntry) {
	byName := map[string]*brokerEntry{}
	var names []string
	for _, b := range brokers {
		if b.b.Name == "" {
			continue
		}
		if first, dup := byName[b.b.Name]; dup {
			b.t.errorf("name", "duplicate broker name %q (first at line %d)", b.b.Name, first.t.at("", -1).line)
			continue
		}
		byName[b.b.Name] = b
		names = append(names, b.b.Name)
	}

	seen := map[string]*connEntry{}
	type bind struct {
		host, port string
		c          *connEntry
	}
	var binds []bind
	for _, c := range conns {
		nc, t := &c.nc, c.t
		if nc.Name != "" {
			if first, dup := seen[nc.Name]; dup {
				t.errorf("name", "duplicate connector name %q (first at line %d)", nc.Name, first.nc.Line)
			} else {
				seen[nc.Name] = c
			}
		}

		var b *brokerEntry
		switch {
		case c.brokerGiven:
			b = byName[nc.Broker]
			if b == nil && len(names) > 0 {
				msg := fmt.Sprintf("unknown broker %q", uriredact.Shorten(nc.Broker))
				if s := suggest(nc.Broker, names); s != "" {
					msg += fmt.Sprintf("; did you mean %q?", s)
				} else {
					msg += fmt.Sprintf("; the [[broker]] names are %s", quoteList(names))
				}
				t.errorf("broker", "%s", msg)
			}
		case len(brokers) == 1:
			b = brokers[0]
			nc.Broker = b.b.Name
		case len(brokers) > 1:
			t.missingf("broker", "missing: with %d [[broker]] tables, name the one to bridge from (%s)", len(brokers), quoteList(names))
		}

		if b != nil && b.uriOK && c.uriOK {
			for _, u := range nc.URI.URIs {
				for _, lu := range b.b.URI.URIs {
					if sameBroker(u, lu) {
						t.errorf("uri", "%s is the local broker %q itself", u, b.b.Name)
					}
				}
			}
		}

		if g := nc.Gossip; g != nil {
			d.checkAdvertised(c, b)
			if host, port, err := net.SplitHostPort(g.Bind); err == nil && port != "0" {
				for _, other := range binds {
					if other.port == port && (other.host == host || isAnyHost(host) || isAnyHost(other.host)) {
						key := "bind"
						if !c.gossip.has("bind") {
							key = ""
						}
						c.gossip.errorf(key, "gossip bind %s clashes with connector %q's %s", g.Bind, other.c.nc.Name, net.JoinHostPort(other.host, other.port))
						break
					}
				}
				binds = append(binds, bind{host, port, c})
			}
		}
	}
}

// checkAdvertised warns about the broker URI a gossip connector advertises:
// one that other members cannot dial, or a passcode sent in clear.
func (d *decoder) checkAdvertised(c *connEntry, b *brokerEntry) {
	g := c.nc.Gossip
	var adv transport.URI
	switch {
	case g.AdvertiseBrokerURI != "":
		u, err := endpoint.Parse(g.AdvertiseBrokerURI)
		if err != nil {
			return
		}
		adv = u
	case b != nil && b.uriOK:
		adv = b.b.URI.URIs[0]
	default:
		return
	}
	at := fmt.Sprintf("%s:%d: %s", d.file, c.nc.Line, c.t.label)
	if isLocalHost(adv.Hostname()) {
		d.warns = append(d.warns, fmt.Sprintf(
			"%s: gossip advertises the local broker as %s, which other members cannot dial; set gossip.advertiseBrokerURI", at, adv))
	}
	if g.AdvertiseBrokerURI != "" && adv.HasPassword() {
		d.warns = append(d.warns, fmt.Sprintf(
			"%s: the passcode of gossip.advertiseBrokerURI is not gossiped; members log in with their own userName and passwordFile", at))
	}
}

// sameBroker reports whether two URIs name the same broker (and virtual host):
// the same protocol at the same address. One broker reached over two
// protocols has two ports, which this cannot tell.
func sameBroker(a, b transport.URI) bool {
	return a.Protocol() == b.Protocol() && strings.EqualFold(a.Addr(), b.Addr()) && vhost(a) == vhost(b)
}

// vhost is a URI's virtual host, "" for protocols without one.
func vhost(u transport.URI) string {
	switch u := u.(type) {
	case stomp.URI:
		return u.VHost
	case amqp.URI:
		return u.VHost
	}
	return ""
}

// isLocalHost reports whether host only makes sense on this machine.
func isLocalHost(host string) bool {
	if strings.EqualFold(host, "localhost") || isAnyHost(host) {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// isAnyHost reports whether host means every interface.
func isAnyHost(host string) bool {
	if host == "" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsUnspecified()
}

// quoteList renders names as "a", "b".
func quoteList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return strings.Join(q, ", ")
}
