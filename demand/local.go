package demand

import (
	"slices"
	"strings"

	"github.com/brokernet/brokernet/advisory"
	"github.com/brokernet/brokernet/destination"
	"github.com/brokernet/brokernet/hop"
)

// The local broker's consumer advisories tell the table two things that
// ActiveMQ's bridges learn inside the broker:
//
//   - which other bridges (in this process or others) hold demand
//     subscriptions for the same origin, so that only the best route
//     survives (suppressDuplicateQueueSubscriptions and
//     suppressDuplicateTopicSubscriptions, activemq-network.md §2.6), and
//   - whether a queue has plain local consumers, which decides whether
//     messages that came from the remote broker may go back to it
//     (replayWhenNoConsumers, §2.7).
//
// ActiveMQ serialises its duplicate check across the bridges of a broker
// with a lock; brokernet bridges may live in other processes, so every
// bridge applies the same total order of routes to what it sees and
// withdraws only in favour of a strictly better route that exists. The best
// route is never withdrawn, so the bridges settle with exactly the best
// route (or routes of equal rank) per origin.

// localKind says what a local consumer is to the table.
type localKind uint8

// The local consumer kinds.
const (
	// localPlain is an application consumer; it counts for replay.
	localPlain localKind = iota + 1
	// localRoute is another bridge's brokernet demand subscription.
	localRoute
	// localNetwork is an ActiveMQ network consumer, or a brokernet
	// subscription without a usable tag: tracked so that it never counts as
	// a plain consumer, but it carries no origin to compare.
	localNetwork
)

// localConsumer is one consumer on the local broker that is not ours.
type localConsumer struct {
	c     advisory.Consumer
	kind  localKind
	route routeKey            // localRoute
	rank  rank                // localRoute
	match destination.Pattern // localPlain on a wildcard destination
	wild  bool
}

// routeKey groups the routes to one origin on one destination. The origin
// key is the origin's broker (the first entry of the demand path) and the
// tag's origin, so that the origins of different brokers never compare
// equal, even when they are names such as StaticOrigin.
type routeKey struct {
	dest   destination.Destination
	origin string
}

// rank orders routes to the same origin, the same way in every bridge: a
// higher priority first (with DecreasePriority the priority encodes the
// path length, as ActiveMQ's duplicate check relies on), then a shorter
// path, then the smaller path joined with "|", so that no two different
// routes tie.
type rank struct {
	priority int
	path     []string
}

// better reports whether r ranks strictly better than o.
func (r rank) better(o rank) bool {
	switch {
	case r.priority != o.priority:
		return r.priority > o.priority
	case len(r.path) != len(o.path):
		return len(r.path) < len(o.path)
	}
	return strings.Join(r.path, "|") < strings.Join(o.path, "|")
}

// rankOf returns a slot's rank.
func (s *slot) rankOf() rank {
	return rank{priority: s.priority, path: s.path}
}

