package openwire

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/brokernet/brokernet/destination"
	"github.com/brokernet/brokernet/transport"
)

// sample returns one filled-in value of every command and data structure.
func sample() []dataStructure {
	conn := &connectionID{Value: "ID:host-1234-1700000000000-1:1"}
	prod := &producerID{ConnectionID: conn.Value, SessionID: 2, Value: 3}
	cons := &consumerID{ConnectionID: conn.Value, SessionID: 2, Value: 7}
	q := &dest{Type: typeQueue, Name: "orders.eu"}
	mid := &messageID{ProducerID: prod, ProducerSeq: 42, BrokerSeq: 99}
	tx := &localTxID{Value: 5, ConnectionID: conn}
	props, _ := encodeProps([]transport.Property{{Name: "intProp", Value: int32(7)}})
	msg := &message{
		baseCommand: baseCommand{CommandID: 9, ResponseRequired: true},
		Type:        typeTextMessage, ProducerID: prod, Destination: q, TransactionID: tx,
		OriginalDestination: &dest{Type: typeTopic, Name: "t"}, MessageID: mid,
		OriginalTransactionID: &xaTxID{FormatID: 1, Global: []byte{1, 2}, Branch: []byte{3}},
		GroupID:               "g", GroupSequence: 3, CorrelationID: "corr", Persistent: true, Expiration: 1e12,
		Priority: 7, ReplyTo: &dest{Type: typeTempQueue, Name: "ID:x:1:1"}, Timestamp: 1e12 + 1,
		JMSType: "type", Content: []byte{0, 0, 0, 2, 'h', 'i'}, Props: props,
		DataStructure: &consumerInfo{ConsumerID: cons, Destination: q}, TargetConsumerID: cons,
		Compressed: false, RedeliveryCounter: 2, BrokerPath: []*brokerID{{Value: "A"}, {Value: "B"}},
		Arrival: 5, UserID: "user", ReceivedByDFBridge: true, Droppable: true,
		Cluster: []*brokerID{{Value: "C"}}, BrokerInTime: 6, BrokerOutTime: 7, JMSXGroupFirst: true,
	}
	return []dataStructure{
		&wireFormatInfo{Magic: magic, Version: 12, Props: props},
		&brokerInfo{baseCommand: baseCommand{CommandID: 1}, BrokerID: &brokerID{Value: "b1"}, BrokerURL: "tcp://x:61616",
			Peers: []*brokerInfo{{BrokerID: &brokerID{Value: "b2"}}}, BrokerName: "name", SlaveBroker: true,
			MasterBroker: true, FaultTolerant: true, DuplexConnection: true, NetworkConnection: true,
			ConnectionID: 12, BrokerUploadURL: "u", NetworkProperties: "p"},
		&connectionInfo{baseCommand: baseCommand{CommandID: 2, ResponseRequired: true}, ConnectionID: conn,
			ClientID: "client", Password: "secret", UserName: "user", BrokerPath: []*brokerID{{Value: "A"}},
			BrokerMasterConnector: true, Manageable: true, ClientMaster: true, FaultTolerant: true,
			FailoverReconnect: true, ClientIP: "1.2.3.4"},
		&sessionInfo{baseCommand: baseCommand{CommandID: 3}, SessionID: &sessionID{ConnectionID: conn.Value, Value: 2}},
		&consumerInfo{baseCommand: baseCommand{CommandID: 4, ResponseRequired: true}, ConsumerID: cons, Browser: true,
			Destination: q, PrefetchSize: 1000, MaxPendingMessageLimit: 10, DispatchAsync: true,
			Selector: "intProp > 5", ClientID: "client", SubscriptionName: "sub", NoLocal: true, Exclusive: true,
			Retroactive: true, Priority: -5, BrokerPath: []*brokerID{{Value: "A"}},
			AdditionalPredicate: &networkBridgeFilter{NetworkBrokerID: &brokerID{Value: "A"}, MessageTTL: 1, ConsumerTTL: 2},
			NetworkSubscription: true, OptimizedAcknowledge: true, NoRangeAcks: true,
			NetworkConsumerPath: []*consumerID{cons}},
		&producerInfo{baseCommand: baseCommand{CommandID: 5}, ProducerID: prod, Destination: q,
			BrokerPath: []*brokerID{{Value: "A"}}, DispatchAsync: true, WindowSize: 1024},
		&transactionInfo{baseCommand: baseCommand{CommandID: 6, ResponseRequired: true}, ConnectionID: conn,
			TransactionID: tx, Type: txCommitOnePhase},
		&destinationInfo{baseCommand: baseCommand{CommandID: 7}, ConnectionID: conn, Destination: q,
			OperationType: 1, Timeout: 100, BrokerPath: []*brokerID{{Value: "A"}}},
		&removeSubscriptionInfo{baseCommand: baseCommand{CommandID: 8}, ConnectionID: conn, SubscriptionName: "sub", ClientID: "client"},
		&keepAliveInfo{baseCommand: baseCommand{CommandID: 9, ResponseRequired: true}},
		&shutdownInfo{baseCommand: baseCommand{CommandID: 10}},
		&connectionControl{baseCommand: baseCommand{CommandID: 15, ResponseRequired: true}},
		&connectionControl{baseCommand: baseCommand{CommandID: 16}, FaultTolerant: true, Suspend: true,
			ConnectedBrokers: "tcp://a:61616", ReconnectTo: "tcp://b:61616", RebalanceConnection: true, Token: []byte{7}},
		&removeInfo{baseCommand: baseCommand{CommandID: 11}, ObjectID: cons, LastDeliveredSequenceID: -1},
		&connectionError{baseCommand: baseCommand{CommandID: 12}, Exception: "java.lang.SecurityException: denied", ConnectionID: conn},
		&messageDispatch{baseCommand: baseCommand{CommandID: 13}, ConsumerID: cons, Destination: q, Message: msg, RedeliveryCounter: 1},
		&messageAck{baseCommand: baseCommand{CommandID: 14}, Destination: q, TransactionID: tx, ConsumerID: cons,
			AckType: ackStandard, FirstID: mid, LastID: &messageID{TextView: "ID:x:1:1:1"}, MessageCount: 3,
			PoisonCause: "java.io.IOException: bad"},
		msg,
		&message{Type: typeBytesMessage, MessageID: mid, Content: []byte{1, 2, 3}},
		&message{Type: typeMapMessage}, &message{Type: typeObjectMessage}, &message{Type: typeStreamMessage},
		&message{Type: typeMessage}, &message{Type: typeBlobMessage},
		&response{baseCommand: baseCommand{CommandID: 15}, CorrelationID: 6},
		&exceptionResponse{response: response{CorrelationID: 7}, Exception: "javax.jms.JMSException: nope"},
		&dataResponse{response: response{CorrelationID: 8}, Data: &brokerID{Value: "x"}},
		&integerResponse{response: response{CorrelationID: 9}, Result: 3},
	}
}

