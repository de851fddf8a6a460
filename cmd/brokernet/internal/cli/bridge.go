package cli

import (
	"context"
	"flag"
	"os"

	"github.com/brokernet/brokernet/config"
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

// bridgeFlags are the flags of `brokernet bridge`: most set keys of a
// one-connector configuration (config.Flags), the others the process.
type bridgeFlags struct {
	cf        *config.Flags
	admin     adminFlags
	creds     credentialFlags
	adminWarn string // what reading the admin flags warned about
}

// register registers the bridge command's configuration flags on fs.
func (f *bridgeFlags) register(fs *flag.FlagSet) {
	f.cf = config.NewFlags(fs, "bridge")
	cfg := f.cf.Config()
	f.cf.Options() // every connector option that has a flag
	f.cf.Lists()
	fs.StringVar(&cfg.Brokers[0].ID, "local-id", "", "local broker id (default: learnt from the broker)")
	f.cf.Name("broker", "id", "--local-id")
	fs.StringVar(&cfg.Log.Level, "log-level", cfg.Log.Level, "trace, debug, info, warn or error")
	fs.StringVar(&cfg.Log.Format, "log-format", cfg.Log.Format, "json or console")
	f.cf.Name("log", "level", "--log-level")
	f.cf.Name("log", "format", "--log-format")
	f.admin.register(fs)
	f.admin.name(f.cf)
	f.creds.register(fs)
	f.cf.Name("broker", "uri", "LOCAL")
	f.cf.Name("networkConnector", "uri", "REMOTE")
}

func runBridge(ctx context.Context, e *env, args []string) error {
	var f bridgeFlags
	fs := newFlagSet("bridge")
	f.register(fs)
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

// config completes the one-connector configuration the flags describe, as
// `brokernet run` would read it from a file, and validates it with the
// file's rules: LOCAL is the broker, REMOTE the connector's discovery URI
// (static:(a,b) bridges to each broker on its own; masterslave:(m,s) is one
// logical broker reached through whichever of its URIs answers). Problems
// name the flag or argument that set the key.
func (f *bridgeFlags) config(local transport.URI, remotes discovery.Spec) (*config.Config, error) {
	cfg := f.cf.Config()
	cfg.Brokers[0].URI = discovery.Spec{Kind: discovery.Static, URIs: []transport.URI{local}}
	nc := f.cf.Connector()
	nc.URI = remotes
	// Each broker URI keeps its own reconnect options (?initialReconnectDelay=…).
	nc.Reconnect = transport.Reconnect{}
	var err error
	if cfg.Admin, f.adminWarn, err = f.admin.config(); err != nil {
		return nil, err
	}
	out, err := f.cf.Validate()
	if err != nil {
		return nil, usagef("%v", err)
	}
	return out, nil
}
