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
	// tight says the frame is in tight encoding: booleans (and the presence
	// and size flags of optional values) come from bits, read in field order.
	tight bool
	bits  []byte
	bit   int
	// names interns identifiers (nil: none).
	names names
}

// names keeps the strings a connection's frames repeat in every message:
// connection ids, destination and property names. Decoding one is then a
// map lookup instead of an allocation. Only the connection's reader
// goroutine uses it; a nil names interns nothing.
type names map[string]string

// maxNames bounds a names; one that fills up starts over.
const maxNames = 1024

// get returns p decoded, the interned copy when p is ASCII.
func (n names) get(p []byte) string {
	if n == nil || !isASCII(p) {
		return decodeMUTF8(p)
	}
	if s, ok := n[string(p)]; ok {
		return s
	}
	if len(n) >= maxNames {
		clear(n)
	}
	s := string(p)
	n[s] = s
	return s
}

// bitsFrom reads a marshalled BooleanStream (BooleanStream.unmarshal): a
// length byte below 64, or 0xC0 and a length byte, or 0x80 and a u16
// length, then that many bytes of bits, least significant first.
func (r *reader) bitsFrom() {
	n := int(r.u8())
	switch n {
	case 0xc0:
		n = int(r.u8())
	case 0x80:
		n = r.u16()
	}
	r.bits = r.take(n)
	r.bit = 0
}

func (r *reader) nextBit() bool {
	if r.err != nil {
		return false
	}
	if r.bit >= 8*len(r.bits) {
		r.fail("boolean stream of %d bytes exhausted", len(r.bits))
		return false
	}
	v := r.bits[r.bit/8]>>(r.bit%8)&1 != 0
	r.bit++
	return v
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

func (r *reader) bool() bool {
	if r.tight {
		return r.nextBit()
	}
	return r.u8() != 0
}

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

// i64 reads a long field. Tight encoding spends two bits to say whether it
// is 0 or fits in an unsigned 16 or 32 bits (tightMarshalLong1).
func (r *reader) i64() int64 {
	if r.tight {
		switch hi, lo := r.nextBit(), r.nextBit(); {
		case !hi && !lo:
			return 0
		case !hi:
			return int64(uint16(r.i16()))
		case !lo:
			return int64(uint32(r.i32()))
		}
	}
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

// name is utf for an identifier: interned (names).
func (r *reader) name() string {
	n := r.u16()
	return r.names.get(r.take(n))
}

// optName is str for an identifier: interned (names).
func (r *reader) optName() string {
	if !r.strPresent() {
		return ""
	}
	return r.name()
}

// str reads an optional string (looseUnmarshalString); absent reads as "".
func (r *reader) str() string {
	if !r.strPresent() {
		return ""
	}
	return r.utf()
}

// strPresent reads the flags before an optional string and reports whether
// one follows. Tight encoding adds a bit saying the string is ASCII, which
// changes nothing for the reader: ASCII is its own modified UTF-8.
func (r *reader) strPresent() bool {
	if !r.bool() {
		return false
	}
	if r.tight {
		r.nextBit()
	}
	return true
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

// writer encodes one frame. In tight encoding booleans go to a separate
// bit stream (the BooleanStream written before the data).
type writer struct {
	b     []byte
	tight bool
	bits  []byte
	nbit  int
}

func (w *writer) putBit(v bool) {
	if w.nbit%8 == 0 {
		w.bits = append(w.bits, 0)
	}
	if v {
		w.bits[w.nbit/8] |= 1 << (w.nbit % 8)
	}
	w.nbit++
}

// appendBits appends the marshalled BooleanStream to p.
func (w *writer) appendBits(p []byte) []byte {
	n := len(w.bits)
	switch {
	case n < 64:
		p = append(p, byte(n))
	case n < 256:
		p = append(p, 0xc0, byte(n))
	default:
		p = append(p, 0x80, byte(n>>8), byte(n))
	}
	return append(p, w.bits...)
}

func (w *writer) u8(v byte) { w.b = append(w.b, v) }

func (w *writer) bool(v bool) {
	if w.tight {
		w.putBit(v)
		return
	}
	if v {
		w.u8(1)
	} else {
		w.u8(0)
	}
}

func (w *writer) i16(v int16) { w.b = binary.BigEndian.AppendUint16(w.b, uint16(v)) }
func (w *writer) i32(v int32) { w.b = binary.BigEndian.AppendUint32(w.b, uint32(v)) }

// i64 writes a long field; see reader.i64 for the tight form.
func (w *writer) i64(v int64) {
	if w.tight {
		switch u := uint64(v); {
		case u == 0:
			w.putBit(false)
			w.putBit(false)
			return
		case u&^0xffff == 0:
			w.putBit(false)
			w.putBit(true)
			w.i16(int16(u))
			return
		case u&^0xffffffff == 0:
			w.putBit(true)
			w.putBit(false)
			w.i32(int32(u))
			return
		}
		w.putBit(true)
		w.putBit(true)
	}
	w.b = binary.BigEndian.AppendUint64(w.b, uint64(v))
}

// utf writes a DataOutput.writeUTF string. Java refuses strings longer than
// 65535 encoded bytes; callers check outside data with fitsUTF first, and
// this writer cuts the rest as a last resort rather than corrupt the frame.
func (w *writer) utf(s string) {
	if len(s) <= math.MaxUint16 && isASCII(s) {
		// The common case, written without a copy.
		w.b = binary.BigEndian.AppendUint16(w.b, uint16(len(s)))
		w.b = append(w.b, s...)
		return
	}
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
		if w.tight {
			w.putBit(isASCII(s))
		}
		w.utf(s)
	}
}

// isASCII reports whether s is all U+0001..U+007F (tightMarshalString1's
// isOnlyAscii): the same bytes in modified UTF-8 and in UTF-8.
// Bodies pass through it twice per message, so it tests eight bytes a word:
// x&hi finds a byte of 0x80 or more; with none, (x-lo)&^x&hi is non-zero
// exactly when some byte is 0.
func isASCII[T string | []byte](s T) bool {
	const lo, hi = 0x0101010101010101, 0x8080808080808080
	i := 0
	for ; i+8 <= len(s); i += 8 {
		x := uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
			uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
		if (x|(x-lo)&^x)&hi != 0 {
			return false
		}
	}
	for ; i < len(s); i++ {
		if s[i] == 0 || s[i] >= 0x80 {
			return false
		}
	}
	return true
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
func fitsUTF(s string) bool {
	if len(s) <= math.MaxUint16 && isASCII(s) {
		return true // ASCII encodes byte for byte: no need to encode it
	}
	return len(encodeMUTF8(s)) <= math.MaxUint16
}

// encodeMUTF8 encodes s in Java's modified UTF-8: U+0000 as two bytes, and
// characters outside the BMP as two three-byte surrogates.
func encodeMUTF8(s string) []byte {
	if isASCII(s) {
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
	if isASCII(p) {
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

// decodeMUTF8Body is decodeMUTF8 for a message body: p itself when it is
// ASCII (no copy; the caller owns p), a UTF-8 copy otherwise.
func decodeMUTF8Body(p []byte) []byte {
	if isASCII(p) {
		return p
	}
	return []byte(decodeMUTF8(p))
}
