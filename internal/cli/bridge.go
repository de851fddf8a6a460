package cli

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/brokernet/brokernet/bridge"
	"github.com/brokernet/brokernet/config"
	"github.com/brokernet/brokernet/demand"
	"github.com/brokernet/brokernet/destination"
	"github.com/brokernet/brokernet/discovery"
	"github.com/brokernet/brokernet/metrics"
	"github.com/brokernet/brokernet/transport"
	"github.com/brokernet/brokernet/transport/endpoint"
)

const bridgeUsage = `Usage: brokernet bridge [flags] LOCAL REMOTE

Forwards messages sent to LOCAL to REMOTE while a consumer on REMOTE demands them.
Flags may come before or after the URIs. REMOTE may also be a discovery URI:
  static:(URI,URI,...)       a bridge to each broker, each reconnecting on its own
  masterslave:(URI,URI,...)  one broker pair: the first URI that answers, failing over
Broker URIs (LOCAL and REMOTE may use different protocols):
  stomp://[user:pass@]host:port[?vhost=/&initialReconnectDelay=1000&maxReconnectDelay=30000&backOffMultiplier=2]
  stomp+ssl://...   (TLS; ?ca=FILE to trust a private CA, ?cert=FILE&key=FILE for a
                     client certificate, ?serverName=NAME to verify another name)
  amqp://[user:pass@]host[:5672][?vhost=NAME], amqps://...   AMQP 1.0 (RabbitMQ)
  tcp://[user:pass@]host[:61616], ssl://host[:61617][?ca=FILE]  OpenWire (ActiveMQ)
Credentials without argv: --broker-user and --broker-password-file, or the
environment variables BROKERNET_BROKER_USER and BROKERNET_BROKER_PASSWORD, apply to
every URI that carries no passcode.

Flags:
`

type bridgeFlags struct {
	duplex           bool
	networkTTL       int
	messageTTL       int
	consumerTTL      int
	prefetch         int
	window           int
	conduit          bool
	decreasePriority bool
	include, exclude stringList
	staticInclude    stringList
	rename           stringList
	dynamicOnly      bool
	suppressQueues   bool
	suppressTopics   bool
	replay           bool
	replayDelay      time.Duration
	replayRate       int
	durableOffline   time.Duration
	localID          string
	remoteID         string
	logLevel         string
	logFormat        string
	admin            adminFlags
	creds            credentialFlags
}

