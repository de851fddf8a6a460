package config

import (
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"net"

	"github.com/brokernet/brokernet/admin"
	"github.com/brokernet/brokernet/destination"
	"github.com/brokernet/brokernet/discovery"
	"github.com/brokernet/brokernet/internal/uriredact"
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

// Validate checks a Config built in code (as `brokernet sidecar` builds one
// from flags) against the rules Parse applies to files, and returns *Errors
// listing every problem, without positions, or nil. Parse's results always
// pass.
func (c *Config) Validate() error {
	var errs Errors
	add := func(table, key, format string, args ...any) {
		errs = append(errs, Error{Table: table, Key: key, Msg: fmt.Sprintf(format, args...)})
	}
	if _, ok := oneOf(c.Log.Level, "trace", "debug", "info", "warn", "error"); !ok || c.Log.Level == "" {
		add("log", "level", "unknown level %q; want trace, debug, info, warn or error", uriredact.Shorten(c.Log.Level))
	}
	if _, ok := oneOf(c.Log.Format, "json", "console"); !ok {
		add("log", "format", "unknown format %q; want json or console", uriredact.Shorten(c.Log.Format))
	}
	if c.Admin.Listen != "" {
		if why := hostPort(c.Admin.Listen, true, false); why != "" {
			add("admin", "listen", "%s, got %q", why, uriredact.Shorten(c.Admin.Listen))
		} else if err := admin.CheckExposure(c.Admin.Listen, admin.Security{Token: c.Admin.Token, Insecure: c.Admin.Insecure}); err != nil {
			add("admin", "listen", "%v", err)
		}
	}

	if len(c.Brokers) == 0 {
		add("", "broker", "missing: want at least one broker")
	}
	brokers := map[string]Broker{}
	for i, b := range c.Brokers {
		tbl := label("broker", b.Name, i)
		if why := ValidName(b.Name); why != "" {
			add(tbl, "name", "%s", why)
		} else if _, dup := brokers[b.Name]; dup {
			add(tbl, "name", "duplicate broker name %q", b.Name)
		} else {
			brokers[b.Name] = b
		}
		switch {
		case b.URI.Kind == discovery.Static && len(b.URI.URIs) == 1:
		case b.URI.Kind == discovery.MasterSlave && len(b.URI.URIs) >= 2:
		default:
			add(tbl, "uri", "want one broker URI or masterslave:(...) with at least two, got %v with %d URI(s)", b.URI.Kind, len(b.URI.URIs))
		}
		if b.ID != "" && ValidName(b.ID) != "" {
			add(tbl, "id", "%s", ValidName(b.ID))
		}
	}

	names := map[string]bool{}
	type bind struct{ host, port, name string }
	var binds []bind
	for i, nc := range c.Connectors {
		tbl := label("networkConnector", nc.Name, i)
		if why := ValidName(nc.Name); why != "" {
			add(tbl, "name", "%s", why)
		} else if names[nc.Name] {
			add(tbl, "name", "duplicate connector name %q", nc.Name)
		}
		names[nc.Name] = true
		b, ok := brokers[nc.Broker]
		if !ok {
			add(tbl, "broker", "unknown broker %q", uriredact.Shorten(nc.Broker))
		}
		switch {
		case nc.URI.Kind == discovery.Static && len(nc.URI.URIs) >= 1:
		case nc.URI.Kind == discovery.MasterSlave && len(nc.URI.URIs) >= 2:
		case nc.URI.Kind == discovery.Gossip && len(nc.URI.URIs) == 0:
		default:
			add(tbl, "uri", "%v discovery with %d URI(s) is not a valid discovery URI", nc.URI.Kind, len(nc.URI.URIs))
		}
		if ok {
			for _, u := range nc.URI.URIs {
				for _, lu := range b.URI.URIs {
					if sameBroker(u, lu) {
						add(tbl, "uri", "%s is the local broker %q itself", u, b.Name)
					}
				}
			}
		}
		for _, ttl := range []struct {
			key string
			v   int
		}{{"networkTTL", nc.NetworkTTL}, {"messageTTL", nc.MessageTTL}, {"consumerTTL", nc.ConsumerTTL}} {
			if ttl.v < -1 || ttl.v == 0 {
				add(tbl, ttl.key, "want -1 (unlimited) or a hop count of at least 1, got %d", ttl.v)
			}
		}
		if nc.ConsumerPriorityBase < -128 || nc.ConsumerPriorityBase > 127 {
			add(tbl, "consumerPriorityBase", "want a priority in -128..127, got %d", nc.ConsumerPriorityBase)
		}
		if nc.PrefetchSize < 1 {
			add(tbl, "prefetchSize", "want at least 1 (network consumers do not poll), got %d", nc.PrefetchSize)
		}
		if nc.Window < 1 {
			add(tbl, "window", "want at least 1 unconfirmed message, got %d", nc.Window)
		}
		if err := destination.CheckRenames(nc.Renames); err != nil {
			add(tbl, "renames", "%v", err)
		}
		r := nc.Reconnect
		switch {
		case r == transport.Reconnect{}:
			// Zero, set in code (`brokernet bridge`): each broker URI's own.
		case r.Initial <= 0:
			add(tbl, "initialReconnectDelay", "want more than 0, got %s", r.Initial)
		case r.Max < r.Initial:
			add(tbl, "maxReconnectDelay", "%s is below initialReconnectDelay %s", r.Max, r.Initial)
		}
		if r != (transport.Reconnect{}) && (math.IsNaN(r.Multiplier) || math.IsInf(r.Multiplier, 0) || r.Multiplier < 1) {
			add(tbl, "backOffMultiplier", "want a number of at least 1, got %v", r.Multiplier)
		}
		if nc.ReplayDelay < 0 {
			add(tbl, "replayDelay", "want at least 0, got %s", nc.ReplayDelay)
		}
		if nc.DurableOfflineTimeout < 0 {
			add(tbl, "durableOfflineTimeout", "want at least 0, got %s", nc.DurableOfflineTimeout)
		}
		if nc.StuckInterval != 0 && nc.StuckInterval < MinStuckInterval {
			add(tbl, "stuckInterval", "want 0 (off) or at least %s, got %s", MinStuckInterval, nc.StuckInterval)
		}
		if nc.RemoteID != "" && (nc.URI.Kind != discovery.Static || len(nc.URI.URIs) != 1) {
			add(tbl, "remoteId", "only for a connector to one broker (one broker URI or static:(one URI)); %s has %d", nc.URI, len(nc.URI.URIs))
		}
		if ok && nc.RemoteID != "" && nc.RemoteID == b.ID {
			add(tbl, "remoteId", "%q is also the id of the local broker %q: local and remote broker would have the same id", nc.RemoteID, b.Name)
		}
		if nc.Password != "" && nc.UserName == "" {
			add(tbl, "passwordFile", "a password needs userName too")
		}
		if nc.RemoteID != "" && ValidName(nc.RemoteID) != "" {
			add(tbl, "remoteId", "%s", ValidName(nc.RemoteID))
		}
		g := nc.Gossip
		switch {
		case nc.URI.Kind == discovery.Gossip && g == nil:
			add(tbl, "gossip", "missing: gossip: discovery needs gossip settings")
		case nc.URI.Kind != discovery.Gossip && g != nil:
			add(tbl, "gossip", "gossip settings belong only to a connector with uri = \"gossip:\"")
		}
		if g == nil {
			continue
		}
		if why := hostPort(g.Bind, true, false); why != "" {
			add(tbl, "gossip.bind", "%s, got %q", why, uriredact.Shorten(g.Bind))
		} else if host, port, _ := net.SplitHostPort(g.Bind); port != "0" {
			for _, o := range binds {
				if o.port == port && (o.host == host || isAnyHost(host) || isAnyHost(o.host)) {
					add(tbl, "gossip.bind", "gossip bind %s clashes with connector %q's %s", g.Bind, o.name, net.JoinHostPort(o.host, o.port))
					break
				}
			}
			binds = append(binds, bind{host, port, nc.Name})
		}
		if g.Advertise != "" {
			if why := hostPort(g.Advertise, false, true); why != "" {
				add(tbl, "gossip.advertise", "%s, got %q", why, uriredact.Shorten(g.Advertise))
			}
		}
		for j, s := range g.Join {
			if why := joinAddr(s); why != "" {
				add(tbl, fmt.Sprintf("gossip.join[%d]", j), "%s, got %q", why, uriredact.Shorten(s))
			}
		}
		if g.NodeName != "" && ValidName(g.NodeName) != "" {
			add(tbl, "gossip.nodeName", "%s", ValidName(g.NodeName))
		}
		if n := len(g.SecretKey); n != 0 && n != 16 && n != 24 && n != 32 {
			add(tbl, "gossip.secretKeyFile", "got a %d-byte key; want 16, 24 or 32 bytes", n)
		}
		if err := discovery.CheckGossipExposure(g.Bind, g.SecretKey, g.Insecure); err != nil {
			add(tbl, "gossip.bind", "%v", err)
		}
		if _, err := discovery.ParseAllowList(g.AllowedBrokers); err != nil {
			add(tbl, "gossip.allowedBrokers", "%v", err)
		}
		if g.AdvertiseBrokerURI != "" {
			if _, err := endpoint.Parse(g.AdvertiseBrokerURI); err != nil {
				add(tbl, "gossip.advertiseBrokerURI", "%v", err)
			}
		}
	}
	if len(errs) > 0 {
		errs.sort()
		return &errs
	}
	return nil
}
