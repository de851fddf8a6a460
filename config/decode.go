package config

import (
	"cmp"
	"fmt"
	"math"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/brokernet/brokernet/internal/uriredact"
)

// decoder collects the problems and warnings of one file, and records in
// src where each value came from.
type decoder struct {
	file  string
	pos   positions
	src   *source
	errs  Errors
	warns []string
}

// table is one TOML table being decoded field by field, so that a wrong
// value is reported and decoding goes on.
type table struct {
	d *decoder
	// path is the table's resolved position path (see positions).
	path []string
	// label is Error.Table for its problems.
	label string
	// prefix is put before key names in messages, for sub-tables shown under
	// their parent's label ("gossip.").
	prefix string
	m      map[string]any
}

// at returns the position of key (and array element elem, when >= 0) in t;
// an empty key means the table header.
func (t *table) at(key string, elem int) pos {
	p := slices.Clone(t.path)
	if key != "" {
		p = append(p, key)
		if elem >= 0 {
			p = append(p, index(elem))
		}
	}
	return t.d.pos.find(p)
}

// errorf reports a problem with key (at its position).
func (t *table) errorf(key string, format string, args ...any) {
	t.report(t.at(key, -1), key, -1, format, args...)
}

// elemErrorf reports a problem with element i of the array at key.
func (t *table) elemErrorf(key string, i int, format string, args ...any) {
	t.report(t.at(key, i), key, i, format, args...)
}

func (t *table) report(p pos, key string, elem int, format string, args ...any) {
	if key != "" {
		t.d.src.failed[pathKey(append(slices.Clone(t.path), key))] = true
	}
	k := ""
	if key != "" {
		k = t.prefix + key
		if elem >= 0 {
			k += fmt.Sprintf("[%d]", elem)
		}
	}
	t.d.errs = append(t.d.errs, Error{
		File: t.d.file, Line: p.line, Col: p.col, Table: t.label, Key: k,
		Msg: fmt.Sprintf(format, args...),
	})
}

// check reports every key that is not in known, suggesting the closest known
// one, in the order the keys were written.
func (t *table) check(known []string, hints map[string]string) {
	var unknown []string
	for k := range t.m {
		if !slices.Contains(known, k) {
			unknown = append(unknown, k)
		}
	}
	slices.SortFunc(unknown, func(a, b string) int {
		pa, pb := t.at(a, -1), t.at(b, -1)
		return cmp.Or(cmp.Compare(pa.line, pb.line), cmp.Compare(pa.col, pb.col), strings.Compare(a, b))
	})
	for _, k := range unknown {
		msg := "unknown key"
		if s := suggest(k, known); s != "" {
			msg += fmt.Sprintf("; did you mean %s?", s)
		} else if h, ok := hints[k]; ok {
			msg += "; " + h
		}
		t.errorf(k, "%s", msg)
	}
}

// str returns the string at key; ok is false when it is absent or not a
// string (which is reported).
func (t *table) str(key string) (string, bool) {
	v, ok := t.m[key]
	if !ok {
		return "", false
	}
	s, ok := v.(string)
	if !ok {
		t.errorf(key, "want a string, got %s", describe(v))
	}
	return s, ok
}

// boolean sets *dst from the boolean at key, if it is one.
func (t *table) boolean(key string, dst *bool) {
	v, ok := t.m[key]
	if !ok {
		return
	}
	b, ok := v.(bool)
	if !ok {
		t.errorf(key, "want true or false, got %s", describe(v))
		return
	}
	*dst = b
}

// integer returns the integer at key; ok is false when it is absent or not an
// integer (which is reported).
func (t *table) integer(key string) (int, bool) {
	v, ok := t.m[key]
	if !ok {
		return 0, false
	}
	n, ok := v.(int64)
	if !ok {
		t.errorf(key, "want an integer, got %s", describe(v))
		return 0, false
	}
	if n < math.MinInt || n > math.MaxInt {
		t.errorf(key, "%d is out of range", n)
		return 0, false
	}
	return int(n), true
}

// number returns the integer or float at key.
func (t *table) number(key string) (float64, bool) {
	v, ok := t.m[key]
	if !ok {
		return 0, false
	}
	switch n := v.(type) {
	case int64:
		return float64(n), true
	case float64:
		return n, true
	}
	t.errorf(key, "want a number, got %s", describe(v))
	return 0, false
}

// duration returns the duration at key: a string in Go syntax ("500ms",
// "30s") or of integer milliseconds, or an integer of milliseconds, as
// ActiveMQ's URI options are written.
func (t *table) duration(key string) (time.Duration, bool) {
	v, ok := t.m[key]
	if !ok {
		return 0, false
	}
	const want = `want a duration such as "500ms" or "30s", or integer milliseconds`
	switch x := v.(type) {
	case int64:
		if x < 0 {
			t.errorf(key, "%s, got %d", "want a duration of at least 0", x)
			return 0, false
		}
		if x > int64(math.MaxInt64/time.Millisecond) {
			t.errorf(key, "%d ms is out of range", x)
			return 0, false
		}
		return time.Duration(x) * time.Millisecond, true
	case string:
		if n, err := strconv.ParseInt(x, 10, 64); err == nil && n >= 0 && n <= int64(math.MaxInt64/time.Millisecond) {
			return time.Duration(n) * time.Millisecond, true
		}
		d, err := time.ParseDuration(x)
		if err != nil {
			t.errorf(key, "%s, got %s", want, describe(v))
			return 0, false
		}
		if d < 0 {
			t.errorf(key, "want a duration of at least 0, got %s", describe(v))
			return 0, false
		}
		return d, true
	}
	t.errorf(key, "%s, got %s", want, describe(v))
	return 0, false
}

