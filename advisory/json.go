package advisory

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// XStream/Jettison JSON is loosely typed: fields are omitted when null, and
// depending on the driver's configuration numbers and booleans can be
// rendered as strings ("priority":"-3"). The helpers below read fields
// leniently but report a descriptive error for values of the wrong shape.

// isNull reports whether raw is absent or JSON null.
func isNull(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || string(t) == "null"
}

// firstByte returns the first non-space byte of raw, or 0.
func firstByte(raw json.RawMessage) byte {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 {
		return 0
	}
	return t[0]
}

// object decodes raw as a JSON object named name.
func object(raw json.RawMessage, name string) (map[string]json.RawMessage, error) {
	if firstByte(raw) != '{' {
		return nil, fmt.Errorf("%s: want an object, got %s", name, Trim(raw, 80))
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return obj, nil
}

// fields reads scalar fields of one object and remembers the first error, so
// that a sequence of reads needs one check.
type fields struct {
	obj    map[string]json.RawMessage
	prefix string // for error messages, e.g. "consumerId."
	err    error
}

// scalar returns the text of a scalar field: a string's value, or a number's
// or boolean's literal. ok is false when the field is absent or null.
func (f *fields) scalar(key string) (text string, ok bool) {
	raw, present := f.obj[key]
	if f.err != nil || !present || isNull(raw) {
		return "", false
	}
	switch c := firstByte(raw); {
	case c == '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			f.fail(key, "%v", err)
			return "", false
		}
		return s, true
	case c == '{' || c == '[':
		f.fail(key, "want a scalar, got %s", Trim(raw, 80))
		return "", false
	default:
		return string(bytes.TrimSpace(raw)), true
	}
}

// fail records the first error.
func (f *fields) fail(key, format string, args ...any) {
	if f.err == nil {
		f.err = fmt.Errorf("%s%s: %s", f.prefix, key, fmt.Sprintf(format, args...))
	}
}

// string reads a string field; numbers and booleans are taken as their
// literal text.
func (f *fields) string(key string) (string, bool) {
	s, ok := f.scalar(key)
	return s, ok
}

// int64 reads an integer field given as a JSON number or a string. Integral
// values written as floats ("1.0", 1e3) are accepted.
func (f *fields) int64(key string) (int64, bool) {
	s, ok := f.scalar(key)
	if !ok {
		return 0, false
	}
	s = strings.TrimSpace(s)
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return n, true
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || v != math.Trunc(v) || v < math.MinInt64 || v >= math.MaxInt64 {
		f.fail(key, "want an integer, got %q", s)
		return 0, false
	}
	return int64(v), true
}

// int reads an integer field that must fit in 32 bits (Java int and byte
// fields); absent fields read as 0.
func (f *fields) int(key string) int {
	n, ok := f.int64(key)
	if !ok {
		return 0
	}
	if n < math.MinInt32 || n > math.MaxInt32 {
		f.fail(key, "%d out of range", n)
		return 0
	}
	return int(n)
}

// bool reads a boolean field given as true/false or "true"/"false"; absent
// fields read as false.
func (f *fields) bool(key string) bool {
	s, ok := f.scalar(key)
	if !ok {
		return false
	}
	v, err := strconv.ParseBool(strings.TrimSpace(s))
	if err != nil {
		f.fail(key, "want a boolean, got %q", s)
		return false
	}
	return v
}
