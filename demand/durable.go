package demand

import (
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/brokernet/brokernet/advisory"
	"github.com/brokernet/brokernet/destination"
	"github.com/brokernet/brokernet/hop"
)

// Durable topic demand follows ActiveMQ's DurableConduitBridge
// (activemq-network.md §2.2, §2.5): a remote durable topic subscriber gets a
// durable demand subscription on the local broker, so that messages keep
// accumulating for it while it (or the bridge) is offline. The table tracks
// each remote durable subscription it has seen, online or not, because a
// durable subscriber that goes offline is reported as a plain RemoveInfo and
// its subscription ends only with a RemoveSubscriptionInfo
// (advisory.DurableRemoved).

// durableKey identifies a remote durable subscription. ActiveMQ keys durable
// subscriptions by (clientId, subscriptionName), but STOMP consumers' client
// ids are not in their advisories (§6.1), so the demand path is part of the
// key too: network durable subscriptions made by different upstream bridges
// can share a name.
type durableKey struct {
	clientID string
	name     string
	path     string // hop.FormatPath of the consumer's path
}

// String renders the key for a slotKey id and for hashing, unambiguously.
func (k durableKey) String() string {
	return strings.Join([]string{k.clientID, k.name, k.path}, "\x00")
}

// durableRec is one remote durable subscription.
type durableRec struct {
	key      durableKey
	c        advisory.Consumer // the last consumer seen for it
	dest     destination.Destination
	selector string
	active   map[string]struct{} // ids of its online consumers
	slot     *slot
}

// durableFor returns the record of durable consumer c's subscription,
// creating it, and updates its destination and selector: a durable
// subscriber that comes back with another topic or selector has had its
// subscription re-created by ActiveMQ.
func (t *Table) durableFor(c advisory.Consumer) *durableRec {
	key := durableKey{clientID: c.ClientID, name: c.SubscriptionName, path: hop.FormatPath(c.Path)}
	rec, ok := t.durables[key]
	if ok && rec.dest != c.Destination {
		t.detachRecord(rec)
		ok = false
	}
	if !ok {
		rec = &durableRec{key: key, dest: c.Destination, active: make(map[string]struct{})}
		t.durables[key] = rec
	}
	if rec.selector != c.Selector && rec.slot != nil {
		t.touch(rec.dest)
	}
	rec.selector = c.Selector
	rec.c = c
	return rec
}

// detachRecord forgets a remote durable subscription. Its online consumers,
// if any, stay members of their slot without a record.
func (t *Table) detachRecord(rec *durableRec) {
	delete(t.durables, rec.key)
	if rec.slot != nil {
		delete(rec.slot.records, rec.key)
		t.touch(rec.dest)
		for id := range rec.active {
			if m := t.consumers[id]; m != nil && m.rec == rec {
				m.rec = nil
			}
		}
		rec.slot = nil
	}
}

// Bounds of the parts of a durable name.
const (
	durableLocalMax = 32
	durableDestMax  = 96
	durableHashLen  = 12 // hex digits
)

// sanitize keeps [A-Za-z0-9._-] of s, replaces other bytes with '_', and
// cuts the result to n bytes. exact is false when anything was replaced or
// cut.
func sanitize(s string, n int) (out string, exact bool) {
	b := []byte(s)
	exact = true
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			b[i] = '_'
			exact = false
		}
	}
	if len(b) > n {
		b = b[:n]
		exact = false
	}
	return string(b), exact
}

// durableName returns the name of a durable group's subscription with the
// user selector user (see Subscription.DurableName). A conduit group has one
// selector for its whole life (slotKey.selector), so its name never changes. The hash covers the
// exact topic name, the selector and, for a solo group, the remote durable
// subscription and the tag's origin, so that different selectors or remote
// subscriptions get different names and a lossy sanitization cannot merge
// two topics. Within a table, equal names thus mean equal selectors: a
// durable subscription is only ever reactivated with the selector it was
// created with, which ActiveMQ would otherwise re-create empty. The local
// id only decorates: all names of one bridge share its connection's client
// id.
func (t *Table) durableName(s *slot, user string) string {
	local, _ := sanitize(t.opts.LocalID, durableLocalMax)
	dest, exact := sanitize(s.key.dest.Name, durableDestMax)
	name := "bn_" + local + "_" + dest
	if exact && user == "" && s.key.id == "" {
		return name
	}
	parts := []string{s.key.dest.Name, user}
	if s.key.id != "" {
		parts = append(parts, s.key.id, s.origin)
	}
	sum := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	return name + "_" + hex.EncodeToString(sum[:])[:durableHashLen]
}

