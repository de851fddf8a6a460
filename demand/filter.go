package demand

import "github.com/brokernet/brokernet/destination"

// ContentFilter forwards, of the destinations Pattern overlaps (every
// destination when Pattern is nil), only the messages Selector selects: it
// becomes part of each demand subscription's selector, so the local broker
// keeps the rest for its own consumers, untouched.
type ContentFilter struct {
	Pattern  *destination.Pattern
	Selector string
}

// contentFilter returns the selector the content filters put on
// subscriptions to d: the AND of those whose pattern overlaps d ("" for
// none). A wildcard destination takes the filters of every destination it
// may deliver, so that nothing a filter withholds is forwarded through it.
func (o Options) contentFilter(d destination.Destination) string {
	var sels []string
	for _, f := range o.ContentFilters {
		if f.Pattern == nil || f.Pattern.Overlaps(destination.PatternOf(d)) {
			sels = append(sels, f.Selector)
		}
	}
	return andSelectors(sels...)
}

// andSelectors combines selectors that must all hold, leaving out empty ones:
// "" for none, the selector itself for one, else "(s1) AND (s2) ...".
func andSelectors(sels ...string) string {
	var kept []string
	for _, s := range sels {
		if s != "" {
			kept = append(kept, s)
		}
	}
	return joinSelectors(kept, " AND ")
}
