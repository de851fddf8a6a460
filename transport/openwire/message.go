package openwire

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/brokernet/brokernet/destination"
	"github.com/brokernet/brokernet/transport"
)

// Property names that are message fields in OpenWire but properties
// elsewhere: ActiveMQ's STOMP converter maps them the same way.
const (
	propGroupID  = "JMSXGroupID"
	propGroupSeq = "JMSXGroupSeq"
)

// native is what Message.Native holds for a message received over OpenWire:
// the command as the broker sent it and the properties as decoded, so that
// sending it over OpenWire again keeps its message type, body encoding
// (Map, Object, Stream, compressed) and, when the bridge did not change the
// properties, the marshalled property map byte for byte.
type native struct {
	msg   *message
	props []transport.Property
	// id is the transport.Message.ID made from msg.MessageID: while the
	// message still has it, it is sent with msg.MessageID itself.
	id string
}

// maxInflate bounds a compressed body, as the frame size bounds others.
const maxInflate = DefaultMaxFrameSize

func toDestination(d *dest) (destination.Destination, bool) {
	if d == nil || d.Name == "" {
		return destination.Destination{}, false
	}
	switch d.Type {
	case typeQueue:
		return destination.Destination{Kind: destination.Queue, Name: d.Name}, true
	case typeTopic:
		return destination.Destination{Kind: destination.Topic, Name: d.Name}, true
	case typeTempQueue:
		return destination.Destination{Kind: destination.TempQueue, Name: d.Name}, true
	case typeTempTopic:
		return destination.Destination{Kind: destination.TempTopic, Name: d.Name}, true
	}
	return destination.Destination{}, false
}

func fromDestination(d destination.Destination) *dest {
	t := byte(typeQueue)
	switch d.Kind {
	case destination.Topic:
		t = typeTopic
	case destination.TempQueue:
		t = typeTempQueue
	case destination.TempTopic:
		t = typeTempTopic
	}
	return &dest{Type: t, Name: d.Name}
}

// toMessage converts a received message. Text bodies are decoded to UTF-8;
// Bytes bodies are passed as they are; Map, Object and Stream bodies are
// passed in their marshalled form with Bytes set (only OpenWire can read
// them; Native carries the type). ReplyTo is in ActiveMQ's STOMP spelling
// (see replyToPath).
// Property names are interned in ns (nil: none).
func toMessage(m *message, redeliveries int32, ns names) (*transport.Message, error) {
	props, err := decodeProps(m.Props, ns)
	if err != nil {
		return nil, err
	}
	tm := &transport.Message{
		ID:            m.MessageID.String(),
		Persistent:    m.Persistent,
		Priority:      int(m.Priority),
		CorrelationID: m.CorrelationID,
		Type:          m.JMSType,
		Redelivered:   redeliveries > 0 || m.RedeliveryCounter > 0,
	}
	tm.Native = &native{msg: m, props: props, id: tm.ID}
	tm.Destination, _ = toDestination(m.Destination)
	if m.Expiration > 0 {
		tm.Expires = time.UnixMilli(m.Expiration)
	}
	if m.Timestamp > 0 {
		tm.Timestamp = time.UnixMilli(m.Timestamp)
	}
	if d, ok := toDestination(m.ReplyTo); ok {
		tm.ReplyTo = replyToPath(d)
	}
	tm.Props = append(tm.Props, props...)
	if m.GroupID != "" {
		tm.Props = append(tm.Props, transport.Property{Name: propGroupID, Value: m.GroupID})
		tm.Props = append(tm.Props, transport.Property{Name: propGroupSeq, Value: m.GroupSequence})
	}
	content := m.Content
	if m.Compressed && content != nil {
		var err error
		if content, err = inflate(m.Type, content); err != nil {
			return nil, err
		}
	}
	switch m.Type {
	case typeTextMessage:
		// MarshallingSupport.writeUTF8: int32 length (-1 for null), modified UTF-8.
		if len(content) >= 4 {
			n := int(int32(binary.BigEndian.Uint32(content)))
			if n > len(content)-4 {
				return nil, fmt.Errorf("text body of %d bytes claims %d", len(content)-4, n)
			}
			if n > 0 {
				tm.Body = decodeMUTF8Body(content[4 : 4+n])
			}
		}
	case typeMessage:
	default:
		tm.Bytes = true
		tm.Body = content
	}
	return tm, nil
}

