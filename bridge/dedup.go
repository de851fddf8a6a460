package bridge

import (
	"slices"

	"github.com/brokernet/brokernet/destination"
)

// topicDedup remembers the ids of recent forwarded topic messages: when a topic
// has more than one of our demand subscriptions (routes to several brokers, one
// per selector under conduit, or a subscription being replaced) the broker gives
// each a copy, and each message is forwarded once. Every topic message is
// remembered, as the copies of one may arrive after the subscription that
// forwarded it retired. A ring bounds it.
type topicDedup struct {
	ids  map[string]struct{}
	ring []string
	pos  int
}

// seenCapacity bounds the topic message ids remembered for de-duplication.
const seenCapacity = 1 << 16

func newTopicDedup() topicDedup {
	return topicDedup{ids: make(map[string]struct{})}
}

func (d *topicDedup) seen(id string) bool {
	_, ok := d.ids[id]
	return ok
}

// remember records a forwarded topic message id, forgetting the oldest.
func (d *topicDedup) remember(id string) {
	if d.ring == nil {
		d.ring = make([]string, seenCapacity)
	}
	if old := d.ring[d.pos]; old != "" {
		delete(d.ids, old)
	}
	d.ring[d.pos] = id
	d.pos = (d.pos + 1) % len(d.ring)
	d.ids[id] = struct{}{}
}

// topicRoutes returns the brokers our live topic subscriptions that receive a
// copy of a message published on topic d forward toward (their Tag.For), and how
// many such subscriptions there are. A wildcard subscription (prices.>) receives
// a copy of every topic it matches, so it counts for each of them.
func (s *session) topicRoutes(d destination.Destination) (forIDs []string, n int) {
	for _, ds := range s.subs {
		if ds.removing || !ds.receives(d) {
			continue
		}
		n++
		if ds.forID != "" && !slices.Contains(forIDs, ds.forID) {
			forIDs = append(forIDs, ds.forID)
		}
	}
	slices.Sort(forIDs)
	return forIDs, n
}

// receives reports whether ds gets a copy of a message on topic d.
func (ds *demandSub) receives(d destination.Destination) bool {
	if ds.sub.Destination.Kind != d.Kind {
		return false
	}
	if ds.pattern == nil {
		return ds.sub.Destination.Name == d.Name
	}
	return ds.pattern.Match(d)
}