// stringList returns the array of strings at key; elements that are not strings
// are reported and left out. ok is false when key is absent or not an array.
func (t *table) stringList(key string) (vals []string, idx []int, ok bool) {
	v, ok := t.m[key]
	if !ok {
		return nil, nil, false
	}
	arr, ok := v.([]any)
	if !ok {
		t.errorf(key, "want an array of strings, got %s", describe(v))
		return nil, nil, false
	}
	for i, e := range arr {
		s, ok := e.(string)
		if !ok {
			t.elemErrorf(key, i, "want a string, got %s", describe(e))
			continue
		}
		vals = append(vals, s)
		idx = append(idx, i)
	}
	return vals, idx, true
}

// sub returns the sub-table at key, shown in messages under t's label.
func (t *table) sub(key string) (*table, bool) {
	v, ok := t.m[key]
	if !ok {
		return nil, false
	}
	m, ok := v.(map[string]any)
	if !ok {
		t.errorf(key, "want a table ([%s]), got %s", strings.Join(append(tableNames(t.path), key), "."), describe(v))
		return nil, false
	}
	return &table{d: t.d, path: append(slices.Clone(t.path), key), label: t.label, prefix: t.prefix + key + ".", m: m}, true
}

// tableNames returns the names in a resolved path, without array indexes.
func tableNames(path []string) []string {
	var out []string
	for _, p := range path {
		if !strings.HasPrefix(p, indexMark) {
			out = append(out, p)
		}
	}
	return out
}

// array returns the entries of the array of tables at key ([[key]]). A single
// [key] table is reported and returned as the only entry, so that its own
// problems are found too.
func (t *table) array(key string) []*table {
	v, ok := t.m[key]
	if !ok {
		return nil
	}
	mk := func(p []string, m map[string]any) *table {
		return &table{d: t.d, path: p, m: m}
	}
	var out []*table
	switch x := v.(type) {
	case []map[string]any:
		for i, m := range x {
			out = append(out, mk(append(slices.Clone(t.path), key, index(i)), m))
		}
	case []any:
		for i, e := range x {
			m, ok := e.(map[string]any)
			if !ok {
				t.elemErrorf(key, i, "want a table, got %s", describe(e))
				continue
			}
			out = append(out, mk(append(slices.Clone(t.path), key, index(i)), m))
		}
	case map[string]any:
		t.errorf(key, "want [[%s]] (an array of tables), got a single [%s] table", key, key)
		out = append(out, mk(append(slices.Clone(t.path), key), x))
	default:
		t.errorf(key, "want [[%s]] tables, got %s", key, describe(v))
	}
	return out
}

// describe names the TOML type of v and shows short scalar values. Strings
// are shown with any URI credentials hidden.
func describe(v any) string {
	switch x := v.(type) {
	case string:
		return "string " + strconv.Quote(uriredact.Shorten(uriredact.All(x)))
	case int64:
		return fmt.Sprintf("integer %d", x)
	case float64:
		return "float " + strconv.FormatFloat(x, 'g', -1, 64)
	case bool:
		return fmt.Sprintf("boolean %t", x)
	case time.Time:
		return "date-time"
	case []any, []map[string]any:
		return "array"
	case map[string]any:
		return "table"
	}
	return fmt.Sprintf("%T", v)
}

// hostPort validates a host:port address. With anyPort, port 0 is allowed
// (any free port); with needHost, the host must not be empty.
func hostPort(s string, anyPort, needHost bool) string {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return "want host:port"
	}
	if needHost && host == "" {
		return "want host:port with a host"
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 0 || n > 65535 || (n == 0 && !anyPort) {
		if anyPort {
			return fmt.Sprintf("bad port %q (want 0..65535)", port)
		}
		return fmt.Sprintf("bad port %q (want 1..65535)", port)
	}
	return ""
}

// oneOf checks s against allowed values, case-insensitively, returning the
// allowed spelling.
func oneOf(s string, allowed ...string) (string, bool) {
	for _, a := range allowed {
		if strings.EqualFold(s, a) {
			return a, true
		}
	}
	return "", false
}

// suggest returns the known key closest to k when it is close enough to be a
// typo: the same up to case, '_' and '-', or within a small edit distance
// (counting a swap of neighbours as one edit).
func suggest(k string, known []string) string {
	norm := func(s string) string {
		return strings.ToLower(strings.NewReplacer("_", "", "-", "").Replace(s))
	}
	for _, c := range known {
		if norm(c) == norm(k) {
			return c
		}
	}
	best, bestD := "", math.MaxInt
	for _, c := range known {
		if d := editDistance(strings.ToLower(k), strings.ToLower(c)); d < bestD {
			best, bestD = c, d
		}
	}
	limit := max(1, min(3, len(best)/4))
	if bestD <= limit {
		return best
	}
	return ""
}

// editDistance is the optimal string alignment distance of a and b
// (Levenshtein plus transpositions of adjacent bytes).
func editDistance(a, b string) int {
	if len(a) > 256 || len(b) > 256 {
		return math.MaxInt
	}
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
