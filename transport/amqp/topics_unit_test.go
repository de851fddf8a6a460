package amqp

import (
	"testing"

	goamqp "github.com/Azure/go-amqp"

	"github.com/brokernet/brokernet/destination"
)

// TestTopicOfADeliveryComesFromTheMessage: on the shared topic queue a
// delivery's topic is read from "to", else from a subject that is a bound
// topic (RabbitMQ's routing key), never from the receiving link.
func TestTopicOfADeliveryComesFromTheMessage(t *testing.T) {
	tq := &topicQueue{patterns: map[string]destination.Pattern{}}
	for _, name := range []string{"prices.*", "orders.eu"} {
		p, err := destination.ParsePattern("topic://" + name)
		if err != nil {
			t.Fatal(err)
		}
		tq.patterns[name] = p
	}
	str := func(s string) *string { return &s }
	for _, tc := range []struct {
		name        string
		to, subject *string
		wantTopic   string // "" keeps the receiving subscription's
		wantType    string
	}{
		{"to names the topic", str("/exchange/amq.topic/prices.us"), str("Quote"), "prices.us", "Quote"},
		{"a routing key in subject (no properties published)", nil, str("orders.eu"), "orders.eu", ""},
		{"a routing key matching a wildcard binding", nil, str("prices.eu"), "prices.eu", ""},
		{"a subject that is no bound topic stays a type", nil, str("OrderPlaced"), "", "OrderPlaced"},
		{"to that is a queue is not a topic", str("/queue/x"), str("prices.eu"), "", "prices.eu"},
		{"nothing to go by", nil, nil, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := &goamqp.Message{Properties: &goamqp.MessageProperties{To: tc.to, Subject: tc.subject}, Value: "x"}
			sub := destination.Destination{Kind: destination.Topic, Name: "orders.eu"}
			m := fromAMQP(in, sub, true)
			tq.route(m, in)
			want := sub
			if tc.wantTopic != "" {
				want = destination.Destination{Kind: destination.Topic, Name: tc.wantTopic}
			}
			if m.Destination != want || m.Type != tc.wantType {
				t.Errorf("destination %s, type %q; want %s, %q", m.Destination, m.Type, want, tc.wantType)
			}
		})
	}
}

func TestTopicQueueNames(t *testing.T) {
	for name, want := range map[string]bool{
		"bn_amqp.0a1b2c3d4e5f6a7b.topics": true,
		"bn_amqp..topics":                 false,
		"bn_amqp.x.topics.other":          false,
		"bn_orders":                       false,
		"amq.gen-abc":                     false,
	} {
		if got := isTopicQueue(name); got != want {
			t.Errorf("isTopicQueue(%q) = %v, want %v", name, got, want)
		}
	}
}
