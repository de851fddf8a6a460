package cli

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/brokernet/brokernet/config"
	"github.com/brokernet/brokernet/config/activemqxml"
	"github.com/brokernet/brokernet/discovery"
	"github.com/brokernet/brokernet/internal/tlsconf"
	"github.com/brokernet/brokernet/internal/uriredact"
	"github.com/brokernet/brokernet/transport"
	"github.com/brokernet/brokernet/transport/endpoint"
)

const sidecarUsage = `Usage: brokernet sidecar --broker URI --gossip-bind HOST:PORT [--join HOST:PORT ...] [flags]

Runs next to one broker: joins a gossip cluster of other sidecars, advertises this
broker, and bridges it to every other member's broker on demand. The same as a
one-connector configuration with uri = "gossip:".

Flags:
`

func runSidecar(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet("sidecar")
	brokerURI := fs.String("broker", "", "the local broker's URI: stomp://, amqp://, tcp:// (OpenWire), ... (required)")
	brokerID := fs.String("broker-id", "", "the local broker's id (default: learnt from the broker)")
	bind := fs.String("gossip-bind", "0.0.0.0:7946", "gossip bind address (port 0: any)")
	advertise := fs.String("gossip-advertise", "", "gossip address other members use (default: derived)")
	advBroker := fs.String("advertise-broker", "", "broker URI other members dial (default: --broker)")
	nodeName := fs.String("node-name", "", "unique gossip member name (default: hostname and port)")
	timings := fs.String("gossip-timings", "lan", "failure detection: lan (memberlist defaults, ~6 s) or fast (~1 s, more traffic)")
	keyFile := fs.String("secret-key-file", "", "file with a base64 AES key (16, 24 or 32 bytes) encrypting gossip")
	insecure := fs.Bool("gossip-insecure", false, "allow unencrypted gossip on a non-loopback address (anyone reaching it may join)")
	var allowed stringList
	fs.Var(&allowed, "allowed-brokers", "brokers members may advertise: host names, IPs, CIDRs (repeatable; default any)")
	var creds credentialFlags
	creds.register(fs)
	peerCA := fs.String("broker-ca", "", "PEM roots for TLS peers (stomp+ssl, amqps, ssl) (gossip never carries file names)")
	peerCert := fs.String("broker-cert", "", "PEM client certificate for stomp+ssl and amqps peers (with --broker-key)")
	peerKey := fs.String("broker-key", "", "PEM key of --broker-cert")
	var join stringList
	fs.Var(&join, "join", "gossip seed HOST:PORT (repeatable)")
	networkTTL := fs.Int("network-ttl", 1, "broker hops for messages and demand")
	prefetch := fs.Int("prefetch", 1000, "prefetch of each demand subscription")
	window := fs.Int("window", 500, "messages forwarded but not yet confirmed")
	decrease := fs.Bool("decrease-network-consumer-priority", false, "demand subscriptions get priority -5 and lower with distance")
	stuck := fs.Duration("stuck-interval", config.DefaultStuckInterval, "how often stuck messages are counted on the broker (0: never)")
	var adm adminFlags
	adm.register(fs)
	fs.StringVar(&adm.listen, "admin-listen", "", "older name of --admin")
	logLevel := fs.String("log-level", "info", "trace, debug, info, warn or error")
	logFormat := fs.String("log-format", "console", "json or console")
	procs := registerProcs(fs)
	pos, err := parseFlags(e, fs, sidecarUsage, args)
	if err != nil {
		return err
	}
	rt, err := chooseRuntime(*procs, os.Getenv)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return usagef("unexpected argument %q", uriredact.Redact(pos[0]))
	}
	if *brokerURI == "" {
		return usagef("--broker is required")
	}
	u, err := endpoint.Parse(*brokerURI)
	if err != nil {
		return usagef("--broker: %v", err)
	}
	user, password, credWarn, err := creds.resolve()
	if err != nil {
		return err
	}
	u = applyCredentials(u, user, password)
	if *advBroker != "" {
		if _, err := endpoint.Parse(*advBroker); err != nil {
			return usagef("--advertise-broker: %v", err)
		}
	}
	var key []byte
	if *keyFile != "" {
		b, err := os.ReadFile(*keyFile)
		if err != nil {
			return usagef("--secret-key-file: %v", err)
		}
		key, err = config.DecodeSecretKey(strings.TrimSpace(string(b)))
		if err != nil {
			return usagef("--secret-key-file %s: %v", *keyFile, err)
		}
	}
	nc := config.DefaultConnector()
	nc.Name = "sidecar"
	nc.Broker = "local"
	nc.URI = discovery.Spec{Kind: discovery.Gossip}
	nc.NetworkTTL, nc.MessageTTL, nc.ConsumerTTL = *networkTTL, *networkTTL, *networkTTL
	nc.PrefetchSize = *prefetch
	nc.Window = *window
	nc.DecreaseNetworkConsumerPriority = *decrease
	nc.StuckInterval = *stuck
	nc.UserName, nc.Password = user, password
	nc.CAFile, nc.CertFile, nc.KeyFile = *peerCA, *peerCert, *peerKey
	if err := (tlsconf.Options{CAFile: nc.CAFile, CertFile: nc.CertFile, KeyFile: nc.KeyFile}).Check(); err != nil {
		return usagef("--broker-ca/--broker-cert/--broker-key: %v", err)
	}
	nc.Gossip = &config.Gossip{
		Bind: *bind, Advertise: *advertise, Join: join, NodeName: *nodeName,
		SecretKey: key, AdvertiseBrokerURI: *advBroker, Timings: *timings,
		Insecure: *insecure, AllowedBrokers: allowed,
	}
	if *timings != config.GossipTimingsLAN && *timings != config.GossipTimingsFast {
		return usagef("--gossip-timings %q: want lan or fast", *timings)
	}
	cfg := config.Default()
	cfg.Log = config.Log{Level: *logLevel, Format: *logFormat}
	var adminWarn string
	if cfg.Admin, adminWarn, err = adm.config(); err != nil {
		return err
	}
	cfg.Brokers = []config.Broker{{Name: "local", URI: discovery.Spec{Kind: discovery.Static, URIs: []transport.URI{u}}, ID: *brokerID}}
	cfg.Connectors = []config.NetworkConnector{nc}
	if err := cfg.Validate(); err != nil {
		return usagef("%v", err)
	}
	log, err := newLogger(e.stderr, cfg.Log.Level, cfg.Log.Format)
	if err != nil {
		return err
	}
	if credWarn != "" {
		log.Warn().Msg(credWarn)
	}
	if adminWarn != "" {
		log.Warn().Msg(adminWarn)
	}
	applyRuntime(log, rt)
	return serveFederation(ctx, log, &cfg, nil, nil)
}

const importUsage = `Usage: brokernet import [--broker-uri URI] activemq.xml

Reads the <networkConnectors> of an ActiveMQ broker configuration and prints the
equivalent brokernet TOML on stdout; options it cannot map are listed on stderr.

Flags:
`

func runImport(_ context.Context, e *env, args []string) error {
	fs := newFlagSet("import")
	brokerURI := fs.String("broker-uri", "", "STOMP URI of the local broker (default: from the XML's stomp transportConnector, else stomp://127.0.0.1:61613)")
	pos, err := parseFlags(e, fs, importUsage, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("want one activemq.xml file, got %d argument(s)", len(pos))
	}
	data, err := os.ReadFile(pos[0])
	if err != nil {
		return usagef("%v", err)
	}
	out, warnings, err := activemqxml.Import(data, *brokerURI)
	if err != nil {
		return usagef("%s: %v", pos[0], err)
	}
	for _, w := range warnings {
		fmt.Fprintf(e.stderr, "warning: %s\n", w)
	}
	fmt.Fprint(e.stdout, out)
	return nil
}
