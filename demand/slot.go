package demand

import (
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/brokernet/brokernet/advisory"
	"github.com/brokernet/brokernet/destination"
	"github.com/brokernet/brokernet/hop"
)

// A slot is one place where the table may want a subscription: a demand
// group (a conduit of plain consumers, or one solo consumer or remote
// durable subscription), a static include, or a queue's replay
// subscription. After every event settle compares what each touched slot
// wants with what it holds on the local broker and emits the difference.

// slotKind says what a slot is for.
type slotKind uint8

// The slot kinds, in the order settle visits them on one destination:
// replay slots last, because they depend on the demand slots' state.
const (
	staticSlot slotKind = iota + 1
	demandSlot
	replaySlot
)

// slotKey identifies a slot.
type slotKey struct {
	dest    destination.Destination
	kind    slotKind
	durable bool
	// id is "" for conduit groups, static includes and replay slots; the
	// consumer id for a solo non-durable group; durableKey.String() for a
	// solo durable group.
	id string
	// selector is the user selector of a topic conduit group: topic demand
	// is one group per distinct selector, so that no subscription is ever
	// replaced while a consumer it serves remains (see conduitSelector).
	selector string
}

// compare orders keys deterministically within one destination.
func (k slotKey) compare(o slotKey) int {
	switch {
	case k.kind != o.kind:
		return int(k.kind) - int(o.kind)
	case k.durable != o.durable:
		if k.durable {
			return 1
		}
		return -1
	}
	if c := strings.Compare(k.id, o.id); c != 0 {
		return c
	}
	return strings.Compare(k.selector, o.selector)
}

// slot holds what one demand group, static include or replay subscription
// is and has.
type slot struct {
	key slotKey
	// Fixed when the group gets its first consumer (identify).
	candidate bool     // a network route, subject to duplicate suppression
	path      []string // the tag's path: the demand's path plus RemoteID
	origin    string   // the tag's origin
	priority  int
	route     routeKey          // for candidates
	ident     advisory.Consumer // the consumer identify used, for Durables

	members map[string]*member         // remote consumers served
	records map[durableKey]*durableRec // durable groups: remote durable subscriptions, online or not
	match   destination.Pattern        // static slots: the destination as a pattern
	// narrowed marks a static slot made for one local destination of a
	// static include that exclusions overlap (static.go); gone, that the
	// destination went.
	narrowed, gone bool

	cur  *Subscription // live on the local broker; Consumers unset
	kept *Subscription // durable subscription kept inactive on the local broker
}

// liveID returns the ID of the slot's live subscription, or "".
func (s *slot) liveID() string {
	if s.cur == nil {
		return ""
	}
	return s.cur.ID
}

// snapshot returns a copy of sub, one of s's subscriptions, with Consumers
// filled in: the members for a live one, none for a kept one.
func (s *slot) snapshot(sub *Subscription) Subscription {
	out := *sub
	out.Consumers = nil
	if sub == s.cur && len(s.members) > 0 {
		out.Consumers = slices.Sorted(maps.Keys(s.members))
	}
	return out
}

// slotFor returns the slot with key k, creating an empty one.
func (t *Table) slotFor(k slotKey) *slot {
	if s, ok := t.slots[k]; ok {
		return s
	}
	s := &slot{key: k, members: make(map[string]*member)}
	if k.durable {
		s.records = make(map[durableKey]*durableRec)
	}
	t.slots[k] = s
	byKey := t.byDest[k.dest]
	if byKey == nil {
		byKey = make(map[slotKey]*slot)
		t.byDest[k.dest] = byKey
	}
	byKey[k] = s
	return s
}

// dropSlot forgets a slot that holds nothing on the local broker.
func (t *Table) dropSlot(s *slot) {
	t.unindex(s)
	delete(t.slots, s.key)
	if byKey := t.byDest[s.key.dest]; byKey != nil {
		delete(byKey, s.key)
		if len(byKey) == 0 {
			delete(t.byDest, s.key.dest)
		}
	}
}

// conduitOrigin is the origin of a conduit group: a name for "the plain
// (durable) consumers of dest on broker remote". Every bridge watching that
// broker derives the same name, whatever consumers it saw first, so
// duplicate routes to the group are recognised downstream, and a durable
// conduit keeps the same selector across restarts.
func conduitOrigin(remote string, dest destination.Destination, durable bool) string {
	o := "conduit:" + remote + ":" + dest.String()
	if durable {
		o += ":durable"
	}
	return o
}

