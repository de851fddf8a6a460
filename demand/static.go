package demand

import (
	"maps"
	"slices"
	"strings"

	"github.com/brokernet/brokernet/advisory"
	"github.com/brokernet/brokernet/destination"
	"github.com/brokernet/brokernet/hop"
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
// A wildcard include that an exclusion overlaps ("queue://orders.>" with
// "queue://orders.secret" excluded) is not subscribed as written: that one
// subscription would also receive the excluded queue's messages, which the
// bridge may neither forward nor acknowledge, so they would sit dispatched
// to it, out of reach of local consumers, and a prefetch of them would stall
// the whole subscription. ActiveMQ has the same flaw; here the include is
// narrowed instead: every concrete local destination it matches and Permits
// gets a static subscription of its own, learnt from Destination, as long as
// the destination exists. Wildcard includes that no exclusion overlaps stay
// one wildcard subscription.
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
	t.narrow = nil
	only := destination.Filter{Exclude: t.opts.Filter.Exclude}
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
			if d.IsWildcard() && !only.AllowsAll(destination.PatternOf(d)) {
				t.narrow = append(t.narrow, destination.PatternOf(d))
				continue
			}
			key := slotKey{dest: d, kind: staticSlot}
			if _, ok := t.slots[key]; ok {
				continue // the same destination from another pattern
			}
			t.slotFor(key).match = destination.PatternOf(d)
			t.touch(d)
		}
	}
	// The wildcard subscriptions exist now, so that narrowing leaves the
	// destinations they receive to them.
	for _, d := range sortedDests(t.dests) {
		t.narrowTo(d)
	}
	return t.settle()
}

// Destination records a concrete local destination appearing or going, as
// the local broker's destination advisories report it
// (advisory.DestinationTopics; ActiveMQ replays the existing ones to a new
// subscriber), and returns the Changes for the static includes narrowed to
// it (see Start): a Subscribe when a destination they match and Permits
// appears, an Unsubscribe when it goes. A narrowed static subscription that
// still serves remote consumers whose destination went stays until they
// leave: ActiveMQ keeps such a consumer and attaches it again when the
// destination is recreated. Events for known states, temporary and wildcard
// destinations change nothing. Reset keeps what Destination learnt, since
// the local broker did not go away.
func (t *Table) Destination(ev advisory.DestinationEvent) []Change {
	d := ev.Destination
	if !d.Kind.Valid() || d.IsTemp() || d.IsWildcard() || d.Name == "" {
		return nil
	}
	if ev.Removed {
		if _, ok := t.dests[d]; !ok {
			return nil
		}
		delete(t.dests, d)
		s, ok := t.slots[slotKey{dest: d, kind: staticSlot}]
		if !ok || !s.narrowed {
			return nil
		}
		s.gone = true
		t.touch(d)
		return t.settle()
	}
	if _, ok := t.dests[d]; ok {
		return nil
	}
	t.dests[d] = struct{}{}
	t.narrowTo(d)
	return t.settle()
}

// narrowTo gives the known local destination d a static slot of its own if
// a narrowed static include matches it, Permits allows it and no other
// static subscription receives it already. The caller settles.
func (t *Table) narrowTo(d destination.Destination) {
	if !t.started || !t.Permits(d) || !slices.ContainsFunc(t.narrow, func(p destination.Pattern) bool { return p.Match(d) }) {
		return
	}
	key := slotKey{dest: d, kind: staticSlot}
	if s, ok := t.slots[key]; ok {
		if s.narrowed && s.gone {
			s.gone = false // back before its last consumer left
			t.touch(d)
		}
		return
	}
	if t.staticFor(d) != nil {
		return
	}
	s := t.slotFor(key)
	s.match = destination.PatternOf(d)
	s.narrowed = true
	t.touch(d)
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
// non-empty Filter.Include must match; a composite destination is never
// permitted whole (its members are). Apply uses it for remote consumers;
// the bridge should use it for each message a static subscription with
// wildcards delivers, as ActiveMQ checks again at forward time
// (activemq-network.md §2.4). (Start narrows every wildcard include that an
// exclusion overlaps, so that check can no longer fail.)
func (t *Table) Permits(d destination.Destination) bool {
	if d.IsTemp() {
		// isPermissableDestination: a temporary destination is decided by
		// bridgeTempDestinations alone, before any filter.
		return t.opts.BridgeTemp && d.Name != ""
	}
	if !d.Kind.Valid() || d.IsComposite() || t.excluded(d) || Internal(d) {
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
// do. A narrowed slot whose destination went takes no new consumers.
func (t *Table) staticFor(dest destination.Destination) *slot {
	if !t.started {
		return nil
	}
	var found *slot
	for k, s := range t.slots {
		if k.kind != staticSlot || s.gone || k.dest.Kind != dest.Kind || !s.match.Match(dest) {
			continue
		}
		if found == nil || k.dest.Name < found.key.dest.Name {
			found = s
		}
	}
	return found
}

// staticWanted reports whether static slot s still wants its subscription:
// always, unless it was narrowed to a destination that went and serves no
// remote consumer any more.
func (s *slot) staticWanted() bool {
	return !s.gone || len(s.members) > 0
}

// staticSpec is the subscription of a static include.
func (t *Table) staticSpec(s *slot) *Subscription {
	path := []string{t.opts.RemoteID}
	user := t.opts.contentFilter(s.key.dest)
	return &Subscription{
		Destination:  s.key.dest,
		Selector:     hop.Selector(user, t.opts.RemoteID, t.opts.MessageTTL, hop.Tag{Path: path, Origin: StaticOrigin}),
		UserSelector: user,
		Priority:     t.priority(0, path),
		Prefetch:     t.opts.Prefetch,
		Static:       true,
	}
}

// sortedDests returns the set's destinations in string order.
func sortedDests(set map[destination.Destination]struct{}) []destination.Destination {
	return slices.SortedFunc(maps.Keys(set), func(a, b destination.Destination) int {
		return strings.Compare(a.String(), b.String())
	})
}

// InternalPrefix starts the names of destinations brokernet keeps for itself on
// a broker (the durable ledger, brokernet.durables.*): never forwarded.
const InternalPrefix = "brokernet."

// Internal reports whether d is one of brokernet's own destinations.
func Internal(d destination.Destination) bool { return strings.HasPrefix(d.Name, InternalPrefix) }
