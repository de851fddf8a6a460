package amqp

import (
	"bytes"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/Azure/go-amqp"

	"github.com/brokernet/brokernet/destination"
	"github.com/brokernet/brokernet/transport"
)

var (
	t0     = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	orders = destination.Destination{Kind: destination.Queue, Name: "orders"}
	prices = destination.Destination{Kind: destination.Topic, Name: "prices.eu"}
)

// mappingCases are messages that must survive Message → AMQP 1.0 → Message.
var mappingCases = []struct {
	name string
	m    transport.Message
}{
	{"a persistent text message keeps every header", transport.Message{
		ID: "ID:vm-34201-1796035819859-4:10:-1:1:3", Destination: orders, Persistent: true, Priority: 7,
		Expires: t0.Add(time.Hour), Timestamp: t0.Add(-time.Minute),
		CorrelationID: "corr-1", ReplyTo: "/queue/replies", Type: "OrderPlaced", ContentType: "text/plain",
		Props: []transport.Property{
			{Name: "BrokernetFor", Value: "|C|"},
			{Name: "BrokernetHops", Value: "2"},
			{Name: "BrokernetPath", Value: "|A|B|"},
			{Name: "color", Value: "red"},
		},
		Body: []byte("hello"),
	}},
	{"typed application properties keep their types", transport.Message{
		Destination: orders, Priority: 4,
		Props: []transport.Property{
			{Name: "b", Value: true}, {Name: "bin", Value: []byte{0, 1, 2}},
			{Name: "f32", Value: float32(1.5)}, {Name: "f64", Value: 2.25},
			{Name: "i16", Value: int16(-2)}, {Name: "i32", Value: int32(-3)},
			{Name: "i64", Value: int64(1) << 40}, {Name: "i8", Value: int8(-1)},
		},
		Body: []byte("x"),
	}},
	{"a binary body is a data section", transport.Message{
		Destination: orders, Priority: 0, Bytes: true, Body: []byte{0, 0xff, 0x10, 0},
	}},
	{"an empty binary body stays binary", transport.Message{
		Destination: orders, Priority: 4, Bytes: true, Body: []byte{},
	}},
	{"an empty text body stays text", transport.Message{
		Destination: orders, Priority: 4, Body: []byte{},
	}},
	{"non-ASCII header values and body", transport.Message{
		Destination: prices, Priority: 9, CorrelationID: "Zürich→東京", Type: "prix-été",
		Props: []transport.Property{{Name: "ville", Value: "Zürich ☃ 東京"}},
		Body:  []byte("Grüße, 世界"),
	}},
	{"a 5 MiB binary body", transport.Message{
		Destination: orders, Persistent: true, Priority: 4, Bytes: true,
		Body: bytes.Repeat([]byte("0123456789abcdef"), 5<<20/16),
	}},
}

// TestMappingRoundTrip encodes each message as go-amqp puts it on the wire,
// decodes it and reads it back.
func TestMappingRoundTrip(t *testing.T) {
	for _, tc := range mappingCases {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.m
			addr, err := address(in.Destination, false)
			if err != nil {
				t.Fatal(err)
			}
			wire, err := toAMQP(&in, addr, t0).MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			var am amqp.Message
			if err := am.UnmarshalBinary(wire); err != nil {
				t.Fatal(err)
			}
			out := fromAMQP(&am, in.Destination, false)
			// AMQP timestamps are milliseconds without a zone.
			if !out.Expires.IsZero() {
				out.Expires = out.Expires.UTC()
			}
			if !out.Timestamp.IsZero() {
				out.Timestamp = out.Timestamp.UTC()
			}
			// reply-to travels as the AMQP address; /queue/ is the same in both.
			want := in
			if !reflect.DeepEqual(*out, want) {
				t.Fatalf("round trip changed the message:\n got %s\nwant %s", show(out), show(&want))
			}
		})
	}
}

func show(m *transport.Message) string {
	c := *m
	if len(c.Body) > 64 {
		c.Body = append(c.Body[:64:64], "…"...)
	}
	return fmt.Sprintf("%+v (body %q)", c, c.Body)
}