func runBridge(ctx context.Context, e *env, args []string) error {
	var f bridgeFlags
	fs := newFlagSet("bridge")
	fs.BoolVar(&f.duplex, "duplex", false, "forward in both directions")
	fs.IntVar(&f.networkTTL, "network-ttl", 1, "broker hops for messages and demand (sets both TTLs); -1 unlimited")
	fs.IntVar(&f.messageTTL, "message-ttl", 0, "broker hops a message may make (default: --network-ttl)")
	fs.IntVar(&f.consumerTTL, "consumer-ttl", 0, "broker hops demand may travel (default: --network-ttl)")
	fs.IntVar(&f.prefetch, "prefetch", bridge.DefaultPrefetch, "prefetch of each demand subscription (prefetchSize)")
	fs.IntVar(&f.window, "window", bridge.DefaultWindow, "messages forwarded but not yet confirmed by the remote broker")
	fs.BoolVar(&f.conduit, "conduit-subscriptions", true, "one demand subscription per destination and selector")
	fs.BoolVar(&f.decreasePriority, "decrease-network-consumer-priority", false, "demand subscriptions get priority -5 and lower with distance")
	fs.Var(&f.include, "include", "destination pattern to forward (repeatable; queue://a.>, topic://b.*, or bare for both)")
	fs.Var(&f.exclude, "exclude", "destination pattern never to forward (repeatable; wins over --include)")
	fs.Var(&f.staticInclude, "static-include", "destination always forwarded, with or without demand (repeatable)")
	fs.Var(&f.rename, "rename", "LOCAL=REMOTE: the local destination is REMOTE on the remote broker (repeatable; exact names, e.g. queue://orders=queue://shop.orders)")
	fs.BoolVar(&f.dynamicOnly, "dynamic-only", false, "only live consumers create demand (durable demand is not kept while its consumer is away)")
	fs.BoolVar(&f.suppressQueues, "suppress-duplicate-queue-subscriptions", false, "keep only the best route to each queue consumer")
	fs.BoolVar(&f.suppressTopics, "suppress-duplicate-topic-subscriptions", true, "keep only the best route to each topic subscriber")
	fs.BoolVar(&f.replay, "replay-when-no-consumers", false, "send queue messages back to where their consumer went")
	fs.DurationVar(&f.replayDelay, "replay-delay", 0, "how long a queue must lack local consumers before replaying")
	fs.IntVar(&f.replayRate, "replay-rate-limit", 0, "most replayed messages per second (0: no limit)")
	fs.DurationVar(&f.durableOffline, "durable-offline-timeout", 0, "destroy durable demand whose remote durable subscribers were all offline this long, with what it kept (0: never)")
	fs.StringVar(&f.localID, "local-id", "", "local broker id (default: learnt from the broker)")
	fs.StringVar(&f.remoteID, "remote-id", "", "remote broker id (default: learnt from the broker)")
	fs.StringVar(&f.logLevel, "log-level", "info", "trace, debug, info, warn or error")
	fs.StringVar(&f.logFormat, "log-format", "console", "json or console")
	f.admin.register(fs)
	f.creds.register(fs)
	pos, err := parseFlags(e, fs, bridgeUsage, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return usagef("want LOCAL and REMOTE broker URIs, got %d argument(s)", len(pos))
	}
	local, err := endpoint.Parse(pos[0])
	if err != nil {
		return usagef("LOCAL: %v", err)
	}
	remotes, err := discovery.ParseURI(pos[1])
	if err != nil {
		return usagef("REMOTE: %v", err)
	}
	if remotes.Kind == discovery.Gossip {
		return usagef("REMOTE: gossip discovery needs 'brokernet sidecar' or a configuration file")
	}
	user, password, credWarn, err := f.creds.resolve()
	if err != nil {
		return err
	}
	local = applyCredentials(local, user, password)
	for i, u := range remotes.URIs {
		remotes.URIs[i] = applyCredentials(u, user, password)
	}
	opts, err := f.demandOptions()
	if err != nil {
		return err
	}
	if f.window < 1 {
		return usagef("--window %d: must be at least 1", f.window)
	}
	var renames []destination.Rename
	for _, s := range f.rename {
		r, err := destination.ParseRename(s)
		if err != nil {
			return usagef("--rename: %v", err)
		}
		renames = append(renames, r)
	}
	if err := destination.CheckRenames(renames); err != nil {
		return usagef("--rename: %v", err)
	}
	log, err := newLogger(e.stderr, f.logLevel, f.logFormat)
	if err != nil {
		return err
	}
	if credWarn != "" {
		log.Warn().Msg(credWarn)
	}

	// static:(a,b) bridges to each broker on its own; masterslave:(m,s) is one
	// logical broker reached through whichever of its URIs answers.
	var groups [][]transport.URI
	if remotes.Kind == discovery.MasterSlave {
		groups = [][]transport.URI{remotes.URIs}
	} else {
		for _, u := range remotes.URIs {
			groups = append(groups, []transport.URI{u})
		}
	}
	var cfgs []bridge.Config
	for _, g := range groups {
		cfgs = append(cfgs, bridge.Config{
			Name: local.Addr() + "->" + g[0].Addr(), Local: local, Remote: g[0], RemoteFailover: transport.Endpoints(g[1:]),
			LocalID: f.localID, RemoteID: f.remoteID, Demand: opts, Window: f.window, ReplayDelay: f.replayDelay, ReplayRateLimit: f.replayRate, DurableOfflineTimeout: f.durableOffline,
			Renames: renames, Log: log,
		})
		if f.duplex {
			cfgs = append(cfgs, bridge.Config{
				Name: g[0].Addr() + "->" + local.Addr(), Local: g[0], LocalFailover: transport.Endpoints(g[1:]), Remote: local,
				LocalID: f.remoteID, RemoteID: f.localID, Demand: opts, Window: f.window, ReplayDelay: f.replayDelay, ReplayRateLimit: f.replayRate, DurableOfflineTimeout: f.durableOffline,
				Renames: destination.InvertRenames(renames), Log: log,
			})
		}
	}
	if f.remoteID != "" && len(groups) > 1 {
		return usagef("--remote-id names one broker; REMOTE %s has %d", remotes, len(groups))
	}
	adminCfg, warn, err := f.admin.config()
	if err != nil {
		return err
	}
	if warn != "" {
		log.Warn().Msg(warn)
	}
	return runBridges(ctx, cfgs, adminCfg, log)
}