func TestEveryCommandRoundTrips(t *testing.T) {
	for _, tight := range []bool{false, true} {
		for _, ds := range sample() {
			testRoundTrip(t, ds, tight)
		}
	}
}

func testRoundTrip(t *testing.T, ds dataStructure, tight bool) {
	name := reflect.TypeOf(ds).Elem().Name() + " loose"
	if tight {
		name = reflect.TypeOf(ds).Elem().Name() + " tight"
	}
	t.Run(name, func(t *testing.T) {
		frame := encodeFrameAs(ds, tight)
		if n := int(binary.BigEndian.Uint32(frame)); n != len(frame)-4 {
			t.Fatalf("size prefix %d, frame %d", n, len(frame)-4)
		}
		got, err := decodeCommandAs(frame[4:], false, tight, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, ds) {
			t.Fatalf("round trip:\n got %#v\nwant %#v", got, ds)
		}
		// Every proper prefix is an error, never a panic.
		for i := 1; i < len(frame)-4; i++ {
			if _, err := decodeCommandAs(frame[4:4+i], false, tight, nil); err == nil && !tight {
				t.Fatalf("prefix of %d bytes decoded", i)
			}
		}
	})
}

func TestPropertyMapKeepsEveryType(t *testing.T) {
	props := []transport.Property{
		{Name: "null", Value: nil},
		{Name: "bool", Value: true},
		{Name: "byte", Value: int8(-3)},
		{Name: "char", Value: uint16('é')},
		{Name: "short", Value: int16(-300)},
		{Name: "int", Value: int32(-70000)},
		{Name: "long", Value: int64(1) << 40},
		{Name: "float", Value: float32(1.5)},
		{Name: "double", Value: math.Pi},
		{Name: "string", Value: "héllo \x00 wörld 😀"},
		{Name: "big", Value: strings.Repeat("x", 9000)},
		{Name: "bytes", Value: []byte{0, 1, 2}},
		{Name: "map", Value: []transport.Property{{Name: "k", Value: int32(1)}}},
		{Name: "list", Value: []any{int64(1), "two", false}},
	}
	b, err := encodeProps(props)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeProps(b, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, props) {
		t.Fatalf("got %#v\nwant %#v", got, props)
	}
	if _, err := encodeProps([]transport.Property{{Name: "bad", Value: struct{}{}}}); err == nil || !strings.Contains(err.Error(), `"bad"`) {
		t.Fatalf("unsupported type: err %v", err)
	}
}

