package destination

import "strings"

// Wildcard demand: a consumer of "queue://orders.>" is one subscription that
// receives the messages of every queue its name matches, so an include or
// exclude rule checked against that name as a literal says nothing about the
// messages it will receive. These functions read a destination's name as the
// pattern the broker applies and compare patterns, so that callers can tell a
// wildcard that stays within the rules from one that must be narrowed.

// IsWildcard reports whether d's name holds a wildcard word ("*" or ">"), which
// ActiveMQ applies to the names of other destinations.
func (d Destination) IsWildcard() bool {
	for _, w := range strings.Split(d.Name, ".") {
		if w == AnyWord || w == AnyRest {
			return true
		}
	}
	return false
}

// PatternOf returns d's name read as the pattern the broker applies for a
// consumer of d, restricted to d's kind. For a destination without wildcards
// it matches d alone.
func PatternOf(d Destination) Pattern {
	return Pattern{kind: d.Kind, words: strings.Split(d.Name, ".")}
}

// kindsOverlap reports whether some destination kind is allowed by both.
func kindsOverlap(a, b Kind) bool {
	switch {
	case a == 0 && b == 0:
		return true
	case a == 0:
		return b == Queue || b == Topic
	case b == 0:
		return a == Queue || a == Topic
	}
	return a == b
}

// Overlaps reports whether some destination matches both p and q.
func (p Pattern) Overlaps(q Pattern) bool {
	if len(p.words) == 0 || len(q.words) == 0 || !kindsOverlap(p.kind, q.kind) {
		return false
	}
	return overlapWords(p.words, q.words)
}

func overlapWords(a, b []string) bool {
	for {
		switch {
		case len(a) > 0 && a[0] == AnyRest, len(b) > 0 && b[0] == AnyRest:
			// ">" takes any number of words, whatever the other side needs.
			return true
		case len(a) == 0 || len(b) == 0:
			return len(a) == len(b)
		case a[0] != AnyWord && b[0] != AnyWord && a[0] != b[0]:
			return false
		}
		a, b = a[1:], b[1:]
	}
}

// Covers reports whether every destination q matches is matched by p.
func (p Pattern) Covers(q Pattern) bool {
	if len(p.words) == 0 || len(q.words) == 0 {
		return false
	}
	switch {
	case p.kind == 0:
		if q.kind != 0 && q.kind != Queue && q.kind != Topic {
			return false
		}
	case p.kind != q.kind:
		return false
	}
	return coverWords(p.words, q.words)
}

func coverWords(a, b []string) bool {
	for {
		switch {
		case len(a) > 0 && a[0] == AnyRest:
			return true
		case len(b) == 0:
			return len(a) == 0
		case len(a) == 0, b[0] == AnyRest:
			// b goes on (or takes any number of words) where a has ended or
			// needs exactly one word.
			return false
		case a[0] == AnyWord:
		case b[0] == AnyWord || a[0] != b[0]:
			return false
		}
		a, b = a[1:], b[1:]
	}
}

// AllowsAll reports whether every destination p matches is allowed: p overlaps
// no Exclude pattern and, when Include is not empty, one Include pattern covers
// it. (A p covered only by several Include patterns together is reported as not
// wholly allowed, which errs on the safe side.)
func (f Filter) AllowsAll(p Pattern) bool {
	for _, x := range f.Exclude {
		if x.Overlaps(p) {
			return false
		}
	}
	if len(f.Include) == 0 {
		return true
	}
	for _, in := range f.Include {
		if in.Covers(p) {
			return true
		}
	}
	return false
}
