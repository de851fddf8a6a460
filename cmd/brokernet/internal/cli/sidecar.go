package cli

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/brokernet/brokernet/config"
	"github.com/brokernet/brokernet/config/activemqxml"
	"github.com/brokernet/brokernet/discovery"
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

// sidecarOptions are the connector keys `brokernet sidecar` takes as flags.
var sidecarOptions = []string{"networkTTL", "prefetchSize", "window", "decreaseNetworkConsumerPriority", "stuckInterval", "rateLimit", "byteRateLimit", "filter"}

func runSidecar(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet("sidecar")
	cf := config.NewFlags(fs, "sidecar")
	cfg, nc := cf.Config(), cf.Connector()
	nc.URI = discovery.Spec{Kind: discovery.Gossip}
	nc.Gossip = config.DefaultGossip()
	g := nc.Gossip
	brokerURI := fs.String("broker", "", "the local broker's URI: stomp://, amqp://, tcp:// (OpenWire), ... (required)")
	fs.StringVar(&cfg.Brokers[0].ID, "broker-id", "", "the local broker's id (default: learnt from the broker)")
	fs.StringVar(&g.Bind, "gossip-bind", g.Bind, "gossip bind address (port 0: any)")
	fs.StringVar(&g.Advertise, "gossip-advertise", "", "gossip address other members use (default: derived)")
	fs.StringVar(&g.AdvertiseBrokerURI, "advertise-broker", "", "broker URI other members dial (default: --broker)")
	fs.StringVar(&g.NodeName, "node-name", "", "unique gossip member name (default: hostname and port)")
	fs.StringVar(&g.Timings, "gossip-timings", config.GossipTimingsLAN, "failure detection: lan (memberlist defaults, ~6 s) or fast (~1 s, more traffic)")
	keyFile := fs.String("secret-key-file", "", "file with a base64 AES key (16, 24 or 32 bytes) encrypting gossip")
	fs.BoolVar(&g.Insecure, "gossip-insecure", false, "allow unencrypted gossip on a non-loopback address (anyone reaching it may join)")
	var allowed stringList
	fs.Var(&allowed, "allowed-brokers", "brokers members may advertise: host names, IPs, CIDRs (repeatable; default any)")
	var creds credentialFlags
	creds.register(fs)
	fs.StringVar(&nc.CAFile, "broker-ca", "", "PEM roots for TLS peers (stomp+ssl, amqps, ssl) (gossip never carries file names)")
	fs.StringVar(&nc.CertFile, "broker-cert", "", "PEM client certificate for stomp+ssl and amqps peers (with --broker-key)")
	fs.StringVar(&nc.KeyFile, "broker-key", "", "PEM key of --broker-cert")
	var join stringList
	fs.Var(&join, "join", "gossip seed HOST:PORT (repeatable)")
	cf.Options(sidecarOptions...)
	var adm adminFlags
	adm.register(fs)
	fs.StringVar(&adm.listen, "admin-listen", "", "older name of --admin")
	adm.name(cf)
	fs.StringVar(&cfg.Log.Level, "log-level", cfg.Log.Level, "trace, debug, info, warn or error")
	fs.StringVar(&cfg.Log.Format, "log-format", cfg.Log.Format, "json or console")
	for key, name := range map[string]string{
		"broker.uri": "--broker", "broker.id": "--broker-id",
		"networkConnector.gossip.bind": "--gossip-bind", "networkConnector.gossip.advertise": "--gossip-advertise",
		"networkConnector.gossip.advertiseBrokerURI": "--advertise-broker", "networkConnector.gossip.nodeName": "--node-name",
		"networkConnector.gossip.timings": "--gossip-timings", "networkConnector.gossip.secretKeyFile": "--secret-key-file",
		"networkConnector.gossip.allowedBrokers": "--allowed-brokers", "networkConnector.gossip.join": "--join",
		"log.level": "--log-level", "log.format": "--log-format",
	} {
		kind, k, _ := strings.Cut(key, ".")
		cf.Name(kind, k, name)
	}
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
	if *keyFile != "" {
		b, err := os.ReadFile(*keyFile)
		if err != nil {
			return usagef("--secret-key-file: %v", err)
		}
		g.SecretKey, err = config.DecodeSecretKey(strings.TrimSpace(string(b)))
		if err != nil {
			return usagef("--secret-key-file %s: %v", *keyFile, err)
		}
	}
	g.Join, g.AllowedBrokers = join, allowed
	nc.UserName, nc.Password = user, password
	cfg.Brokers[0].URI = discovery.Spec{Kind: discovery.Static, URIs: []transport.URI{u}}
	var adminWarn string
	if cfg.Admin, adminWarn, err = adm.config(); err != nil {
		return err
	}
	if _, err := cf.Validate(); err != nil {
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
	return serveFederation(ctx, log, cfg, nil, nil)
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