func TestModifiedUTF8MatchesJava(t *testing.T) {
	// DataOutputStream.writeUTF("a\u0000é😀"): NUL as C0 80, the emoji as two surrogates.
	want := []byte{'a', 0xc0, 0x80, 0xc3, 0xa9, 0xed, 0xa0, 0xbd, 0xed, 0xb8, 0x80}
	if got := encodeMUTF8("a\x00é😀"); !bytes.Equal(got, want) {
		t.Fatalf("encode: % x, want % x", got, want)
	}
	if got := decodeMUTF8(want); got != "a\x00é😀" {
		t.Fatalf("decode: %q", got)
	}
}

func TestMessageConversionRoundTrips(t *testing.T) {
	exp := time.UnixMilli(2_000_000_000_000)
	tm := &transport.Message{
		Destination: destination.Destination{Kind: destination.Topic, Name: "prices.eu"},
		Persistent:  true, Priority: 7, Expires: exp, Timestamp: exp.Add(-time.Hour),
		CorrelationID: "c-1", ReplyTo: "/queue/replies", Type: "Quote",
		Props: []transport.Property{{Name: "intProp", Value: int32(6)}, {Name: "boolProp", Value: true},
			{Name: propGroupID, Value: "grp"}, {Name: propGroupSeq, Value: int32(4)}},
		Body: []byte("naïve"),
	}
	m, err := fromMessage(tm)
	if err != nil {
		t.Fatal(err)
	}
	if m.GroupID != "grp" || m.GroupSequence != 4 || m.Type != typeTextMessage || m.ReplyTo.Name != "replies" {
		t.Fatalf("fromMessage: %+v", m)
	}
	back, err := toMessage(m, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if string(back.Body) != "naïve" || back.Priority != 7 || !back.Expires.Equal(exp) || back.ReplyTo != "/queue/replies" ||
		back.Type != "Quote" || back.CorrelationID != "c-1" || !back.Persistent || back.Destination != tm.Destination {
		t.Fatalf("toMessage: %+v", back)
	}
	if v, _ := back.Prop("intProp"); v != int32(6) {
		t.Fatalf("intProp = %#v", v)
	}
	if v, _ := back.Prop(propGroupSeq); v != int32(4) {
		t.Fatalf("group seq = %#v", v)
	}
	// Unchanged properties travel byte for byte with the native message.
	again, err := fromMessage(back)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again.Props, m.Props) || again.Type != m.Type || !bytes.Equal(again.Content, m.Content) {
		t.Fatal("native pass-through changed the message")
	}
	// A property added by the bridge is marshalled anew, with the others kept typed.
	back.Props = append(back.Props, transport.Property{Name: "BrokernetHops", Value: "1"})
	again, _ = fromMessage(back)
	props, _ := decodeProps(again.Props, nil)
	if len(props) != 3 || props[0].Value != int32(6) || props[2].Value != "1" {
		t.Fatalf("props after bridge edit: %#v", props)
	}
	// Temporary reply destinations keep naming the existing one, in both spellings.
	for _, rt := range []string{"/remote-temp-queue/ID:h-1:1:1", "temp-queue://ID:h-1:1:1"} {
		m, err := fromMessage(&transport.Message{ReplyTo: rt, Priority: -1})
		if err != nil || m.ReplyTo.Type != typeTempQueue || m.ReplyTo.Name != "ID:h-1:1:1" {
			t.Fatalf("reply-to %s: %+v %v", rt, m.ReplyTo, err)
		}
		if back, _ := toMessage(m, 0, nil); back.ReplyTo != "/remote-temp-queue/ID:h-1:1:1" {
			t.Fatalf("reply-to %s came back as %s", rt, back.ReplyTo)
		}
	}
	if _, err := fromMessage(&transport.Message{ReplyTo: "nowhere", Priority: -1}); err == nil || !strings.Contains(err.Error(), `"nowhere"`) {
		t.Fatalf("bad reply-to: %v", err)
	}
	// Bytes bodies stay bytes.
	bm, _ := fromMessage(&transport.Message{Bytes: true, Body: []byte{0, 255}, Priority: -1})
	bb, _ := toMessage(bm, 1, nil)
	if bm.Type != typeBytesMessage || bm.Priority != 4 || !bb.Bytes || !bytes.Equal(bb.Body, []byte{0, 255}) || !bb.Redelivered {
		t.Fatalf("bytes message: %+v / %+v", bm, bb)
	}
}

