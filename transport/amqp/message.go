package amqp

import (
	"encoding/hex"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/Azure/go-amqp"

	"github.com/brokernet/brokernet/destination"
	"github.com/brokernet/brokernet/transport"
)

// toAMQP builds the AMQP 1.0 message for m, sent to address to.
//
// The "Header mapping" table in docs/protocols.md is the reference; the facts it rests on:
//   - go-amqp sends no header section when Message.Header is nil, and AMQP's
//     default is durable=false, so the header is always written (durable copied).
//   - RabbitMQ 3.10 turns header durable/priority/ttl into 0-9-1 delivery_mode,
//     priority and expiration (rabbit_amqp1_0_message:translate_header), so TTL is
//     what expires the message there; absolute-expiry-time travels along for
//     AMQP 1.0 receivers.
//   - message-id is the message's own id (transport.Message.ID), kept as a
//     string, as ActiveMQ's networkConnector keeps a forwarded MessageId; a
//     message that arrived with a numeric, UUID or binary id carries its text
//     (idString). RabbitMQ 3.10 stores it as the 0-9-1 message_id and gives
//     it back as message-id over AMQP 1.0.
func toAMQP(m *transport.Message, to string, now time.Time) *amqp.Message {
	h := &amqp.MessageHeader{Durable: m.Persistent, Priority: 4}
	if m.Priority >= 0 {
		h.Priority = uint8(min(m.Priority, 255))
	}
	p := &amqp.MessageProperties{To: &to}
	if m.ID != "" {
		p.MessageID = m.ID
	}
	if !m.Expires.IsZero() {
		ttl := m.Expires.Sub(now).Truncate(time.Millisecond)
		if ttl < time.Millisecond {
			// Already expired on the way: the shortest TTL lets the broker drop it
			// the way it drops any expired message (TTL 0 would mean "never").
			ttl = time.Millisecond
		}
		h.TTL = ttl
		exp := m.Expires
		p.AbsoluteExpiryTime = &exp
	}
	if !m.Timestamp.IsZero() {
		ts := m.Timestamp
		p.CreationTime = &ts
	}
	if m.CorrelationID != "" {
		p.CorrelationID = m.CorrelationID
	}
	if m.ReplyTo != "" {
		r := replyToAddress(m.ReplyTo)
		p.ReplyTo = &r
	}
	if m.Type != "" {
		s := m.Type
		p.Subject = &s
	}
	if m.ContentType != "" {
		s := m.ContentType
		p.ContentType = &s
	}
	out := &amqp.Message{Header: h, Properties: p}
	if len(m.Props) > 0 {
		out.ApplicationProperties = make(map[string]any, len(m.Props))
		for _, prop := range m.Props {
			if _, dup := out.ApplicationProperties[prop.Name]; dup {
				continue // the first of repeated properties wins, as in STOMP
			}
			out.ApplicationProperties[prop.Name] = propToAMQP(prop.Value)
		}
	}
	if m.Bytes {
		out.Data = [][]byte{m.Body}
	} else {
		out.Value = string(m.Body)
	}
	return out
}

// propToAMQP passes the seam's property types through (the AMQP encoder takes
// them all) and renders anything else as a string rather than failing the send.
func propToAMQP(v any) any {
	switch v.(type) {
	case string, bool, int8, int16, int32, int64, float32, float64, []byte:
		return v
	case int:
		return int64(v.(int))
	}
	return fmt.Sprint(v)
}

