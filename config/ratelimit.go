package config

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/brokernet/brokernet/destination"
)

// DestinationRateLimit caps what a connector forwards per second for the
// destinations Pattern matches, taken together: Messages messages or Bytes
// bytes of message bodies (one of the two). Written "PATTERN=RATE", RATE being
// "500/s" (messages) or "2MB/s" (bytes: B, kB, MB, GB, or KiB, MiB, GiB).
type DestinationRateLimit struct {
	Pattern  destination.Pattern
	Messages int
	Bytes    int
}

// String is the written form.
func (r DestinationRateLimit) String() string {
	if r.Bytes > 0 {
		return fmt.Sprintf("%s=%dB/s", r.Pattern, r.Bytes)
	}
	return fmt.Sprintf("%s=%d/s", r.Pattern, r.Messages)
}

// byteUnits are the units of a byte rate, longest first.
var byteUnits = []struct {
	name string
	n    int
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30},
	{"kB", 1e3}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"B", 1},
}

// ParseDestinationRateLimit parses "PATTERN=RATE".
func ParseDestinationRateLimit(s string) (DestinationRateLimit, error) {
	const want = `want PATTERN=RATE, RATE messages ("500/s") or bytes ("2MB/s") a second, e.g. queue://backlog.>=500/s`
	p, rate, ok := strings.Cut(s, "=")
	if !ok {
		return DestinationRateLimit{}, fmt.Errorf("rate limit %q: %s", s, want)
	}
	var out DestinationRateLimit
	var err error
	if out.Pattern, err = destination.ParsePattern(strings.TrimSpace(p)); err != nil {
		return DestinationRateLimit{}, fmt.Errorf("rate limit %q: %w", s, err)
	}
	rate = strings.TrimSpace(rate)
	num, ok := strings.CutSuffix(rate, "/s")
	if !ok {
		return DestinationRateLimit{}, fmt.Errorf("rate limit %q: %s", s, want)
	}
	unit := 0
	for _, u := range byteUnits {
		if n, ok := strings.CutSuffix(num, u.name); ok {
			num, unit = strings.TrimSpace(n), u.n
			break
		}
	}
	n, err := strconv.Atoi(num)
	if err != nil || n <= 0 {
		return DestinationRateLimit{}, fmt.Errorf("rate limit %q: %q is not a positive whole number a second; %s", s, rate, want)
	}
	if unit == 0 {
		out.Messages = n
		return out, nil
	}
	if n > (1<<62)/unit {
		return DestinationRateLimit{}, fmt.Errorf("rate limit %q: too large", s)
	}
	out.Bytes = n * unit
	return out, nil
}
