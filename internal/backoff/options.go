package backoff

import (
	"fmt"
	"net/url"
	"strconv"
	"time"
)

// The URI options of a Policy, with ActiveMQ's names; every broker URI scheme
// accepts them.
const (
	OptionInitial    = "initialReconnectDelay"
	OptionMax        = "maxReconnectDelay"
	OptionMultiplier = "backOffMultiplier"
)

// SetOption applies URI option key=v to p. It reports whether key is one of
// p's options; err says what is wrong with v.
func (p *Policy) SetOption(key, v string) (known bool, err error) {
	switch key {
	case OptionInitial:
		d, err := ParseMillis(v)
		if err != nil || d <= 0 {
			return true, fmt.Errorf("want a positive duration (ms or e.g. 500ms)")
		}
		p.Initial = d
	case OptionMax:
		d, err := ParseMillis(v)
		if err != nil || d <= 0 {
			return true, fmt.Errorf("want a positive duration (ms or e.g. 30s)")
		}
		p.Max = d
	case OptionMultiplier:
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f < 1 {
			return true, fmt.Errorf("want a number >= 1")
		}
		p.Multiplier = f
	default:
		return false, nil
	}
	return true, nil
}

// Check reports a policy whose maximum delay is below its first.
func (p Policy) Check() error {
	if p.Max < p.Initial {
		return fmt.Errorf("%s %s is below %s %s", OptionMax, p.Max, OptionInitial, p.Initial)
	}
	return nil
}

// AddOptions sets in q the options of p that differ from Default.
func (p Policy) AddOptions(q url.Values) {
	def := Default()
	if p.Initial != def.Initial {
		q.Set(OptionInitial, p.Initial.String())
	}
	if p.Max != def.Max {
		q.Set(OptionMax, p.Max.String())
	}
	if p.Multiplier != def.Multiplier {
		q.Set(OptionMultiplier, strconv.FormatFloat(p.Multiplier, 'g', -1, 64))
	}
}

// ParseMillis reads ActiveMQ-style integer milliseconds or a Go duration.
func ParseMillis(v string) (time.Duration, error) {
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n < 0 {
			return 0, fmt.Errorf("negative duration")
		}
		return time.Duration(n) * time.Millisecond, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("want milliseconds or a duration such as 10s")
	}
	return d, nil
}
