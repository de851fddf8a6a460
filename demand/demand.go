// Package demand decides which local demand subscriptions must exist for the
// consumers seen on the remote broker.
//
// A Table is a pure state machine fed with advisory events. It follows
// ActiveMQ's DemandForwardingBridgeSupport.serviceRemoteConsumerAdvisory,
// ConduitBridge and DurableConduitBridge (activemq-network.md §2.2, §2.3,
// §2.5), duplicate-route suppression (§2.6) and replayWhenNoConsumers
// (§2.7), and performs no I/O: the bridge applies the Changes it returns to
// the local broker.
//
// Remote consumer advisories go to Apply, the local broker's advisories about
// consumers other than the bridge's own to ApplyLocal, its destination
// advisories to Destination (and, for wildcard demand, to an Expander), and
// static includes are created by Start, those that exclusions overlap
// narrowed to the local destinations Destination reports. After every call
// the table reconciles each subscription it wants with the one the local
// broker holds, so the Changes it returns are always the difference between
// two consistent states.
//
// # Selectors under conduit
//
// A conduit shares demand between the plain remote consumers of one
// destination. A queue's shared subscription selects the OR of their
// selectors and is replaced (new one first) when the OR changes: what the
// old subscription held unacknowledged goes back to the queue at its
// UNSUBSCRIBE, so a replacement loses nothing. A topic is different: the
// broker discards what it holds for a subscription (dispatched but not
// acknowledged, or pending behind a full prefetch) when that subscription
// goes, and a non-durable topic copy is never redelivered, so replacing a
// topic subscription while its consumers remain loses up to a prefetch and
// a backlog each time (issue 8, defect 1). Topic demand is therefore one
// subscription per distinct user selector: consumers with the same selector
// share it, a consumer without selector gets an unfiltered one of its own,
// and each goes only with its last consumer, which wants none of what it
// held. A message that several of them select reaches the bridge once per
// subscription, and the bridge forwards it once (message-id
// de-duplication across its subscriptions on one topic).
//
// Durable topic demand follows the same rule, which also makes each durable
// demand subscription's name depend only on its topic and selector: another
// subscriber's selector coming or going never destroys what the local broker
// keeps for an offline durable subscriber (issue 8, defect 2). The remote
// durable subscriptions a table tracks, online or not, can be saved
// (Durables) and restored into a new table (Restore), as the remote broker's
// advisories never list offline ones; StaleDurables then names the durable
// demand no remote durable subscription produces any more, and Forget drops
// one offline too long.
package demand

