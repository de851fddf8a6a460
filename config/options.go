package config

import (
	"math"
	"time"
)

// Off is the value of an interval that is turned off (StuckInterval). Files
// and flags write it as 0 ("0s", --stuck-interval 0); in the typed tree, as in
// bridge.Config, zero means the default and a negative interval means off.
// It is the most negative duration, so that no value a person writes is
// taken for it: a negative interval written in a file or on the command line
// is reported, not turned into off.
const Off = time.Duration(math.MinInt64)

// option is one scalar key of a [[networkConnector]] table and the flag of
// `brokernet bridge` and `brokernet sidecar` that sets it. The TOML decoder,
// the flags and ConnectorKeys all come from this one table; the key's rules
// live in Validate. Adding an option is one line here, a field of
// NetworkConnector with its default in DefaultConnector, its rule in
// Validate if it has one, and its consumer.
type option struct {
	// key is the TOML key (an ActiveMQ networkConnector attribute name when
	// there is one).
	key string
	// flag is the command-line flag, without dashes; "" when there is none.
	flag string
	// usage is the flag's help.
	usage string
	// field returns the option's field in nc: a *bool, *int, *float64,
	// *string or *time.Duration. Its value in DefaultConnector is the default
	// of both the key and the flag.
	field func(nc *NetworkConnector) any
	// offIfZero means a written 0 is Off (an interval that can be turned off).
	offIfZero bool
	// derived names the key whose value this one takes when it is not written
	// (messageTTL and consumerTTL take networkTTL's).
	derived string
}

