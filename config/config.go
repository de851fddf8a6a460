// Package config reads and validates the TOML federation file of
// `brokernet run -c federation.toml`, and translates the <networkConnectors>
// of an ActiveMQ activemq.xml into one (package config/activemqxml).
//
// Keys are ActiveMQ's networkConnector attribute names, so that ActiveMQ users
// recognise them:
//
//	[log]
//	level = "info"                # trace|debug|info|warn|error
//	format = "console"            # json|console
//
//	[admin]
//	listen = "127.0.0.1:9464"     # /metrics and /status; "" = off
//
//	[[broker]]                    # a local broker; at least one
//	name = "local"                # default "local" when there is exactly one
//	uri = "stomp://127.0.0.1:61613"
//
//	[[networkConnector]]
//	name = "to-dc2"
//	uri = "static:(stomp://10.0.0.2:61613,stomp://10.0.0.3:61613)"
//	networkTTL = 2
//	excludedDestinations = ["queue://internal.>"]
//
// Every front end takes one path to one validated Config:
//
//   - decode: Parse reads a file into the typed tree, starting from Default
//     and DefaultConnector, and records where each key was written; Flags
//     binds the flags of `brokernet bridge` and `brokernet sidecar` to the
//     same tree, with the same defaults (the option table in options.go
//     names each connector key's flag). Decoding reports only what cannot be
//     read: syntax, unknown keys, wrong types, unreadable files.
//   - fill: the defaults that depend on other keys (a lone broker's name, a
//     connector's broker, messageTTL and consumerTTL from networkTTL).
//   - Validate: every rule, once. It reports every problem at once as
//     *Errors, each located where its value came from: file:line:col for a
//     file, the flag and its value for the command line.
//
// Passcodes and secret keys never appear in errors or warnings.
package config

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/brokernet/brokernet/destination"
	"github.com/brokernet/brokernet/discovery"
	"github.com/brokernet/brokernet/transport"
)

// Defaults of a [[networkConnector]], after ActiveMQ's NetworkBridgeConfiguration
// (5.17) and the `brokernet bridge` flags.
const (
	// DefaultNetworkTTL lets messages and demand make one hop.
	DefaultNetworkTTL = 1
	// DefaultConsumerPriorityBase is ActiveMQ's ConsumerInfo.NETWORK_CONSUMER_PRIORITY.
	DefaultConsumerPriorityBase = -5
	// DefaultPrefetchSize is ActiveMQ's network prefetchSize (and bridge.DefaultPrefetch).
	DefaultPrefetchSize = 1000
	// DefaultWindow is the number of unconfirmed messages in flight (bridge.DefaultWindow).
	DefaultWindow = 500
	// DefaultStuckInterval is how often stuck messages are counted
	// (bridge.DefaultStuckInterval).
	DefaultStuckInterval = time.Minute
	// MinStuckInterval is the shortest StuckInterval: every count browses each
	// demanded queue on the local broker.
	MinStuckInterval = time.Second
	// DefaultBlockedAfter is when a destination the remote broker does not
	// confirm is reported blocked (bridge.Config.BlockedAfter).
	DefaultBlockedAfter = 5 * time.Second
	// DefaultMaxReplays and DefaultReplayCooldown keep a message whose
	// consumers keep moving from bouncing between brokers without end: at
	// most five replays, five seconds apart.
	DefaultMaxReplays     = 5
	DefaultReplayCooldown = 5 * time.Second
	// DefaultDrainTimeout bounds a bridge's drain (bridge.Config.DrainTimeout).
	DefaultDrainTimeout = 30 * time.Second
	// DefaultGossipBind is memberlist's default LAN bind address.
	DefaultGossipBind = "0.0.0.0:7946"
	// DefaultBrokerName is the name of a lone [[broker]] that has none.
	DefaultBrokerName = "local"
)

// Config is a whole federation file.
type Config struct {
	// Log configures the process logger.
	Log Log
	// Admin configures the HTTP listener for /metrics and /status.
	Admin Admin
	// Brokers are the local brokers this process bridges from, in file order.
	Brokers []Broker
	// Connectors are the network connectors, in file order. Each names one of
	// Brokers (NetworkConnector.Broker is always filled in).
	Connectors []NetworkConnector
	// Warnings are things that are allowed but probably not what was meant,
	// one sentence each, for the caller to log.
	Warnings []string

	// src records where the values came from (a file's positions, or flags),
	// for Validate's messages; nil for a Config built in code.
	src *source
}

