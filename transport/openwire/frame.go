package openwire

import (
	"encoding/binary"
	"fmt"
	"io"
	"sync"
)

// DefaultMaxFrameSize bounds a frame read from the broker (and one written):
// ActiveMQ's own default maxFrameSize is 100 MiB (OpenWireFormat), far more
// than a bridge should buffer; 64 MiB keeps a hostile or broken peer from
// making brokernet allocate without bound. The URI option
// wireFormat.maxFrameSize changes it.
const DefaultMaxFrameSize = 64 << 20

// With sizePrefixDisabled false (negotiated; brokernet never disables it)
// every frame is an int32 size, then the data type byte and the encoded
// body (OpenWireFormat.marshal). The size makes unknown commands
// skippable.

// encodeFrame marshals c into a complete frame in loose encoding.
func encodeFrame(c dataStructure) []byte { return encodeFrameAs(c, false) }

// encodeFrameAs marshals c in loose or tight encoding. A tight frame is the
// size, the type, the BooleanStream, then the data (OpenWireFormat.marshal).
func encodeFrameAs(c dataStructure, tight bool) []byte {
	if !tight {
		w := &writer{b: make([]byte, 5, 256)}
		w.b[4] = c.dsType()
		c.marshal(w)
		binary.BigEndian.PutUint32(w.b, uint32(len(w.b)-4))
		return w.b
	}
	// The marshalled body is copied behind the bit stream, so its buffer is
	// scratch: pooled, it is not grown afresh (256, 512, 1,024, … bytes) for
	// every message.
	w := tightWriters.Get().(*writer)
	w.b, w.bits, w.nbit = w.b[:0], w.bits[:0], 0
	c.marshal(w)
	out := newFrame(8 + len(w.bits) + len(w.b))
	out[4] = c.dsType()
	out = w.appendBits(out)
	out = append(out, w.b...)
	binary.BigEndian.PutUint32(out, uint32(len(out)-4))
	if cap(w.b) <= 1<<20 {
		tightWriters.Put(w) // a rare huge message's buffer is not kept
	}
	return out
}

var tightWriters = sync.Pool{New: func() any { return &writer{b: make([]byte, 0, 4096), tight: true} }}

// frames are buffers that encodeFrameAs fills and the writer gives back
// (releaseFrame) once it copied them into its buffered writer, so that a
// forwarded message costs no fresh buffer of its size. A channel rather than a
// sync.Pool: a slice goes in and out without an allocation, and what it keeps
// is bounded (cap(frames) × maxPooledFrame at worst).
var frames = make(chan []byte, 256)

// maxPooledFrame is the largest buffer kept for reuse.
const maxPooledFrame = 64 << 10

// newFrame returns a buffer of length 5 (size and type) and capacity at
// least size.
func newFrame(size int) []byte {
	select {
	case b := <-frames:
		if cap(b) >= size {
			return b[:5]
		}
	default:
	}
	return make([]byte, 5, size)
}

// releaseFrame gives back a frame's buffer that nothing refers to any more.
func releaseFrame(b []byte) {
	if cap(b) == 0 || cap(b) > maxPooledFrame {
		return
	}
	select {
	case frames <- b:
	default:
	}
}

// readFrame reads one frame's payload (type byte and body) from r.
func readFrame(r io.Reader, buf []byte, max int) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := int(int32(binary.BigEndian.Uint32(hdr[:])))
	if n < 1 || n > max {
		return nil, fmt.Errorf("frame size %d outside 1..%d (wireFormat.maxFrameSize)", n, max)
	}
	if cap(buf) < n {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if _, err := io.ReadFull(r, buf); err != nil {
		return nil, err
	}
	return buf, nil
}

// errUnknownCommand is returned by decodeCommand for a well-formed frame of
// a command type brokernet does not read; the caller skips it.
type errUnknownCommand byte

func (e errUnknownCommand) Error() string { return fmt.Sprintf("unknown command type %d", byte(e)) }

// decodeCommand decodes a loose frame payload. It never panics; a malformed
// frame is an error naming the offset. traces says stack traces were
// negotiated.
func decodeCommand(p []byte, traces bool) (dataStructure, error) {
	return decodeCommandAs(p, traces, false, nil)
}

// decodeCommandAs decodes a frame payload in loose or tight encoding,
// interning identifiers in ns (nil: none).
func decodeCommandAs(p []byte, traces, tight bool, ns names) (dataStructure, error) {
	if len(p) == 0 {
		return nil, fmt.Errorf("empty frame")
	}
	ds := newDataStructure(p[0])
	if ds == nil {
		return nil, errUnknownCommand(p[0])
	}
	r := &reader{b: p, off: 1, traces: traces, tight: tight, names: ns}
	if tight {
		r.bitsFrom()
	}
	ds.unmarshal(r)
	if r.err != nil {
		return nil, fmt.Errorf("decoding command type %d: %w", p[0], r.err)
	}
	return ds, nil
}
