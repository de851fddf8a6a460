package destination

import (
	"strings"
	"testing"
)

func TestToRabbit(t *testing.T) {
	for _, tc := range []struct {
		d     Destination
		p     RabbitProtocol
		want  string
		fails string // part of the error; "" when it must succeed
	}{
		{Destination{Queue, "orders"}, RabbitSTOMP, "/queue/orders", ""},
		{Destination{Queue, "orders"}, RabbitAMQP10, "/queue/orders", ""},
		{Destination{Queue, "a/b"}, RabbitSTOMP, "/queue/a%2Fb", ""},
		{Destination{Queue, "50%"}, RabbitSTOMP, "/queue/50%", ""},
		{Destination{Queue, "ünï.cødé"}, RabbitAMQP10, "/queue/ünï.cødé", ""},
		{Destination{Queue, "a/b"}, RabbitAMQP10, "/queue/a%2Fb", ""},
		{Destination{Topic, "prices.eu"}, RabbitSTOMP, "/topic/prices.eu", ""},
		{Destination{Topic, "prices.eu"}, RabbitAMQP10, "/topic/prices.eu", ""},
		{Destination{Topic, "prices.*"}, RabbitSTOMP, "/topic/prices.*", ""},
		{Destination{Topic, "prices.>"}, RabbitSTOMP, "/topic/prices.#", ""},
		{Destination{Topic, ">"}, RabbitAMQP10, "/topic/#", ""},
		{Destination{Topic, "*.eu.>"}, RabbitAMQP10, "/topic/*.eu.#", ""},
		{Destination{TempQueue, "reply1"}, RabbitSTOMP, "/temp-queue/reply1", ""},
		{Destination{TempQueue, "reply1"}, RabbitAMQP10, "", "temporary queues"},
		{Destination{TempTopic, "t"}, RabbitSTOMP, "", "temp-topic"},
		{Destination{Topic, "a.>.b"}, RabbitSTOMP, "", "last word"},
		{Destination{Topic, "a.#"}, RabbitSTOMP, "", "RabbitMQ wildcard"},
		{Destination{Queue, ""}, RabbitSTOMP, "", "empty name"},
	} {
		got, err := ToRabbit(tc.d, tc.p)
		if tc.fails != "" {
			if err == nil || !strings.Contains(err.Error(), tc.fails) {
				t.Errorf("ToRabbit(%v, %v) = %q, %v; want error with %q", tc.d, tc.p, got, err, tc.fails)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ToRabbit(%v, %v) = %q, %v; want %q", tc.d, tc.p, got, err, tc.want)
			continue
		}
		// Both ways: the address reads back as the destination.
		back, err := FromRabbit(got, tc.p)
		if err != nil || back != tc.d {
			t.Errorf("FromRabbit(%q) = %v, %v; want %v", got, back, err, tc.d)
		}
	}
}

func TestFromRabbit(t *testing.T) {
	for _, tc := range []struct {
		addr  string
		p     RabbitProtocol
		want  Destination
		fails string
	}{
		{"/queue/orders", RabbitSTOMP, Destination{Queue, "orders"}, ""},
		{"/amq/queue/orders", RabbitSTOMP, Destination{Queue, "orders"}, ""},
		{"/amq/queue/orders", RabbitAMQP10, Destination{Queue, "orders"}, ""},
		{"/queues/orders", RabbitAMQP10, Destination{Queue, "orders"}, ""},
		{"/queue/a%2Fb", RabbitSTOMP, Destination{Queue, "a/b"}, ""},
		{"/queue/50%25", RabbitSTOMP, Destination{Queue, "50%25"}, ""}, // only %2F is an escape
		{"/topic/prices.eu", RabbitSTOMP, Destination{Topic, "prices.eu"}, ""},
		{"/topic/prices.#", RabbitAMQP10, Destination{Topic, "prices.>"}, ""},
		{"/topic/*.eu", RabbitAMQP10, Destination{Topic, "*.eu"}, ""},
		{"/exchange/amq.topic/prices.eu", RabbitSTOMP, Destination{Topic, "prices.eu"}, ""},
		{"/exchange/amq.topic/prices.eu", RabbitAMQP10, Destination{Topic, "prices.eu"}, ""},
		{"/exchanges/amq.topic/#", RabbitAMQP10, Destination{Topic, ">"}, ""},
		{"/temp-queue/r", RabbitSTOMP, Destination{TempQueue, "r"}, ""},
		{"/temp-queue/r", RabbitAMQP10, Destination{}, "STOMP-only"},
		{"/exchange/amq.direct/x", RabbitSTOMP, Destination{}, `exchange "amq.direct"`},
		{"/topic/a.#.b", RabbitSTOMP, Destination{}, "last word"},
		{"/topic/a.>", RabbitSTOMP, Destination{}, "ActiveMQ wildcard"},
		{"/queue/", RabbitSTOMP, Destination{}, "empty name"},
		{"/topic/", RabbitSTOMP, Destination{}, "empty routing key"},
		{"orders", RabbitSTOMP, Destination{}, `must start with "/"`},
		{"/queue/a/b", RabbitSTOMP, Destination{}, "unknown form"},
		{"/reply-queue/x", RabbitSTOMP, Destination{}, "unknown form"},
	} {
		got, err := FromRabbit(tc.addr, tc.p)
		if tc.fails != "" {
			if err == nil || !strings.Contains(err.Error(), tc.fails) || !strings.Contains(err.Error(), tc.addr) {
				t.Errorf("FromRabbit(%q, %v) = %v, %v; want error naming the address with %q", tc.addr, tc.p, got, err, tc.fails)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("FromRabbit(%q, %v) = %v, %v; want %v", tc.addr, tc.p, got, err, tc.want)
		}
	}
}

func TestRabbitKeyRoundTrip(t *testing.T) {
	for name, key := range map[string]string{
		"a": "a", "a.b": "a.b", "a.*": "a.*", "a.>": "a.#", ">": "#", "*.*.>": "*.*.#",
	} {
		k, err := RabbitKey(name)
		if err != nil || k != key {
			t.Errorf("RabbitKey(%q) = %q, %v; want %q", name, k, err, key)
		}
		n, err := TopicFromRabbitKey(key)
		if err != nil || n != name {
			t.Errorf("TopicFromRabbitKey(%q) = %q, %v; want %q", key, n, err, name)
		}
	}
}