// fromMessage builds the OpenWire message to send for tm. A message that
// came from OpenWire (Native) keeps its type and body encoding.
func fromMessage(tm *transport.Message) (*message, error) {
	m := &message{
		Type:          typeTextMessage,
		Destination:   fromDestination(tm.Destination),
		Persistent:    tm.Persistent,
		Priority:      4, // JMS default priority
		CorrelationID: tm.CorrelationID,
		JMSType:       tm.Type,
	}
	if tm.Priority >= 0 && tm.Priority <= 9 {
		m.Priority = byte(tm.Priority)
	}
	if !tm.Expires.IsZero() {
		m.Expiration = tm.Expires.UnixMilli()
	}
	m.Timestamp = time.Now().UnixMilli()
	if !tm.Timestamp.IsZero() {
		m.Timestamp = tm.Timestamp.UnixMilli()
	}
	if tm.ReplyTo != "" {
		d, err := parseReplyTo(tm.ReplyTo)
		if err != nil {
			return nil, err
		}
		m.ReplyTo = d
	}
	for _, s := range []string{tm.CorrelationID, tm.Type} {
		if !fitsUTF(s) {
			return nil, fmt.Errorf("header %.40q…: longer than 65535 bytes", s)
		}
	}

	props := make([]transport.Property, 0, len(tm.Props))
	for _, p := range tm.Props {
		switch p.Name {
		case propGroupID:
			m.GroupID = fmt.Sprint(p.Value)
			continue
		case propGroupSeq:
			m.GroupSequence = toInt32(p.Value)
			continue
		}
		props = append(props, p)
	}

	nat, _ := tm.Native.(*native)
	if nat != nil && sameProps(nat.props, props) {
		m.Props = nat.msg.Props
	} else if len(props) > 0 {
		b, err := encodeProps(props)
		if err != nil {
			return nil, err
		}
		m.Props = b
	}

	switch {
	case nat != nil:
		m.Type = nat.msg.Type
		m.Content = nat.msg.Content
		m.Compressed = nat.msg.Compressed
	case tm.Bytes:
		m.Type = typeBytesMessage
		m.Content = tm.Body
		if m.Content == nil {
			m.Content = []byte{}
		}
	default:
		p := tm.Body
		if !isASCII(p) { // an ASCII body is the same bytes in modified UTF-8
			p = encodeMUTF8(string(p))
		}
		c := make([]byte, 4, 4+len(p))
		binary.BigEndian.PutUint32(c, uint32(len(p)))
		m.Content = append(c, p...)
	}
	return m, nil
}

// replyToPath spells a reply destination as ActiveMQ's STOMP support does:
// "/queue/NAME", "/topic/NAME", and "/remote-temp-queue/NAME" for a
// temporary destination, which on ActiveMQ's STOMP side names the existing
// temporary queue rather than a new one of the sending connection. That
// spelling passes through the STOMP transport unchanged; an ActiveMQ STOMP
// broker refuses a reply-to in URI form ("queue://NAME").
func replyToPath(d destination.Destination) string {
	switch d.Kind {
	case destination.TempQueue:
		return "/remote-temp-queue/" + d.Name
	case destination.TempTopic:
		return "/remote-temp-topic/" + d.Name
	}
	return d.StompPath()
}

// inflate undoes the client's compression (useCompression): a zlib stream
// (Message.doCompress, java.util.zip.DeflaterOutputStream), preceded by the
// uncompressed length for a BytesMessage (ActiveMQBytesMessage.doCompress).
func inflate(typ byte, content []byte) ([]byte, error) {
	want := -1
	if typ == typeBytesMessage {
		if len(content) < 4 {
			return nil, fmt.Errorf("compressed bytes body of %d bytes", len(content))
		}
		want = int(int32(binary.BigEndian.Uint32(content)))
		if want < 0 || want > maxInflate {
			return nil, fmt.Errorf("compressed bytes body claims %d bytes", want)
		}
		content = content[4:]
	}
	zr, err := zlib.NewReader(bytes.NewReader(content))
	if err != nil {
		return nil, fmt.Errorf("inflating body: %w", err)
	}
	out, err := io.ReadAll(io.LimitReader(zr, maxInflate))
	if err != nil {
		return nil, fmt.Errorf("inflating body: %w", err)
	}
	if want >= 0 && len(out) != want {
		return nil, fmt.Errorf("inflated bytes body has %d bytes, claims %d", len(out), want)
	}
	return out, nil
}