// TestToAMQP pins the AMQP side of the header mapping table.
func TestToAMQP(t *testing.T) {
	m := &transport.Message{
		ID: "ID:source-1", Destination: prices, Persistent: true, Priority: -1,
		Expires: t0.Add(90 * time.Second), Timestamp: t0, ReplyTo: "/topic/answers",
		Type: "T", ContentType: "application/json", Body: []byte("{}"),
		Props: []transport.Property{{Name: "a", Value: "1"}, {Name: "a", Value: "2"}, {Name: "n", Value: 3}},
	}
	am := toAMQP(m, "/exchange/amq.topic/prices.eu", t0)
	if !am.Header.Durable || am.Header.Priority != 4 || am.Header.TTL != 90*time.Second {
		t.Errorf("header = %+v, want durable, priority 4 (none given), ttl 90s", *am.Header)
	}
	p := am.Properties
	if p.MessageID != "ID:source-1" {
		t.Errorf("message-id = %v, want the message's own id ID:source-1", p.MessageID)
	}
	if am := toAMQP(&transport.Message{Destination: prices}, "/exchange/amq.topic/prices.eu", t0); am.Properties.MessageID != nil {
		t.Errorf("message without id: message-id = %v, want none", am.Properties.MessageID)
	}
	if *p.ReplyTo != "/exchange/amq.topic/answers" || *p.To != "/exchange/amq.topic/prices.eu" || *p.Subject != "T" ||
		*p.ContentType != "application/json" || !p.AbsoluteExpiryTime.Equal(t0.Add(90*time.Second)) || !p.CreationTime.Equal(t0) {
		t.Errorf("properties = %+v", *p)
	}
	if am.ApplicationProperties["a"] != "1" || am.ApplicationProperties["n"] != int64(3) {
		t.Errorf("application-properties = %v, want a=1 (first wins), n=int64 3", am.ApplicationProperties)
	}
	if am.Value != "{}" || am.Data != nil {
		t.Errorf("text body: value %v data %v, want an amqp-value string", am.Value, am.Data)
	}
	expired := toAMQP(&transport.Message{Destination: orders, Priority: -1, Expires: t0.Add(-time.Second)}, "/queue/orders", t0)
	if expired.Header.TTL != time.Millisecond {
		t.Errorf("an already expired message has ttl %s, want 1ms (0 would mean never)", expired.Header.TTL)
	}
}

// TestFromRabbitMQ reads messages as RabbitMQ 3.10 delivers them when they
// were published over STOMP or AMQP 0-9-1: subject holds the routing key, no
// "to", a data section, first-acquirer false on redelivery.
func TestFromRabbitMQ(t *testing.T) {
	str := func(s string) *string { return &s }
	tests := []struct {
		name     string
		sub      destination.Destination
		in       amqp.Message
		wantDest destination.Destination
		wantType string
		redeliv  bool
	}{
		{"a queue message's routing key is not its type", orders,
			amqp.Message{Header: &amqp.MessageHeader{Priority: 4, FirstAcquirer: true}, Properties: &amqp.MessageProperties{Subject: str("orders")}, Data: [][]byte{[]byte("x")}},
			orders, "", false},
		{"a wildcard topic subscription learns the topic from the routing key", destination.Destination{Kind: destination.Topic, Name: "prices.>"},
			amqp.Message{Header: &amqp.MessageHeader{Priority: 4}, Properties: &amqp.MessageProperties{Subject: str("prices.eu")}, Data: [][]byte{[]byte("x")}},
			prices, "", true},
		{"a wildcard topic subscription learns the topic from brokernet's to", destination.Destination{Kind: destination.Topic, Name: "prices.*"},
			amqp.Message{Properties: &amqp.MessageProperties{To: str("/exchange/amq.topic/prices.eu"), Subject: str("Quote")}, Value: "x"},
			prices, "Quote", false},
		{"a subject that is not the routing key is the type", orders,
			amqp.Message{Properties: &amqp.MessageProperties{Subject: str("OrderPlaced")}, Value: "x"},
			orders, "OrderPlaced", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := fromAMQP(&tc.in, tc.sub, true)
			if m.Destination != tc.wantDest || m.Type != tc.wantType || m.Redelivered != tc.redeliv {
				t.Fatalf("got dest %s type %q redelivered %v, want %s %q %v", m.Destination, m.Type, m.Redelivered, tc.wantDest, tc.wantType, tc.redeliv)
			}
		})
	}
	// Values the seam has no type for are mapped, never dropped or a crash.
	m := fromAMQP(&amqp.Message{
		Properties:            &amqp.MessageProperties{MessageID: uint64(42), CorrelationID: []byte{0xca, 0xfe}},
		ApplicationProperties: map[string]any{"u8": uint8(200), "u64": uint64(1) << 63, "t": t0, "nil": nil, "sym": amqp.Symbol("s")},
	}, orders, false)
	want := []transport.Property{{Name: "sym", Value: "s"}, {Name: "t", Value: t0.UnixMilli()}, {Name: "u64", Value: "9223372036854775808"}, {Name: "u8", Value: int16(200)}}
	if m.ID != "42" || m.CorrelationID != "cafe" || !reflect.DeepEqual(m.Props, want) || !m.Bytes || len(m.Body) != 0 || m.Priority != -1 {
		t.Fatalf("got %+v", m)
	}
}
