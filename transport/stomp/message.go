package stomp

import (
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/go-stomp/stomp/v3/frame"

	"github.com/brokernet/brokernet/destination"
	"github.com/brokernet/brokernet/rabbitmq"
	"github.com/brokernet/brokernet/transport"
)

// deliveryHeader reports whether a MESSAGE frame's header belongs to the
// delivery, not to the message, or maps to a Message field. (A switch: this
// runs for every header of every message, and beats a map lookup.)
func deliveryHeader(k string) bool {
	switch k {
	case frame.Subscription, frame.MessageId, frame.Ack,
		frame.Destination, frame.ContentLength, frame.ContentType,
		frame.Receipt, frame.Transaction, "redelivered",
		"persistent", "priority", "expires", "timestamp",
		"correlation-id", "reply-to", "type":
		return true
	}
	return false
}

// MessageOf maps a MESSAGE frame to a transport.Message (see docs/protocols.md's header
// mapping table). Of repeated headers the first wins, as STOMP says.
func MessageOf(f *frame.Frame) *transport.Message {
	h := f.Header
	m := &transport.Message{
		ID:            h.Get(frame.MessageId),
		Persistent:    h.Get("persistent") == "true",
		Priority:      -1,
		CorrelationID: h.Get("correlation-id"),
		ReplyTo:       h.Get("reply-to"),
		Type:          h.Get("type"),
		ContentType:   h.Get(frame.ContentType),
		Redelivered:   h.Get("redelivered") == "true",
		Body:          f.Body,
	}
	m.Destination, _ = destination.FromStomp(h.Get(frame.Destination))
	if _, ok := h.Contains(frame.ContentLength); ok {
		m.Bytes = true
	}
	if p, err := strconv.Atoi(h.Get("priority")); err == nil {
		m.Priority = p
	}
	if ms, err := strconv.ParseInt(h.Get("expires"), 10, 64); err == nil && ms > 0 {
		m.Expires = time.UnixMilli(ms)
	}
	if ms, err := strconv.ParseInt(h.Get("timestamp"), 10, 64); err == nil && ms > 0 {
		m.Timestamp = time.UnixMilli(ms)
	}
	n := h.Len()
	m.Props = make([]transport.Property, 0, n)
	var seen map[string]struct{}
	if n > 16 {
		seen = make(map[string]struct{}, n)
	}
	for i := 0; i < n; i++ {
		k, v := h.GetAt(i)
		if deliveryHeader(k) {
			continue
		}
		if seen != nil {
			if _, dup := seen[k]; dup {
				continue
			}
			seen[k] = struct{}{}
		} else if hasProp(m.Props, k) {
			continue
		}
		m.Props = append(m.Props, transport.Property{Name: k, Value: v})
	}
	return m
}

func hasProp(ps []transport.Property, name string) bool {
	for i := range ps {
		if ps[i].Name == name {
			return true
		}
	}
	return false
}

// kvPool holds SendFrame's scratch header lists.
var kvPool = sync.Pool{New: func() any { s := make([]string, 0, 64); return &s }}

// sendPath is where a SEND to d goes. ActiveMQ reads "/temp-queue/NAME" as a
// temporary queue of the sending connection, named per connection; a
// temporary destination of another connection (a reply-to the bridge
// forwards to) is "/remote-temp-queue/NAME" (destination.StompPath).
func sendPath(d destination.Destination) string {
	if d.IsTemp() {
		return "/remote-" + d.Kind.String() + "/" + d.Name
	}
	return d.StompPath()
}

