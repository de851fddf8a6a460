package faultproxy

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"io"
	"strconv"
)

// The AMQP 1.0 sniffer. A connection whose first bytes are "AMQP" is read as
// AMQP 1.0 (OASIS AMQP 1.0 part 2): protocol headers ("AMQP" and four bytes,
// §2.2; a second one follows the SASL exchange, part 5 §5.3.1) and frames (a
// 4-byte big-endian size counting the whole frame, data offset in 4-byte
// words, type 0 for AMQP or 1 for SASL, channel; §2.3.1). A frame's body is a
// described list whose descriptor code names the performative (§2.7, part 5
// §5.3.3); the sniffer decodes its leading primitive fields (handles, delivery
// ids, settled flags, the outcome of a disposition) so that a rule can cut
// after a transfer before its disposition, or before the receiver's
// disposition of a delivery.

// AMQP performative names, as they appear in Frame.Command. An empty frame (the
// idle-time-out keep-alive, §2.4.5) has Command "", as a STOMP heart-beat.
const (
	AMQPHeader      = "AMQP"        // a protocol header
	AMQPOpen        = "OPEN"        // §2.7.1
	AMQPBegin       = "BEGIN"       // §2.7.2
	AMQPAttach      = "ATTACH"      // §2.7.3
	AMQPFlow        = "FLOW"        // §2.7.4
	AMQPTransfer    = "TRANSFER"    // §2.7.5
	AMQPDisposition = "DISPOSITION" // §2.7.6
	AMQPDetach      = "DETACH"      // §2.7.7
	AMQPEnd         = "END"         // §2.7.8
	AMQPClose       = "CLOSE"       // §2.7.9
)

// performatives maps descriptor codes to their name and the names of their
// leading fields (only those the sniffer reports; it stops at the first field
// it cannot decode).
var performatives = map[uint64]struct {
	name   string
	fields []string
}{
	0x10: {AMQPOpen, []string{"container-id", "hostname", "max-frame-size", "channel-max", "idle-time-out"}},
	0x11: {AMQPBegin, []string{"remote-channel", "next-outgoing-id", "incoming-window", "outgoing-window", "handle-max"}},
	0x12: {AMQPAttach, []string{"name", "handle", "role", "snd-settle-mode", "rcv-settle-mode"}},
	0x13: {AMQPFlow, []string{"next-incoming-id", "incoming-window", "next-outgoing-id", "outgoing-window", "handle", "delivery-count", "link-credit", "available", "drain", "echo"}},
	0x14: {AMQPTransfer, []string{"handle", "delivery-id", "delivery-tag", "message-format", "settled", "more"}},
	0x15: {AMQPDisposition, []string{"role", "first", "last", "settled", "state"}},
	0x16: {AMQPDetach, []string{"handle", "closed"}},
	0x17: {AMQPEnd, nil},
	0x18: {AMQPClose, nil},
	// SASL frames (part 5 §5.3.3).
	0x40: {"SASL-MECHANISMS", nil},
	0x41: {"SASL-INIT", []string{"mechanism"}},
	0x42: {"SASL-CHALLENGE", nil},
	0x43: {"SASL-RESPONSE", nil},
	0x44: {"SASL-OUTCOME", []string{"code"}},
}

// outcomes names the delivery states a disposition carries (part 3 §3.4).
var outcomes = map[uint64]string{0x23: "received", 0x24: "accepted", 0x25: "rejected", 0x26: "released", 0x27: "modified"}

var errNotAMQP = errors.New("not an amqp frame")

// maxAMQPFrame bounds a frame the sniffer buffers; larger means the stream is
// not one it understands (brokernet asks for 1 MiB frames, RabbitMQ offers at
// most its frame_max).
const maxAMQPFrame = 64 << 20

// isAMQP reports whether the stream starts with an AMQP protocol header.
func isAMQP(r *bufio.Reader) bool {
	b, err := r.Peek(4)
	return err == nil && string(b) == "AMQP"
}

// readAMQPFrame reads one protocol header or frame and returns what it says with
// its exact bytes. On errNotAMQP the bytes read so far are returned, to be passed
// on raw.
func readAMQPFrame(r *bufio.Reader) (Frame, []byte, error) {
	head, err := r.Peek(8)
	if err != nil {
		b := make([]byte, r.Buffered())
		n, _ := io.ReadFull(r, b)
		return Frame{}, b[:n], err
	}
	if string(head[:4]) == "AMQP" {
		b := make([]byte, 8)
		io.ReadFull(r, b)
		f := Frame{Command: AMQPHeader, Header: []string{"protocol-id", strconv.Itoa(int(b[4])),
			"version", strconv.Itoa(int(b[5])) + "." + strconv.Itoa(int(b[6])) + "." + strconv.Itoa(int(b[7]))}}
		return f, b, nil
	}
	size := binary.BigEndian.Uint32(head[:4])
	doff := int(head[4]) * 4
	if size < 8 || size > maxAMQPFrame || doff < 8 || doff > int(size) || head[5] > 1 {
		b := make([]byte, r.Buffered())
		n, _ := io.ReadFull(r, b)
		return Frame{}, b[:n], errNotAMQP
	}
	b := make([]byte, size)
	if n, err := io.ReadFull(r, b); err != nil {
		if err == io.ErrUnexpectedEOF {
			err = io.EOF
		}
		return Frame{}, b[:n], err
	}
	f := Frame{Header: []string{"channel", strconv.Itoa(int(binary.BigEndian.Uint16(b[6:8])))}}
	body := b[doff:]
	if len(body) == 0 {
		return f, b, nil // an empty frame: the keep-alive
	}
	d := &decoder{b: body}
	code, ok := d.descriptor()
	p, known := performatives[code]
	if !ok || !known {
		f.Command = "AMQP-UNKNOWN"
		return f, b, nil
	}
	f.Command = p.name
	n, ok := d.listHeader()
	for i := 0; ok && i < n && i < len(p.fields); i++ {
		var v string
		var present bool
		v, present, ok = d.value()
		if !ok {
			break
		}
		if !present {
			continue
		}
		if p.fields[i] == "role" {
			v = map[string]string{"false": "sender", "true": "receiver"}[v]
		}
		f.Header = append(f.Header, p.fields[i], v)
	}
	return f, b, nil
}