// ApplyLocal applies one consumer advisory from the local broker about a
// consumer that is not one of this table's subscriptions, and returns the
// Changes to make on the local broker and a Decision explaining them.
// Events are idempotent by consumer id, as for Apply.
//
// It tracks:
//   - other bridges' brokernet demand subscriptions (advisory.Consumer.Bridge),
//     by destination, origin, path and priority. With SuppressQueues or
//     SuppressTopics for the destination's kind, each of our subscriptions
//     for a network consumer (one origin reached through a network path;
//     not conduits of consumers on the remote broker, which are one hop
//     away, nor durables or static includes) is withheld while another
//     subscription on the destination for the same origin ranks strictly
//     better, ours or another bridge's: higher priority, then shorter path,
//     then smaller path joined with "|". It is withdrawn when such a route
//     appears, and re-subscribed (with a new ID) when the last better one
//     goes. Equal ranks keep both.
//   - plain local consumers (neither brokernet, nor ActiveMQ network
//     consumers, nor browsers). With ReplayWhenNoConsumers, every queue
//     with a live demand subscription from Apply and no plain local
//     consumer gets a replay subscription (Subscription.Replay), removed
//     when a plain consumer appears or the demand goes.
//   - ActiveMQ network consumers, only so that they never count as plain
//     consumers: their origin is not in their advisory, so they suppress
//     nothing.
//
// Replay subscriptions, ours or other bridges', are ignored. Feeding the
// table one of its own subscriptions is harmless: a route never ranks
// strictly better than itself.
func (t *Table) ApplyLocal(ev advisory.Event) ([]Change, Decision) {
	c := ev.Consumer
	d := Decision{ConsumerID: c.ID, Local: true}
	switch ev.Kind {
	case advisory.DurableRemoved:
		d.ConsumerID = "durable:" + c.SubscriptionName
		d.Action, d.Reason = Ignored, ReasonNotLocal
		return nil, d
	case advisory.ConsumerRemoved, advisory.ConsumerAdded:
	default:
		d.Action, d.Reason = Ignored, ReasonInvalid+": unknown event kind "+ev.Kind.String()
		return nil, d
	}
	if c.ID == "" {
		d.Action, d.Reason = Ignored, ReasonInvalid+": missing consumer id"
		return nil, d
	}
	if ev.Kind == advisory.ConsumerRemoved {
		if _, ok := t.local[c.ID]; !ok {
			d.Action, d.Reason = Ignored, ReasonUnknownConsumer
			return nil, d
		}
		t.forgetLocal(c.ID)
		d.Action = Removed
		return t.settle(), d
	}
	c = normalize(c)
	if lc, ok := t.local[c.ID]; ok {
		if sameLocal(lc.c, c) {
			d.Action, d.Reason = Ignored, ReasonDuplicate
			return nil, d
		}
		d.Replaced = true
		t.forgetLocal(c.ID)
	}
	lc, reason := classifyLocal(c)
	if reason != "" {
		d.Action, d.Reason = Ignored, reason
		return t.settle(), d
	}
	t.trackLocal(lc)
	changes := t.settle()
	d.Action = Added
	if lc.kind == localRoute {
		// Say so when this route withdrew or withheld one of ours.
		for _, s := range t.own[lc.route] {
			if len(s.members) > 0 && s.cur == nil && lc.rank.better(s.rankOf()) {
				d.Reason = ReasonSuppressed + hop.FormatPath(lc.c.Path)
				break
			}
		}
	}
	return changes, d
}

// sameLocal reports whether a and b are the same as far as ApplyLocal is
// concerned.
func sameLocal(a, b advisory.Consumer) bool {
	return a.Destination == b.Destination && a.Priority == b.Priority &&
		slices.Equal(a.Path, b.Path) && a.Origin == b.Origin &&
		a.Browser == b.Browser && a.Bridge == b.Bridge && a.Native == b.Native && a.Replay == b.Replay
}

// classifyLocal decides what a local consumer is, or why it is ignored.
func classifyLocal(c advisory.Consumer) (*localConsumer, string) {
	lc := &localConsumer{c: c}
	switch {
	case !c.Destination.Kind.Valid() || c.Destination.Name == "":
		return nil, ReasonInvalid + ": invalid destination"
	case c.Replay:
		return nil, ReasonReplay
	case c.Bridge && c.Origin != "" && len(c.Path) > 0:
		lc.kind = localRoute
		lc.route = routeKey{dest: c.Destination, origin: c.Path[0] + "\x00" + c.Origin}
		lc.rank = rank{priority: c.Priority, path: c.Path}
	case c.Bridge || c.Native:
		lc.kind = localNetwork
	case c.Browser:
		return nil, ReasonBrowser
	default:
		lc.kind = localPlain
		if isWildcard(c.Destination.Name) {
			p, err := destination.ParsePattern(c.Destination.String())
			if err == nil {
				lc.match, lc.wild = p, true
			}
		}
	}
	return lc, ""
}

// isWildcard reports whether a destination name has a wildcard word, so
// that a consumer on it receives from the destinations it matches.
func isWildcard(name string) bool {
	for w := range strings.SplitSeq(name, ".") {
		if w == destination.AnyWord || w == destination.AnyRest {
			return true
		}
	}
	return false
}

// trackLocal records lc and touches what it may change.
func (t *Table) trackLocal(lc *localConsumer) {
	t.local[lc.c.ID] = lc
	switch lc.kind {
	case localRoute:
		byID := t.foreign[lc.route]
		if byID == nil {
			byID = make(map[string]*localConsumer)
			t.foreign[lc.route] = byID
		}
		byID[lc.c.ID] = lc
		t.touch(lc.c.Destination)
	case localPlain:
		if lc.wild {
			t.wild[lc.c.ID] = lc
			t.touchMatching(lc.match)
		} else {
			t.plain[lc.c.Destination]++
			t.touch(lc.c.Destination)
		}
	}
}

