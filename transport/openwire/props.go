package openwire

import (
	"fmt"
	"math"

	"github.com/brokernet/brokernet/transport"
)

// Type codes of MarshallingSupport's primitive map, the encoding of a
// message's marshalledProperties and of a MapMessage body: an int32 entry
// count (-1 for null), then per entry a writeUTF name, a type byte and the
// value.
const (
	ptNull      = 0
	ptBool      = 1
	ptByte      = 2
	ptChar      = 3
	ptShort     = 4
	ptInt       = 5
	ptLong      = 6
	ptDouble    = 7
	ptFloat     = 8
	ptString    = 9  // writeUTF: u16 length
	ptBytes     = 10 // i32 length
	ptMap       = 11
	ptList      = 12
	ptBigString = 13 // i32 length, modified UTF-8
)

// maxMapEntries bounds the entries of one primitive map or list; each entry
// takes at least two bytes, so a real one never comes near within the frame
// bound.
const maxMapEntries = 1 << 20

// decodeProps decodes a marshalled property map. Values become string, bool,
// int8, uint16 (char), int16, int32, int64, float32, float64, []byte, nil,
// and for nested maps and lists []transport.Property and []any (ActiveMQ
// allows those as object properties; JMS does not).
// Names are interned in ns (nil: none).
func decodeProps(p []byte, ns names) ([]transport.Property, error) {
	if p == nil {
		return nil, nil
	}
	r := &reader{b: p, names: ns}
	props := r.primitiveMap()
	if r.err != nil {
		return nil, fmt.Errorf("decoding properties: %w", r.err)
	}
	return props, nil
}

func (r *reader) primitiveMap() []transport.Property {
	n := int(r.i32())
	if n < 0 || r.err != nil {
		return nil
	}
	if n > maxMapEntries || n > len(r.b)-r.off {
		r.fail("map of %d entries", n)
		return nil
	}
	r.depth++
	defer func() { r.depth-- }()
	if r.depth > maxNesting {
		r.fail("maps nested too deeply")
		return nil
	}
	props := make([]transport.Property, 0, n)
	for i := 0; i < n && r.err == nil; i++ {
		name := r.name()
		props = append(props, transport.Property{Name: name, Value: r.primitive()})
	}
	return props
}

func (r *reader) primitive() any {
	switch t := r.u8(); t {
	case ptNull:
		return nil
	case ptBool:
		return r.bool()
	case ptByte:
		return int8(r.u8())
	case ptChar:
		return uint16(r.u16())
	case ptShort:
		return r.i16()
	case ptInt:
		return r.i32()
	case ptLong:
		return r.i64()
	case ptDouble:
		return math.Float64frombits(uint64(r.i64()))
	case ptFloat:
		return math.Float32frombits(uint32(r.i32()))
	case ptString:
		return r.utf()
	case ptBigString:
		n := r.i32()
		return decodeMUTF8(r.take(int(n)))
	case ptBytes:
		n := r.i32()
		p := r.take(int(n))
		if p == nil {
			return nil
		}
		return append(make([]byte, 0, len(p)), p...)
	case ptMap:
		return r.primitiveMap()
	case ptList:
		n := int(r.i32())
		if n < 0 || n > maxMapEntries || n > len(r.b)-r.off {
			r.fail("list of %d entries", n)
			return nil
		}
		r.depth++
		defer func() { r.depth-- }()
		if r.depth > maxNesting {
			r.fail("lists nested too deeply")
			return nil
		}
		list := make([]any, 0, n)
		for i := 0; i < n && r.err == nil; i++ {
			list = append(list, r.primitive())
		}
		return list
	default:
		if r.err == nil {
			r.fail("unknown property type %d", t)
		}
		return nil
	}
}

// encodeProps marshals props as a primitive map. Values of other types than
// decodeProps produces (int, uint8, …) are converted to the nearest Java
// type; anything else is an error naming the property.
func encodeProps(props []transport.Property) ([]byte, error) {
	w := &writer{b: make([]byte, 0, 4+48*len(props))} // names and values are short as a rule
	if err := w.primitiveMap(props, 0); err != nil {
		return nil, err
	}
	return w.b, nil
}

func (w *writer) primitiveMap(props []transport.Property, depth int) error {
	if depth > maxNesting {
		return fmt.Errorf("property maps nested too deeply")
	}
	w.i32(int32(len(props)))
	for _, p := range props {
		if !fitsUTF(p.Name) {
			return fmt.Errorf("property name %.40q…: longer than 65535 bytes", p.Name)
		}
		w.utf(p.Name)
		if err := w.primitive(p.Value, depth); err != nil {
			return fmt.Errorf("property %q: %w", p.Name, err)
		}
	}
	return nil
}

func (w *writer) primitive(v any, depth int) error {
	switch v := v.(type) {
	case nil:
		w.u8(ptNull)
	case bool:
		w.u8(ptBool)
		w.bool(v)
	case int8:
		w.u8(ptByte)
		w.u8(byte(v))
	case uint8:
		w.u8(ptShort)
		w.i16(int16(v))
	case uint16:
		w.u8(ptChar)
		w.i16(int16(v))
	case int16:
		w.u8(ptShort)
		w.i16(v)
	case int32:
		w.u8(ptInt)
		w.i32(v)
	case int:
		if v >= math.MinInt32 && v <= math.MaxInt32 {
			w.u8(ptInt)
			w.i32(int32(v))
		} else {
			w.u8(ptLong)
			w.i64(int64(v))
		}
	case int64:
		w.u8(ptLong)
		w.i64(v)
	case float32:
		w.u8(ptFloat)
		w.i32(int32(math.Float32bits(v)))
	case float64:
		w.u8(ptDouble)
		w.i64(int64(math.Float64bits(v)))
	case string:
		// MarshallingSupport.marshalString: writeUTF below Short.MAX_VALUE/4
		// UTF-16 units, the int-length form above.
		if shortUTF16(v) {
			w.u8(ptString)
			w.utf(v)
		} else {
			p := encodeMUTF8(v)
			w.u8(ptBigString)
			w.i32(int32(len(p)))
			w.b = append(w.b, p...)
		}
	case []byte:
		w.u8(ptBytes)
		w.i32(int32(len(v)))
		w.b = append(w.b, v...)
	case []transport.Property:
		w.u8(ptMap)
		return w.primitiveMap(v, depth+1)
	case []any:
		if depth > maxNesting {
			return fmt.Errorf("lists nested too deeply")
		}
		w.u8(ptList)
		w.i32(int32(len(v)))
		for _, e := range v {
			if err := w.primitive(e, depth+1); err != nil {
				return err
			}
		}
	default:
		return fmt.Errorf("value of type %T cannot be an OpenWire property", v)
	}
	return nil
}

// shortUTF16 reports whether s has fewer than Short.MAX_VALUE/4 UTF-16
// units as Java holds it (an invalid UTF-8 byte is one U+FFFD), without
// converting it: every string property of every message sent is measured.
func shortUTF16(s string) bool {
	const limit = math.MaxInt16 / 4
	if len(s) < limit {
		return true // UTF-8 takes at least as many bytes as UTF-16 units
	}
	n := 0
	for _, r := range s {
		if n++; r >= 0x10000 {
			n++
		}
		if n >= limit {
			return false
		}
	}
	return true
}
