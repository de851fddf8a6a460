package destination

import (
	"fmt"
	"strings"
)

// patternf returns the error for the pattern text s.
func patternf(s string, format string, args ...any) error {
	return fmt.Errorf("pattern %q: %s", s, fmt.Sprintf(format, args...))
}

// Wildcard words of ActiveMQ's destination syntax (DestinationFilter.ANY_CHILD
// and ANY_DESCENDENT).
const (
	// AnyWord matches exactly one word.
	AnyWord = "*"
	// AnyRest matches the remaining words, zero or more; it must be the last
	// word of a pattern.
	AnyRest = ">"
)

// Pattern is an ActiveMQ wildcard pattern over destination names, optionally
// restricted to one kind.
//
// Names are split into words at '.'. In a pattern, the word "*" matches
// exactly one word and the word ">" matches all remaining words. As in
// ActiveMQ 5.x (activemq-client PrefixDestinationFilter, "want to look for the
// case where A matches A.>"), ">" also matches zero words: "orders.>" matches
// "orders", "orders.eu" and "orders.eu.paid", and ">" alone matches every
// name. Any other word matches only itself. Wildcards in a destination's own
// name are not interpreted: a consumer on the wildcard destination "orders.>"
// is matched as the literal words "orders" and ">".
//
// A pattern written without a kind ("orders.>") matches queues and topics
// but not temporary destinations; a pattern with a kind ("queue://orders.>")
// matches only that kind, so "queue://..." does not match temporary queues
// unless written "temp-queue://...". The zero Pattern matches nothing.
type Pattern struct {
	kind  Kind // 0 means queues and topics
	words []string
}

// ParsePattern reads a pattern: "queue://orders.>", "topic://prices.*",
// "temp-queue://..." and "temp-topic://...", the STOMP forms "/queue/..."
// and "/topic/..." (and their temp- variants), or a bare "orders.>" that
// matches queues and topics alike.
//
// It rejects empty patterns, empty words ("a..b", ".a", "a."), ">" anywhere
// but last, and '*' or '>' mixed with other characters in a word ("a*"),
// which ActiveMQ would silently take literally.
func ParsePattern(s string) (Pattern, error) {
	var p Pattern
	body := s
	if s == "" {
		return Pattern{}, patternf(s, "empty pattern")
	}
	if strings.Contains(s, "://") || strings.HasPrefix(s, "/") {
		split := splitURI
		if strings.HasPrefix(s, "/") {
			split = splitStomp
		}
		d, problem := split(s)
		if problem != "" {
			return Pattern{}, patternf(s, "%s", problem)
		}
		p.kind, body = d.Kind, d.Name
	}
	if strings.Contains(body, CompositeSeparator) {
		return Pattern{}, patternf(s, "a pattern names one destination, not a composite (%q): write one pattern per member", CompositeSeparator)
	}
	p.words = strings.Split(body, ".")
	for i, w := range p.words {
		switch {
		case w == "":
			return Pattern{}, patternf(s, "empty word %d (a pattern must not start or end with '.' or contain \"..\")", i+1)
		case w == AnyRest && i != len(p.words)-1:
			return Pattern{}, patternf(s, "%q must be the last word", AnyRest)
		case w != AnyWord && w != AnyRest && strings.ContainsAny(w, AnyWord+AnyRest):
			return Pattern{}, patternf(s, "word %q mixes a wildcard with other characters; %q and %q must be whole words", w, AnyWord, AnyRest)
		}
	}
	return p, nil
}

// Kind returns the kind the pattern is restricted to, or 0 when it matches
// both queues and topics.
func (p Pattern) Kind() Kind { return p.kind }

// Match reports whether d's kind and name match the pattern.
func (p Pattern) Match(d Destination) bool {
	if len(p.words) == 0 {
		return false
	}
	if p.kind == 0 {
		if d.Kind != Queue && d.Kind != Topic {
			return false
		}
	} else if d.Kind != p.kind {
		return false
	}
	return matchWords(p.words, d.Name)
}

// matchWords matches the pattern words against name without allocating.
func matchWords(words []string, name string) bool {
	rest := name
	exhausted := false // true once every word of name has been consumed
	for _, w := range words {
		if w == AnyRest {
			return true // zero or more remaining words
		}
		if exhausted {
			return false
		}
		word, tail, more := strings.Cut(rest, ".")
		if w != AnyWord && w != word {
			return false
		}
		rest, exhausted = tail, !more
	}
	return exhausted
}

// String returns the pattern in canonical form: "queue://orders.>" for a
// kind-restricted pattern, "orders.>" for a bare one, and "" for the zero
// Pattern.
func (p Pattern) String() string {
	body := strings.Join(p.words, ".")
	if p.kind == 0 || body == "" {
		return body
	}
	return p.kind.String() + "://" + body
}

// MarshalText implements encoding.TextMarshaler with String.
func (p Pattern) MarshalText() ([]byte, error) {
	return []byte(p.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler with ParsePattern, so
// that patterns can be read directly from configuration files.
func (p *Pattern) UnmarshalText(text []byte) error {
	v, err := ParsePattern(string(text))
	if err != nil {
		return err
	}
	*p = v
	return nil
}

// Filter decides which destinations a bridge may forward, like ActiveMQ's
// excludedDestinations and dynamicallyIncludedDestinations.
// The zero Filter allows everything.
type Filter struct {
	// Include lists the allowed destinations; empty means all.
	Include []Pattern
	// Exclude lists forbidden destinations; exclusion wins over inclusion.
	Exclude []Pattern
}

// Allows reports whether d matches no Exclude pattern and, when Include is
// not empty, at least one Include pattern. A composite destination is
// allowed when each of its members is.
func (f Filter) Allows(d Destination) bool {
	if d.IsComposite() {
		// Every member must be allowed: a composite receives the
		// messages of all of them.
		ms := d.Members()
		for _, m := range ms {
			if !f.Allows(m) {
				return false
			}
		}
		return len(ms) > 0
	}
	for _, p := range f.Exclude {
		if p.Match(d) {
			return false
		}
	}
	if len(f.Include) == 0 {
		return true
	}
	for _, p := range f.Include {
		if p.Match(d) {
			return true
		}
	}
	return false
}

// ParseFilter builds a Filter from textual patterns, for configuration code.
// It reports the first invalid pattern.
func ParseFilter(include, exclude []string) (Filter, error) {
	var f Filter
	for _, s := range include {
		p, err := ParsePattern(s)
		if err != nil {
			return Filter{}, err
		}
		f.Include = append(f.Include, p)
	}
	for _, s := range exclude {
		p, err := ParsePattern(s)
		if err != nil {
			return Filter{}, err
		}
		f.Exclude = append(f.Exclude, p)
	}
	return f, nil
}
