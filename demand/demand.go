// Package demand decides which local demand subscriptions must exist for the
// consumers seen on the remote broker.
//
// A Table is a pure state machine fed with advisory events. It follows
// ActiveMQ's DemandForwardingBridgeSupport.serviceRemoteConsumerAdvisory and
// ConduitBridge (activemq-network.md §2.2, §2.3, §2.5) and performs no I/O:
// the bridge applies the Changes it returns to the local broker.
package demand

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/brokernet/brokernet/advisory"
	"github.com/brokernet/brokernet/destination"
)

// ActiveMQ's consumer priority is a Java byte.
const (
	minPriority = -128
	maxPriority = 127
)

// subIDPrefix starts every Subscription.ID, so that ids are never purely
// numeric.
const subIDPrefix = "bn-d"

// Subscription is one demand subscription the bridge must hold on the local
// broker.
type Subscription struct {
	// ID is unique within the Table and never reused by it, even across
	// Reset; it is not purely numeric ("bn-d1"). The bridge uses it as the
	// STOMP subscription id.
	ID string
	// Destination is the destination to subscribe to.
	Destination destination.Destination
	// Selector is the full selector built by advisory.Selector: the user
	// selector, the hop filter for RemoteID and MessageTTL, and the tag with
	// the consumer's path plus RemoteID and the original consumer's id.
	Selector string
	// UserSelector is the remote consumer's own selector ("" for none).
	UserSelector string
	// Priority is the consumer priority to subscribe with.
	Priority int
	// Prefetch is the prefetch to subscribe with.
	Prefetch int
	// Consumers lists the remote consumer ids served, sorted.
	Consumers []string
}

// ChangeKind says whether a Change creates or removes a subscription.
type ChangeKind uint8

// The change kinds. The zero ChangeKind is invalid.
const (
	// Subscribe asks the bridge to create Sub on the local broker.
	Subscribe ChangeKind = iota + 1
	// Unsubscribe asks the bridge to remove Sub from the local broker.
	Unsubscribe
)

// String returns "subscribe", "unsubscribe", or "ChangeKind(N)".
func (k ChangeKind) String() string {
	switch k {
	case Subscribe:
		return "subscribe"
	case Unsubscribe:
		return "unsubscribe"
	}
	return fmt.Sprintf("ChangeKind(%d)", uint8(k))
}

// Change is one action on the local broker. Applying a Table's Changes in
// order yields exactly its Subscriptions (ignoring their Consumers lists,
// which change without broker actions when conduit consumers join or leave).
type Change struct {
	// Kind says what to do.
	Kind ChangeKind
	// Sub is the subscription concerned, as it was at the time of the
	// change. The Consumers of an Unsubscribe are empty when the last
	// consumer left, and those still served when it comes from Reset.
	Sub Subscription
}

// Action summarises what an event did to the table.
type Action uint8

// The actions. The zero Action is invalid.
const (
	// Ignored means the event changed nothing; Decision.Reason says why.
	Ignored Action = iota + 1
	// Added means a new subscription was created for the consumer.
	Added
	// Joined means the consumer was added to an existing conduit
	// subscription.
	Joined
	// Left means the consumer was removed from a conduit subscription that
	// other consumers keep alive.
	Left
	// Removed means the consumer was removed together with its subscription.
	Removed
)

// String returns the action's name in lower case.
func (a Action) String() string {
	switch a {
	case Ignored:
		return "ignored"
	case Added:
		return "added"
	case Joined:
		return "joined"
	case Left:
		return "left"
	case Removed:
		return "removed"
	}
	return fmt.Sprintf("Action(%d)", uint8(a))
}

