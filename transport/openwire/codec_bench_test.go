package openwire

import (
	"bytes"
	"testing"

	"github.com/brokernet/brokernet/destination"
	"github.com/brokernet/brokernet/transport"
)

// benchMessage is a 1 KiB text message with a few typed properties, like
// the bench harness sends.
func benchMessage() *transport.Message {
	return &transport.Message{
		Destination: destination.Destination{Kind: destination.Queue, Name: "bench"},
		Persistent:  true, Priority: 4,
		Props: []transport.Property{{Name: "intProp", Value: int32(7)}, {Name: "BrokernetPath", Value: "|A|"},
			{Name: "BrokernetHops", Value: "1"}},
		Body: bytes.Repeat([]byte("x"), 1024),
	}
}

// BenchmarkEncodeMessage measures converting and marshalling one message for
// Send, in tight encoding (ActiveMQ's default) with the frame's buffer given
// back as the writer does.
func BenchmarkEncodeMessage(b *testing.B) {
	tm := benchMessage()
	b.ReportAllocs()
	for b.Loop() {
		m, err := fromMessage(tm)
		if err != nil {
			b.Fatal(err)
		}
		releaseFrame(encodeFrameAs(m, true))
	}
}

// BenchmarkDecodeDispatch measures decoding one MessageDispatch and converting its message,
// with identifiers interned as a connection's reader does.
func BenchmarkDecodeDispatch(b *testing.B) {
	m, _ := fromMessage(benchMessage())
	m.MessageID = &messageID{ProducerID: &producerID{ConnectionID: "ID:x-1", SessionID: 1, Value: 1}, ProducerSeq: 1}
	frame := encodeFrame(&messageDispatch{ConsumerID: &consumerID{ConnectionID: "ID:y-1", SessionID: 1, Value: 1},
		Destination: m.Destination, Message: m})[4:]
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	ns := names{} // as a connection's reader has
	for b.Loop() {
		ds, err := decodeCommandAs(frame, false, false, ns)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := toMessage(ds.(*messageDispatch).Message, 0, ns); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSentID measures finding the MessageId a forwarded message keeps:
// one received over OpenWire (its own, no work) and one received over STOMP
// (ActiveMQ's message-id header, parsed).
func BenchmarkSentID(b *testing.B) {
	own := &messageID{ProducerID: &producerID{ConnectionID: "ID:vm-34201-1796035819859-4:10", SessionID: -1, Value: 1}, ProducerSeq: 3}
	fromOW, err := toMessage(&message{Type: typeMessage, MessageID: own}, 0, nil)
	if err != nil {
		b.Fatal(err)
	}
	fromSTOMP := &transport.Message{ID: "ID:vm-34201-1796035819859-4:10:-1:1:3"}
	for _, c := range []struct {
		name string
		m    *transport.Message
	}{{"OpenWire", fromOW}, {"STOMP", fromSTOMP}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, ok := sentID(c.m); !ok {
					b.Fatal("not kept")
				}
			}
		})
	}
}
