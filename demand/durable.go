package demand

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"

	"github.com/brokernet/brokernet/advisory"
	"github.com/brokernet/brokernet/destination"
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
	path     string // advisory.FormatPath of the consumer's path
}

// String renders the key for a slotKey id and for hashing, unambiguously.
func (k durableKey) String() string {
	return strings.Join([]string{k.clientID, k.name, k.path}, "\x00")
}

// durableRec is one remote durable subscription.
type durableRec struct {
	key      durableKey
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
	key := durableKey{clientID: c.ClientID, name: c.SubscriptionName, path: advisory.FormatPath(c.Path)}
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