// Log configures the process logger.
type Log struct {
	// Level is one of trace, debug, info, warn and error. Default info.
	Level string
	// Format is json (one object per line, for collectors) or console (for
	// people). Default console, as for `brokernet bridge`.
	Format string
}

// Admin configures the optional HTTP listener.
type Admin struct {
	// Listen is the host:port of the listener serving /metrics and /status;
	// empty turns it off (the default).
	Listen string
	// Token, read from TokenFile, must come as "Authorization: Bearer TOKEN".
	// A non-loopback Listen needs one unless Insecure.
	Token string
	// TokenFile is the file Token was read from (tokenFile,
	// --admin-token-file); empty when there is none.
	TokenFile string
	// CertFile and KeyFile serve HTTPS instead of HTTP.
	CertFile, KeyFile string
	// Insecure allows a non-loopback Listen without a token.
	Insecure bool
}

// Broker is a local broker: the one demand subscriptions are made on and
// messages are forwarded from.
type Broker struct {
	// Name identifies the broker to connectors (NetworkConnector.Broker).
	// Default "local" when the file has exactly one [[broker]].
	Name string
	// URI is where to reach it: Kind Static with exactly one URI, or
	// MasterSlave for a master/slave pair (the first that answers).
	URI discovery.Spec
	// ID overrides the broker id; empty means learn it from the broker (ActiveMQ
	// tells its own). Set it for brokers that do not.
	ID string
}

