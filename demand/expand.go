package demand

import (
	"maps"
	"slices"
	"strings"

	"github.com/brokernet/brokernet/advisory"
	"github.com/brokernet/brokernet/destination"
)

// Expander narrows wildcard demand so that include and exclude rules hold for
// every message, whatever the remote consumer's wildcard.
//
// A demand subscription on "queue://>" receives the messages of every queue of
// the local broker, "secret.x" included, however "queue://secret.>" is
// excluded: the rules are checked against the demand's destination, and a
// wildcard is one destination. So a wildcard consumer whose pattern is not
// wholly allowed (destination.Filter.AllowsAll) is not passed on as it is.
// Instead the Expander passes on one consumer per concrete, allowed local
// destination its pattern matches, learnt from the local broker's destination
// advisories (advisory.DestinationTopics), and follows destinations as they
// appear and go. Wildcards that stay within the rules, and concrete
// destinations, pass through unchanged.
//
// The consumers it makes have the id ExpandedID(id, d) and d as destination;
// a durable subscriber with a wildcard that is not wholly allowed makes no
// demand at all (a durable subscription per destination would need names the
// subscriber never chose). Like Table, it is a pure state machine: events in,
// events out, no I/O. The zero value is not usable; use NewExpander.
type Expander struct {
	opts  Options
	dests map[destination.Destination]struct{}
	// wild holds the wildcard consumers being narrowed, by id, with the
	// event that added them (for its headers).
	wild map[string]advisory.Event
	// made holds, per wildcard consumer id, the destinations it was expanded to.
	made map[string]map[destination.Destination]struct{}
	// composite holds the members of each composite consumer, by id.
	composite map[string][]destination.Destination
}

// NewExpander returns an Expander applying opts' Filter and StaticInclude.
func NewExpander(opts Options) *Expander {
	return &Expander{
		opts:  opts.normalized(),
		dests: make(map[destination.Destination]struct{}),
		wild:  make(map[string]advisory.Event),
		made:  make(map[string]map[destination.Destination]struct{}),

		composite: make(map[string][]destination.Destination),
	}
}

// Needed reports whether any wildcard, of remote demand or of a static
// include (Table.Start), could need narrowing: false when the Filter is
// empty, so that callers can skip destination advisories. Static includes
// are narrowed only where an exclusion overlaps them, so the same test
// covers them.
func (x *Expander) Needed() bool {
	return len(x.opts.Filter.Include) > 0 || len(x.opts.Filter.Exclude) > 0
}

// ExpandedID is the id of the consumer an Expander makes for the wildcard
// consumer id on destination d.
func ExpandedID(id string, d destination.Destination) string {
	return id + "|" + d.String()
}

// permits is Table.Permits for a concrete destination: not temporary, not
// excluded, statically included or allowed by the Filter.
func (x *Expander) permits(d destination.Destination) bool {
	if !d.Kind.Valid() || d.IsTemp() || d.IsWildcard() || Internal(d) {
		return false
	}
	for _, p := range x.opts.Filter.Exclude {
		if p.Match(d) {
			return false
		}
	}
	for _, p := range x.opts.StaticInclude {
		if p.Match(d) {
			return true
		}
	}
	return x.opts.Filter.Allows(d)
}

// narrows reports whether c's destination is a wildcard the rules do not wholly allow.
func (x *Expander) narrows(c advisory.Consumer) bool {
	d := c.Destination
	return d.IsWildcard() && !d.IsTemp() && !x.opts.Filter.AllowsAll(destination.PatternOf(d))
}

// Consumer passes one consumer advisory through: unchanged, split into its
// members (a composite destination), or narrowed to concrete destinations.
//
// A consumer of a composite destination ("queue://public.y,secret.x",
// destination.Destination.Members) becomes one consumer per member, with the
// id ExpandedID(id, member), each then treated like any other consumer: the
// rules apply member by member, an excluded member makes no demand while the
// others do, and a wildcard member is narrowed. One subscription on the
// composite would receive the excluded member's messages too. A durable
// subscriber of a composite topic passes whole, and Table rejects it
// (ReasonComposite): its members would need durable subscription names the
// subscriber never chose.
func (x *Expander) Consumer(ev advisory.Event) []advisory.Event {
	switch ev.Kind {
	case advisory.ConsumerAdded:
		var out []advisory.Event
		if _, known := x.composite[ev.Consumer.ID]; known {
			out = x.dropComposite(ev.Consumer.ID)
		}
		if ev.Consumer.Destination.IsComposite() && !isDurable(ev.Consumer) {
			return append(out, x.split(ev)...)
		}
		if _, known := x.wild[ev.Consumer.ID]; known {
			out = append(out, x.drop(ev.Consumer.ID)...)
		}
		if !x.narrows(ev.Consumer) {
			return append(out, ev)
		}
		if ev.Consumer.SubscriptionName != "" && ev.Consumer.Destination.Kind == destination.Topic {
			return out
		}
		x.wild[ev.Consumer.ID] = ev
		x.made[ev.Consumer.ID] = make(map[destination.Destination]struct{})
		for _, d := range x.sortedDests() {
			if e, ok := x.expand(ev.Consumer.ID, d); ok {
				out = append(out, e)
			}
		}
		return out
	case advisory.ConsumerRemoved:
		if _, known := x.composite[ev.Consumer.ID]; known {
			return x.dropComposite(ev.Consumer.ID)
		}
		if _, known := x.wild[ev.Consumer.ID]; known {
			return x.drop(ev.Consumer.ID)
		}
	}
	return []advisory.Event{ev}
}