// forgetLocal undoes trackLocal for the consumer id.
func (t *Table) forgetLocal(id string) {
	lc := t.local[id]
	delete(t.local, id)
	switch lc.kind {
	case localRoute:
		if byID := t.foreign[lc.route]; byID != nil {
			delete(byID, id)
			if len(byID) == 0 {
				delete(t.foreign, lc.route)
			}
		}
		t.touch(lc.c.Destination)
	case localPlain:
		if lc.wild {
			delete(t.wild, id)
			t.touchMatching(lc.match)
		} else {
			if t.plain[lc.c.Destination]--; t.plain[lc.c.Destination] <= 0 {
				delete(t.plain, lc.c.Destination)
			}
			t.touch(lc.c.Destination)
		}
	}
}

// touchMatching touches the destinations with slots that p matches.
func (t *Table) touchMatching(p destination.Pattern) {
	for d := range t.byDest {
		if p.Match(d) {
			t.touch(d)
		}
	}
}

// suppressionOn reports whether duplicate suppression applies to kind.
func (t *Table) suppressionOn(k destination.Kind) bool {
	switch k {
	case destination.Queue:
		return t.opts.SuppressQueues
	case destination.Topic:
		return t.opts.SuppressTopics
	}
	return false
}

// suppressor returns the path of the best route that ranks strictly better
// than candidate slot s, another bridge's or another of ours, or nil when s
// may hold its subscription.
func (t *Table) suppressor(s *slot) []string {
	if !s.candidate || !t.suppressionOn(s.key.dest.Kind) {
		return nil
	}
	mine := s.rankOf()
	var best *rank
	consider := func(r rank) {
		if r.better(mine) && (best == nil || r.better(*best)) {
			best = &r
		}
	}
	for _, lc := range t.foreign[s.route] {
		consider(lc.rank)
	}
	for _, o := range t.own[s.route] {
		if o != s && len(o.members) > 0 {
			consider(o.rankOf())
		}
	}
	if best == nil {
		return nil
	}
	return best.path
}

// localConsumers counts the plain local consumers that receive from queue
// d: those on d itself and those on wildcard destinations matching it.
func (t *Table) localConsumers(d destination.Destination) int {
	n := t.plain[d]
	for _, lc := range t.wild {
		if lc.match.Match(d) {
			n++
		}
	}
	return n
}

// replayOrigin is the tag origin of replay subscriptions.
const replayOrigin = "replay"

// ensureReplaySlot creates d's replay slot if replay applies to it, so that
// settle reconciles it after d's demand slots.
func (t *Table) ensureReplaySlot(d destination.Destination) {
	if t.opts.ReplayWhenNoConsumers && d.Kind == destination.Queue {
		t.slotFor(slotKey{dest: d, kind: replaySlot})
	}
}

// replaySpec is the replay subscription queue d needs, or nil: while the
// table holds a live demand subscription from Apply on d and the local
// broker has no plain consumer for it. Its user selector is the OR of what
// that demand selects, and its selector takes only messages that already
// visited the remote broker, which the demand subscriptions' hop filter
// withholds. ActiveMQ's replay branch skips messageTTL, and so does it.
func (t *Table) replaySpec(d destination.Destination) *Subscription {
	var sels []string
	demand := false
	for k, s := range t.byDest[d] {
		if k.kind == demandSlot && s.cur != nil {
			demand = true
			sels = append(sels, s.selectors()...)
		}
	}
	if !demand || t.localConsumers(d) > 0 {
		return nil
	}
	user := andSelectors(t.opts.contentFilter(d), orSelectors(sels))
	path := []string{t.opts.RemoteID}
	tag := hop.Tag{Path: path, Origin: replayOrigin, Replay: true}
	return &Subscription{
		Destination:  d,
		Selector:     hop.ReplaySelector(user, t.opts.RemoteID, t.opts.MaxReplays, tag),
		UserSelector: user,
		Priority:     t.priority(0, path),
		Prefetch:     t.opts.Prefetch,
		Replay:       true,
	}
}
