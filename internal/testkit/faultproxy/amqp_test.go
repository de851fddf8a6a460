package faultproxy

import (
	"bytes"
	"encoding/binary"
	"io"
	"strings"
	"testing"
	"time"
)

var amqpHeader = []byte("AMQP\x00\x01\x00\x00")

// amqpFrame encodes an AMQP 1.0 frame on channel ch with body (part 2 §2.3.1).
func amqpFrame(ch uint16, body []byte) []byte {
	b := make([]byte, 8, 8+len(body))
	binary.BigEndian.PutUint32(b, uint32(8+len(body)))
	b[4], b[5] = 2, 0
	binary.BigEndian.PutUint16(b[6:], ch)
	return append(b, body...)
}

// performative encodes a described list with descriptor code and fields (each
// already encoded), followed by payload.
func performative(code byte, payload []byte, fields ...[]byte) []byte {
	var list []byte
	for _, f := range fields {
		list = append(list, f...)
	}
	b := []byte{0x00, 0x53, code, 0xc0, byte(len(list) + 1), byte(len(fields))}
	return append(append(b, list...), payload...)
}

func smalluint(v byte) []byte { return []byte{0x52, v} }

var (
	amqpTrue  = []byte{0x41}
	amqpFalse = []byte{0x42}
	// accepted is the described accepted outcome with an empty list (part 3 §3.4.2).
	accepted = []byte{0x00, 0x53, 0x24, 0x45}
)

func transferFrame(handle, id byte) []byte {
	return amqpFrame(1, performative(0x14, []byte("message payload"),
		smalluint(handle), smalluint(id), []byte{0xa0, 1, id}, []byte{0x43}, amqpFalse))
}

func dispositionFrame(first, last byte) []byte {
	return amqpFrame(1, performative(0x15, nil, amqpTrue, smalluint(first), smalluint(last), amqpTrue, accepted))
}

func TestAMQPFramesAreReadAndPassedUnchanged(t *testing.T) {
	p, c, s := pair(t)
	var seen []Frame
	p.CutWhen(func(f Frame) Action {
		seen = append(seen, f)
		return Pass
	})
	in := append(append(append([]byte{}, amqpHeader...), transferFrame(0, 7)...), amqpFrame(0, nil)...)
	go c.Write(in)
	got := make([]byte, len(in))
	s.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(s, got); err != nil || !bytes.Equal(got, in) {
		t.Fatalf("got %q, %v; want %q", got, err, in)
	}
	var cmds []string
	for _, f := range seen {
		cmds = append(cmds, f.Command)
	}
	if strings.Join(cmds, ",") != "AMQP,TRANSFER," {
		t.Fatalf("frames seen %q, want AMQP, TRANSFER and an empty one", cmds)
	}
	tr := seen[1]
	if tr.Get("channel") != "1" || tr.Get("handle") != "0" || tr.Get("delivery-id") != "7" || tr.Get("settled") != "false" || tr.Get("delivery-tag") != "07" {
		t.Fatalf("transfer read as %v", tr.Header)
	}
}

func TestAMQPCutBeforeDisposition(t *testing.T) {
	p, c, s := pair(t)
	p.CutWhen(func(f Frame) Action {
		if f.Dir == ToClient && f.Command == AMQPDisposition && f.Get("last") == "7" {
			if f.Get("role") != "receiver" || f.Get("first") != "5" || f.Get("settled") != "true" || f.Get("state") != "accepted" {
				t.Errorf("disposition read as %v", f.Header)
			}
			return CutBefore
		}
		return Pass
	})
	c.Write(append(append([]byte{}, amqpHeader...), transferFrame(0, 7)...))
	got := make([]byte, len(amqpHeader)+len(transferFrame(0, 7)))
	s.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(s, got); err != nil {
		t.Fatal(err)
	}
	out := append(append(append([]byte{}, amqpHeader...), dispositionFrame(0, 4)...), dispositionFrame(5, 7)...)
	s.Write(out)
	want := len(amqpHeader) + len(dispositionFrame(0, 4))
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	b, err := io.ReadAll(c)
	if len(b) != want || err != nil && !strings.Contains(err.Error(), "reset") {
		t.Fatalf("client got %d bytes then %v; want %d (the header and the first disposition) then the end", len(b), err, want)
	}
	if p.Cuts() != 1 || p.Seen(ToClient, AMQPDisposition) != 2 || p.Seen(ToServer, AMQPTransfer) != 1 {
		t.Fatalf("cuts %d, dispositions seen %d, transfers %d", p.Cuts(), p.Seen(ToClient, AMQPDisposition), p.Seen(ToServer, AMQPTransfer))
	}
}

func TestAMQPGarbageAfterHeaderGoesRaw(t *testing.T) {
	_, c, s := pair(t)
	in := append(append([]byte{}, amqpHeader...), []byte("\x00\x00\x00\x03junk that is no frame")...)
	go c.Write(in)
	got := make([]byte, len(in))
	s.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(s, got); err != nil || !bytes.Equal(got, in) {
		t.Fatalf("got %q, %v; want %q", got, err, in)
	}
}