func (f *bridgeFlags) demandOptions() (demand.Options, error) {
	ttl := func(name string, v int) (int, error) {
		if v < -1 {
			return 0, usagef("--%s %d: want -1 (unlimited) or a hop count", name, v)
		}
		return v, nil
	}
	if _, err := ttl("network-ttl", f.networkTTL); err != nil {
		return demand.Options{}, err
	}
	if f.networkTTL == 0 {
		return demand.Options{}, usagef("--network-ttl 0: would forward nothing; want -1 or at least 1")
	}
	msgTTL, consTTL := f.networkTTL, f.networkTTL
	if f.messageTTL != 0 {
		v, err := ttl("message-ttl", f.messageTTL)
		if err != nil {
			return demand.Options{}, err
		}
		msgTTL = v
	}
	if f.consumerTTL != 0 {
		v, err := ttl("consumer-ttl", f.consumerTTL)
		if err != nil {
			return demand.Options{}, err
		}
		consTTL = v
	}
	if f.prefetch < 1 {
		return demand.Options{}, usagef("--prefetch %d: must be at least 1 (network consumers do not poll)", f.prefetch)
	}
	var filter destination.Filter
	for _, s := range f.include {
		p, err := destination.ParsePattern(s)
		if err != nil {
			return demand.Options{}, usagef("--include: %v", err)
		}
		filter.Include = append(filter.Include, p)
	}
	for _, s := range f.exclude {
		p, err := destination.ParsePattern(s)
		if err != nil {
			return demand.Options{}, usagef("--exclude: %v", err)
		}
		filter.Exclude = append(filter.Exclude, p)
	}
	var static []destination.Pattern
	for _, s := range f.staticInclude {
		p, err := destination.ParsePattern(s)
		if err != nil {
			return demand.Options{}, usagef("--static-include: %v", err)
		}
		static = append(static, p)
	}
	if f.replayRate < 0 {
		return demand.Options{}, usagef("--replay-rate-limit %d: want 0 (no limit) or messages per second", f.replayRate)
	}
	if f.replayDelay < 0 {
		return demand.Options{}, usagef("--replay-delay %s: must not be negative", f.replayDelay)
	}
	if f.durableOffline < 0 {
		return demand.Options{}, usagef("--durable-offline-timeout %s: must not be negative", f.durableOffline)
	}
	return demand.Options{
		Conduit:               f.conduit,
		ConsumerTTL:           consTTL,
		MessageTTL:            msgTTL,
		DecreasePriority:      f.decreasePriority,
		PriorityBase:          -5,
		Prefetch:              f.prefetch,
		Filter:                filter,
		StaticInclude:         static,
		DynamicOnly:           f.dynamicOnly,
		SuppressQueues:        f.suppressQueues,
		SuppressTopics:        f.suppressTopics,
		ReplayWhenNoConsumers: f.replay,
	}, nil
}

// runBridges runs bridges until ctx ends; the first one that fails for good
// stops all. With adminAddr set it serves the admin endpoints for them.
func runBridges(ctx context.Context, cfgs []bridge.Config, adminCfg config.Admin, log zerolog.Logger) error {
	bridges := make([]*bridge.Bridge, 0, len(cfgs))
	for _, c := range cfgs {
		b, err := bridge.New(c)
		if err != nil {
			if errors.Is(err, bridge.ErrLoopback) {
				return usagef("%v", err)
			}
			return err
		}
		bridges = append(bridges, b)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	listed := make([]metrics.Bridge, len(bridges))
	for i, b := range bridges {
		// The peer is the far end: the remote of a forward bridge, the local
		// end of a duplex bridge's reverse direction.
		peer, reverse := cfgs[i].Remote.Addr(), false
		if peer == cfgs[0].Local.Addr() {
			peer, reverse = cfgs[i].Local.Addr(), true
		}
		listed[i] = metrics.Bridge{Connector: "bridge", Peer: peer, Reverse: reverse, Bridge: b}
	}
	if err := startAdmin(ctx, adminCfg, func() []metrics.Bridge { return listed }, log); err != nil {
		return err
	}
	var wg sync.WaitGroup
	errs := make([]error, len(bridges))
	for i, b := range bridges {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := b.Run(ctx); err != nil {
				errs[i] = fmt.Errorf("bridge %s: %w", cfgs[i].Name, err)
				cancel()
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
