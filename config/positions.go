package config

import (
	"strconv"
	"strings"
)

// BurntSushi/toml v1.6.0 records a position per key name only internally
// (MetaData.keyInfo, unexported) and keyed by the dotted name, so the entries
// of an array of tables share one slot. Error messages need the line of each
// [[networkConnector]] and of each key in it, so positions come from this
// small scanner instead. It runs only on text the TOML parser accepted, so it
// need not diagnose anything; on anything unexpected it moves on, and it
// always advances, so it cannot loop or panic on odd input.

// pos is a 1-based line and byte column.
type pos struct{ line, col int }

// pathSep joins path elements into a map key; indexMark starts an array
// index element, so an index never equals a key name.
const (
	pathSep   = "\x00"
	indexMark = "\x01"
)

// index is the path element of the i-th entry of an array.
func index(i int) string { return indexMark + strconv.Itoa(i) }

// positions maps a resolved key path (table names, array indexes, key) to the
// place it was written.
type positions struct {
	at map[string]pos
}

// find returns the position of path, or of its nearest ancestor that has one.
func (p positions) find(path []string) pos {
	for n := len(path); n > 0; n-- {
		if q, ok := p.at[strings.Join(path[:n], pathSep)]; ok {
			return q
		}
	}
	return pos{}
}

// scanner walks TOML source text, recording positions.
type scanner struct {
	src        string
	i          int
	lineStarts []int
	at         map[string]pos
	arrays     map[string]int // number of [[...]] entries per resolved path
}

// scanPositions records where every table header, key and array element of
// src was written.
func scanPositions(src string) positions {
	s := &scanner{src: src, at: map[string]pos{}, arrays: map[string]int{}, lineStarts: []int{0}}
	for i := 0; i < len(src); i++ {
		if src[i] == '\n' {
			s.lineStarts = append(s.lineStarts, i+1)
		}
	}
	if strings.HasPrefix(src, "\ufeff") {
		s.i = len("\ufeff")
	}
	s.top()
	return positions{at: s.at}
}

