package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/brokernet/brokernet/bridge"
	"github.com/brokernet/brokernet/config"
	"github.com/brokernet/brokernet/destination"
	"github.com/brokernet/brokernet/discovery"
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
	bridgeTemp       bool
	suppressQueues   bool
	suppressTopics   bool
	replay           bool
	replayDelay      time.Duration
	replayRate       int
	durableOffline   time.Duration
	stuckInterval    time.Duration
	localID          string
	remoteID         string
	logLevel         string
	logFormat        string
	admin            adminFlags
	creds            credentialFlags
	adminWarn        string // what reading the admin flags warned about
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
	fs.BoolVar(&f.bridgeTemp, "bridge-temp-destinations", true, "mirror remote temporary destinations so replies to remote requesters reach them (request/reply)")
	fs.BoolVar(&f.suppressQueues, "suppress-duplicate-queue-subscriptions", false, "keep only the best route to each queue consumer")
	fs.BoolVar(&f.suppressTopics, "suppress-duplicate-topic-subscriptions", true, "keep only the best route to each topic subscriber")
	fs.BoolVar(&f.replay, "replay-when-no-consumers", false, "send queue messages back to where their consumer went")
	fs.DurationVar(&f.replayDelay, "replay-delay", 0, "how long a queue must lack local consumers before replaying")
	fs.IntVar(&f.replayRate, "replay-rate-limit", 0, "most replayed messages per second (0: no limit)")
	fs.DurationVar(&f.durableOffline, "durable-offline-timeout", 0, "destroy durable demand whose remote durable subscribers were all offline this long, with what it kept (0: never)")
	fs.DurationVar(&f.stuckInterval, "stuck-interval", config.DefaultStuckInterval, "how often stuck messages are counted on LOCAL (0: never)")
	fs.StringVar(&f.localID, "local-id", "", "local broker id (default: learnt from the broker)")
	fs.StringVar(&f.remoteID, "remote-id", "", "remote broker id (default: learnt from the broker)")
	fs.StringVar(&f.logLevel, "log-level", "info", "trace, debug, info, warn or error")
	fs.StringVar(&f.logFormat, "log-format", "console", "json or console")
	f.admin.register(fs)
	f.creds.register(fs)
	procs := registerProcs(fs)
	pos, err := parseFlags(e, fs, bridgeUsage, args)
	if err != nil {
		return err
	}
	rt, err := chooseRuntime(*procs, os.Getenv)
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
	cfg, err := f.config(local, remotes)
	if err != nil {
		return err
	}
	log, err := newLogger(e.stderr, cfg.Log.Level, cfg.Log.Format)
	if err != nil {
		return err
	}
	if credWarn != "" {
		log.Warn().Msg(credWarn)
	}
	if f.adminWarn != "" {
		log.Warn().Msg(f.adminWarn)
	}
	applyRuntime(log, rt)
	return serveFederation(ctx, log, cfg, nil, nil)
}