// identify fixes a demand group's path, origin, priority and role from its
// first consumer c.
func (t *Table) identify(s *slot, c advisory.Consumer, conduit, durable bool) {
	t.unindex(s)
	s.ident = c
	if conduit {
		s.path = []string{t.opts.RemoteID}
	} else {
		s.path = append(slices.Clone(c.Path), t.opts.RemoteID)
	}
	switch {
	case conduit:
		s.origin = conduitOrigin(t.opts.RemoteID, c.Destination, durable)
	case c.Bridge && c.Origin != "":
		s.origin = c.Origin // keep the original consumer across hops, like networkConsumerIds
	case durable:
		// Stable across reconnects of the remote subscriber, unlike its
		// consumer id, so that the durable's selector does not change.
		s.origin = "durable:" + t.opts.RemoteID + ":" + c.ClientID + ":" + c.SubscriptionName
	default:
		s.origin = c.ID
	}
	s.priority = t.priority(c.Priority, s.path)
	// Subscriptions for consumers on the remote broker itself are one hop
	// away and never lose; durable ones are never suppressed either (as
	// ActiveMQ spares inactive durables), because withdrawing one would
	// drop the messages it keeps.
	s.candidate = !conduit && !durable && len(c.Path) > 0
	s.route = routeKey{dest: c.Destination, origin: s.path[0] + "\x00" + s.origin}
	t.index(s)
}

// index registers a candidate slot under its route.
func (t *Table) index(s *slot) {
	if !s.candidate {
		return
	}
	byKey := t.own[s.route]
	if byKey == nil {
		byKey = make(map[slotKey]*slot)
		t.own[s.route] = byKey
	}
	byKey[s.key] = s
}

// unindex undoes index.
func (t *Table) unindex(s *slot) {
	if !s.candidate {
		return
	}
	if byKey := t.own[s.route]; byKey != nil {
		delete(byKey, s.key)
		if len(byKey) == 0 {
			delete(t.own, s.route)
		}
	}
}

// touch marks dest for the next settle.
func (t *Table) touch(dest destination.Destination) {
	t.dirty[dest] = struct{}{}
}

// settle reconciles every slot on the touched destinations and returns the
// Changes: first those of slots that subscribe (replacement pairs kept
// together), then those of slots that only unsubscribe, each group in
// destination and slot order.
func (t *Table) settle() []Change {
	dests := slices.SortedFunc(maps.Keys(t.dirty), func(a, b destination.Destination) int {
		return strings.Compare(a.String(), b.String())
	})
	clear(t.dirty)
	var subscribing, unsubscribing []Change
	for _, d := range dests {
		t.ensureReplaySlot(d)
		keys := slices.SortedFunc(maps.Keys(t.byDest[d]), slotKey.compare)
		for _, k := range keys {
			s := t.slots[k]
			changes := t.reconcile(s)
			if slices.ContainsFunc(changes, func(c Change) bool { return c.Kind == Subscribe }) {
				subscribing = append(subscribing, changes...)
			} else {
				unsubscribing = append(unsubscribing, changes...)
			}
		}
	}
	return append(subscribing, unsubscribing...)
}

// desired returns the subscription slot s wants without ID and Consumers,
// or nil for none, and whether it must be live (false: a durable
// subscription kept inactive).
func (t *Table) desired(s *slot) (want *Subscription, live bool) {
	switch s.key.kind {
	case staticSlot:
		if !s.staticWanted() {
			return nil, false
		}
		return t.staticSpec(s), true
	case replaySlot:
		return t.replaySpec(s.key.dest), true
	}
	if len(s.members) > 0 {
		if t.suppressor(s) != nil {
			return nil, false
		}
		return t.demandSpec(s), true
	}
	if len(s.records) > 0 {
		return t.demandSpec(s), false
	}
	return nil, false
}

// selectors returns the user selectors of the demand a group serves: its
// consumers', or for a durable group those of its remote durable
// subscriptions, online or not (the kept durable must keep their messages).
func (s *slot) selectors() []string {
	var out []string
	for _, rec := range s.records {
		out = append(out, rec.selector)
	}
	for _, m := range s.members {
		if m.rec == nil || m.rec.slot != s {
			out = append(out, m.c.Selector)
		}
	}
	return out
}

// orSelectors combines user selectors: "" when there are none or one is ""
// (a consumer without selector wants everything), the selector itself when
// all are equal, else "(s1) OR (s2) ..." over the distinct selectors in
// sorted order, so that the result depends only on the set.
func orSelectors(sels []string) string {
	if len(sels) == 0 || slices.Contains(sels, "") {
		return ""
	}
	return joinSelectors(slices.Compact(slices.Sorted(slices.Values(sels))), " OR ")
}

// joinSelectors joins non-empty selectors with op ("AND", "OR" in spaces):
// "" for none, the selector itself for one, else "(s1) op (s2) ...".
func joinSelectors(sels []string, op string) string {
	switch len(sels) {
	case 0:
		return ""
	case 1:
		return sels[0]
	}
	var b strings.Builder
	for i, s := range sels {
		if i > 0 {
			b.WriteString(op)
		}
		b.WriteString("(")
		b.WriteString(s)
		b.WriteString(")")
	}
	return b.String()
}