func TestCompressedBodiesAreInflated(t *testing.T) {
	deflate := func(p []byte) []byte {
		var b bytes.Buffer
		zw := zlib.NewWriter(&b)
		zw.Write(p)
		zw.Close()
		return b.Bytes()
	}
	text := append([]byte{0, 0, 0, 5}, "hello"...)
	tm, err := toMessage(&message{Type: typeTextMessage, Compressed: true, Content: deflate(text)}, 0, nil)
	if err != nil || string(tm.Body) != "hello" {
		t.Fatalf("text: %q %v", tm.Body, err)
	}
	raw := []byte{9, 8, 7}
	bm := append([]byte{0, 0, 0, 3}, deflate(raw)...)
	tm, err = toMessage(&message{Type: typeBytesMessage, Compressed: true, Content: bm}, 0, nil)
	if err != nil || !bytes.Equal(tm.Body, raw) {
		t.Fatalf("bytes: %v %v", tm.Body, err)
	}
	// Passed on over OpenWire, the compressed form travels as it is.
	m, _ := fromMessage(tm)
	if !m.Compressed || !bytes.Equal(m.Content, bm) {
		t.Fatal("compressed body not passed through")
	}
	bm[3] = 4
	if _, err := toMessage(&message{Type: typeBytesMessage, Compressed: true, Content: bm}, 0, nil); err == nil {
		t.Fatal("wrong inflated length accepted")
	}
}

func TestParseURI(t *testing.T) {
	good := []struct{ in, addr, str string }{
		{"tcp://h", "h:61616", "tcp://h:61616"},
		{"tcp://h?wireFormat.tightEncodingEnabled=false", "h:61616", "tcp://h:61616?wireFormat.tightEncodingEnabled=false"},
		{"ssl://h", "h:61617", "ssl://h:61617"},
		{"tcp://u:p@h:1?clientId=c&initialReconnectDelay=250&backOffMultiplier=1.5", "h:1", "tcp://u:***@h:1?backOffMultiplier=1.5&clientId=c&initialReconnectDelay=250ms"},
		{"ssl://[::1]:5?ca=/x.pem&wireFormat.maxInactivityDuration=0", "[::1]:5", "ssl://[::1]:5?ca=%2Fx.pem&wireFormat.maxInactivityDuration=0"},
	}
	for _, g := range good {
		u, err := ParseURI(g.in)
		if err != nil {
			t.Errorf("%s: %v", g.in, err)
			continue
		}
		if u.Addr() != g.addr || u.String() != g.str {
			t.Errorf("%s: addr %s string %s", g.in, u.Addr(), u.String())
		}
		if back, err := ParseURI(u.WithSecrets()); err != nil || !reflect.DeepEqual(back, u) {
			t.Errorf("%s: WithSecrets does not round-trip: %+v %v", g.in, back, err)
		}
	}
	bad := map[string]string{
		"stomp://h":                         `unsupported scheme "stomp"`,
		"tcp://u:secret@h?bogus=1":          `unknown option "bogus"`,
		"tcp://h:99999":                     `bad port "99999"`,
		"tcp://h?ca=x":                      "needs ssl://",
		"h:61616":                           "missing scheme",
		"tcp://h?wireFormat.maxFrameSize=1": "wireFormat.maxFrameSize",
	}
	for in, want := range bad {
		_, err := ParseURI(in)
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "secret") {
			t.Errorf("%s: err %v, want %q without the password", in, err, want)
		}
	}
}