import (
	"fmt"
	"slices"
	"strings"

	"github.com/brokernet/brokernet/advisory"
	"github.com/brokernet/brokernet/destination"
	"github.com/brokernet/brokernet/hop"
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
	// Destination is the destination to subscribe to. For a static include
	// it may contain wildcards.
	Destination destination.Destination
	// Selector is the full selector built by hop.Selector: the user
	// selector, the hop filter for RemoteID and MessageTTL, and the tag with
	// the demand's path plus RemoteID and its origin. A replay
	// subscription's is built by hop.ReplaySelector instead.
	Selector string
	// UserSelector is the user part of Selector: the remote consumer's own
	// selector, the selector shared by a topic conduit subscription's
	// consumers, or for a queue conduit subscription the OR of its
	// consumers' selectors; "" for none. Under content filters
	// (Options.ContentFilters) it is "(filters) AND (that)".
	UserSelector string
	// Priority is the consumer priority to subscribe with.
	Priority int
	// Prefetch is the prefetch to subscribe with.
	Prefetch int
	// Consumers lists the remote consumer ids served, sorted. It is empty
	// for a replay subscription, for a static include that no remote
	// consumer joined, and for a durable subscription kept while its
	// consumers are offline.
	Consumers []string
	// DurableName is set for a durable topic demand subscription: the
	// bridge subscribes with activemq.subscriptionName set to it. It is
	// "bn_" + LocalID + "_" + the topic name, sanitized to [A-Za-z0-9._-] and
	// bounded in length, followed by "_" and a short hash when the user
	// selector is not empty, when the subscription serves one remote durable
	// subscription rather than a conduit of them, or when sanitizing changed
	// the topic name. It depends on nothing else, so a restarted bridge
	// finds the durable subscription, and the messages it kept, again, and
	// as a conduit keeps one durable subscription per selector, the name of
	// a remote durable subscriber's demand never changes while that remote
	// subscription exists with its selector.
	DurableName string
	// Exclusive makes the subscription an exclusive queue consumer on the
	// local broker (ActiveMQ's ConsumerInfo.exclusive, STOMP
	// activemq.exclusive). A queue demand subscription is exclusive when any
	// remote consumer it serves is: the remote broker then dispatches to that
	// consumer alone, and an exclusive demand subscription makes the local
	// broker do the same for the network, so that of exclusive consumers on
	// several brokers the first one stays the only active one (see
	// docs/consumer-flags.md). ActiveMQ's ConduitBridge copies the flags of
	// whichever consumer created the shared subscription; here the answer
	// does not depend on the order in which the consumers came, and a
	// conduit subscription is replaced (the new one first) when it changes.
	// Static includes, replay and topic subscriptions are never exclusive.
	Exclusive bool
	// Retroactive asks the local broker to replay to the new subscription
	// the recent topic messages its subscription recovery policy kept
	// (ActiveMQ's ConsumerInfo.retroactive), as the networkConnector does
	// for a retroactive remote consumer. It is set on a non-durable topic
	// subscription whose first consumer was retroactive: it matters only
	// when the subscription is made, so a retroactive consumer joining an
	// existing subscription changes nothing (the remote broker's own
	// recovery serves it what was forwarded), and the first consumer leaving
	// does not take it away. (A solo consumer re-advised with the other
	// flag is a new consumer, and gets a replacement.)
	Retroactive bool
	// Static is true for a subscription created by Start for a static
	// include.
	Static bool
	// Replay is true for a replay subscription (ReplayWhenNoConsumers): it
	// takes the queue's messages that already visited the remote broker.
	Replay bool
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
// which change without broker actions when conduit consumers join or leave)
// and its InactiveDurables.
//
// Within one call's Changes, every Change that subscribes comes before
// those that only unsubscribe, so that demand moving from one subscription
// to another never has a gap. A replacement is an adjacent pair: the
// Subscribe (Replaces) and then the Unsubscribe (ReplacedBy) — except when a
// durable subscription keeps its DurableName and only its consumer
// properties (the priority) change: ActiveMQ allows one active subscriber
// per durable subscription, so the Unsubscribe (ReplacedBy, KeepDurable)
// comes first and its UNSUBSCRIBE must be complete before the SUBSCRIBE of
// the same name is sent. The same holds whenever a Subscribe reactivates a
// DurableName whose deactivation the bridge has not finished.
type Change struct {
	// Kind says what to do.
	Kind ChangeKind
	// Sub is the subscription concerned, as it was at the time of the
	// change. The Consumers of an Unsubscribe are empty when the last
	// consumer left, and those still served when it comes from Reset.
	Sub Subscription
	// Replaces is set on a Subscribe that replaces the subscription with
	// this id, because what the demand needs changed (a queue conduit
	// subscription's OR of selectors, a solo consumer's own selector, the
	// selector of a replay subscription). A topic conduit subscription is
	// never replaced (see the package documentation). The Unsubscribe of the old
	// subscription, with ReplacedBy set, follows (see above for the one
	// exception). The bridge keeps the old one until its in-flight messages
	// are confirmed, and drops topic messages that reach it through both
	// during the overlap. A replaced durable subscription has a new
	// DurableName and the old one is destroyed (DestroyDurable).
	Replaces string
	// ReplacedBy is set on the Unsubscribe of a replaced subscription: the
	// id of the subscription that took over.
	ReplacedBy string
	// KeepDurable is set on the Unsubscribe of a durable subscription whose
	// remote durable subscribers all went offline (or that Reset
	// withdraws): the bridge deactivates it (UNSUBSCRIBE without
	// activemq.subscriptionName), so the local broker keeps its messages. A
	// later Subscribe with the same DurableName (and a new ID) reactivates
	// it.
	KeepDurable bool
	// DestroyDurable is set on the Unsubscribe of a durable subscription
	// that must disappear with its messages: the remote durable
	// subscription was destroyed, DynamicOnly is set, or the durable was
	// replaced by one with another selector. Sub may be inactive (kept
	// earlier by KeepDurable): the bridge then only destroys it.
	DestroyDurable bool
}

// Action summarises what an event did to the table.
type Action uint8

// The actions. The zero Action is invalid.
const (
	// Ignored means the event changed nothing; Decision.Reason says why.
	Ignored Action = iota + 1
	// Added means a new subscription was created for the consumer (or, for
	// ApplyLocal, that the local consumer is now tracked).
	Added
	// Joined means the consumer was added to a subscription that other
	// consumers share (a conduit or static subscription), possibly
	// re-issued with a new selector.
	Joined
	// Left means the consumer was removed from a subscription that stays
	// (other consumers keep it alive, or it is static).
	Left
	// Removed means the consumer was removed together with its subscription
	// (or, for ApplyLocal, that the local consumer is no longer tracked).
	Removed
	// Suppressed means the consumer was accepted, but its subscription is
	// withheld because a better route to the same origin exists
	// (SuppressQueues, SuppressTopics); Decision.Reason names the route.
	Suppressed
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
	case Suppressed:
		return "suppressed"
	}
	return fmt.Sprintf("Action(%d)", uint8(a))
}

