package advisory

import "strings"

// Naming convention of the bridge's own consumers on RabbitMQ, which a
// RabbitMQ demand source (package rabbitmq/events) must never count as
// demand: RabbitMQ has no selector to carry a tag in.

// BridgeTagPrefix starts the STOMP subscription id (RabbitMQ consumer tag
// "T_" + id) and the AMQP 0-9-1 consumer tag of every consumer the bridge
// opens on RabbitMQ. Such consumers are never demand. Every subscription id
// the bridge uses already starts with it (package demand's "bn-d1",
// transport/stomp's "bn-adv-queue").
//
// On RabbitMQ 3.10, AMQP 1.0 consumers get the tag "ctag-" + a binary link
// handle (checked here), whatever the link name: AMQP 1.0 consumers of the
// bridge cannot be recognised by tag, only by BridgeQueuePrefix.
const BridgeTagPrefix = "bn-"

// BridgeQueuePrefix starts the names of the queues the bridge declares on
// RabbitMQ, such as the queue of its own topic subscription (over STOMP, the
// SUBSCRIBE header x-queue-name; transport/stomp names them so). Their
// consumers and bindings are never demand.
const BridgeQueuePrefix = "bn_"

// IsBridgeConsumerTag reports whether a RabbitMQ consumer tag belongs to the
// bridge: BridgeTagPrefix, or "T_" + BridgeTagPrefix (STOMP).
func IsBridgeConsumerTag(tag string) bool {
	return strings.HasPrefix(tag, BridgeTagPrefix) || strings.HasPrefix(tag, "T_"+BridgeTagPrefix)
}

// IsBridgeQueue reports whether a RabbitMQ queue was declared by the bridge.
func IsBridgeQueue(name string) bool { return strings.HasPrefix(name, BridgeQueuePrefix) }

// PrivateQueue reports queues whose names no other client can address: the
// server-named queues of AMQP clients and STOMP topic subscriptions. Their
// consumers are topic subscribers (see bindings), not queue demand.
func PrivateQueue(name string) bool {
	return strings.HasPrefix(name, "amq.gen-") || strings.HasPrefix(name, "stomp-subscription-")
}