// sentID returns the MessageId to send tm with, when it has one of its own:
// the one it arrived with over OpenWire, or its id parsed as ActiveMQ's
// MessageId parses ("ID:connection:session:producer:sequence", from the end;
// kept only when it prints back the same). ActiveMQ's broker and JMS client
// audits key on that MessageId's producer id and sequence, so a message sent
// again keeps being recognised. ok is false for an id of another form.
func sentID(tm *transport.Message) (id *messageID, ok bool) {
	if nat, _ := tm.Native.(*native); nat != nil && nat.msg.MessageID != nil && nat.id == tm.ID {
		return nat.msg.MessageID, true
	}
	return parseMessageID(tm.ID)
}

// KeepsID reports whether Send gives a message with id that id as its own
// MessageId (transport.Info.KeepsID): only an ActiveMQ MessageId. Another id
// ("order-17", RabbitMQ's "T_sub@@session@@1") is not kept as a text view:
// ActiveMQ's STOMP consumers acknowledge by message-id, which the broker
// parses back into a MessageId, and it refused such an ack
// (NumberFormatException) and closed the consumer's connection — a consumer
// on ActiveMQ of messages bridged from RabbitMQ got one message
// (TestConformance/RabbitMQ-to-ActiveMQ-OpenWire).
func KeepsID(id string) bool {
	_, ok := parseMessageID(id)
	return ok
}

// parseMessageID parses an ActiveMQ MessageId's text.
func parseMessageID(s string) (id *messageID, ok bool) {
	if !strings.HasPrefix(s, "ID:") {
		return nil, false
	}
	var n [3]int64
	end := len(s)
	for i := 2; i >= 0; i-- {
		p := strings.LastIndexByte(s[:end], ':')
		if p < 3 {
			return nil, false
		}
		v, err := strconv.ParseInt(s[p+1:end], 10, 64)
		if err != nil {
			return nil, false
		}
		n[i], end = v, p
	}
	id = &messageID{ProducerID: &producerID{ConnectionID: s[:end], SessionID: n[0], Value: n[1]}, ProducerSeq: n[2]}
	var buf [96]byte
	if string(id.appendKey(buf[:0])) != s {
		return nil, false
	}
	return id, true
}

// parseReplyTo reads a reply destination in URI ("queue://x") or STOMP
// ("/queue/x") spelling.
func parseReplyTo(s string) (*dest, error) {
	var d destination.Destination
	var err error
	if strings.HasPrefix(s, "/") {
		d, err = destination.FromStomp(s)
	} else {
		d, err = destination.Parse(s)
	}
	if err != nil {
		return nil, fmt.Errorf("reply-to %q: %w", s, err)
	}
	return fromDestination(d), nil
}

func toInt32(v any) int32 {
	switch v := v.(type) {
	case int32:
		return v
	case int:
		return int32(v)
	case int64:
		return int32(v)
	case int16:
		return int32(v)
	case int8:
		return int32(v)
	case string:
		var n int32
		fmt.Sscan(v, &n)
		return n
	}
	return 0
}

// sameProps reports whether b holds exactly the properties a does.
func sameProps(a, b []transport.Property) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Name != b[i].Name || !sameValue(a[i].Value, b[i].Value) {
			return false
		}
	}
	return true
}

func sameValue(a, b any) bool {
	switch x := a.(type) {
	case []byte:
		y, ok := b.([]byte)
		return ok && bytes.Equal(x, y)
	case []transport.Property:
		y, ok := b.([]transport.Property)
		return ok && sameProps(x, y)
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !sameValue(x[i], y[i]) {
				return false
			}
		}
		return true
	}
	switch b.(type) {
	case []byte, []transport.Property, []any:
		return false
	}
	return a == b
}
