// Package rabbitmq holds brokernet's knowledge of RabbitMQ's naming: how an
// ActiveMQ destination is addressed there (address.go), and how the bridge names
// the queues it declares there and recognises its own consumers, which a
// RabbitMQ demand source must never count as demand, since RabbitMQ has no
// selector to carry brokernet's tag in. Its subpackages speak to RabbitMQ:
// mgmt is a client of the management HTTP API, events the demand source read
// from the event exchange.
//
// Layering: the family sits below package transport and imports no
// transport: rabbitmq and rabbitmq/mgmt sit on the leaves (rabbitmq reads
// destination and advisory.BridgeTagPrefix), rabbitmq/events imports them, advisory and
// destination. Its Source satisfies transport.DemandSource without importing
// it; transport/stomp and transport/amqp give it STOMP connections and name
// it as their URIs' demand source.
package rabbitmq

import (
	"strings"

	"github.com/brokernet/brokernet/advisory"
)

// BridgeQueuePrefix starts the names of the queues the bridge declares on
// RabbitMQ, such as the queue of its own topic subscription (over STOMP, the
// SUBSCRIBE header x-queue-name; transport/stomp names them so). Their
// consumers and bindings are never demand.
const BridgeQueuePrefix = "bn_"

// IsBridgeConsumerTag reports whether a RabbitMQ consumer tag belongs to the
// bridge: advisory.BridgeTagPrefix, or "T_" + advisory.BridgeTagPrefix (STOMP).
func IsBridgeConsumerTag(tag string) bool {
	return strings.HasPrefix(tag, advisory.BridgeTagPrefix) || strings.HasPrefix(tag, "T_"+advisory.BridgeTagPrefix)
}

// IsBridgeQueue reports whether a RabbitMQ queue was declared by the bridge.
func IsBridgeQueue(name string) bool { return strings.HasPrefix(name, BridgeQueuePrefix) }

// PrivateQueue reports queues whose names no other client can address: the
// server-named queues of AMQP clients and STOMP topic subscriptions. Their
// consumers are topic subscribers (see bindings), not queue demand.
func PrivateQueue(name string) bool {
	return strings.HasPrefix(name, "amq.gen-") || strings.HasPrefix(name, "stomp-subscription-")
}
