package amqp

import (
	"fmt"
	"strings"

	"github.com/brokernet/brokernet/destination"
)

// RabbitMQ 3.10's AMQP 1.0 plugin reads link addresses with the same parser as
// its STOMP plugin (rabbit_routing_util:parse_endpoint, called from
// rabbit_amqp1_0_incoming_link/outgoing_link:ensure_target/ensure_source):
//
//	/queue/NAME              declares the durable queue NAME (source and target)
//	/exchange/X/KEY          target: publish to exchange X with routing key KEY;
//	                         source: a server-named exclusive queue bound to X with KEY
//	/amq/queue/NAME          an existing queue, not declared: a transfer to a missing
//	                         one is still settled "accepted" and dropped
//	                         (verified-here.md), so brokernet never sends there
//
// A RabbitMQ topic subscriber is a queue bound to amq.topic, so an ActiveMQ topic
// maps to amq.topic with the topic name as routing key; ActiveMQ's wildcards
// ("*" one word, ">" the rest) become RabbitMQ's ("*", "#").
//
// This is the transport's own small mapping until the RabbitMQ address mapping
// of the destination package exists; it has no per-connector renames.

const topicExchange = "amq.topic"

// address returns the RabbitMQ AMQP 1.0 address of d, for a source (subscribing,
// wildcards allowed) or a target (sending).
func address(d destination.Destination, source bool) (string, error) {
	if d.Name == "" {
		return "", fmt.Errorf("destination %s: empty name", d)
	}
	if strings.Contains(d.Name, "/") {
		// parse_endpoint splits on "/": the name would change meaning.
		return "", fmt.Errorf("destination %s: a name with %q has no RabbitMQ AMQP 1.0 address", d, "/")
	}
	switch d.Kind {
	case destination.Queue:
		if strings.ContainsAny(d.Name, "*>") && source {
			return "", fmt.Errorf("destination %s: RabbitMQ has no wildcard queues", d)
		}
		return "/queue/" + d.Name, nil
	case destination.Topic:
		key := d.Name
		if source {
			key = topicKey(key)
		} else if strings.ContainsAny(key, "*>") {
			return "", fmt.Errorf("destination %s: cannot send to a wildcard", d)
		}
		return "/exchange/" + topicExchange + "/" + key, nil
	}
	return "", fmt.Errorf("destination %s: %s has no RabbitMQ AMQP 1.0 address", d, d.Kind)
}

// topicKey turns an ActiveMQ topic pattern into a RabbitMQ binding key.
func topicKey(name string) string {
	words := strings.Split(name, ".")
	for i, w := range words {
		if w == ">" {
			words[i] = "#"
		}
	}
	return strings.Join(words, ".")
}

// fromAddress reads an address written by address (or RabbitMQ's own
// "/queue/NAME" reply-to form) back into a destination.
func fromAddress(a string) (destination.Destination, bool) {
	if name, ok := strings.CutPrefix(a, "/queue/"); ok && name != "" && !strings.Contains(name, "/") {
		return destination.Destination{Kind: destination.Queue, Name: name}, true
	}
	if key, ok := strings.CutPrefix(a, "/exchange/"+topicExchange+"/"); ok && key != "" {
		return destination.Destination{Kind: destination.Topic, Name: key}, true
	}
	if key, ok := strings.CutPrefix(a, "/topic/"); ok && key != "" {
		return destination.Destination{Kind: destination.Topic, Name: key}, true
	}
	return destination.Destination{}, false
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
