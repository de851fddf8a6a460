package amqp

import (
	"fmt"
	"strings"

	"github.com/brokernet/brokernet/destination"
	"github.com/brokernet/brokernet/rabbitmq"
)

// RabbitMQ 3.10's AMQP 1.0 plugin reads link addresses with the same parser as
// its STOMP plugin (rabbitmq.Address documents the forms). A queue is
// "/queue/NAME", which RabbitMQ declares; a topic is amq.topic with the topic
// name as routing key, written "/exchange/amq.topic/KEY" (the same as
// "/topic/KEY" there: a target publishes with KEY, a source is a server-named
// exclusive queue bound with KEY). "/amq/queue/NAME" is never produced: a
// transfer to a missing queue there is settled "accepted" and dropped.

const topicPrefix = "/exchange/" + rabbitmq.TopicExchange + "/"

// address returns the RabbitMQ AMQP 1.0 address of d, for a source (subscribing,
// wildcards allowed) or a target (sending).
func address(d destination.Destination, source bool) (string, error) {
	if d.Kind == destination.Queue && source && strings.ContainsAny(d.Name, "*>") {
		return "", fmt.Errorf("destination %s: RabbitMQ has no wildcard queues", d)
	}
	if d.Kind == destination.Topic && !source && isPattern(d.Name) {
		return "", fmt.Errorf("destination %s: cannot send to a wildcard", d)
	}
	a, err := rabbitmq.Address(d, rabbitmq.AMQP10)
	if err != nil {
		return "", err
	}
	if key, ok := strings.CutPrefix(a, "/topic/"); ok {
		a = topicPrefix + key
	}
	return a, nil
}

// fromAddress reads a RabbitMQ address back into a destination.
func fromAddress(a string) (destination.Destination, bool) {
	d, err := rabbitmq.ParseAddress(a, rabbitmq.AMQP10)
	return d, err == nil
}

// replyToAddress maps a reply-to in STOMP spelling ("/queue/x", "/topic/x", as
// ActiveMQ's and RabbitMQ's STOMP write it) to the AMQP 1.0 address; anything
// else (already an AMQP address, or a temporary destination that only means
// something on its own broker) passes unchanged.
func replyToAddress(r string) string {
	d, err := destination.FromStomp(r)
	if err != nil || d.IsTemp() {
		return r
	}
	if a, err := address(d, false); err == nil {
		return a
	}
	return r
}
