// Package netconnector runs a NetworkConnector: one discovery agent plus a set of
// options, starting, supervising and stopping one bridge per discovered peer, the
// way ActiveMQ's DiscoveryNetworkConnector does.
package netconnector

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/brokernet/brokernet/bridge"
	"github.com/brokernet/brokernet/config"
	"github.com/brokernet/brokernet/demand"
	"github.com/brokernet/brokernet/destination"
	"github.com/brokernet/brokernet/discovery"
	"github.com/brokernet/brokernet/transport"
)

// Connector is one running NetworkConnector.
type Connector struct {
	cfg   config.NetworkConnector
	local config.Broker
	agent discovery.Agent
	log   zerolog.Logger

	// runBridge runs one bridge until ctx ends and it drained; tests replace it.
	runBridge func(b *bridge.Bridge, ctx context.Context) error

	mu       sync.Mutex
	peers    map[string]*peer         // by discovery.Peer.Key
	draining map[string]chan struct{} // removed peers whose bridges still drain, by key
	drains   sync.WaitGroup           // one per draining peer
}

// peer is a discovered broker and the bridges running to it.
type peer struct {
	p       discovery.Peer
	bridges []*bridge.Bridge
	cancel  context.CancelFunc
	done    chan struct{}
}

// PeerStatus describes one peer for status pages and tests.
type PeerStatus struct {
	Key       string   `json:"key"`
	URIs      []string `json:"uris"`
	Up        bool     `json:"up"`
	Forwarded int64    `json:"forwarded"`
	Demand    int64    `json:"demand_subscriptions"`
}

// New builds a connector from its configuration and the local broker it bridges from.
// agent may be nil: the agent is then made from cfg.URI (and cfg.Gossip).
func New(cfg config.NetworkConnector, local config.Broker, agent discovery.Agent, log zerolog.Logger) (*Connector, error) {
	log = log.With().Str("connector", cfg.Name).Logger()
	if agent == nil {
		var err error
		agent, err = newAgent(cfg, local, log)
		if err != nil {
			return nil, fmt.Errorf("network connector %q: %w", cfg.Name, err)
		}
	}
	return &Connector{cfg: cfg, local: local, agent: agent, log: log,
		runBridge: (*bridge.Bridge).Run,
		peers:     make(map[string]*peer), draining: make(map[string]chan struct{})}, nil
}

func newAgent(cfg config.NetworkConnector, local config.Broker, log zerolog.Logger) (discovery.Agent, error) {
	var g *discovery.GossipConfig
	if cfg.URI.Kind == discovery.Gossip {
		if cfg.Gossip == nil {
			return nil, errors.New("gossip: discovery needs gossip settings")
		}
		adv := cfg.Gossip.AdvertiseBrokerURI
		if adv == "" && len(local.URI.URIs) > 0 {
			// The gossip agent drops credentials before advertising; drop them
			// here already so no passcode is ever handed to it.
			adv = local.URI.URIs[0].Public().WithSecrets()
		}
		allowed, err := discovery.ParseAllowList(cfg.Gossip.AllowedBrokers)
		if err != nil {
			return nil, err
		}
		g = &discovery.GossipConfig{
			Insecure:       cfg.Gossip.Insecure,
			AllowedBrokers: allowed,
			NodeName:       cfg.Gossip.NodeName,
			BindAddr:       cfg.Gossip.Bind,
			Advertise:      cfg.Gossip.Advertise,
			Join:           cfg.Gossip.Join,
			SecretKey:      cfg.Gossip.SecretKey,
			Timings:        GossipTimings(cfg.Gossip.Timings),
			Local:          discovery.LocalBroker{URI: adv, BrokerID: local.ID, BrokerName: local.Name},
			Log:            log,
		}
	}
	return discovery.New(cfg.URI, g, log)
}