// NetworkConnector is one [[networkConnector]]: a demand-forwarding bridge
// (or one per discovered peer) from Broker to the brokers URI finds.
type NetworkConnector struct {
	// Name identifies the connector in logs, metrics and reloads; unique.
	Name string
	// Broker is the Name of the local [[broker]] it bridges from.
	Broker string
	// URI says how to find the remote brokers: one broker URI of any
	// protocol (stomp://, amqp://, tcp://, ...), static:(...) (one bridge per
	// URI), masterslave:(...) (one bridge to whichever answers) or gossip:
	// (peers found by Gossip).
	URI discovery.Spec
	// Duplex also forwards from the remote brokers to the local one.
	Duplex bool
	// NetworkTTL is the default of MessageTTL and ConsumerTTL. Default 1.
	NetworkTTL int
	// MessageTTL is how many broker hops a message may make; -1 is unlimited.
	// Default NetworkTTL.
	MessageTTL int
	// ConsumerTTL is how many hops demand may travel; -1 is unlimited.
	// Default NetworkTTL; ActiveMQ advises 1 in a mesh.
	ConsumerTTL int
	// ConduitSubscriptions makes remote consumers of one destination share
	// one demand subscription. Default true.
	ConduitSubscriptions bool
	// DynamicOnly creates demand only for live consumers, not for durable
	// subscriptions found at start-up. Default false.
	DynamicOnly bool
	// BridgeTempDestinations mirrors the remote brokers' temporary queues and
	// topics on the local broker and lets their consumers make demand, so
	// that a reply sent here to a remote requester's temporary reply-to
	// reaches it (request/reply across the network). Default true, as in
	// ActiveMQ.
	BridgeTempDestinations bool
	// DecreaseNetworkConsumerPriority gives demand subscriptions priority
	// ConsumerPriorityBase, lower still with distance, so local consumers win.
	// Default false (ActiveMQ 5.17's default and `brokernet bridge`'s; 5.18
	// changed it to true).
	DecreaseNetworkConsumerPriority bool
	// ConsumerPriorityBase is the priority of one-hop demand when decreasing,
	// in -128..127. Default -5.
	ConsumerPriorityBase int
	// SuppressDuplicateQueueSubscriptions drops demand for a queue consumer
	// that is already reached over another route. Default false.
	SuppressDuplicateQueueSubscriptions bool
	// SuppressDuplicateTopicSubscriptions does the same for topics. Default true.
	SuppressDuplicateTopicSubscriptions bool
	// PrefetchSize is the prefetch of each demand subscription, > 0 (network
	// consumers do not poll). Default 1000.
	PrefetchSize int
	// Window is how many forwarded messages may await the remote broker's
	// confirmation, >= 1. Default 500.
	Window int
	// IsolateDestinations sends every message on its own to a remote broker
	// that confirms messages one by one (ActiveMQ), so that a destination it
	// blocks holds back only its own messages (bridge.Config.Batched is its
	// opposite). Default true.
	IsolateDestinations bool
	// DestinationWindow is the most of Window one destination may hold
	// while isolated; 0 means a quarter of Window. At most Window.
	DestinationWindow int
	// BlockedAfter is how long a destination's oldest message may wait for
	// the remote broker's confirmation before it is reported blocked. More
	// than 0. Default DefaultBlockedAfter.
	BlockedAfter time.Duration
	// StaticallyIncludedDestinations get demand subscriptions whether or not
	// a remote consumer asks; ExcludedDestinations still apply to them.
	StaticallyIncludedDestinations []destination.Pattern
	// DynamicallyIncludedDestinations limit dynamic demand to these patterns;
	// empty means every destination.
	DynamicallyIncludedDestinations []destination.Pattern
	// ExcludedDestinations are never forwarded; exclusion wins over inclusion.
	ExcludedDestinations []destination.Pattern
	// Renames make local destinations other ones on the peer ("renames",
	// "LOCAL=REMOTE" each, exact names): messages from LOCAL go to REMOTE and
	// consumers of REMOTE make demand on LOCAL; a duplex connector's reverse
	// bridge uses them inverted. The destination rules apply to local names.
	Renames []destination.Rename
	// Reconnect is the back-off between attempts to reach a remote broker
	// (initialReconnectDelay, maxReconnectDelay, backOffMultiplier). Zero
	// (possible only in code: `brokernet bridge`) leaves each broker URI's own.
	Reconnect transport.Reconnect
	// ReplayWhenNoConsumers sends a message back when it arrived for a
	// consumer that has gone and no local consumer is left. Default false.
	ReplayWhenNoConsumers bool
	// ReplayDelay is how long a queue must have had no local consumer, while
	// a remote broker has demand for it, before its messages are replayed.
	// Default 0.
	ReplayDelay time.Duration
	// RateLimit caps the messages each bridge of the connector forwards per
	// second, every destination together; 0 (the default) means no limit.
	RateLimit int
	// ByteRateLimit caps the bytes of message bodies each bridge forwards
	// per second; 0 (the default) means no limit.
	ByteRateLimit int
	// DestinationRateLimits cap the destinations a pattern matches, taken
	// together ("destinationRateLimits", "PATTERN=RATE" each).
	DestinationRateLimits []DestinationRateLimit
	// Filter is a JMS selector: only the messages it selects are forwarded,
	// on every destination ("" forwards all). On ActiveMQ it becomes part of
	// each demand subscription's selector, so the others stay on the local
	// broker for its own consumers; a RabbitMQ local broker, which has no
	// selectors, serves no demand under a filter.
	Filter string
	// DestinationFilters are filters for the destinations a pattern matches
	// ("destinationFilters", "PATTERN=SELECTOR" each), on top of Filter.
	DestinationFilters []DestinationFilter
	// MaxReplays caps how often one message is replayed; 0 means no cap.
	// Default DefaultMaxReplays.
	MaxReplays int
	// ReplayCooldown is how long a replayed message stays before it may be
	// replayed again; Off (written 0) means no cool-down. Default
	// DefaultReplayCooldown.
	ReplayCooldown time.Duration
	// ReplayRateLimit caps replayed messages per second; 0 means no limit
	// (ActiveMQ's conditionalNetworkBridgeFilterFactory rateLimit).
	ReplayRateLimit int
	// DurableOfflineTimeout destroys durable demand whose remote durable
	// subscribers were all offline this long, with what it kept; 0 (the
	// default) never does (bridge.Config.DurableOfflineTimeout).
	DurableOfflineTimeout time.Duration
	// StuckInterval is how often each bridge counts the stuck messages on its
	// local broker (bridge.Config.StuckInterval, which means the same: on
	// ActiveMQ a queue browse per demanded queue): a message counts as stuck
	// once it waited that long. Off turns the count off (files and flags write
	// 0); zero means DefaultStuckInterval, as in bridge.Config. At least
	// MinStuckInterval otherwise.
	StuckInterval time.Duration
	// DrainTimeout is how long stopping a bridge (at shutdown, or when a
	// reload removes or changes its connector) waits for the remote broker to
	// confirm the messages in flight before it lets them go back to the local
	// broker (bridge.Config.DrainTimeout). Keep it below the time the process
	// is given to stop (systemd's TimeoutStopSec, Kubernetes'
	// terminationGracePeriodSeconds, both 30 s by default). More than 0.
	// Default DefaultDrainTimeout.
	DrainTimeout time.Duration
	// RemoteID overrides the remote broker id (only for a connector with one
	// static URI); empty means learn it.
	RemoteID string
	// UserName and Password log in to the remote brokers this connector finds
	// whose URI carries no password of its own (a login in it wins), as
	// ActiveMQ's networkConnector userName/password do for every discovered
	// broker. Gossip never carries credentials, so gossip peers need them here. Password is read from
	// passwordFile; it is never logged.
	UserName, Password string
	// CAFile, CertFile and KeyFile are the TLS files for the TLS brokers
	// (stomp+ssl, amqps; ssl takes only CAFile) this connector finds whose URI
	// names none (gossip never carries file names): trusted roots, and a
	// client certificate with its key.
	CAFile, CertFile, KeyFile string
	// Gossip configures discovery when URI.Kind is discovery.Gossip; nil
	// otherwise.
	Gossip *Gossip
	// Line is the line of the connector's [[networkConnector]] header, for
	// messages. It is ignored by Equal and Fingerprint.
	Line int
}