// Reasons reported in Decision.Reason for ignored events.
const (
	// ReasonBrowser is reported for queue browsers, which never create
	// demand.
	ReasonBrowser = "browser"
	// ReasonLoop is reported when the consumer's path contains the local
	// broker: the demand already came through here (for example, our own
	// demand subscription seen by the bridge in the other direction).
	ReasonLoop = "loop: path contains local broker"
	// ReasonConsumerTTL is reported when the demand has already travelled
	// ConsumerTTL hops.
	ReasonConsumerTTL = "consumerTTL exceeded"
	// ReasonTemporary is reported for temporary destinations, which are not
	// bridged yet.
	ReasonTemporary = "temporary destination"
	// ReasonExcluded is reported when Options.Filter does not allow the
	// destination.
	ReasonExcluded = "excluded by filter"
	// ReasonDuplicate is reported when the consumer is already known with
	// the same demand-relevant properties (a replay, or a replay racing with
	// a live event).
	ReasonDuplicate = "duplicate"
	// ReasonUnknownConsumer is reported for the removal of a consumer the
	// table does not hold (never seen, ignored, or already removed).
	ReasonUnknownConsumer = "unknown consumer"
	// ReasonInvalid is reported when the event lacks a consumer id, has an
	// unknown kind, or names an invalid destination; details follow after
	// ": ".
	ReasonInvalid = "invalid event"
)

// Decision explains, for logging, what Apply did with one event.
type Decision struct {
	// Action is what happened.
	Action Action
	// Reason says why an event was ignored (one of the Reason constants,
	// possibly with details after ": "); "" otherwise.
	Reason string
	// ConsumerID is the remote consumer's id.
	ConsumerID string
	// SubID is the subscription that now serves the consumer (Added,
	// Joined), that it left (Left, Removed), or that already serves it
	// (Ignored as a duplicate); "" otherwise.
	SubID string
	// Replaced is true when the consumer was known with different
	// properties: its old demand was withdrawn before the event was applied
	// as new, and the returned Changes include that withdrawal.
	Replaced bool
	// PreviousSubID is the subscription a replaced consumer left.
	PreviousSubID string
}

// String renders the decision for a log line.
func (d Decision) String() string {
	var b strings.Builder
	b.WriteString(d.Action.String())
	b.WriteString(" consumer ")
	b.WriteString(d.ConsumerID)
	if d.SubID != "" {
		b.WriteString(" sub ")
		b.WriteString(d.SubID)
	}
	if d.Reason != "" {
		b.WriteString(": ")
		b.WriteString(d.Reason)
	}
	if d.Replaced {
		b.WriteString(" (replaced changed consumer")
		if d.PreviousSubID != "" {
			b.WriteString(", left ")
			b.WriteString(d.PreviousSubID)
		}
		b.WriteString(")")
	}
	return b.String()
}

// conduitKey identifies the shared subscription of plain consumers.
type conduitKey struct {
	dest     destination.Destination
	selector string
}

// sub is a live subscription with its consumer set.
type sub struct {
	Subscription // Consumers is rebuilt by snapshot
	consumers    map[string]struct{}
	shared       bool // registered in Table.conduit under key
	key          conduitKey
}

// snapshot returns a copy of s with Consumers filled in, sorted.
func (s *sub) snapshot() Subscription {
	out := s.Subscription
	out.Consumers = slices.Sorted(maps.Keys(s.consumers))
	return out
}

// member is an accepted remote consumer.
type member struct {
	c     advisory.Consumer
	subID string
}

// Table holds the demand of one bridge: the accepted remote consumers and the
// local subscriptions that serve them.
//
// A Table is not safe for concurrent use; the bridge owns it from one
// goroutine.
type Table struct {
	opts      Options
	seq       uint64
	consumers map[string]*member  // by remote consumer id; accepted consumers only
	subs      map[string]*sub     // by Subscription.ID
	conduit   map[conduitKey]*sub // shared subscriptions of plain consumers
}

// New returns an empty Table. opts should pass Validate; New itself only
// replaces TTLs below -1 by -1 and a non-positive Prefetch by
// DefaultPrefetch.
func New(opts Options) *Table {
	return &Table{
		opts:      opts.normalized(),
		consumers: make(map[string]*member),
		subs:      make(map[string]*sub),
		conduit:   make(map[conduitKey]*sub),
	}
}