// Run runs discovery and the bridges until ctx ends, then drains every bridge.
func (c *Connector) Run(ctx context.Context) error {
	events := make(chan discovery.Event, 64)
	agentErr := make(chan error, 1)
	actx, cancelAgent := context.WithCancel(ctx)
	defer cancelAgent()
	go func() { agentErr <- c.agent.Run(actx, events) }()
	c.log.Info().Str("discovery", c.cfg.URI.String()).Msg("network connector started")
	defer c.stopAll()
	for {
		select {
		case ev := <-events:
			switch ev.Kind {
			case discovery.PeerAdded:
				c.addPeer(ctx, ev.Peer)
			case discovery.PeerRemoved:
				c.removePeer(ev.Peer.Key)
			}
		case err := <-agentErr:
			if ctx.Err() != nil {
				return nil
			}
			if err != nil {
				return fmt.Errorf("network connector %q: discovery: %w", c.cfg.Name, err)
			}
			return nil
		case <-ctx.Done():
			return nil
		}
	}
}

func (c *Connector) addPeer(ctx context.Context, p discovery.Peer) {
	c.mu.Lock()
	old, ok := c.peers[p.Key]
	c.mu.Unlock()
	if ok {
		if sameURIs(old.p.URIs, p.URIs) {
			return
		}
		c.removePeer(p.Key)
	}
	cfgs := c.bridgeConfigs(p)
	pctx, cancel := context.WithCancel(ctx)
	pe := &peer{p: p, cancel: cancel, done: make(chan struct{})}
	c.mu.Lock()
	prev := c.draining[p.Key] // nil when the peer is not draining
	c.mu.Unlock()
	for _, bc := range cfgs {
		b, err := bridge.New(bc)
		if err != nil {
			c.log.Error().Err(err).Str("peer", p.Key).Msg("cannot bridge to peer")
			cancel()
			return
		}
		pe.bridges = append(pe.bridges, b)
	}
	var wg sync.WaitGroup
	for _, b := range pe.bridges {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if prev != nil {
				// The same peer's previous bridges still drain: two demand
				// subscriptions for one topic consumer would copy each message twice.
				select {
				case <-prev:
				case <-pctx.Done():
					return
				}
			}
			if err := c.runBridge(b, pctx); err != nil {
				c.log.Error().Err(err).Str("peer", p.Key).Msg("bridge stopped for good")
			}
		}()
	}
	go func() { wg.Wait(); close(pe.done) }()
	c.mu.Lock()
	c.peers[p.Key] = pe
	c.mu.Unlock()
	c.log.Info().Str("peer", p.Key).Str("uri", p.URIs[0].String()).Int("bridges", len(pe.bridges)).Msg("peer added")
}

// removePeer forgets a peer and drains its bridges in the background: a drain
// takes up to the bridges' DrainTimeout (30 s by default), and discovery of the
// other peers must not wait for it. At most one drain runs per peer key (a peer
// added again waits for it, see addPeer); stopAll waits for all of them.
func (c *Connector) removePeer(key string) {
	c.mu.Lock()
	pe, ok := c.peers[key]
	delete(c.peers, key)
	if !ok {
		c.mu.Unlock()
		return
	}
	drained := make(chan struct{})
	c.draining[key] = drained
	c.drains.Add(1)
	c.mu.Unlock()
	pe.cancel()
	go func() {
		defer c.drains.Done()
		<-pe.done
		c.mu.Lock()
		if c.draining[key] == drained {
			delete(c.draining, key)
		}
		c.mu.Unlock()
		close(drained)
		c.log.Info().Str("peer", key).Msg("peer removed")
	}()
}

// Draining reports how many removed peers' bridges are still draining.
func (c *Connector) Draining() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.draining)
}

// stopAll drains every peer's bridges in parallel and waits for every drain,
// including those of peers removed earlier.
func (c *Connector) stopAll() {
	c.mu.Lock()
	keys := make([]string, 0, len(c.peers))
	for key := range c.peers {
		keys = append(keys, key)
	}
	c.mu.Unlock()
	for _, key := range keys {
		c.removePeer(key)
	}
	c.drains.Wait()
}