// demandSpec is the subscription a demand group needs.
func (t *Table) demandSpec(s *slot) *Subscription {
	user := andSelectors(t.opts.contentFilter(s.key.dest), orSelectors(s.selectors()))
	tag := hop.Tag{Path: s.path, Origin: s.origin}
	if s.key.dest.Kind == destination.Topic && len(s.path) > 0 {
		tag.For = s.path[0]
	}
	sub := &Subscription{
		Destination:  s.key.dest,
		Selector:     hop.Selector(user, t.opts.RemoteID, t.opts.MessageTTL, tag),
		UserSelector: user,
		Priority:     s.priority,
		Prefetch:     t.opts.Prefetch,
	}
	switch {
	case s.key.dest.Kind == destination.Queue:
		sub.Exclusive = s.exclusive()
	case s.key.dest.Kind == destination.Topic && !s.key.durable:
		sub.Retroactive = s.ident.Retroactive
	}
	if s.key.durable {
		sub.DurableName = t.durableName(s, user)
	}
	return sub
}

// exclusive reports whether any consumer the group serves is exclusive.
func (s *slot) exclusive() bool {
	for _, m := range s.members {
		if m.c.Exclusive {
			return true
		}
	}
	return false
}

// sameSpec reports whether a and b are the same subscription but for ID
// and Consumers.
func sameSpec(a, b *Subscription) bool {
	return a.Destination == b.Destination && a.Selector == b.Selector &&
		a.UserSelector == b.UserSelector && a.Priority == b.Priority &&
		a.Prefetch == b.Prefetch && a.DurableName == b.DurableName &&
		a.Exclusive == b.Exclusive && a.Retroactive == b.Retroactive &&
		a.Static == b.Static && a.Replay == b.Replay
}

// newSub gives want a fresh ID and makes it s's live subscription.
func (t *Table) newSub(s *slot, want *Subscription) *Subscription {
	t.seq++
	sub := *want
	sub.ID = subIDPrefix + strconv.FormatUint(t.seq, 10)
	s.cur = &sub
	t.subs[sub.ID] = s
	return &sub
}

// reconcile moves slot s from what it holds to what it wants and returns
// the Changes; it drops the slot when it holds and wants nothing.
func (t *Table) reconcile(s *slot) []Change {
	want, live := t.desired(s)
	var out []Change
	subscribe := func(sub *Subscription, replaces string) {
		out = append(out, Change{Kind: Subscribe, Sub: s.snapshot(sub), Replaces: replaces})
	}
	unsubscribe := func(old *Subscription, ch Change) {
		ch.Kind = Unsubscribe
		ch.Sub = s.snapshot(old)
		out = append(out, ch)
	}
	// retire ends the live subscription old.
	retire := func(old *Subscription) {
		delete(t.subs, old.ID)
		s.cur = nil
	}
	// sameDurable reports whether want is the durable subscription old with
	// other consumer properties at most (the name hashes the selector):
	// the local broker's durable subscription can serve it.
	sameDurable := func(old *Subscription) bool {
		return want != nil && old.DurableName != "" && want.DurableName == old.DurableName
	}
	switch {
	case s.cur != nil:
		old := s.cur
		switch {
		case want == nil:
			unsubscribe(old, Change{DestroyDurable: old.DurableName != ""})
			retire(old)
		case !live && sameDurable(old):
			unsubscribe(old, Change{KeepDurable: true})
			retire(old)
			s.kept = old
		case !live:
			unsubscribe(old, Change{DestroyDurable: true})
			retire(old)
		case sameSpec(old, want):
		case sameDurable(old):
			// Two live subscriptions cannot share a durable name, so the
			// old one is deactivated first and the new one reactivates the
			// durable subscription with the new properties (a priority).
			retire(old)
			nw := t.newSub(s, want)
			unsubscribe(old, Change{ReplacedBy: nw.ID, KeepDurable: true})
			subscribe(nw, old.ID)
		default:
			retire(old)
			nw := t.newSub(s, want)
			subscribe(nw, old.ID)
			unsubscribe(old, Change{ReplacedBy: nw.ID, DestroyDurable: old.DurableName != ""})
		}
	case s.kept != nil:
		old := s.kept
		switch {
		case !live && sameDurable(old):
			// The kept durable subscription keeps the messages.
		case want == nil || !live:
			unsubscribe(old, Change{DestroyDurable: true})
			s.kept = nil
		case sameDurable(old):
			s.kept = nil
			subscribe(t.newSub(s, want), "") // reactivation, same DurableName
		default:
			s.kept = nil
			nw := t.newSub(s, want)
			subscribe(nw, old.ID)
			unsubscribe(old, Change{ReplacedBy: nw.ID, DestroyDurable: true})
		}
	case want != nil && live:
		subscribe(t.newSub(s, want), "")
	}
	if s.cur == nil && s.kept == nil && len(s.members) == 0 && len(s.records) == 0 && (s.key.kind != staticSlot || s.gone) {
		t.dropSlot(s)
	}
	return out
}