// Reasons reported in Decision.Reason.
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
	// ReasonTemporary is reported for temporary destinations while
	// Options.BridgeTemp is off.
	ReasonTemporary = "temporary destination"
	// ReasonComposite is reported for a composite destination that reached
	// the table whole: composite demand is served member by member (the
	// Expander splits it), never as one subscription whose members the
	// rules were not checked against.
	ReasonComposite = "composite destination"
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
	// ReasonReplay is reported for a brokernet replay subscription, which is
	// not demand.
	ReasonReplay = "replay subscription"
	// ReasonUnknownDurable is reported for the destruction of a durable
	// subscription that no remote durable consumer of the table had.
	ReasonUnknownDurable = "unknown durable subscription"
	// ReasonDurableActive is reported for the destruction of a durable
	// subscription whose consumer is online, which ActiveMQ refuses.
	ReasonDurableActive = "durable subscription is active"
	// ReasonNotLocal is reported by ApplyLocal for a durable subscription's
	// destruction, which says nothing about routes or local consumers.
	ReasonNotLocal = "not relevant on the local broker"
	// ReasonSuppressed starts the Reason of a Suppressed decision, and of an
	// ApplyLocal decision whose foreign route withdrew one of ours; the
	// better route's path follows, as a PathHeader value ("|A|B|").
	ReasonSuppressed = "suppressed: better route via "
)

// Decision explains, for logging, what Apply or ApplyLocal did with one
// event.
type Decision struct {
	// Action is what happened.
	Action Action
	// Reason says why an event was ignored or suppressed (one of the Reason
	// constants, possibly with details after ": "); "" otherwise.
	Reason string
	// ConsumerID is the consumer's id; for a DurableRemoved event,
	// "durable:" followed by the subscription name.
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
	// Local is true for a decision of ApplyLocal: the consumer is on the
	// local broker.
	Local bool
}