// decoder reads the few AMQP 1.0 encodings (part 1 §1.6) performative fields
// start with.
type decoder struct{ b []byte }

func (d *decoder) take(n int) ([]byte, bool) {
	if n < 0 || len(d.b) < n {
		return nil, false
	}
	out := d.b[:n]
	d.b = d.b[n:]
	return out, true
}

// descriptor reads a described type's constructor and numeric descriptor.
func (d *decoder) descriptor() (uint64, bool) {
	if b, ok := d.take(1); !ok || b[0] != 0x00 {
		return 0, false
	}
	v, ok := d.ulong()
	return v, ok
}

func (d *decoder) ulong() (uint64, bool) {
	c, ok := d.take(1)
	if !ok {
		return 0, false
	}
	switch c[0] {
	case 0x44: // ulong0
		return 0, true
	case 0x53: // smallulong
		b, ok := d.take(1)
		if !ok {
			return 0, false
		}
		return uint64(b[0]), true
	case 0x80: // ulong
		b, ok := d.take(8)
		if !ok {
			return 0, false
		}
		return binary.BigEndian.Uint64(b), true
	}
	return 0, false
}

// listHeader reads a list's constructor and returns its element count.
func (d *decoder) listHeader() (int, bool) {
	c, ok := d.take(1)
	if !ok {
		return 0, false
	}
	switch c[0] {
	case 0x45: // list0
		return 0, true
	case 0xc0: // list8: size, count
		b, ok := d.take(2)
		if !ok {
			return 0, false
		}
		return int(b[1]), true
	case 0xd0: // list32
		b, ok := d.take(8)
		if !ok {
			return 0, false
		}
		return int(binary.BigEndian.Uint32(b[4:])), true
	}
	return 0, false
}

// value reads one primitive value as text; present is false for null. A
// described value is read as the name of its outcome (accepted, released, …),
// after which nothing more can be read (its list is not skipped): ok is false
// on the next call.
func (d *decoder) value() (v string, present, ok bool) {
	c, ok := d.take(1)
	if !ok {
		return "", false, false
	}
	fixed := func(n int) ([]byte, bool) { return d.take(n) }
	variable := func(lenBytes int) ([]byte, bool) {
		l, ok := d.take(lenBytes)
		if !ok {
			return nil, false
		}
		n := int(l[0])
		if lenBytes == 4 {
			n = int(binary.BigEndian.Uint32(l))
		}
		return d.take(n)
	}
	switch c[0] {
	case 0x40:
		return "", false, true
	case 0x41:
		return "true", true, true
	case 0x42:
		return "false", true, true
	case 0x56:
		b, ok := fixed(1)
		return strconv.FormatBool(ok && b[0] != 0), true, ok
	case 0x43, 0x44:
		return "0", true, true
	case 0x50, 0x52, 0x53:
		b, ok := fixed(1)
		if !ok {
			return "", false, false
		}
		return strconv.Itoa(int(b[0])), true, true
	case 0x60:
		b, ok := fixed(2)
		if !ok {
			return "", false, false
		}
		return strconv.Itoa(int(binary.BigEndian.Uint16(b))), true, true
	case 0x70:
		b, ok := fixed(4)
		if !ok {
			return "", false, false
		}
		return strconv.FormatUint(uint64(binary.BigEndian.Uint32(b)), 10), true, true
	case 0x80:
		b, ok := fixed(8)
		if !ok {
			return "", false, false
		}
		return strconv.FormatUint(binary.BigEndian.Uint64(b), 10), true, true
	case 0xa0, 0xb0: // vbin8, vbin32
		b, ok := variable(map[byte]int{0xa0: 1, 0xb0: 4}[c[0]])
		return hex.EncodeToString(b), ok, ok
	case 0xa1, 0xa3, 0xb1, 0xb3: // str8, sym8, str32, sym32
		b, ok := variable(map[byte]int{0xa1: 1, 0xa3: 1, 0xb1: 4, 0xb3: 4}[c[0]])
		return string(b), ok, ok
	case 0x00:
		code, ok := d.ulong()
		d.b = nil // the described value is not skipped: stop here
		if name, known := outcomes[code]; ok && known {
			return name, true, true
		}
		return "", false, false
	}
	return "", false, false
}
