package rabbitmq

import (
	"strings"
	"testing"

	"github.com/brokernet/brokernet/destination"
)

func TestAddress(t *testing.T) {
	for _, tc := range []struct {
		d     destination.Destination
		p     Protocol
		want  string
		fails string // part of the error; "" when it must succeed
	}{
		{destination.Destination{Kind: destination.Queue, Name: "orders"}, STOMP, "/queue/orders", ""},
		{destination.Destination{Kind: destination.Queue, Name: "orders"}, AMQP10, "/queue/orders", ""},
		{destination.Destination{Kind: destination.Queue, Name: "a/b"}, STOMP, "/queue/a%2Fb", ""},
		{destination.Destination{Kind: destination.Queue, Name: "50%"}, STOMP, "/queue/50%", ""},
		{destination.Destination{Kind: destination.Queue, Name: "ünï.cødé"}, AMQP10, "/queue/ünï.cødé", ""},
		{destination.Destination{Kind: destination.Queue, Name: "a/b"}, AMQP10, "/queue/a%2Fb", ""},
		{destination.Destination{Kind: destination.Topic, Name: "prices.eu"}, STOMP, "/topic/prices.eu", ""},
		{destination.Destination{Kind: destination.Topic, Name: "prices.eu"}, AMQP10, "/topic/prices.eu", ""},
		{destination.Destination{Kind: destination.Topic, Name: "prices.*"}, STOMP, "/topic/prices.*", ""},
		{destination.Destination{Kind: destination.Topic, Name: "prices.>"}, STOMP, "/topic/prices.#", ""},
		{destination.Destination{Kind: destination.Topic, Name: ">"}, AMQP10, "/topic/#", ""},
		{destination.Destination{Kind: destination.Topic, Name: "*.eu.>"}, AMQP10, "/topic/*.eu.#", ""},
		{destination.Destination{Kind: destination.TempQueue, Name: "reply1"}, STOMP, "/temp-queue/reply1", ""},
		{destination.Destination{Kind: destination.TempQueue, Name: "reply1"}, AMQP10, "", "temporary queues"},
		{destination.Destination{Kind: destination.TempTopic, Name: "t"}, STOMP, "", "temp-topic"},
		{destination.Destination{Kind: destination.Topic, Name: "a.>.b"}, STOMP, "", "last word"},
		{destination.Destination{Kind: destination.Topic, Name: "a.#"}, STOMP, "", "RabbitMQ wildcard"},
		{destination.Destination{Kind: destination.Queue, Name: ""}, STOMP, "", "empty name"},
	} {
		got, err := Address(tc.d, tc.p)
		if tc.fails != "" {
			if err == nil || !strings.Contains(err.Error(), tc.fails) {
				t.Errorf("Address(%v, %v) = %q, %v; want error with %q", tc.d, tc.p, got, err, tc.fails)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("Address(%v, %v) = %q, %v; want %q", tc.d, tc.p, got, err, tc.want)
			continue
		}
		// Both ways: the address reads back as the destination.
		back, err := ParseAddress(got, tc.p)
		if err != nil || back != tc.d {
			t.Errorf("ParseAddress(%q) = %v, %v; want %v", got, back, err, tc.d)
		}
	}
}

func TestParseAddress(t *testing.T) {
	for _, tc := range []struct {
		addr  string
		p     Protocol
		want  destination.Destination
		fails string
	}{
		{"/queue/orders", STOMP, destination.Destination{Kind: destination.Queue, Name: "orders"}, ""},
		{"/amq/queue/orders", STOMP, destination.Destination{Kind: destination.Queue, Name: "orders"}, ""},
		{"/amq/queue/orders", AMQP10, destination.Destination{Kind: destination.Queue, Name: "orders"}, ""},
		{"/queues/orders", AMQP10, destination.Destination{Kind: destination.Queue, Name: "orders"}, ""},
		{"/queue/a%2Fb", STOMP, destination.Destination{Kind: destination.Queue, Name: "a/b"}, ""},
		{"/queue/50%25", STOMP, destination.Destination{Kind: destination.Queue, Name: "50%25"}, ""}, // only %2F is an escape
		{"/topic/prices.eu", STOMP, destination.Destination{Kind: destination.Topic, Name: "prices.eu"}, ""},
		{"/topic/prices.#", AMQP10, destination.Destination{Kind: destination.Topic, Name: "prices.>"}, ""},
		{"/topic/*.eu", AMQP10, destination.Destination{Kind: destination.Topic, Name: "*.eu"}, ""},
		{"/exchange/amq.topic/prices.eu", STOMP, destination.Destination{Kind: destination.Topic, Name: "prices.eu"}, ""},
		{"/exchange/amq.topic/prices.eu", AMQP10, destination.Destination{Kind: destination.Topic, Name: "prices.eu"}, ""},
		{"/exchanges/amq.topic/#", AMQP10, destination.Destination{Kind: destination.Topic, Name: ">"}, ""},
		{"/temp-queue/r", STOMP, destination.Destination{Kind: destination.TempQueue, Name: "r"}, ""},
		{"/temp-queue/r", AMQP10, destination.Destination{}, "STOMP-only"},
		{"/exchange/amq.direct/x", STOMP, destination.Destination{}, `exchange "amq.direct"`},
		{"/topic/a.#.b", STOMP, destination.Destination{}, "last word"},
		{"/topic/a.>", STOMP, destination.Destination{}, "ActiveMQ wildcard"},
		{"/queue/", STOMP, destination.Destination{}, "empty name"},
		{"/topic/", STOMP, destination.Destination{}, "empty routing key"},
		{"orders", STOMP, destination.Destination{}, `must start with "/"`},
		{"/queue/a/b", STOMP, destination.Destination{}, "unknown form"},
		{"/reply-queue/x", STOMP, destination.Destination{}, "unknown form"},
	} {
		got, err := ParseAddress(tc.addr, tc.p)
		if tc.fails != "" {
			if err == nil || !strings.Contains(err.Error(), tc.fails) || !strings.Contains(err.Error(), tc.addr) {
				t.Errorf("ParseAddress(%q, %v) = %v, %v; want error naming the address with %q", tc.addr, tc.p, got, err, tc.fails)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseAddress(%q, %v) = %v, %v; want %v", tc.addr, tc.p, got, err, tc.want)
		}
	}
}

func TestRoutingKeyRoundTrip(t *testing.T) {
	for name, key := range map[string]string{
		"a": "a", "a.b": "a.b", "a.*": "a.*", "a.>": "a.#", ">": "#", "*.*.>": "*.*.#",
	} {
		k, err := RoutingKey(name)
		if err != nil || k != key {
			t.Errorf("RoutingKey(%q) = %q, %v; want %q", name, k, err, key)
		}
		n, err := TopicFromKey(key)
		if err != nil || n != name {
			t.Errorf("TopicFromKey(%q) = %q, %v; want %q", key, n, err, name)
		}
	}
}