// Gossip timing profiles (Gossip.Timings).
const (
	GossipTimingsLAN  = "lan"
	GossipTimingsFast = "fast"
)

// Gossip configures gossip discovery (hashicorp/memberlist) for one connector.
type Gossip struct {
	// Bind is the host:port the gossip agent listens on; port 0 picks any.
	// Default "0.0.0.0:7946".
	Bind string
	// Advertise is the host:port other members should reach this one at;
	// empty lets memberlist derive it.
	Advertise string
	// Join are seed members (host or host:port) to join at start; empty
	// starts a new cluster that others join.
	Join []string
	// NodeName is this member's unique name; empty lets the gossip agent
	// derive one from the host name and the bound port.
	NodeName string
	// SecretKey is the AES key (16, 24 or 32 bytes) encrypting gossip, read
	// from secretKeyFile (base64); nil means no encryption.
	SecretKey []byte
	// AdvertiseBrokerURI is the local broker's URI (any protocol) as other members
	// should dial it. Its credentials, client id and TLS file options are never
	// gossiped: members log in with their own userName/passwordFile. Empty means
	// the first URI of the connector's [[broker]], which netconnector fills in.
	AdvertiseBrokerURI string
	// Insecure allows gossip without SecretKey on a non-loopback Bind: anyone
	// who reaches the port can then join and advertise brokers. Default false:
	// such a configuration is refused.
	Insecure bool
	// AllowedBrokers, when not empty, are the only brokers gossip peers may
	// advertise: host names (exact), IP addresses and CIDR networks.
	AllowedBrokers []string
	// Timings is memberlist's timing profile: "lan" (its LAN defaults: a
	// crashed member is noticed in about 6 s) or "fast" (probes every 100 ms:
	// under 1 s on a quiet network, at the cost of more gossip traffic).
	// "" means "lan".
	Timings string
}

// DefaultGossip returns the gossip settings of an empty
// [networkConnector.gossip] table.
func DefaultGossip() *Gossip {
	return &Gossip{Bind: DefaultGossipBind}
}

// Default returns the configuration of an empty file, without brokers or
// connectors.
func Default() Config {
	return Config{
		Log:   Log{Level: "info", Format: "console"},
		Admin: Admin{},
	}
}

// DefaultConnector returns a connector with every default set and no name,
// broker or URI. It is the one source of the connector defaults: a file's
// [[networkConnector]] is decoded onto it, and the flags of `brokernet
// bridge` and `brokernet sidecar` take their defaults from it.
func DefaultConnector() NetworkConnector {
	return NetworkConnector{
		NetworkTTL:                          DefaultNetworkTTL,
		MessageTTL:                          DefaultNetworkTTL,
		ConsumerTTL:                         DefaultNetworkTTL,
		ConduitSubscriptions:                true,
		BridgeTempDestinations:              true,
		ConsumerPriorityBase:                DefaultConsumerPriorityBase,
		SuppressDuplicateTopicSubscriptions: true,
		PrefetchSize:                        DefaultPrefetchSize,
		Window:                              DefaultWindow,
		IsolateDestinations:                 true,
		BlockedAfter:                        DefaultBlockedAfter,
		StuckInterval:                       DefaultStuckInterval,
		DrainTimeout:                        DefaultDrainTimeout,
		MaxReplays:                          DefaultMaxReplays,
		ReplayCooldown:                      DefaultReplayCooldown,
		Reconnect:                           transport.DefaultReconnect(),
	}
}