// posOf converts byte offset i to a line and column.
func (s *scanner) posOf(i int) pos {
	lo, hi := 0, len(s.lineStarts)-1
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if s.lineStarts[mid] <= i {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return pos{line: lo + 1, col: i - s.lineStarts[lo] + 1}
}

func (s *scanner) eof() bool { return s.i >= len(s.src) }

// record sets the position of path; with keep it leaves an earlier one alone
// (implicitly created tables are located where they first appear).
func (s *scanner) record(path []string, at int, keep bool) {
	k := strings.Join(path, pathSep)
	if _, ok := s.at[k]; ok && keep {
		return
	}
	s.at[k] = s.posOf(at)
}

// skipSpace skips blanks, and with newlines also line breaks and comments.
func (s *scanner) skipSpace(newlines bool) {
	for !s.eof() {
		switch c := s.src[s.i]; {
		case c == ' ' || c == '\t':
			s.i++
		case newlines && (c == '\n' || c == '\r'):
			s.i++
		case newlines && c == '#':
			s.skipLine()
		default:
			return
		}
	}
}

// skipLine moves to the start of the next line.
func (s *scanner) skipLine() {
	if j := strings.IndexByte(s.src[s.i:], '\n'); j >= 0 {
		s.i += j + 1
	} else {
		s.i = len(s.src)
	}
}

// top scans the document: table headers and key/value lines.
func (s *scanner) top() {
	var current []string
	for {
		s.skipSpace(true)
		if s.eof() {
			return
		}
		start := s.i
		if s.src[s.i] == '[' {
			double := strings.HasPrefix(s.src[s.i:], "[[")
			s.i++
			if double {
				s.i++
			}
			keys := s.key()
			current = s.resolveHeader(keys, double, start)
			s.skipLine()
			continue
		}
		keys := s.key()
		s.skipSpace(false)
		if s.eof() || s.src[s.i] != '=' || len(keys) == 0 {
			if s.i == start {
				s.i++
			}
			s.skipLine()
			continue
		}
		s.i++
		path := append(append([]string(nil), current...), keys...)
		s.recordKey(path, len(current), start)
		s.value(path)
		s.skipLine()
	}
}

// recordKey records a (possibly dotted) key: its implicit parent tables keep
// their first position, the key itself gets this one.
func (s *scanner) recordKey(path []string, from int, at int) {
	for n := from + 1; n < len(path); n++ {
		s.record(path[:n], at, true)
	}
	s.record(path, at, false)
}

// resolveHeader turns the key of a [table] or [[array]] header into a
// resolved path: every prefix naming an array of tables means its last
// entry, and a [[...]] header opens a new entry.
func (s *scanner) resolveHeader(keys []string, double bool, at int) []string {
	var res []string
	for j, k := range keys {
		res = append(res, k)
		name := strings.Join(res, pathSep)
		if j == len(keys)-1 && double {
			n := s.arrays[name]
			s.arrays[name] = n + 1
			s.record(res, at, true)
			res = append(res, index(n))
		} else if n := s.arrays[name]; n > 0 {
			res = append(res, index(n-1))
		}
		s.record(res, at, j < len(keys)-1)
	}
	return res
}

// key reads a dotted key of bare, "basic" and 'literal' parts. It stops at
// the first character that cannot continue a key ('=', ']', ...).
func (s *scanner) key() []string {
	var keys []string
	for {
		s.skipSpace(false)
		if s.eof() {
			return keys
		}
		switch c := s.src[s.i]; {
		case c == '"':
			end := s.basicEnd(s.i + 1)
			raw := s.src[s.i:end]
			if k, err := strconv.Unquote(raw); err == nil {
				keys = append(keys, k)
			} else {
				keys = append(keys, strings.Trim(raw, `"`))
			}
			s.i = end
		case c == '\'':
			end := s.literalEnd(s.i + 1)
			keys = append(keys, strings.Trim(s.src[s.i:end], "'"))
			s.i = end
		case isBare(c):
			j := s.i
			for j < len(s.src) && isBare(s.src[j]) {
				j++
			}
			keys = append(keys, s.src[s.i:j])
			s.i = j
		default:
			return keys
		}
		s.skipSpace(false)
		if s.eof() || s.src[s.i] != '.' {
			return keys
		}
		s.i++
	}
}

func isBare(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

// basicEnd returns the offset just after the closing quote of a one-line
// basic string whose content starts at i.
func (s *scanner) basicEnd(i int) int {
	for i < len(s.src) {
		switch s.src[i] {
		case '\\':
			i += 2
			continue
		case '"':
			return i + 1
		case '\n':
			return i
		}
		i++
	}
	return len(s.src)
}

// literalEnd is basicEnd for 'literal' strings, which have no escapes.
func (s *scanner) literalEnd(i int) int {
	for i < len(s.src) {
		switch s.src[i] {
		case '\'':
			return i + 1
		case '\n':
			return i
		}
		i++
	}
	return len(s.src)
}

// multiEnd returns the offset after the closing delimiter (""" or ”') of a
// multi-line string whose content starts at i. Up to two more quote
// characters directly before the delimiter belong to the content.
func (s *scanner) multiEnd(i int, delim string) int {
	for i < len(s.src) {
		if delim == `"""` && s.src[i] == '\\' {
			i += 2
			continue
		}
		if strings.HasPrefix(s.src[i:], delim) {
			i += 3
			for n := 0; n < 2 && i < len(s.src) && s.src[i] == delim[0]; n++ {
				i++
			}
			return i
		}
		i++
	}
	return len(s.src)
}

// value skips one value, recording the elements of arrays and the keys of
// inline tables under path.
func (s *scanner) value(path []string) {
	s.skipSpace(false)
	if s.eof() {
		return
	}
	switch c := s.src[s.i]; c {
	case '"':
		if strings.HasPrefix(s.src[s.i:], `"""`) {
			s.i = s.multiEnd(s.i+3, `"""`)
		} else {
			s.i = s.basicEnd(s.i + 1)
		}
	case '\'':
		if strings.HasPrefix(s.src[s.i:], "'''") {
			s.i = s.multiEnd(s.i+3, "'''")
		} else {
			s.i = s.literalEnd(s.i + 1)
		}
	case '[':
		s.i++
		for n := 0; ; n++ {
			s.skipSpace(true)
			if s.eof() {
				return
			}
			if s.src[s.i] == ']' {
				s.i++
				return
			}
			elem := append(append([]string(nil), path...), index(n))
			s.record(elem, s.i, false)
			before := s.i
			s.value(elem)
			s.skipSpace(true)
			if s.eof() {
				return
			}
			if s.src[s.i] == ',' {
				s.i++
			} else if s.i == before {
				s.i++ // not a value: step over it
			}
		}
	case '{':
		s.i++
		for {
			s.skipSpace(true)
			if s.eof() {
				return
			}
			if s.src[s.i] == '}' {
				s.i++
				return
			}
			start := s.i
			keys := s.key()
			s.skipSpace(false)
			if len(keys) > 0 && !s.eof() && s.src[s.i] == '=' {
				s.i++
				kp := append(append([]string(nil), path...), keys...)
				s.recordKey(kp, len(path), start)
				s.value(kp)
			}
			s.skipSpace(true)
			if s.eof() {
				return
			}
			if s.src[s.i] == ',' {
				s.i++
			} else if s.i == start {
				s.i++
			}
		}
	default:
		// Numbers, booleans and date-times (which may contain a space) run
		// to the next delimiter.
		for !s.eof() && !strings.ContainsRune(",]}\n#", rune(s.src[s.i])) {
			s.i++
		}
	}
}
