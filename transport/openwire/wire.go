package openwire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"unicode/utf16"
)

// The primitives of OpenWire's loose encoding are those of Java's
// DataOutput: big-endian integers, one byte per boolean, and writeUTF strings
// (an unsigned 16-bit length and Java's modified UTF-8). Optional values are
// preceded by a boolean "present" flag (BaseDataStreamMarshaller.looseMarshal*).

// errShort is returned for a frame that ends in the middle of a value.
var errShort = errors.New("frame truncated")

// maxNesting bounds how deeply nested objects and property maps may be, so a
// hostile frame cannot exhaust the stack.
const maxNesting = 16

// reader decodes one frame. The first error sticks; later reads return zero
// values, so a sequence of reads needs one check at the end.
type reader struct {
	b     []byte
	off   int
	err   error
	depth int
	// traces says stackTraceEnabled was negotiated: exceptions then carry
	// their stack traces and causes.
	traces bool
}

func (r *reader) stackTraces() bool { return r.traces }

func (r *reader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf(format+" at offset %d", append(args, r.off)...)
	}
}

func (r *reader) take(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > len(r.b)-r.off {
		if r.err == nil {
			r.err = fmt.Errorf("%w: need %d bytes at offset %d, have %d", errShort, n, r.off, len(r.b)-r.off)
		}
		return nil
	}
	p := r.b[r.off : r.off+n]
	r.off += n
	return p
}

func (r *reader) u8() byte {
	p := r.take(1)
	if p == nil {
		return 0
	}
	return p[0]
}

func (r *reader) bool() bool { return r.u8() != 0 }

func (r *reader) i16() int16 {
	p := r.take(2)
	if p == nil {
		return 0
	}
	return int16(binary.BigEndian.Uint16(p))
}

func (r *reader) u16() int {
	p := r.take(2)
	if p == nil {
		return 0
	}
	return int(binary.BigEndian.Uint16(p))
}

func (r *reader) i32() int32 {
	p := r.take(4)
	if p == nil {
		return 0
	}
	return int32(binary.BigEndian.Uint32(p))
}

func (r *reader) i64() int64 {
	p := r.take(8)
	if p == nil {
		return 0
	}
	return int64(binary.BigEndian.Uint64(p))
}

// utf reads a DataInput.readUTF string.
func (r *reader) utf() string {
	n := r.u16()
	return decodeMUTF8(r.take(n))
}

// str reads an optional string (looseUnmarshalString); absent reads as "".
func (r *reader) str() string {
	if !r.bool() {
		return ""
	}
	return r.utf()
}

// bytes reads an optional int-length byte sequence; absent reads as nil.
// The result is a copy, so it outlives the frame buffer.
func (r *reader) bytes() []byte {
	if !r.bool() {
		return nil
	}
	n := r.i32()
	p := r.take(int(n))
	if p == nil {
		return nil
	}
	return append(make([]byte, 0, len(p)), p...)
}

// throwable reads a marshalled Java exception (looseUnmarshalThrowable) as
// "class: message". Stack traces are present only when stackTraceEnabled was
// negotiated; brokernet never asks for them, but reads them if present.
func (r *reader) throwable(stackTraces bool) string {
	if r.depth > maxNesting {
		r.fail("exception causes nested too deeply")
		return ""
	}
	if !r.bool() {
		return ""
	}
	class := r.str()
	msg := r.str()
	if stackTraces {
		n := int(r.i16())
		for i := 0; i < n && r.err == nil; i++ {
			r.str()
			r.str()
			r.str()
			r.i32()
		}
		r.depth++
		r.throwable(true)
		r.depth--
	}
	if msg == "" {
		return class
	}
	return class + ": " + msg
}

// writer encodes one frame.
type writer struct{ b []byte }

func (w *writer) u8(v byte) { w.b = append(w.b, v) }

func (w *writer) bool(v bool) {
	if v {
		w.u8(1)
	} else {
		w.u8(0)
	}
}

func (w *writer) i16(v int16) { w.b = binary.BigEndian.AppendUint16(w.b, uint16(v)) }
func (w *writer) i32(v int32) { w.b = binary.BigEndian.AppendUint32(w.b, uint32(v)) }
func (w *writer) i64(v int64) { w.b = binary.BigEndian.AppendUint64(w.b, uint64(v)) }

// utf writes a DataOutput.writeUTF string. Java refuses strings longer than
// 65535 encoded bytes; callers check outside data with fitsUTF first, and
// this writer cuts the rest as a last resort rather than corrupt the frame.
func (w *writer) utf(s string) {
	p := encodeMUTF8(s)
	if len(p) > math.MaxUint16 {
		p = p[:math.MaxUint16]
	}
	w.b = binary.BigEndian.AppendUint16(w.b, uint16(len(p)))
	w.b = append(w.b, p...)
}

// str writes an optional string; "" is written as absent (null), as the Java
// client does for unset fields.
func (w *writer) str(s string) {
	w.bool(s != "")
	if s != "" {
		w.utf(s)
	}
}

// bytes writes an optional byte sequence; nil is absent.
func (w *writer) bytes(p []byte) {
	w.bool(p != nil)
	if p != nil {
		w.i32(int32(len(p)))
		w.b = append(w.b, p...)
	}
}

// fitsUTF reports whether s can be written with writeUTF.
func fitsUTF(s string) bool { return len(encodeMUTF8(s)) <= math.MaxUint16 }

// encodeMUTF8 encodes s in Java's modified UTF-8: U+0000 as two bytes, and
// characters outside the BMP as two three-byte surrogates.
func encodeMUTF8(s string) []byte {
	ascii := true
	for i := 0; i < len(s); i++ {
		if s[i] == 0 || s[i] >= 0x80 {
			ascii = false
			break
		}
	}
	if ascii {
		return []byte(s)
	}
	out := make([]byte, 0, len(s)+8)
	for _, c := range utf16.Encode([]rune(s)) {
		switch {
		case c != 0 && c < 0x80:
			out = append(out, byte(c))
		case c < 0x800:
			out = append(out, 0xc0|byte(c>>6), 0x80|byte(c&0x3f))
		default:
			out = append(out, 0xe0|byte(c>>12), 0x80|byte((c>>6)&0x3f), 0x80|byte(c&0x3f))
		}
	}
	return out
}

// decodeMUTF8 decodes Java's modified UTF-8 leniently: malformed sequences
// become U+FFFD instead of failing the frame.
func decodeMUTF8(p []byte) string {
	ascii := true
	for _, c := range p {
		if c == 0 || c >= 0x80 {
			ascii = false
			break
		}
	}
	if ascii {
		return string(p)
	}
	units := make([]uint16, 0, len(p))
	for i := 0; i < len(p); {
		c := p[i]
		switch {
		case c < 0x80:
			units = append(units, uint16(c))
			i++
		case c&0xe0 == 0xc0 && i+1 < len(p) && p[i+1]&0xc0 == 0x80:
			units = append(units, uint16(c&0x1f)<<6|uint16(p[i+1]&0x3f))
			i += 2
		case c&0xf0 == 0xe0 && i+2 < len(p) && p[i+1]&0xc0 == 0x80 && p[i+2]&0xc0 == 0x80:
			units = append(units, uint16(c&0x0f)<<12|uint16(p[i+1]&0x3f)<<6|uint16(p[i+2]&0x3f))
			i += 3
		default:
			units = append(units, 0xfffd)
			i++
		}
	}
	return string(utf16.Decode(units))
}