// Load reads the file at path and parses it (see Parse). A file that others
// may read while it holds passcodes adds a warning.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading config: %w", err)
	}
	cfg, err := Parse(path, data)
	if err != nil {
		return nil, err
	}
	if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o077 != 0 && cfg.hasPasscodes() {
		cfg.Warnings = append(cfg.Warnings, fmt.Sprintf(
			"%s holds passcodes and is readable by other users (mode %v); chmod 600 it", path, fi.Mode().Perm()))
	}
	return cfg, nil
}

// hasPasscodes reports whether any broker URI carries a passcode.
func (c *Config) hasPasscodes() bool {
	specs := make([]discovery.Spec, 0, len(c.Brokers)+len(c.Connectors))
	for _, b := range c.Brokers {
		specs = append(specs, b.URI)
	}
	for _, nc := range c.Connectors {
		specs = append(specs, nc.URI)
	}
	for _, s := range specs {
		for _, u := range s.URIs {
			if u.HasPassword() {
				return true
			}
		}
	}
	return false
}

// ReadPasswordFile reads a password file (passwordFile, --broker-password-file):
// a regular file of at most 4 KiB whose trailing line break is dropped. Its
// errors name the file, never its contents. warn says the file is readable by
// other users.
func ReadPasswordFile(path string) (password string, warn string, err error) {
	fi, err := os.Stat(path)
	if err != nil {
		return "", "", fmt.Errorf("reading password: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return "", "", fmt.Errorf("%s is not a regular file", path)
	}
	if fi.Size() > 4096 {
		return "", "", fmt.Errorf("%s is larger than 4096 bytes; want just the password", path)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return "", "", fmt.Errorf("reading password: %w", err)
	}
	password = strings.TrimRight(string(data), "\r\n")
	if password == "" {
		return "", "", fmt.Errorf("%s is empty", path)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		warn = fmt.Sprintf("password file %s is readable by other users (mode %v); chmod 600 it", path, fi.Mode().Perm())
	}
	return password, warn, nil
}

// Broker returns the [[broker]] called name.
func (c *Config) Broker(name string) (Broker, bool) {
	i := slices.IndexFunc(c.Brokers, func(b Broker) bool { return b.Name == name })
	if i < 0 {
		return Broker{}, false
	}
	return c.Brokers[i], true
}

// Connector returns the [[networkConnector]] called name.
func (c *Config) Connector(name string) (NetworkConnector, bool) {
	i := slices.IndexFunc(c.Connectors, func(nc NetworkConnector) bool { return nc.Name == name })
	if i < 0 {
		return NetworkConnector{}, false
	}
	return c.Connectors[i], true
}

// Changes compares c with the configuration it replaces (on SIGHUP) and
// names the connectors to start (added), stop (removed) and restart
// (changed: its own settings differ, or those of its [[broker]]), each in
// file order. A nil prev means everything is added.
func (c *Config) Changes(prev *Config) (added, removed, changed []string) {
	if prev == nil {
		prev = &Config{}
	}
	for _, nc := range c.Connectors {
		old, ok := prev.Connector(nc.Name)
		if !ok {
			added = append(added, nc.Name)
			continue
		}
		nb, _ := c.Broker(nc.Broker)
		ob, _ := prev.Broker(old.Broker)
		if !nc.Equal(old) || !nb.Equal(ob) {
			changed = append(changed, nc.Name)
		}
	}
	for _, old := range prev.Connectors {
		if _, ok := c.Connector(old.Name); !ok {
			removed = append(removed, old.Name)
		}
	}
	return added, removed, changed
}

// label is how messages name a table of an array: by its name when it has a
// usable one, else by its 1-based position.
func label(kind, name string, i int) string {
	if name == "" {
		return fmt.Sprintf("%s #%d", kind, i+1)
	}
	return fmt.Sprintf("%s %q", kind, name)
}

// ValidName reports why s cannot name a broker or connector, or "".
func ValidName(s string) string {
	switch {
	case s == "":
		return "must not be empty"
	case strings.TrimSpace(s) != s:
		return "must not start or end with blanks"
	case strings.ContainsFunc(s, func(r rune) bool { return r < ' ' || r == 0x7f }):
		return "must not contain control characters"
	}
	return ""
}