// connectorOptions are the scalar keys of a [[networkConnector]], in the
// order ConnectorKeys lists them.
var connectorOptions = []option{
	{key: "duplex", flag: "duplex", usage: "forward in both directions",
		field: func(nc *NetworkConnector) any { return &nc.Duplex }},
	{key: "networkTTL", flag: "network-ttl", usage: "broker hops for messages and demand (sets both TTLs); -1 unlimited",
		field: func(nc *NetworkConnector) any { return &nc.NetworkTTL }},
	{key: "messageTTL", flag: "message-ttl", usage: "broker hops a message may make (default: --network-ttl)", derived: "networkTTL",
		field: func(nc *NetworkConnector) any { return &nc.MessageTTL }},
	{key: "consumerTTL", flag: "consumer-ttl", usage: "broker hops demand may travel (default: --network-ttl)", derived: "networkTTL",
		field: func(nc *NetworkConnector) any { return &nc.ConsumerTTL }},
	{key: "conduitSubscriptions", flag: "conduit-subscriptions", usage: "one demand subscription per destination and selector",
		field: func(nc *NetworkConnector) any { return &nc.ConduitSubscriptions }},
	{key: "dynamicOnly", flag: "dynamic-only", usage: "only live consumers create demand (durable demand is not kept while its consumer is away)",
		field: func(nc *NetworkConnector) any { return &nc.DynamicOnly }},
	{key: "bridgeTempDestinations", flag: "bridge-temp-destinations", usage: "mirror remote temporary destinations so replies to remote requesters reach them (request/reply)",
		field: func(nc *NetworkConnector) any { return &nc.BridgeTempDestinations }},
	{key: "decreaseNetworkConsumerPriority", flag: "decrease-network-consumer-priority", usage: "demand subscriptions get priority -5 and lower with distance",
		field: func(nc *NetworkConnector) any { return &nc.DecreaseNetworkConsumerPriority }},
	{key: "consumerPriorityBase",
		field: func(nc *NetworkConnector) any { return &nc.ConsumerPriorityBase }},
	{key: "suppressDuplicateQueueSubscriptions", flag: "suppress-duplicate-queue-subscriptions", usage: "keep only the best route to each queue consumer",
		field: func(nc *NetworkConnector) any { return &nc.SuppressDuplicateQueueSubscriptions }},
	{key: "suppressDuplicateTopicSubscriptions", flag: "suppress-duplicate-topic-subscriptions", usage: "keep only the best route to each topic subscriber",
		field: func(nc *NetworkConnector) any { return &nc.SuppressDuplicateTopicSubscriptions }},
	{key: "prefetchSize", flag: "prefetch", usage: "prefetch of each demand subscription (prefetchSize)",
		field: func(nc *NetworkConnector) any { return &nc.PrefetchSize }},
	{key: "window", flag: "window", usage: "messages forwarded but not yet confirmed by the remote broker",
		field: func(nc *NetworkConnector) any { return &nc.Window }},
	{key: "isolateDestinations", flag: "isolate-destinations", usage: "to ActiveMQ, send messages one by one so that a destination the remote broker blocks (flow control) holds back only its own",
		field: func(nc *NetworkConnector) any { return &nc.IsolateDestinations }},
	{key: "destinationWindow", flag: "destination-window", usage: "most of the window one destination may hold while isolated (default: a quarter of --window)",
		field: func(nc *NetworkConnector) any { return &nc.DestinationWindow }},
	{key: "blockedAfter", flag: "blocked-after", usage: "report a destination blocked once its oldest message waited this long for the remote broker",
		field: func(nc *NetworkConnector) any { return &nc.BlockedAfter }},
	{key: "initialReconnectDelay",
		field: func(nc *NetworkConnector) any { return &nc.Reconnect.Initial }},
	{key: "maxReconnectDelay",
		field: func(nc *NetworkConnector) any { return &nc.Reconnect.Max }},
	{key: "backOffMultiplier",
		field: func(nc *NetworkConnector) any { return &nc.Reconnect.Multiplier }},
	{key: "rateLimit", flag: "rate-limit", usage: "most messages forwarded per second by each bridge, every destination together (0: no limit)",
		field: func(nc *NetworkConnector) any { return &nc.RateLimit }},
	{key: "byteRateLimit", flag: "byte-rate-limit", usage: "most bytes of message bodies forwarded per second by each bridge (0: no limit)",
		field: func(nc *NetworkConnector) any { return &nc.ByteRateLimit }},
	{key: "replayWhenNoConsumers", flag: "replay-when-no-consumers", usage: "send queue messages back to where their consumer went",
		field: func(nc *NetworkConnector) any { return &nc.ReplayWhenNoConsumers }},
	{key: "replayDelay", flag: "replay-delay", usage: "how long a queue must lack local consumers before replaying",
		field: func(nc *NetworkConnector) any { return &nc.ReplayDelay }},
	{key: "maxReplays", flag: "max-replays", usage: "most times one message is replayed (0: no cap)",
		field: func(nc *NetworkConnector) any { return &nc.MaxReplays }},
	{key: "replayCooldown", flag: "replay-cooldown", usage: "how long a replayed message stays before it may be replayed again (0: no cool-down)", offIfZero: true,
		field: func(nc *NetworkConnector) any { return &nc.ReplayCooldown }},
	{key: "replayRateLimit", flag: "replay-rate-limit", usage: "most replayed messages per second (0: no limit)",
		field: func(nc *NetworkConnector) any { return &nc.ReplayRateLimit }},
	{key: "filter", flag: "filter", usage: "JMS selector: forward only the messages it selects, on every destination (ActiveMQ local brokers)",
		field: func(nc *NetworkConnector) any { return &nc.Filter }},
	{key: "remoteId", flag: "remote-id", usage: "remote broker id (default: learnt from the broker)",
		field: func(nc *NetworkConnector) any { return &nc.RemoteID }},
	{key: "durableOfflineTimeout", flag: "durable-offline-timeout", usage: "destroy durable demand whose remote durable subscribers were all offline this long, with what it kept (0: never)",
		field: func(nc *NetworkConnector) any { return &nc.DurableOfflineTimeout }},
	{key: "stuckInterval", flag: "stuck-interval", usage: "count the stuck messages on the local broker every `duration` (0: never)", offIfZero: true,
		field: func(nc *NetworkConnector) any { return &nc.StuckInterval }},
	{key: "drainTimeout", flag: "drain-timeout", usage: "how long stopping a bridge (shutdown, reload) waits for the remote broker to confirm the messages in flight",
		field: func(nc *NetworkConnector) any { return &nc.DrainTimeout }},
	{key: "userName",
		field: func(nc *NetworkConnector) any { return &nc.UserName }},
}

// optionByKey returns the scalar option called key.
func optionByKey(key string) (option, bool) {
	for _, o := range connectorOptions {
		if o.key == key {
			return o, true
		}
	}
	return option{}, false
}

// ConnectorKeys are the keys of a [[networkConnector]] table, in the order a
// written file lists them (the ActiveMQ importer's); read only. Every scalar
// option is one of them (TestConnectorKeysListEveryOption).
var ConnectorKeys = []string{
	"name", "broker", "uri", "duplex", "networkTTL", "messageTTL", "consumerTTL",
	"conduitSubscriptions", "dynamicOnly", "bridgeTempDestinations", "decreaseNetworkConsumerPriority", "consumerPriorityBase",
	"suppressDuplicateQueueSubscriptions", "suppressDuplicateTopicSubscriptions", "prefetchSize", "window",
	"isolateDestinations", "destinationWindow", "blockedAfter",
	"staticallyIncludedDestinations", "dynamicallyIncludedDestinations", "excludedDestinations",
	"initialReconnectDelay", "maxReconnectDelay", "backOffMultiplier",
	"rateLimit", "byteRateLimit", "destinationRateLimits", "filter", "destinationFilters",
	"replayWhenNoConsumers", "replayDelay", "maxReplays", "replayCooldown", "replayRateLimit", "remoteId", "gossip",
	"durableOfflineTimeout", "stuckInterval", "drainTimeout", "renames",
	"userName", "passwordFile", "caFile", "certFile", "keyFile",
}