// Status lists the peers and their bridges' state, sorted by key.
func (c *Connector) Status() []PeerStatus {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]PeerStatus, 0, len(c.peers))
	for key, pe := range c.peers {
		st := PeerStatus{Key: key, Up: true}
		for _, u := range pe.p.URIs {
			st.URIs = append(st.URIs, u.String())
		}
		for _, b := range pe.bridges {
			st.Up = st.Up && b.Up()
			st.Forwarded += b.Stats().Forwarded.Load()
			st.Demand += b.Stats().DemandSubs.Load()
		}
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// Bridges returns the running bridges of a peer (for tests and metrics).
func (c *Connector) Bridges(key string) []*bridge.Bridge {
	c.mu.Lock()
	defer c.mu.Unlock()
	if pe, ok := c.peers[key]; ok {
		return append([]*bridge.Bridge(nil), pe.bridges...)
	}
	return nil
}

// bridgeConfigs turns the connector options into the bridge(s) for one peer:
// LOCAL → peer, and with duplex also peer → LOCAL.
func (c *Connector) bridgeConfigs(p discovery.Peer) []bridge.Config {
	cfg := c.cfg
	withDefaults := func(us []transport.URI, d transport.Defaults) []transport.URI {
		out := make([]transport.URI, len(us))
		for i, u := range us {
			out[i] = u.WithDefaults(d)
		}
		return out
	}
	// The connector's back-off applies to both sides. Discovered brokers log in
	// with the connector's credentials and TLS files unless their URI has its
	// own (gossip never carries any).
	local := withDefaults(c.local.URI.URIs, transport.Defaults{Reconnect: cfg.Reconnect})
	remote := withDefaults(p.URIs, transport.Defaults{
		User: cfg.UserName, Password: cfg.Password,
		CAFile: cfg.CAFile, CertFile: cfg.CertFile, KeyFile: cfg.KeyFile,
		Reconnect: cfg.Reconnect,
	})
	// An id discovery advertised is checked against what the broker reports;
	// only a configured remoteId overrides what the broker says.
	remoteID, expectID := cfg.RemoteID, ""
	if remoteID == "" {
		expectID = p.BrokerID
	}
	opts := DemandOptions(cfg)
	log := c.log.With().Str("peer", p.Key).Logger()
	out := []bridge.Config{{
		Name:  cfg.Name + ":" + local[0].Addr() + "->" + remote[0].Addr(),
		Local: local[0], LocalFailover: transport.Endpoints(local[1:]),
		Remote: remote[0], RemoteFailover: transport.Endpoints(remote[1:]),
		LocalID: c.local.ID, RemoteID: remoteID, ExpectRemoteID: expectID,
		Demand: opts, Window: cfg.Window, ReplayDelay: cfg.ReplayDelay, ReplayRateLimit: cfg.ReplayRateLimit, ReplayCooldown: cfg.ReplayCooldown, DurableOfflineTimeout: cfg.DurableOfflineTimeout,
		StuckInterval: cfg.StuckInterval, DrainTimeout: cfg.DrainTimeout,
		Batched: !cfg.IsolateDestinations, DestinationWindow: cfg.DestinationWindow, BlockedAfter: cfg.BlockedAfter,
		RateLimits: RateLimits(cfg), Renames: cfg.Renames, Log: log,
	}}
	if cfg.Duplex {
		out = append(out, bridge.Config{
			Name:  cfg.Name + ":" + remote[0].Addr() + "->" + local[0].Addr(),
			Local: remote[0], LocalFailover: transport.Endpoints(remote[1:]),
			Remote: local[0], RemoteFailover: transport.Endpoints(local[1:]),
			LocalID: remoteID, RemoteID: c.local.ID, ExpectLocalID: expectID,
			Demand: opts, Window: cfg.Window, ReplayDelay: cfg.ReplayDelay, ReplayRateLimit: cfg.ReplayRateLimit, ReplayCooldown: cfg.ReplayCooldown, DurableOfflineTimeout: cfg.DurableOfflineTimeout,
			StuckInterval: cfg.StuckInterval, DrainTimeout: cfg.DrainTimeout,
			Batched: !cfg.IsolateDestinations, DestinationWindow: cfg.DestinationWindow, BlockedAfter: cfg.BlockedAfter,
			RateLimits: RateLimits(cfg), Renames: destination.InvertRenames(cfg.Renames), Log: log,
		})
	}
	return out
}

// RateLimits are a connector's rate limits, each bridge's own: the
// connector-wide ones first, then the destinations'.
func RateLimits(cfg config.NetworkConnector) []bridge.RateLimit {
	var out []bridge.RateLimit
	if cfg.RateLimit > 0 || cfg.ByteRateLimit > 0 {
		out = append(out, bridge.RateLimit{Messages: cfg.RateLimit, Bytes: cfg.ByteRateLimit})
	}
	for _, r := range cfg.DestinationRateLimits {
		out = append(out, bridge.RateLimit{Pattern: &r.Pattern, Messages: r.Messages, Bytes: r.Bytes})
	}
	return out
}

// ContentFilters are a connector's filter and its destinations' filters.
func ContentFilters(cfg config.NetworkConnector) []demand.ContentFilter {
	var out []demand.ContentFilter
	if cfg.Filter != "" {
		out = append(out, demand.ContentFilter{Selector: cfg.Filter})
	}
	for _, f := range cfg.DestinationFilters {
		out = append(out, demand.ContentFilter{Pattern: &f.Pattern, Selector: f.Selector})
	}
	return out
}

// DemandOptions maps a connector's ActiveMQ-named options onto the demand rules.
func DemandOptions(cfg config.NetworkConnector) demand.Options {
	return demand.Options{
		Conduit:          cfg.ConduitSubscriptions,
		ConsumerTTL:      cfg.ConsumerTTL,
		MessageTTL:       cfg.MessageTTL,
		DecreasePriority: cfg.DecreaseNetworkConsumerPriority,
		PriorityBase:     cfg.ConsumerPriorityBase,
		Prefetch:         cfg.PrefetchSize,
		ContentFilters:   ContentFilters(cfg),
		Filter: destination.Filter{
			Include: cfg.DynamicallyIncludedDestinations,
			Exclude: cfg.ExcludedDestinations,
		},
		StaticInclude:         cfg.StaticallyIncludedDestinations,
		DynamicOnly:           cfg.DynamicOnly,
		BridgeTemp:            cfg.BridgeTempDestinations,
		SuppressQueues:        cfg.SuppressDuplicateQueueSubscriptions,
		SuppressTopics:        cfg.SuppressDuplicateTopicSubscriptions,
		ReplayWhenNoConsumers: cfg.ReplayWhenNoConsumers,
		MaxReplays:            cfg.MaxReplays,
	}
}

// sameURIs reports whether two URI lists dial the same brokers the same way.
func sameURIs(a, b []transport.URI) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].WithSecrets() != b[i].WithSecrets() {
			return false
		}
	}
	return true
}

// GossipTimings maps a configured timing profile to memberlist timings: the
// zero value (memberlist's LAN defaults) for "lan" or "", and probes every
// 100 ms for "fast" (a crashed member is noticed in under a second here).
func GossipTimings(profile string) discovery.GossipTimings {
	if profile != config.GossipTimingsFast {
		return discovery.GossipTimings{}
	}
	return discovery.GossipTimings{
		ProbeInterval:    100 * time.Millisecond,
		ProbeTimeout:     50 * time.Millisecond,
		GossipInterval:   20 * time.Millisecond,
		PushPullInterval: time.Second,
		SuspicionMult:    2,
	}
}
