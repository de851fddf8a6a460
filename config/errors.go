package config

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// Error is one problem in a configuration file, with its location.
type Error struct {
	// File is the file name given to Parse or Load.
	File string
	// Line and Col locate the problem, both counted from 1; 0 means unknown.
	// For a value, they point at its key (or at the element of an array); for
	// a missing key, at the header of its table.
	Line, Col int
	// Table names the table the key belongs to as a reader would:
	// `networkConnector "to-dc2"`, `broker #2` (when it has no usable name),
	// "log", "admin"; empty at the top level.
	Table string
	// Key is the key within Table ("networkTTL"), dotted for sub-tables
	// ("gossip.bind"), with an element index for arrays
	// ("excludedDestinations[2]"); empty for a problem of the whole table or
	// file.
	Key string
	// Flag is, for a configuration given on the command line, the flag and
	// value that set the key ("--window 0", `--log-level "loud"`), or the
	// argument ("REMOTE"); Error shows it instead of Table and Key.
	Flag string
	// Msg says what is wrong and what is wanted. It never contains a passcode
	// or a secret key.
	Msg string
}

// Error renders the problem as "file:line:col: table: key: message", leaving
// out the parts that are unknown or empty, or as "flag value: message".
func (e Error) Error() string {
	if e.Flag != "" {
		return e.Flag + ": " + e.Msg
	}
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
		if e.Col > 0 {
			fmt.Fprintf(&b, ":%d", e.Col)
		}
	}
	if b.Len() > 0 {
		b.WriteString(": ")
	}
	if e.Table != "" {
		b.WriteString(e.Table)
		b.WriteString(": ")
	}
	if e.Key != "" {
		b.WriteString(e.Key)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Errors is every problem found in one configuration file, ordered by
// position. Parse and Load return it as *Errors.
type Errors []Error

// Error prints one line per problem.
func (e *Errors) Error() string {
	if e == nil || len(*e) == 0 {
		return "no errors"
	}
	lines := make([]string, len(*e))
	for i, err := range *e {
		lines[i] = err.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap returns the problems as individual errors, for errors.As and errors.Is.
func (e *Errors) Unwrap() []error {
	if e == nil {
		return nil
	}
	out := make([]error, len(*e))
	for i, err := range *e {
		out[i] = err
	}
	return out
}

// sort orders the problems by line and column; problems without a position
// come last, in the order they were found. It drops repeated problems (a
// value two keys take, such as networkTTL's for messageTTL, is reported once).
func (e *Errors) sort() {
	var out Errors
	for _, x := range *e {
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	*e = out
	slices.SortStableFunc(*e, func(a, b Error) int {
		al, bl := a.Line, b.Line
		if al == 0 {
			al = int(^uint(0) >> 1)
		}
		if bl == 0 {
			bl = int(^uint(0) >> 1)
		}
		return cmp.Or(cmp.Compare(al, bl), cmp.Compare(a.Col, b.Col))
	})
}