// Apply applies one advisory event and returns the Changes to make on the
// local broker, in order, and a Decision explaining them.
//
// ConsumerAdded events are idempotent by consumer id, because ActiveMQ
// replays every existing consumer to a new advisory subscriber and live
// events can race with that replay (activemq-network.md §6.2): an event for a
// known consumer with the same demand-relevant properties changes nothing,
// and one with different properties is applied as a removal followed by an
// addition. Demand-relevant are destination, selector, path, origin, the
// Browser/Bridge/Native flags and, unless DecreasePriority, priority; not
// prefetch, which ActiveMQ reports as 0 when the consumer asked for a receipt
// and corrects later. A ConsumerRemoved for an unknown id changes nothing.
func (t *Table) Apply(ev advisory.Event) ([]Change, Decision) {
	c := ev.Consumer
	d := Decision{ConsumerID: c.ID}
	if c.ID == "" {
		d.Action, d.Reason = Ignored, ReasonInvalid+": missing consumer id"
		return nil, d
	}
	switch ev.Kind {
	case advisory.ConsumerRemoved:
		m, ok := t.consumers[c.ID]
		if !ok {
			d.Action, d.Reason = Ignored, ReasonUnknownConsumer
			return nil, d
		}
		d.SubID = m.subID
		var changes []Change
		changes, d.Action = t.remove(c.ID)
		return changes, d
	case advisory.ConsumerAdded:
		c = normalize(c)
		var changes []Change
		if m, ok := t.consumers[c.ID]; ok {
			if t.sameDemand(m.c, c) {
				d.Action, d.Reason, d.SubID = Ignored, ReasonDuplicate, m.subID
				return nil, d
			}
			d.Replaced, d.PreviousSubID = true, m.subID
			changes, _ = t.remove(c.ID)
		}
		if reason := t.reject(c); reason != "" {
			d.Action, d.Reason = Ignored, reason
			return changes, d
		}
		var more []Change
		more, d.Action, d.SubID = t.add(c)
		return append(changes, more...), d
	}
	d.Action, d.Reason = Ignored, ReasonInvalid+": unknown event kind "+ev.Kind.String()
	return nil, d
}

// normalize returns c with its own copy of Path and a blank selector
// reduced to "".
func normalize(c advisory.Consumer) advisory.Consumer {
	c.Path = slices.Clone(c.Path)
	if strings.TrimSpace(c.Selector) == "" {
		c.Selector = ""
	}
	return c
}

// sameDemand reports whether a and b would create the same demand.
func (t *Table) sameDemand(a, b advisory.Consumer) bool {
	return a.Destination == b.Destination && a.Selector == b.Selector &&
		slices.Equal(a.Path, b.Path) && a.Origin == b.Origin &&
		a.Browser == b.Browser && a.Bridge == b.Bridge && a.Native == b.Native &&
		(t.opts.DecreasePriority || a.Priority == b.Priority)
}

// reject returns why c creates no demand, or "".
// The checks follow serviceRemoteConsumerAdvisory: browsers, the local
// broker in the path (the demand came through here), the consumerTTL, and
// then isPermissableDestination (temporary destinations, not bridged yet,
// and the filter).
func (t *Table) reject(c advisory.Consumer) string {
	switch {
	case c.Browser:
		return ReasonBrowser
	case !c.Destination.Kind.Valid() || c.Destination.Name == "":
		return ReasonInvalid + ": invalid destination"
	case slices.Contains(c.Path, t.opts.LocalID):
		return ReasonLoop
	case t.opts.ConsumerTTL > -1 && len(c.Path) >= t.opts.ConsumerTTL:
		return ReasonConsumerTTL
	case c.Destination.IsTemp():
		return ReasonTemporary
	case !t.opts.Filter.Allows(c.Destination):
		return ReasonExcluded
	}
	return ""
}