// String renders the decision for a log line.
func (d Decision) String() string {
	var b strings.Builder
	b.WriteString(d.Action.String())
	if d.Local {
		b.WriteString(" local")
	}
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

// member is an accepted remote consumer.
type member struct {
	c    advisory.Consumer
	slot *slot       // the demand group or static include serving it
	rec  *durableRec // its durable subscription, for a durable consumer
}

// Table holds the demand of one bridge: the accepted remote consumers, what
// the local broker's advisories said about other consumers there, and the
// local subscriptions that serve the demand.
//
// A Table is not safe for concurrent use; the bridge owns it from one
// goroutine.
type Table struct {
	opts      Options
	seq       uint64
	consumers map[string]*member // accepted remote consumers by id
	slots     map[slotKey]*slot
	byDest    map[destination.Destination]map[slotKey]*slot
	subs      map[string]*slot // slots by the ID of their live subscription
	durables  map[durableKey]*durableRec
	own       map[routeKey]map[slotKey]*slot       // our suppression candidates
	started   bool                                 // Start was called since New or Reset
	narrow    []destination.Pattern                // static includes narrowed to destinations (Start)
	dests     map[destination.Destination]struct{} // the local broker's destinations (Destination)
	dirty     map[destination.Destination]struct{}

	// What ApplyLocal learnt about the local broker.
	local   map[string]*localConsumer
	foreign map[routeKey]map[string]*localConsumer // other bridges' demand
	plain   map[destination.Destination]int        // plain consumers by exact destination
	wild    map[string]*localConsumer              // plain consumers on wildcard destinations
}

// New returns an empty Table. opts should pass Validate; New itself only
// replaces TTLs below -1 by -1 and a non-positive Prefetch by
// DefaultPrefetch.
func New(opts Options) *Table {
	return &Table{
		opts:      opts.normalized(),
		consumers: make(map[string]*member),
		slots:     make(map[slotKey]*slot),
		byDest:    make(map[destination.Destination]map[slotKey]*slot),
		subs:      make(map[string]*slot),
		durables:  make(map[durableKey]*durableRec),
		own:       make(map[routeKey]map[slotKey]*slot),
		dirty:     make(map[destination.Destination]struct{}),
		dests:     make(map[destination.Destination]struct{}),
		local:     make(map[string]*localConsumer),
		foreign:   make(map[routeKey]map[string]*localConsumer),
		plain:     make(map[destination.Destination]int),
		wild:      make(map[string]*localConsumer),
	}
}

// Apply applies one advisory event from the remote broker and returns the
// Changes to make on the local broker, in order, and a Decision explaining
// them.
//
// ConsumerAdded events are idempotent by consumer id, because ActiveMQ
// replays every existing consumer to a new advisory subscriber and live
// events can race with that replay (activemq-network.md §6.2): an event for a
// known consumer with the same demand-relevant properties changes nothing,
// and one with different properties is applied as a removal followed by an
// addition, reconciled as one step (a consumer that keeps its subscription
// but changes its selector gives a replacement, not a gap). Demand-relevant
// are destination, selector, path, origin, durable subscription name and
// client id, the Browser/Bridge/Native/Replay/Exclusive/Retroactive flags
// and, unless
// DecreasePriority, priority; not prefetch, which ActiveMQ reports as 0 when
// the consumer asked for a receipt and corrects later. A ConsumerRemoved for
// an unknown id changes nothing.
//
// A ConsumerRemoved of a durable topic subscriber means it went offline: its
// durable demand is kept inactive (Change.KeepDurable) unless DynamicOnly. A
// DurableRemoved destroys the durable demand of the remote durable
// subscriptions it names (Change.DestroyDurable).
func (t *Table) Apply(ev advisory.Event) ([]Change, Decision) {
	c := ev.Consumer
	d := Decision{ConsumerID: c.ID}
	if ev.Kind == advisory.DurableRemoved {
		return t.applyDurableRemoved(ev)
	}
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
		s := m.slot
		d.SubID = s.liveID()
		t.remove(c.ID)
		changes := t.settle()
		d.Action = Removed
		if len(s.members) > 0 || s.key.kind == staticSlot && s.cur != nil {
			d.Action = Left
		}
		return changes, d
	case advisory.ConsumerAdded:
		c = normalize(c)
		if m, ok := t.consumers[c.ID]; ok {
			if t.sameDemand(m.c, c) {
				d.Action, d.Reason, d.SubID = Ignored, ReasonDuplicate, m.slot.liveID()
				return nil, d
			}
			d.Replaced, d.PreviousSubID = true, m.slot.liveID()
			t.remove(c.ID)
		}
		if reason := t.reject(c); reason != "" {
			d.Action, d.Reason = Ignored, reason
			return t.settle(), d
		}
		s := t.add(c)
		changes := t.settle()
		d.SubID = s.liveID()
		switch {
		case d.SubID == "":
			d.Action, d.Reason = Suppressed, ReasonSuppressed+hop.FormatPath(t.suppressor(s))
		case s.key.kind == staticSlot || len(s.members) > 1:
			d.Action = Joined
		default:
			d.Action = Added
		}
		return changes, d
	}
	d.Action, d.Reason = Ignored, ReasonInvalid+": unknown event kind "+ev.Kind.String()
	return nil, d
}

