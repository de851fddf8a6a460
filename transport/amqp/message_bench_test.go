package amqp

import (
	"bytes"
	"testing"

	"github.com/Azure/go-amqp"

	"github.com/brokernet/brokernet/transport"
)

func benchMessage() *transport.Message {
	return &transport.Message{
		Destination: orders, Persistent: true, Priority: 4, Expires: t0.Add(1e12), CorrelationID: "c",
		Props: []transport.Property{{Name: "BrokernetPath", Value: "|A|"}, {Name: "BrokernetHops", Value: "1"}, {Name: "color", Value: "red"}},
		Body:  bytes.Repeat([]byte("x"), 1024),
	}
}

// BenchmarkToAMQP measures mapping and encoding a 1 KiB message for sending.
func BenchmarkToAMQP(b *testing.B) {
	m := benchMessage()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := toAMQP(m, "/queue/orders", t0).MarshalBinary(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFromAMQP measures decoding and mapping a received 1 KiB message.
func BenchmarkFromAMQP(b *testing.B) {
	wire, err := toAMQP(benchMessage(), "/queue/orders", t0).MarshalBinary()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		var am amqp.Message
		if err := am.UnmarshalBinary(wire); err != nil {
			b.Fatal(err)
		}
		_ = fromAMQP(&am, orders, true)
	}
}