// applyDurableRemoved handles a RemoveSubscriptionInfo: the remote durable
// subscriptions it names are forgotten, and a durable demand subscription
// that serves no other one is destroyed.
//
// The subscription name must match. ActiveMQ's STOMP 1.0 support puts the
// subscription name in clientId and STOMP advisories show no client id, so
// the client ids are compared only when both are known and the event's is
// not the name; the destination only when the advisory's header told it.
func (t *Table) applyDurableRemoved(ev advisory.Event) ([]Change, Decision) {
	c := ev.Consumer
	d := Decision{ConsumerID: "durable:" + c.SubscriptionName}
	if c.SubscriptionName == "" {
		d.Action, d.Reason = Ignored, ReasonInvalid+": missing subscription name"
		return nil, d
	}
	var matched []*durableRec
	for _, rec := range t.durables {
		if rec.key.name != c.SubscriptionName ||
			c.Destination.Kind.Valid() && rec.dest != c.Destination ||
			rec.key.clientID != "" && c.ClientID != "" && c.ClientID != c.SubscriptionName && rec.key.clientID != c.ClientID {
			continue
		}
		matched = append(matched, rec)
	}
	if len(matched) == 0 {
		d.Action, d.Reason = Ignored, ReasonUnknownDurable
		return nil, d
	}
	slices.SortFunc(matched, func(a, b *durableRec) int { return strings.Compare(a.key.String(), b.key.String()) })
	removed := 0
	for _, rec := range matched {
		if len(rec.active) > 0 {
			continue // ActiveMQ refuses to destroy a durable subscription in use
		}
		if s := rec.slot; s != nil && d.SubID == "" {
			if s.cur != nil {
				d.SubID = s.cur.ID
			} else if s.kept != nil {
				d.SubID = s.kept.ID
			}
		}
		t.detachRecord(rec)
		removed++
	}
	if removed == 0 {
		d.Action, d.Reason = Ignored, ReasonDurableActive
		return nil, d
	}
	d.Action = Removed
	return t.settle(), d
}

// RemoteDurable is a remote durable subscription the table tracks, online or
// not, in the form the bridge persists on the local broker: a bridge that
// restarts, or reconnects, learns from the remote advisory replay only about
// the durable subscribers that are online (ActiveMQ replays consumers, and an
// offline durable subscriber is not one), so it restores the others with
// Restore.
type RemoteDurable struct {
	// Consumer is the last consumer seen for the subscription, without its ID:
	// destination, selector, subscription name, client id, path and flags,
	// with the priority, origin and bridge flag of the consumer that fixed its
	// demand subscription's tag and priority.
	Consumer advisory.Consumer `json:"consumer"`
	// DemandName is the DurableName of the local durable subscription that
	// serves it when it was recorded.
	DemandName string `json:"demand_name"`
	// Online is true while a consumer of it is online (ignored by Restore).
	Online bool `json:"online,omitempty"`
}

// Durables returns the remote durable subscriptions the table tracks, in key
// order, for the bridge to persist.
func (t *Table) Durables() []RemoteDurable {
	keys := slices.SortedFunc(maps.Keys(t.durables), func(a, b durableKey) int { return strings.Compare(a.String(), b.String()) })
	out := make([]RemoteDurable, 0, len(keys))
	for _, k := range keys {
		rec := t.durables[k]
		c := rec.c
		c.ID = ""
		c.Path = slices.Clone(c.Path)
		rd := RemoteDurable{Consumer: c, Online: len(rec.active) > 0}
		if s := rec.slot; s != nil {
			// What fixed the demand's tag and priority, so that Restore
			// derives the same subscription, name included.
			rd.Consumer.Priority, rd.Consumer.Origin, rd.Consumer.Bridge = s.ident.Priority, s.ident.Origin, s.ident.Bridge
			switch {
			case s.cur != nil:
				rd.DemandName = s.cur.DurableName
			case s.kept != nil:
				rd.DemandName = s.kept.DurableName
			}
		}
		out = append(out, rd)
	}
	return out
}

