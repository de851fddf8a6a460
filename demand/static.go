package demand

import (
	"strings"

	"github.com/brokernet/brokernet/advisory"
	"github.com/brokernet/brokernet/destination"
)

// StaticOrigin is the tag origin of static include subscriptions. Other
// bridges tell static subscriptions of different brokers apart by the
// tag's path, whose first entry is the remote broker.
const StaticOrigin = "static"

// Start creates the static include subscriptions (Options.StaticInclude)
// and returns their Subscribes, in destination order. It follows
// DemandForwardingBridgeSupport.setupStaticDestinations: each pattern is
// subscribed to as written, wildcards included, a pattern without kind once
// as a queue and once as a topic, and a destination that Filter.Exclude
// matches is skipped (exclusion wins, AMQ-6331). Static subscriptions carry
// the usual hop filter, Tag{Path: [RemoteID], Origin: StaticOrigin}, and
// Apply never removes them.
//
// The bridge calls Start once the local broker is connected, before the
// remote advisories, so that plain remote consumers of matching
// destinations join the static subscriptions. Start is idempotent until
// Reset, after which it may be called again.
func (t *Table) Start() []Change {
	if t.started {
		return nil
	}
	t.started = true
	for _, p := range t.opts.StaticInclude {
		kinds := []destination.Kind{p.Kind()}
		if p.Kind() == 0 {
			kinds = []destination.Kind{destination.Queue, destination.Topic}
		}
		for _, k := range kinds {
			if !k.Valid() || k.IsTemp() {
				continue
			}
			name := strings.TrimPrefix(p.String(), p.Kind().String()+"://")
			if p.Kind() == 0 {
				name = p.String()
			}
			d := destination.Destination{Kind: k, Name: name}
			if name == "" || t.excluded(d) {
				continue
			}
			key := slotKey{dest: d, kind: staticSlot}
			if _, ok := t.slots[key]; ok {
				continue // the same destination from another pattern
			}
			match, err := destination.ParsePattern(d.String())
			if err != nil {
				continue // unreachable: d came from a valid pattern
			}
			t.slotFor(key).match = match
			t.touch(d)
		}
	}
	return t.settle()
}

// excluded reports whether Filter.Exclude matches d.
func (t *Table) excluded(d destination.Destination) bool {
	for _, p := range t.opts.Filter.Exclude {
		if p.Match(d) {
			return true
		}
	}
	return false
}

// Permits reports whether messages for d may be forwarded, in the order of
// ActiveMQ's isPermissableDestination: temporary destinations are not
// bridged, Filter.Exclude forbids, a static include allows, and otherwise a
// non-empty Filter.Include must match. Apply uses it for remote consumers;
// the bridge should use it for each message a static subscription with
// wildcards delivers, as ActiveMQ checks again at forward time
// (activemq-network.md §2.4).
func (t *Table) Permits(d destination.Destination) bool {
	if !d.Kind.Valid() || d.IsTemp() || t.excluded(d) {
		return false
	}
	for _, p := range t.opts.StaticInclude {
		if p.Match(d) {
			return true
		}
	}
	return t.opts.Filter.Allows(d)
}

// staticFor returns the live static slot whose destination, read as a
// pattern, matches dest, or nil; the first in destination order if several
// do.
func (t *Table) staticFor(dest destination.Destination) *slot {
	if !t.started {
		return nil
	}
	var found *slot
	for k, s := range t.slots {
		if k.kind != staticSlot || k.dest.Kind != dest.Kind || !s.match.Match(dest) {
			continue
		}
		if found == nil || k.dest.Name < found.key.dest.Name {
			found = s
		}
	}
	return found
}

// staticSpec is the subscription of a static include.
func (t *Table) staticSpec(s *slot) *Subscription {
	path := []string{t.opts.RemoteID}
	return &Subscription{
		Destination: s.key.dest,
		Selector:    advisory.Selector("", t.opts.RemoteID, t.opts.MessageTTL, advisory.Tag{Path: path, Origin: StaticOrigin}),
		Priority:    t.priority(0, path),
		Prefetch:    t.opts.Prefetch,
		Static:      true,
	}
}