// config builds the one-connector configuration the flags describe, as
// `brokernet run` would read it from a file, and validates it with the file's
// rules: LOCAL is the broker, REMOTE the connector's discovery URI
// (static:(a,b) bridges to each broker on its own; masterslave:(m,s) is one
// logical broker reached through whichever of its URIs answers).
func (f *bridgeFlags) config(local transport.URI, remotes discovery.Spec) (*config.Config, error) {
	nc := config.DefaultConnector()
	nc.Name = "bridge"
	nc.Broker = "local"
	nc.URI = remotes
	nc.Duplex = f.duplex
	nc.NetworkTTL = f.networkTTL
	nc.MessageTTL = cmp.Or(f.messageTTL, f.networkTTL)
	nc.ConsumerTTL = cmp.Or(f.consumerTTL, f.networkTTL)
	nc.PrefetchSize = f.prefetch
	nc.Window = f.window
	nc.ConduitSubscriptions = f.conduit
	nc.DecreaseNetworkConsumerPriority = f.decreasePriority
	nc.DynamicOnly = f.dynamicOnly
	nc.BridgeTempDestinations = f.bridgeTemp
	nc.SuppressDuplicateQueueSubscriptions = f.suppressQueues
	nc.SuppressDuplicateTopicSubscriptions = f.suppressTopics
	nc.ReplayWhenNoConsumers = f.replay
	nc.ReplayDelay = f.replayDelay
	nc.ReplayRateLimit = f.replayRate
	nc.DurableOfflineTimeout = f.durableOffline
	nc.StuckInterval = f.stuckInterval
	nc.RemoteID = f.remoteID
	// Each broker URI keeps its own reconnect options (?initialReconnectDelay=…).
	nc.Reconnect = transport.Reconnect{}
	for _, p := range []struct {
		flag string
		in   stringList
		out  *[]destination.Pattern
	}{
		{"include", f.include, &nc.DynamicallyIncludedDestinations},
		{"exclude", f.exclude, &nc.ExcludedDestinations},
		{"static-include", f.staticInclude, &nc.StaticallyIncludedDestinations},
	} {
		for _, s := range p.in {
			pat, err := destination.ParsePattern(s)
			if err != nil {
				return nil, usagef("--%s: %v", p.flag, err)
			}
			*p.out = append(*p.out, pat)
		}
	}
	for _, s := range f.rename {
		r, err := destination.ParseRename(s)
		if err != nil {
			return nil, usagef("--rename: %v", err)
		}
		nc.Renames = append(nc.Renames, r)
	}
	cfg := config.Default()
	cfg.Log = config.Log{Level: f.logLevel, Format: f.logFormat}
	var err error
	if cfg.Admin, f.adminWarn, err = f.admin.config(); err != nil {
		return nil, err
	}
	cfg.Brokers = []config.Broker{{Name: "local", URI: discovery.Spec{Kind: discovery.Static, URIs: []transport.URI{local}}, ID: f.localID}}
	cfg.Connectors = []config.NetworkConnector{nc}
	if err := cfg.Validate(); err != nil {
		return nil, f.flagErrors(err)
	}
	return &cfg, nil
}

// flagKeys names the flag that sets each configuration key the bridge
// command sets from flags.
var flagKeys = map[string]string{
	"level": "log-level", "format": "log-format", "listen": "admin",
	"id": "local-id", "remoteId": "remote-id",
	"networkTTL": "network-ttl", "messageTTL": "message-ttl", "consumerTTL": "consumer-ttl",
	"prefetchSize": "prefetch", "window": "window",
	"replayDelay": "replay-delay", "replayRateLimit": "replay-rate-limit",
	"durableOfflineTimeout": "durable-offline-timeout", "stuckInterval": "stuck-interval", "renames": "rename",
}

// flagErrors renders configuration problems in the command's terms: the
// flag (with the value given) instead of the configuration key, REMOTE
// instead of the connector's uri.
func (f *bridgeFlags) flagErrors(err error) error {
	var errs *config.Errors
	if !errors.As(err, &errs) {
		return usagef("%v", err)
	}
	values := map[string]any{
		"log-level": strconv.Quote(f.logLevel), "log-format": strconv.Quote(f.logFormat), "admin": strconv.Quote(f.admin.listen),
		"local-id": strconv.Quote(f.localID), "remote-id": strconv.Quote(f.remoteID),
		"network-ttl": f.networkTTL, "message-ttl": f.messageTTL, "consumer-ttl": f.consumerTTL,
		"prefetch": f.prefetch, "window": f.window,
		"replay-delay": f.replayDelay, "replay-rate-limit": f.replayRate, "durable-offline-timeout": f.durableOffline,
		"stuck-interval": f.stuckInterval,
	}
	var lines []string
	for _, e := range *errs {
		flag, ok := flagKeys[e.Key]
		// An unset --message-ttl or --consumer-ttl takes --network-ttl's value.
		if e.Key == "messageTTL" && f.messageTTL == 0 || e.Key == "consumerTTL" && f.consumerTTL == 0 {
			flag = "network-ttl"
		}
		line := e.Error()
		switch {
		case ok:
			line = fmt.Sprintf("--%s %v: %s", flag, values[flag], e.Msg)
		case e.Key == "uri":
			line = "REMOTE: " + e.Msg
		}
		if !slices.Contains(lines, line) {
			lines = append(lines, line)
		}
	}
	return usagef("%s", strings.Join(lines, "\n"))
}