// split makes one consumer per member of ev's composite destination and
// passes each through Consumer.
func (x *Expander) split(ev advisory.Event) []advisory.Event {
	id := ev.Consumer.ID
	members := ev.Consumer.Destination.Members()
	x.composite[id] = members
	var out []advisory.Event
	for _, m := range members {
		e := ev
		e.Consumer.ID = ExpandedID(id, m)
		e.Consumer.Destination = m
		e.Consumer.Path = slices.Clone(ev.Consumer.Path)
		if e.Consumer.Origin != "" {
			e.Consumer.Origin = ExpandedID(e.Consumer.Origin, m)
		}
		out = append(out, x.Consumer(e)...)
	}
	return out
}

// dropComposite forgets composite consumer id and removes its members.
func (x *Expander) dropComposite(id string) []advisory.Event {
	var out []advisory.Event
	for _, m := range x.composite[id] {
		out = append(out, x.Consumer(removal(id, m))...)
	}
	delete(x.composite, id)
	return out
}

// Destination records a local destination appearing or going and returns the
// consumers that starts or ends.
func (x *Expander) Destination(ev advisory.DestinationEvent) []advisory.Event {
	d := ev.Destination
	if d.IsTemp() || d.IsWildcard() || !d.Kind.Valid() {
		return nil
	}
	var out []advisory.Event
	if ev.Removed {
		if _, ok := x.dests[d]; !ok {
			return nil
		}
		delete(x.dests, d)
		for _, id := range slices.Sorted(maps.Keys(x.made)) {
			if _, ok := x.made[id][d]; ok {
				delete(x.made[id], d)
				out = append(out, removal(id, d))
			}
		}
		return out
	}
	if _, ok := x.dests[d]; ok {
		return nil
	}
	x.dests[d] = struct{}{}
	for _, id := range slices.Sorted(maps.Keys(x.wild)) {
		if e, ok := x.expand(id, d); ok {
			out = append(out, e)
		}
	}
	return out
}

// Reset forgets everything, as on a new session: destinations and consumers
// are replayed by the broker to the new subscriptions.
func (x *Expander) Reset() {
	clear(x.dests)
	clear(x.wild)
	clear(x.made)
	clear(x.composite)
}

// expand makes the consumer for wildcard consumer id on d, if d matches and is permitted.
func (x *Expander) expand(id string, d destination.Destination) (advisory.Event, bool) {
	src := x.wild[id]
	if !destination.PatternOf(src.Consumer.Destination).Match(d) || !x.permits(d) {
		return advisory.Event{}, false
	}
	if _, done := x.made[id][d]; done {
		return advisory.Event{}, false
	}
	x.made[id][d] = struct{}{}
	e := src
	e.Consumer.ID = ExpandedID(id, d)
	e.Consumer.Destination = d
	e.Consumer.Path = slices.Clone(src.Consumer.Path)
	if e.Consumer.Origin != "" {
		e.Consumer.Origin = ExpandedID(e.Consumer.Origin, d)
	}
	return e, true
}

// drop forgets wildcard consumer id and removes what it was expanded to.
func (x *Expander) drop(id string) []advisory.Event {
	var out []advisory.Event
	made := x.made[id]
	ds := slices.SortedFunc(maps.Keys(made), func(a, b destination.Destination) int {
		return strings.Compare(a.String(), b.String())
	})
	for _, d := range ds {
		out = append(out, removal(id, d))
	}
	delete(x.wild, id)
	delete(x.made, id)
	return out
}

func removal(id string, d destination.Destination) advisory.Event {
	return advisory.Event{Kind: advisory.ConsumerRemoved, Consumer: advisory.Consumer{ID: ExpandedID(id, d)}, ConsumerCount: -1}
}

func (x *Expander) sortedDests() []destination.Destination {
	return slices.SortedFunc(maps.Keys(x.dests), func(a, b destination.Destination) int {
		return strings.Compare(a.String(), b.String())
	})
}