func FuzzDecodeCommand(f *testing.F) {
	for _, ds := range sample() {
		f.Add(encodeFrame(ds)[4:])
	}
	for _, ds := range sample() {
		f.Add(encodeFrameAs(ds, true)[4:])
	}
	f.Fuzz(func(t *testing.T, p []byte) {
		last := byte(0)
		if len(p) > 0 {
			last = p[len(p)-1]
		}
		ds, err := decodeCommandAs(p, last&1 == 1, last&2 == 2, nil)
		if err != nil {
			return
		}
		// Whatever decodes must encode again without panicking.
		encodeFrameAs(ds, last&2 == 2)
		if m, ok := ds.(*message); ok {
			if tm, err := toMessage(m, 0, nil); err == nil {
				fromMessage(tm)
			}
		}
		if md, ok := ds.(*messageDispatch); ok && md.Message != nil {
			if ci, ok := md.Message.DataStructure.(*consumerInfo); ok {
				consumerOf(ci)
			}
		}
	})
}

func FuzzDecodeProps(f *testing.F) {
	b, _ := encodeProps([]transport.Property{{Name: "a", Value: int32(1)}, {Name: "m", Value: []transport.Property{{Name: "x", Value: "y"}}}})
	f.Add(b)
	f.Fuzz(func(t *testing.T, p []byte) {
		props, err := decodeProps(p, nil)
		if err == nil {
			encodeProps(props)
		}
	})
}

func TestTextBodiesConvertWhateverTheirCharacters(t *testing.T) {
	for _, body := range []string{"plain ASCII 123", "naïve", "nul\x00inside", "😀 outside the BMP", ""} {
		m, err := fromMessage(&transport.Message{Body: []byte(body)})
		if err != nil {
			t.Fatal(err)
		}
		back, err := toMessage(m, 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		if string(back.Body) != body {
			t.Errorf("text body %q came back as %q", body, back.Body)
		}
	}
}

// TestSentIDKeepsActiveMQMessageIDs: an id in ActiveMQ's MessageId form is
// sent as that MessageId (producer id and sequence, which ActiveMQ's audits
// key on); a message received over OpenWire is sent with its own MessageId;
// any other id is not parsed.
func TestSentIDKeepsActiveMQMessageIDs(t *testing.T) {
	for _, c := range []struct {
		id   string
		ok   bool
		conn string
		sess int64
		prod int64
		seq  int64
	}{
		{"ID:vm-42233-1796135445856-4:5:-1:1:7", true, "ID:vm-42233-1796135445856-4:5", -1, 1, 7},
		{"ID:vm-1-2-3:4-bnr2:1:2:3", true, "ID:vm-1-2-3:4-bnr2", 1, 2, 3},
		{"ID:x:1:2:03", false, "", 0, 0, 0}, // would not print back the same
		{"ID:1:2:3", false, "", 0, 0, 0},    // no connection id
		{"order-17", false, "", 0, 0, 0},
		{"vm:1:2:3", false, "", 0, 0, 0},
		{"", false, "", 0, 0, 0},
	} {
		id, ok := sentID(&transport.Message{ID: c.id})
		if ok != c.ok {
			t.Errorf("%q: ok = %v, want %v", c.id, ok, c.ok)
			continue
		}
		if !ok {
			continue
		}
		if p := id.ProducerID; p.ConnectionID != c.conn || p.SessionID != c.sess || p.Value != c.prod || id.ProducerSeq != c.seq || id.String() != c.id {
			t.Errorf("%q: sent as %+v seq %d (%s)", c.id, *p, id.ProducerSeq, id)
		}
	}
	own := &messageID{TextView: "ID:foreign", ProducerID: &producerID{ConnectionID: "ID:c:1", SessionID: 1, Value: 1}, ProducerSeq: 9}
	tm, err := toMessage(&message{Type: typeMessage, MessageID: own}, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if id, ok := sentID(tm); !ok || id != own {
		t.Errorf("a message received over OpenWire is sent with %v, want its own MessageId", id)
	}
	tm.ID = "ID:other-1:1:1:1"
	if id, ok := sentID(tm); !ok || id == own || id.String() != tm.ID {
		t.Errorf("a message whose id the bridge changed is sent with %v, want %s", id, tm.ID)
	}
}