// SendFrame maps m to a SEND frame inside transaction tx ("" for none).
func SendFrame(m *transport.Message, tx string) *frame.Frame {
	kvp := kvPool.Get().(*[]string)
	kv := append((*kvp)[:0], frame.Destination, sendPath(m.Destination))
	if tx != "" {
		kv = append(kv, frame.Transaction, tx)
	}
	if m.Bytes {
		// A content-length makes ActiveMQ build a BytesMessage, its absence a
		// TextMessage: keep whichever the producer chose. (Without one ActiveMQ
		// reads the body a byte at a time, about 13 µs per KiB message on the
		// bench's broker; "amq-msg-type:text" would keep a length-announced
		// body text, but ActiveMQ 5.17 then keeps both headers as properties.
		// bench/history/2026-12-03.md.)
		kv = append(kv, frame.ContentLength, strconv.Itoa(len(m.Body)))
	}
	if m.ContentType != "" {
		kv = append(kv, frame.ContentType, m.ContentType)
	}
	if m.Persistent {
		kv = append(kv, "persistent", "true")
	}
	if m.Priority >= 0 {
		kv = append(kv, "priority", strconv.Itoa(m.Priority))
	}
	if !m.Expires.IsZero() {
		kv = append(kv, "expires", strconv.FormatInt(m.Expires.UnixMilli(), 10))
	}
	if !m.Timestamp.IsZero() {
		kv = append(kv, "timestamp", strconv.FormatInt(m.Timestamp.UnixMilli(), 10))
	}
	if m.CorrelationID != "" {
		kv = append(kv, "correlation-id", m.CorrelationID)
	}
	if m.ReplyTo != "" {
		kv = append(kv, "reply-to", m.ReplyTo)
	}
	if m.Type != "" {
		kv = append(kv, "type", m.Type)
	}
	for _, p := range m.Props {
		if deliveryHeader(p.Name) {
			continue
		}
		kv = append(kv, p.Name, PropText(p.Value))
	}
	// frame.Header has no way to take a slice as it is; NewHeader copies it
	// once, exactly sized, so the scratch slice goes back to the pool.
	f := &frame.Frame{Command: frame.SEND, Header: frame.NewHeader(kv...), Body: m.Body}
	clear(kv)
	*kvp = kv
	kvPool.Put(kvp)
	return f
}

// PropText renders a property value as STOMP carries it: text.
func PropText(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case nil:
		return ""
	case bool:
		return strconv.FormatBool(x)
	case int8:
		return strconv.FormatInt(int64(x), 10)
	case int16:
		return strconv.FormatInt(int64(x), 10)
	case int32:
		return strconv.FormatInt(int64(x), 10)
	case int64:
		return strconv.FormatInt(x, 10)
	case int:
		return strconv.Itoa(x)
	case float32:
		return strconv.FormatFloat(float64(x), 'g', -1, 32)
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	case []byte:
		return string(x)
	}
	return fmt.Sprint(v)
}

// fromRabbit corrects what MessageOf read from a RabbitMQ MESSAGE frame:
// RabbitMQ addresses, "expiration" (a time to live in ms, relative) instead of
// "expires", "timestamp" in seconds, and its own headers that are not the
// message's.
func fromRabbit(f *frame.Frame, m *transport.Message) {
	h := f.Header
	if d, err := rabbitmq.ParseAddress(h.Get(frame.Destination), rabbitmq.STOMP); err == nil {
		m.Destination = d
	}
	m.Timestamp = time.Time{}
	if s, err := strconv.ParseInt(h.Get("timestamp"), 10, 64); err == nil && s > 0 {
		m.Timestamp = time.Unix(s, 0)
	}
	props := m.Props[:0]
	for _, p := range m.Props {
		switch p.Name {
		case "expiration":
			if ms, err := strconv.ParseInt(PropText(p.Value), 10, 64); err == nil && ms >= 0 {
				m.Expires = time.Now().Add(time.Duration(ms) * time.Millisecond)
			}
			continue
		case "amqp-message-id", "content-encoding", "user-id", "app-id", "x-queue-name":
			continue
		}
		props = append(props, p)
	}
	m.Props = props
}

// toRabbit adapts a SEND frame for RabbitMQ: its address form, and "expiration"
// (relative ms) instead of "expires". A message already expired is sent with a
// time to live of 0 ms, so that RabbitMQ drops it as ActiveMQ would.
func toRabbit(m *transport.Message, f *frame.Frame) error {
	dest, err := rabbitmq.Address(m.Destination, rabbitmq.STOMP)
	if err != nil {
		return err
	}
	f.Header.Set(frame.Destination, dest)
	f.Header.Del("timestamp")
	if !m.Expires.IsZero() {
		f.Header.Del("expires")
		f.Header.Set("expiration", strconv.FormatInt(max(0, time.Until(m.Expires).Milliseconds()), 10))
	}
	return nil
}