// add registers the accepted consumer c, which must not be known.
func (t *Table) add(c advisory.Consumer) ([]Change, Action, string) {
	// Like ConduitBridge, only plain consumers are conduited: a shared
	// subscription carries one path and one origin in its tag, which would
	// be wrong for network consumers with other paths.
	conduit := t.opts.Conduit && len(c.Path) == 0
	key := conduitKey{dest: c.Destination, selector: c.Selector}
	if conduit {
		if s, ok := t.conduit[key]; ok {
			s.consumers[c.ID] = struct{}{}
			t.consumers[c.ID] = &member{c: c, subID: s.ID}
			return nil, Joined, s.ID
		}
	}
	t.seq++
	path := append(slices.Clone(c.Path), t.opts.RemoteID)
	origin := c.ID
	if c.Bridge && c.Origin != "" {
		origin = c.Origin // keep the original consumer across hops, like networkConsumerIds
	}
	s := &sub{
		Subscription: Subscription{
			ID:           subIDPrefix + strconv.FormatUint(t.seq, 10),
			Destination:  c.Destination,
			Selector:     advisory.Selector(c.Selector, t.opts.RemoteID, t.opts.MessageTTL, advisory.Tag{Path: path, Origin: origin}),
			UserSelector: c.Selector,
			Priority:     t.priority(c, path),
			Prefetch:     t.opts.Prefetch,
		},
		consumers: map[string]struct{}{c.ID: {}},
		shared:    conduit,
		key:       key,
	}
	t.subs[s.ID] = s
	if conduit {
		t.conduit[key] = s
	}
	t.consumers[c.ID] = &member{c: c, subID: s.ID}
	return []Change{{Kind: Subscribe, Sub: s.snapshot()}}, Added, s.ID
}

// priority computes the demand subscription's priority for consumer c whose
// demand path (including RemoteID) is path. With DecreasePriority it is
// PriorityBase, lowered by len(path)+1 beyond the first hop (-5, -8, -9 for
// paths of 1, 2, 3 brokers, as ActiveMQ); otherwise the consumer's own.
func (t *Table) priority(c advisory.Consumer, path []string) int {
	p := c.Priority
	if t.opts.DecreasePriority {
		p = t.opts.PriorityBase
		if len(path) > 1 {
			p -= len(path) + 1
		}
	}
	return min(max(p, minPriority), maxPriority)
}

// remove forgets the known consumer id and returns the Unsubscribe of its
// subscription if it was the last consumer.
func (t *Table) remove(id string) ([]Change, Action) {
	m := t.consumers[id]
	delete(t.consumers, id)
	s := t.subs[m.subID]
	delete(s.consumers, id)
	if len(s.consumers) > 0 {
		return nil, Left
	}
	delete(t.subs, s.ID)
	if s.shared {
		delete(t.conduit, s.key)
	}
	return []Change{{Kind: Unsubscribe, Sub: s.snapshot()}}, Removed
}

// Reset forgets all consumers and subscriptions and returns an Unsubscribe
// for every live subscription, in ID order. The bridge calls it when the
// remote side reconnects: ActiveMQ replays the remote consumers to the new
// advisory subscription, which rebuilds the demand. Subscription ids keep
// counting, so a new subscription never reuses the id of an old one.
func (t *Table) Reset() []Change {
	var changes []Change
	for _, s := range t.Subscriptions() {
		changes = append(changes, Change{Kind: Unsubscribe, Sub: s})
	}
	clear(t.consumers)
	clear(t.subs)
	clear(t.conduit)
	return changes
}

// Subscriptions returns the live subscriptions sorted by ID (as strings).
func (t *Table) Subscriptions() []Subscription {
	out := make([]Subscription, 0, len(t.subs))
	for _, s := range t.subs {
		out = append(out, s.snapshot())
	}
	slices.SortFunc(out, func(a, b Subscription) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// Len returns the number of live subscriptions.
func (t *Table) Len() int {
	return len(t.subs)
}

// Lookup returns the live subscription with the given ID.
func (t *Table) Lookup(id string) (Subscription, bool) {
	s, ok := t.subs[id]
	if !ok {
		return Subscription{}, false
	}
	return s.snapshot(), true
}