// Restore adds remote durable subscriptions recorded earlier (Durables) that
// the table does not know, as offline: their demand is kept inactive on the
// local broker, where it is assumed to exist already, so Restore returns no
// Changes. A durable subscriber that is online is replayed by the remote
// broker and becomes active as usual; one that was destroyed meanwhile
// stays until its DurableRemoved, or, if that was missed, for good: the
// remote advisories do not list inactive durable subscriptions, so the
// table cannot tell a destroyed one from an offline one and errs on the side
// of keeping messages. Entries that Apply would ignore (a queue, a rejected
// consumer, no subscription name) are skipped and counted in the result.
//
// The bridge calls Restore after New or Reset and before the remote
// advisories.
func (t *Table) Restore(recs []RemoteDurable) (skipped int) {
	for _, rd := range recs {
		c := normalize(rd.Consumer)
		c.ID = ""
		key := durableKey{clientID: c.ClientID, name: c.SubscriptionName, path: hop.FormatPath(c.Path)}
		if !isDurable(c) || t.reject(c) != "" {
			skipped++
			continue
		}
		if _, ok := t.durables[key]; ok {
			continue
		}
		conduit := t.opts.Conduit && len(c.Path) == 0
		rec := t.durableFor(c)
		k := slotKey{dest: c.Destination, kind: demandSlot, durable: true}
		if conduit {
			k.selector = c.Selector
		} else {
			k.id = rec.key.String()
		}
		s := t.slotFor(k)
		if len(s.members) == 0 && len(s.records) == 0 {
			t.identify(s, c, conduit, true)
		}
		rec.slot = s
		s.records[rec.key] = rec
		if s.cur == nil && s.kept == nil {
			t.seq++
			kept := *t.demandSpec(s)
			kept.ID = subIDPrefix + strconv.FormatUint(t.seq, 10)
			s.kept = &kept
		}
	}
	return skipped
}

// StaleDurables decides which durable demand subscriptions on the local
// broker no remote durable subscription wants any more. held lists those the
// local broker holds for this bridge (at least DurableName and Destination
// set), as the bridge recorded them; every one whose DurableName is not the
// name of a live or kept subscription of the table is returned as an
// Unsubscribe with DestroyDurable and a fresh ID, in name order: a remote
// durable subscriber that unsubscribed while the bridge was away, or demand
// made under an older naming rule.
//
// The bridge calls it only once the remote advisory replay is complete and
// Restore was applied, so that every remote durable subscription the table
// can know of is known.
func (t *Table) StaleDurables(held []Subscription) []Change {
	wanted := make(map[string]bool)
	for _, s := range t.slots {
		if s.cur != nil && s.cur.DurableName != "" {
			wanted[s.cur.DurableName] = true
		}
		if s.kept != nil {
			wanted[s.kept.DurableName] = true
		}
	}
	held = slices.Clone(held)
	slices.SortFunc(held, func(a, b Subscription) int { return strings.Compare(a.DurableName, b.DurableName) })
	var out []Change
	for i, h := range held {
		if h.DurableName == "" || wanted[h.DurableName] || i > 0 && held[i-1].DurableName == h.DurableName {
			continue
		}
		t.seq++
		sub := Subscription{ID: subIDPrefix + strconv.FormatUint(t.seq, 10), Destination: h.Destination, DurableName: h.DurableName}
		out = append(out, Change{Kind: Unsubscribe, Sub: sub, DestroyDurable: true})
	}
	return out
}

// Forget forgets the remote durable subscription of consumer c (as recorded
// by Durables) if no consumer of it is online, as if its DurableRemoved had
// been seen, and returns the Changes: the destruction of its durable demand
// unless another remote durable subscription still needs it. The bridge
// uses it for subscriptions offline longer than it may keep messages for
// them: whether one was destroyed while the bridge was away cannot be told
// from the remote broker's advisories. It reports whether c was forgotten.
func (t *Table) Forget(c advisory.Consumer) ([]Change, bool) {
	c = normalize(c)
	rec, ok := t.durables[durableKey{clientID: c.ClientID, name: c.SubscriptionName, path: hop.FormatPath(c.Path)}]
	if !ok || len(rec.active) > 0 {
		return nil, false
	}
	t.detachRecord(rec)
	return t.settle(), true
}