// TempGone forgets every remote consumer of the temporary destination d,
// which the remote broker removed (its temporary destination advisory), and
// returns the changes that removes their demand. ActiveMQ sends no RemoveInfo
// for a consumer of a temporary destination that is already gone
// (activemq-network.md §6.1), so without this its demand would stay.
func (t *Table) TempGone(d destination.Destination) []Change {
	if !d.IsTemp() {
		return nil
	}
	var ids []string
	for id, m := range t.consumers {
		if m.c.Destination == d {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	slices.Sort(ids)
	for _, id := range ids {
		t.remove(id)
	}
	return t.settle()
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
		a.SubscriptionName == b.SubscriptionName && a.ClientID == b.ClientID &&
		a.Browser == b.Browser && a.Bridge == b.Bridge && a.Native == b.Native && a.Replay == b.Replay &&
		a.Exclusive == b.Exclusive && a.Retroactive == b.Retroactive &&
		(t.opts.DecreasePriority || a.Priority == b.Priority)
}

// reject returns why c creates no demand, or "".
// The checks follow serviceRemoteConsumerAdvisory: browsers, the local
// broker in the path (the demand came through here), the consumerTTL, and
// then isPermissableDestination (temporary destinations by BridgeTemp
// alone, then Permits). Replay subscriptions are brokernet's own and never demand.
func (t *Table) reject(c advisory.Consumer) string {
	switch {
	case c.Browser:
		return ReasonBrowser
	case !c.Destination.Kind.Valid() || c.Destination.Name == "":
		return ReasonInvalid + ": invalid destination"
	case c.Replay:
		return ReasonReplay
	case slices.Contains(c.Path, t.opts.LocalID):
		return ReasonLoop
	case t.opts.ConsumerTTL > -1 && len(c.Path) >= t.opts.ConsumerTTL:
		return ReasonConsumerTTL
	case c.Destination.IsTemp() && !t.opts.BridgeTemp:
		return ReasonTemporary
	case c.Destination.IsComposite():
		return ReasonComposite
	case !t.Permits(c.Destination):
		return ReasonExcluded
	}
	return ""
}

// isDurable reports whether c is a durable topic subscriber. ActiveMQ
// refuses durable subscriptions on queues, so a subscription name on one is
// ignored.
func isDurable(c advisory.Consumer) bool {
	return c.Destination.Kind == destination.Topic && c.SubscriptionName != ""
}

// add registers the accepted consumer c, which must not be known, and
// returns the slot that serves it.
func (t *Table) add(c advisory.Consumer) *slot {
	// Like ConduitBridge, only plain consumers are conduited: a shared
	// subscription carries one path and one origin in its tag, which would
	// be wrong for network consumers with other paths.
	conduit := t.opts.Conduit && len(c.Path) == 0
	durable := isDurable(c)
	m := &member{c: c}
	t.consumers[c.ID] = m
	if conduit && !durable {
		// ConduitBridge.addToAlreadyInterestedConsumers: a static include
		// whose pattern matches serves the consumer already.
		if s := t.staticFor(c.Destination); s != nil {
			m.slot = s
			s.members[c.ID] = m
			t.touch(s.key.dest)
			return s
		}
	}
	key := slotKey{dest: c.Destination, kind: demandSlot, durable: durable}
	var rec *durableRec
	if durable {
		rec = t.durableFor(c)
		if !conduit {
			key.id = rec.key.String()
		}
	} else if !conduit {
		key.id = c.ID
	}
	if conduit && c.Destination.Kind == destination.Topic {
		key.selector = c.Selector
	}
	s := t.slotFor(key)
	if len(s.members) == 0 && len(s.records) == 0 {
		t.identify(s, c, conduit, durable)
	}
	if rec != nil {
		if rec.slot != nil && rec.slot != s {
			delete(rec.slot.records, rec.key)
			t.touch(rec.slot.key.dest)
		}
		rec.slot = s
		s.records[rec.key] = rec
		rec.active[c.ID] = struct{}{}
		m.rec = rec
	}
	m.slot = s
	s.members[c.ID] = m
	t.touch(c.Destination)
	return s
}

// remove forgets the known consumer id. The caller settles.
func (t *Table) remove(id string) {
	m := t.consumers[id]
	delete(t.consumers, id)
	s := m.slot
	delete(s.members, id)
	if rec := m.rec; rec != nil {
		delete(rec.active, id)
		if len(rec.active) == 0 && t.opts.DynamicOnly {
			t.detachRecord(rec)
		}
	}
	t.touch(s.key.dest)
}

// priority computes the demand subscription's priority for a consumer with
// priority p whose demand path (including RemoteID) is path. With
// DecreasePriority it is PriorityBase, lowered by len(path)+1 beyond the
// first hop (-5, -8, -9 for paths of 1, 2, 3 brokers, as ActiveMQ);
// otherwise the consumer's own.
func (t *Table) priority(p int, path []string) int {
	if t.opts.DecreasePriority {
		p = t.opts.PriorityBase
		if len(path) > 1 {
			p -= len(path) + 1
		}
	}
	return min(max(p, minPriority), maxPriority)
}

// Reset forgets all remote consumers and static includes and returns an
// Unsubscribe for every live subscription, in ID order. The bridge calls it
// when the remote side reconnects: ActiveMQ replays the remote consumers to
// the new advisory subscription, which rebuilds the demand, and Start may be
// called again. Subscription ids keep counting, so a new subscription never
// reuses the id of an old one.
//
// Durable demand is deactivated (KeepDurable), never destroyed, whatever
// DynamicOnly says: the remote durable subscribers are probably still there
// and will be replayed, and a replayed one reactivates its durable
// subscription with the messages it kept. What ApplyLocal and Destination
// learnt about the local broker is kept too, as that broker did not go away.
func (t *Table) Reset() []Change {
	var changes []Change
	for _, s := range t.Subscriptions() {
		ch := Change{Kind: Unsubscribe, Sub: s}
		sl := t.subs[s.ID]
		switch {
		case sl.key.durable && len(sl.records) > 0:
			ch.KeepDurable = true
			sl.kept = sl.cur
		case sl.key.durable:
			// Its consumers' durable subscriptions moved to other topics
			// while they were online: nothing remains to keep messages for.
			ch.DestroyDurable = true
		}
		sl.cur = nil
		changes = append(changes, ch)
	}
	clear(t.subs)
	clear(t.consumers)
	clear(t.own)
	clear(t.dirty)
	t.started = false
	for key, s := range t.slots {
		clear(s.members)
		for _, rec := range s.records {
			clear(rec.active)
		}
		if key.durable && len(s.records) > 0 {
			continue // remote durable subscriptions outlive the connection
		}
		for _, rec := range s.records {
			delete(t.durables, rec.key)
		}
		t.dropSlot(s)
	}
	return changes
}

// Subscriptions returns the live subscriptions sorted by ID (as strings).
func (t *Table) Subscriptions() []Subscription {
	out := make([]Subscription, 0, len(t.subs))
	for _, s := range t.subs {
		out = append(out, s.snapshot(s.cur))
	}
	slices.SortFunc(out, func(a, b Subscription) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// InactiveDurables returns the durable subscriptions the table keeps
// inactive on the local broker (see Change.KeepDurable), sorted by the ID
// they had when they were deactivated. They are not in Subscriptions.
func (t *Table) InactiveDurables() []Subscription {
	var out []Subscription
	for _, s := range t.slots {
		if s.kept != nil {
			out = append(out, s.snapshot(s.kept))
		}
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
	return s.snapshot(s.cur), true
}
