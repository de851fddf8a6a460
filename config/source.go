package config

import (
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// source records where the values of a Config came from, so that Validate
// can say where each problem is: the line and column in a file (Parse), or
// the flag that set it (Flags). A Config built in code has none, and its
// problems name only their table and key.
type source struct {
	// file and pos locate the keys of a file.
	file string
	pos  positions
	// brokers and conns are the position paths of the decoded [[broker]] and
	// [[networkConnector]] tables, in order (an entry that is not a table is
	// left out, so the i-th decoded one need not be the i-th written).
	brokers, conns [][]string
	// elems maps a list's path to the written index of each decoded element
	// (elements that could not be decoded are left out).
	elems map[string][]int
	// written holds the paths of the keys that were given, in the file or as
	// flags: a key not written takes its default.
	written map[string]bool
	// failed holds the paths of the keys whose value could not be decoded;
	// that was reported, so Validate's rules skip them.
	failed map[string]bool
	// flags, for a command line, is the flag set, and names the flag (or
	// argument, such as REMOTE) that sets each key ("networkConnector.window").
	flags *flag.FlagSet
	names map[string]string
	lists map[string][]string
}

func newSource() *source {
	return &source{elems: map[string][]int{}, written: map[string]bool{}, failed: map[string]bool{}, names: map[string]string{}, lists: map[string][]string{}}
}

func pathKey(path []string) string { return strings.Join(path, pathSep) }

// isWritten reports whether the key at path was given.
func (s *source) isWritten(path []string) bool {
	return s != nil && s.written[pathKey(path)]
}

// isFailed reports whether the key at path was given but could not be
// decoded (which was reported).
func (s *source) isFailed(path []string) bool {
	return s != nil && s.failed[pathKey(path)]
}

// locate fills in where e is: its line and column in a file, or its flag.
// path is the resolved path of its key, with elem the decoded index of a
// list element or -1.
func (s *source) locate(e *Error, path []string, kind, key string, elem int) {
	if s == nil {
		return
	}
	w := elem // the written index
	if elem >= 0 {
		if idx, ok := s.elems[pathKey(path)]; ok && elem < len(idx) {
			w = idx[elem]
		}
		path = append(slices.Clone(path), index(w))
	}
	if s.flags == nil {
		e.File = s.file
		p := s.pos.find(path)
		e.Line, e.Col = p.line, p.col
		return
	}
	name, ok := s.names[kind+"."+key]
	if !ok {
		return
	}
	if !strings.HasPrefix(name, "-") {
		e.Flag = name // an argument: LOCAL, REMOTE
		return
	}
	f := s.flags.Lookup(strings.TrimLeft(name, "-"))
	switch {
	case f == nil:
		e.Flag = name
	case s.lists[f.Name] != nil:
		if w >= 0 && w < len(s.lists[f.Name]) {
			e.Flag = name + " " + s.lists[f.Name][w]
		} else {
			e.Flag = name
		}
	default:
		v := f.Value.String()
		if g, ok := f.Value.(flag.Getter); ok {
			if _, isString := g.Get().(string); isString {
				v = strconv.Quote(v)
			}
		}
		e.Flag = fmt.Sprintf("%s %s", name, v)
	}
}

// line is the line where the key at path was written, 0 when unknown.
func (s *source) line(path []string) int {
	if s == nil || s.flags != nil {
		return 0
	}
	return s.pos.find(path).line
}

// brokerPath and connPath are the position paths of the i-th decoded
// [[broker]] and [[networkConnector]].
func (s *source) brokerPath(i int) []string {
	if s != nil && i < len(s.brokers) {
		return s.brokers[i]
	}
	return []string{"broker", index(i)}
}

func (s *source) connPath(i int) []string {
	if s != nil && i < len(s.conns) {
		return s.conns[i]
	}
	return []string{"networkConnector", index(i)}
}
