package config

import (
	"fmt"
	"strings"

	"github.com/brokernet/brokernet/destination"
	"github.com/brokernet/brokernet/selector"
)

// DestinationFilter forwards, of the destinations Pattern matches, only the
// messages Selector (a JMS selector) selects. Written "PATTERN=SELECTOR".
type DestinationFilter struct {
	Pattern  destination.Pattern
	Selector string
}

// String is the written form.
func (f DestinationFilter) String() string { return f.Pattern.String() + "=" + f.Selector }

// ParseDestinationFilter parses "PATTERN=SELECTOR".
func ParseDestinationFilter(s string) (DestinationFilter, error) {
	const want = `want PATTERN=SELECTOR, e.g. queue://orders.>=region = 'eu'`
	p, sel, ok := strings.Cut(s, "=")
	if !ok {
		return DestinationFilter{}, fmt.Errorf("filter %q: %s", s, want)
	}
	var out DestinationFilter
	var err error
	if out.Pattern, err = destination.ParsePattern(strings.TrimSpace(p)); err != nil {
		return DestinationFilter{}, fmt.Errorf("filter %q: %w", s, err)
	}
	out.Selector = strings.TrimSpace(sel)
	if err := selector.Check(out.Selector); err != nil {
		return DestinationFilter{}, fmt.Errorf("filter %q: %w", s, err)
	}
	return out, nil
}
