package config

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/brokernet/brokernet/destination"
	"github.com/brokernet/brokernet/discovery"
	"github.com/brokernet/brokernet/internal/uriredact"
	"github.com/brokernet/brokernet/transport"
	"github.com/brokernet/brokernet/transport/amqp"
	"github.com/brokernet/brokernet/transport/endpoint"
	"github.com/brokernet/brokernet/transport/stomp"
)

// Keys each table accepts (ConnectorKeys, with the connector's options, is
// in options.go).
var (
	topKeys    = []string{"log", "admin", "broker", "networkConnector"}
	logKeys    = []string{"level", "format"}
	adminKeys  = []string{"listen", "tokenFile", "certFile", "keyFile", "insecure"}
	brokerKeys = []string{"name", "uri", "id"}
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

// Parse decodes and validates a federation file; name is used in messages
// and to resolve relative file names (passwordFile, secretKeyFile, ...). It
// decodes the TOML into the typed tree, recording where each key was written
// (decoding reports only what cannot be read: syntax, unknown keys, wrong
// types, unreadable files), fills in the defaults that depend on other keys
// (fill), and runs Validate, which owns every rule. On any problem it returns
// *Errors with every problem found, each with its line, and nothing is
// half-configured.
func Parse(name string, data []byte) (*Config, error) {
	var raw map[string]any
	if _, err := toml.Decode(string(data), &raw); err != nil {
		return nil, syntaxError(name, err)
	}
	d := &decoder{file: name, pos: scanPositions(string(data)), src: newSource()}
	d.src.file, d.src.pos = name, d.pos
	cfg := Default()
	cfg.src = d.src
	root := &table{d: d, m: raw}
	d.written(root)
	root.check(topKeys, nil)
	d.logAdmin(root, &cfg)
	d.brokers(root, &cfg)
	d.connectors(root, &cfg)
	cfg.fill()

	errs := d.errs
	if err := cfg.Validate(); err != nil {
		errs = append(errs, *err.(*Errors)...)
	}
	if len(errs) > 0 {
		errs.sort()
		return nil, &errs
	}
	for i := range cfg.Connectors {
		d.checkAdvertised(&cfg, i)
	}
	if len(cfg.Connectors) == 0 {
		d.warns = append(d.warns, fmt.Sprintf("%s: no [[networkConnector]]: nothing will be bridged", name))
	}
	cfg.Warnings = d.warns
	return &cfg, nil
}

// fill sets the defaults that depend on other keys, for the keys its source
// says were not given: the name of a lone [[broker]], the broker of a
// connector when there is one, messageTTL and consumerTTL from networkTTL.
// The other defaults are in Default and DefaultConnector, which decoding
// starts from. It also spells log settings the one way Validate accepts.
func (c *Config) fill() {
	s := c.src
	if v, ok := oneOf(c.Log.Level, "trace", "debug", "info", "warn", "error"); ok {
		c.Log.Level = v
	}
	if v, ok := oneOf(c.Log.Format, "json", "console"); ok {
		c.Log.Format = v
	}
	if len(c.Brokers) == 1 && c.Brokers[0].Name == "" && !s.isWritten(append(s.brokerPath(0), "name")) {
		c.Brokers[0].Name = DefaultBrokerName
	}
	for i := range c.Connectors {
		nc, p := &c.Connectors[i], s.connPath(i)
		if len(c.Brokers) == 1 && nc.Broker == "" && !s.isWritten(append(p, "broker")) {
			nc.Broker = c.Brokers[0].Name
		}
		for _, o := range connectorOptions {
			if o.derived == "" || s.isWritten(append(slices.Clone(p), o.key)) {
				continue
			}
			from, _ := optionByKey(o.derived)
			reflect.ValueOf(o.field(nc)).Elem().Set(reflect.ValueOf(from.field(nc)).Elem())
		}
	}
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

// written records the keys of t as given.
func (d *decoder) written(t *table) {
	for k := range t.m {
		d.src.written[pathKey(append(slices.Clone(t.path), k))] = true
	}
}

// path resolves a file name relative to the directory of the file.
func (d *decoder) path(s string) string {
	if filepath.IsAbs(s) {
		return s
	}
	return filepath.Join(filepath.Dir(d.file), s)
}

// logAdmin decodes [log] and [admin].
func (d *decoder) logAdmin(root *table, cfg *Config) {
	if t, ok := root.sub("log"); ok {
		t.label, t.prefix = "log", ""
		d.written(t)
		t.check(logKeys, nil)
		if s, ok := t.str("level"); ok {
			cfg.Log.Level = s
		}
		if s, ok := t.str("format"); ok {
			cfg.Log.Format = s
		}
	}
	if t, ok := root.sub("admin"); ok {
		t.label, t.prefix = "admin", ""
		d.written(t)
		t.check(adminKeys, nil)
		if s, ok := t.str("listen"); ok {
			cfg.Admin.Listen = s
		}
		if s, ok := t.str("tokenFile"); ok && s != "" {
			cfg.Admin.TokenFile = d.path(s)
			tok, warn, err := ReadPasswordFile(cfg.Admin.TokenFile)
			if err != nil {
				t.errorf("tokenFile", "%v", err)
			} else {
				cfg.Admin.Token = tok
				if warn != "" {
					d.warns = append(d.warns, d.file+": "+warn)
				}
			}
		}
		if s, ok := t.str("certFile"); ok && s != "" {
			cfg.Admin.CertFile = d.path(s)
		}
		if s, ok := t.str("keyFile"); ok && s != "" {
			cfg.Admin.KeyFile = d.path(s)
		}
		t.boolean("insecure", &cfg.Admin.Insecure)
	}
}

// brokers decodes the [[broker]] tables.
func (d *decoder) brokers(root *table, cfg *Config) {
	for i, t := range root.array("broker") {
		t.label = label("broker", "", i)
		d.written(t)
		d.src.brokers = append(d.src.brokers, t.path)
		var b Broker
		if s, ok := t.str("name"); ok {
			b.Name = s
			t.label = label("broker", validName(s), i)
		}
		t.check(brokerKeys, nil)
		if s, ok := t.str("uri"); ok {
			if spec, err := discovery.ParseURI(s); err != nil {
				t.errorf("uri", "%v", err)
			} else {
				b.URI = spec
			}
		}
		if s, ok := t.str("id"); ok {
			b.ID = s
		}
		cfg.Brokers = append(cfg.Brokers, b)
	}
}

// connectors decodes the [[networkConnector]] tables.
func (d *decoder) connectors(root *table, cfg *Config) {
	for i, t := range root.array("networkConnector") {
		cfg.Connectors = append(cfg.Connectors, d.connector(t, i))
	}
}

// connector decodes one [[networkConnector]], starting from DefaultConnector.
func (d *decoder) connector(t *table, i int) NetworkConnector {
	nc := DefaultConnector()
	nc.Line = t.at("", -1).line
	t.label = label("networkConnector", "", i)
	d.written(t)
	d.src.conns = append(d.src.conns, t.path)
	if s, ok := t.str("name"); ok {
		nc.Name = s
		t.label = label("networkConnector", validName(s), i)
	}
	t.check(ConnectorKeys, activemqOnly)

	if s, ok := t.str("broker"); ok {
		nc.Broker = s
	}
	if s, ok := t.str("uri"); ok {
		if spec, err := discovery.ParseURI(s); err != nil {
			t.errorf("uri", "%v", err)
		} else {
			nc.URI = spec
		}
	}
	for _, o := range connectorOptions {
		t.option(o, &nc)
	}
	nc.StaticallyIncludedDestinations = patterns(t, "staticallyIncludedDestinations")
	nc.DynamicallyIncludedDestinations = patterns(t, "dynamicallyIncludedDestinations")
	nc.ExcludedDestinations = patterns(t, "excludedDestinations")
	nc.Renames = renames(t, "renames")
	nc.DestinationRateLimits = parsedList(t, "destinationRateLimits", ParseDestinationRateLimit)
	nc.DestinationFilters = parsedList(t, "destinationFilters", ParseDestinationFilter)
	if s, ok := t.str("passwordFile"); ok && s != "" {
		pw, warn, err := ReadPasswordFile(d.path(s))
		if err != nil {
			t.errorf("passwordFile", "%v", err)
		} else {
			nc.Password = pw
			if warn != "" {
				d.warns = append(d.warns, d.file+": "+warn)
			}
		}
	}
	for key, dst := range map[string]*string{"caFile": &nc.CAFile, "certFile": &nc.CertFile, "keyFile": &nc.KeyFile} {
		if s, ok := t.str(key); ok && s != "" {
			*dst = d.path(s)
		}
	}
	if g, ok := t.sub("gossip"); ok {
		d.written(g)
		g.check(gossipKeys, nil)
		nc.Gossip = d.gossipTable(g)
	}
	return nc
}

// option decodes the scalar option o into its field of nc, when written.
func (t *table) option(o option, nc *NetworkConnector) {
	switch dst := o.field(nc).(type) {
	case *bool:
		t.boolean(o.key, dst)
	case *int:
		if n, ok := t.integer(o.key); ok {
			*dst = n
		}
	case *float64:
		if f, ok := t.number(o.key); ok {
			*dst = f
		}
	case *string:
		if s, ok := t.str(o.key); ok {
			*dst = s
		}
	case *time.Duration:
		if v, ok := t.duration(o.key); ok {
			if v == 0 && o.offIfZero {
				v = Off
			}
			*dst = v
		}
	default:
		panic(fmt.Sprintf("config: option %s has a field of type %T", o.key, dst))
	}
}

// patterns decodes a list of destination patterns.
func patterns(t *table, key string) []destination.Pattern {
	return parsedList(t, key, destination.ParsePattern)
}

// renames decodes a list of "LOCAL=REMOTE" destination renames; Validate
// checks them as a set.
func renames(t *table, key string) []destination.Rename {
	return parsedList(t, key, destination.ParseRename)
}

// parsedList decodes the list of strings at key with parse, reporting each
// element parse refuses where it was written and recording where each kept
// one was.
func parsedList[T any](t *table, key string, parse func(string) (T, error)) []T {
	vals, idx, _ := t.stringList(key)
	var out []T
	var kept []int
	for j, s := range vals {
		v, err := parse(s)
		if err != nil {
			t.elemErrorf(key, idx[j], "%v", err)
			continue
		}
		out = append(out, v)
		kept = append(kept, idx[j])
	}
	t.elems(key, kept)
	return out
}

// strings decodes a list of strings, recording where each was written.
func (t *table) strings(key string) []string {
	vals, idx, _ := t.stringList(key)
	t.elems(key, idx)
	return vals
}

// elems records the written index of each decoded element of the list at key.
func (t *table) elems(key string, idx []int) {
	if len(idx) > 0 {
		t.d.src.elems[pathKey(append(slices.Clone(t.path), key))] = idx
	}
}

// gossipTable decodes [networkConnector.gossip].
func (d *decoder) gossipTable(g *table) *Gossip {
	gs := DefaultGossip()
	if s, ok := g.str("bind"); ok {
		gs.Bind = s
	}
	if s, ok := g.str("advertise"); ok {
		gs.Advertise = s
	}
	gs.Join = g.strings("join")
	if s, ok := g.str("timings"); ok {
		gs.Timings = s
	}
	if s, ok := g.str("nodeName"); ok {
		gs.NodeName = s
	}
	if s, ok := g.str("secretKeyFile"); ok && s != "" {
		key, why := d.readSecretKey(s)
		if why != "" {
			g.errorf("secretKeyFile", "%s", why)
		} else {
			gs.SecretKey = key
		}
	}
	g.boolean("insecure", &gs.Insecure)
	gs.AllowedBrokers = g.strings("allowedBrokers")
	if s, ok := g.str("advertiseBrokerURI"); ok {
		gs.AdvertiseBrokerURI = s
	}
	return gs
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

// checkAdvertised warns about the broker URI the i-th connector advertises
// by gossip: one that other members cannot dial, or a passcode sent in clear.
func (d *decoder) checkAdvertised(cfg *Config, i int) {
	nc := cfg.Connectors[i]
	g := nc.Gossip
	if g == nil || nc.URI.Kind != discovery.Gossip {
		return
	}
	var adv transport.URI
	if g.AdvertiseBrokerURI != "" {
		u, err := endpoint.Parse(g.AdvertiseBrokerURI)
		if err != nil {
			return
		}
		adv = u
	} else if b, ok := cfg.Broker(nc.Broker); ok && len(b.URI.URIs) > 0 {
		adv = b.URI.URIs[0]
	} else {
		return
	}
	at := fmt.Sprintf("%s:%d: %s", d.file, nc.Line, label("networkConnector", validName(nc.Name), i))
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