// fromAMQP reads a delivery of subscription sub (whose destination is subDest)
// into a transport.Message. It never fails: a value it cannot represent is
// rendered as a string.
//
// RabbitMQ 3.10 facts (rabbit_amqp1_0_message:annotated_message): a message
// published over STOMP or AMQP 0-9-1 arrives with a properties section built
// from its 0-9-1 properties, subject = its routing key, no to, no
// application-properties (0-9-1 headers, so STOMP headers, are not mapped) and
// a data section; a message published over AMQP 1.0 keeps its own properties,
// application-properties and body sections.
//
// rabbit says the broker is RabbitMQ, which marks redeliveries with
// first-acquirer=false (AMQP's default, so meaningless elsewhere) and leaves
// delivery-count unset.
func fromAMQP(in *amqp.Message, subDest destination.Destination, rabbit bool) *transport.Message {
	m := &transport.Message{Destination: subDest, Priority: -1}
	if h := in.Header; h != nil {
		m.Persistent = h.Durable
		m.Priority = int(h.Priority)
		m.Redelivered = h.DeliveryCount > 0 || rabbit && !h.FirstAcquirer
		if h.TTL > 0 {
			m.Expires = time.Now().Add(h.TTL)
		}
	}
	subject := ""
	to := ""
	if p := in.Properties; p != nil {
		m.ID = idString(p.MessageID)
		m.CorrelationID = idString(p.CorrelationID)
		if p.ReplyTo != nil {
			m.ReplyTo = *p.ReplyTo
			// RabbitMQ 3.10 writes a 0-9-1 reply_to as "/queue/"+reply_to, and
			// its STOMP plugin stores a STOMP reply-to as given ("/queue/x"):
			// the two make "/queue//queue/x".
			if rest, ok := strings.CutPrefix(m.ReplyTo, "/queue/"); ok && strings.HasPrefix(rest, "/") {
				m.ReplyTo = rest
			}
			// Reply-to travels in STOMP spelling (transport.Message.ReplyTo):
			// /amq/queue/x and /exchange/amq.topic/k read back as /queue/x, /topic/k.
			if d, ok := fromAddress(m.ReplyTo); ok && !d.IsTemp() {
				m.ReplyTo = d.StompPath()
			}
		}
		if p.ContentType != nil {
			m.ContentType = *p.ContentType
		}
		if p.Subject != nil {
			subject = *p.Subject
		}
		if p.To != nil {
			to = *p.To
		}
		if p.AbsoluteExpiryTime != nil && !p.AbsoluteExpiryTime.IsZero() {
			m.Expires = *p.AbsoluteExpiryTime
		}
		if p.CreationTime != nil && !p.CreationTime.IsZero() {
			m.Timestamp = *p.CreationTime
		}
	}
	// Which destination: a wildcard topic subscription learns the concrete topic
	// from "to" (brokernet's AMQP sender sets it) or else from the routing key
	// RabbitMQ put in subject for messages that did not come over AMQP 1.0.
	routingKey := false
	if d, ok := fromAddress(to); ok && d.Kind == subDest.Kind {
		m.Destination = d
	} else if to == "" && subject != "" {
		switch {
		case subDest.Kind == destination.Topic && isPattern(subDest.Name):
			m.Destination = destination.Destination{Kind: destination.Topic, Name: subject}
			routingKey = true
		case subject == subDest.Name:
			routingKey = true
		}
	}
	if !routingKey {
		m.Type = subject
	}
	if len(in.ApplicationProperties) > 0 {
		names := make([]string, 0, len(in.ApplicationProperties))
		for k := range in.ApplicationProperties {
			names = append(names, k)
		}
		// AMQP's map has no order; sorted names keep deliveries deterministic.
		sort.Strings(names)
		m.Props = make([]transport.Property, 0, len(names))
		for _, k := range names {
			v, ok := propFromAMQP(in.ApplicationProperties[k])
			if !ok {
				continue
			}
			m.Props = append(m.Props, transport.Property{Name: k, Value: v})
		}
	}
	switch {
	case len(in.Data) == 1:
		m.Bytes = true
		m.Body = in.Data[0]
	case len(in.Data) > 1:
		m.Bytes = true
		for _, d := range in.Data {
			m.Body = append(m.Body, d...)
		}
	case in.Value != nil:
		switch v := in.Value.(type) {
		case string:
			m.Body = []byte(v)
		case []byte:
			m.Bytes = true
			m.Body = v
		default:
			m.Body = []byte(fmt.Sprint(v))
		}
	case in.Sequence != nil:
		m.Body = []byte(fmt.Sprint(in.Sequence))
	default:
		// No body section: an empty binary body (what RabbitMQ's data section
		// of an empty 0-9-1 payload also gives).
		m.Bytes = true
	}
	if m.Body == nil {
		m.Body = []byte{}
	}
	return m
}

func isPattern(name string) bool {
	return hasWord(name, "*") || hasWord(name, ">") || hasWord(name, "#")
}

func hasWord(name, w string) bool {
	start := 0
	for i := 0; i <= len(name); i++ {
		if i == len(name) || name[i] == '.' {
			if name[start:i] == w {
				return true
			}
			start = i + 1
		}
	}
	return false
}

// idString renders an AMQP message-id or correlation-id (string, uint64, UUID or binary).
func idString(v any) string {
	switch id := v.(type) {
	case nil:
		return ""
	case string:
		return id
	case uint64:
		return strconv.FormatUint(id, 10)
	case []byte:
		return hex.EncodeToString(id)
	case amqp.UUID:
		return id.String()
	}
	return fmt.Sprint(v)
}

// propFromAMQP maps an application-property value to the seam's types; nulls
// are dropped, unsigned and other simple types become the nearest signed or string form.
func propFromAMQP(v any) (any, bool) {
	switch x := v.(type) {
	case nil:
		return nil, false
	case string, bool, int8, int16, int32, int64, float32, float64, []byte:
		return v, true
	case uint8:
		return int16(x), true
	case uint16:
		return int32(x), true
	case uint32:
		return int64(x), true
	case uint64:
		if x <= math.MaxInt64 {
			return int64(x), true
		}
		return strconv.FormatUint(x, 10), true
	case int:
		return int64(x), true
	case time.Time:
		return x.UnixMilli(), true
	case amqp.UUID:
		return x.String(), true
	case amqp.Symbol:
		return string(x), true
	}
	return fmt.Sprint(v), true
}
