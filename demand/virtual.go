package demand

import (
	"slices"
	"strings"

	"github.com/brokernet/brokernet/destination"
)

// ActiveMQ's default virtual topics (its virtualDestinationInterceptor when
// the configuration names none): a message sent to a topic VirtualTopic.<rest>
// is also put in every existing queue Consumer.<name>.VirtualTopic.<rest>
// (VirtualTopic, VirtualTopicInterceptor). Nothing else in ActiveMQ's network
// knows of them: its networkConnector bridges the consumer queues like any
// queue, and the topic for topic subscribers.
const (
	virtualTopicPrefix  = "VirtualTopic."
	consumerQueuePrefix = "Consumer."
)

// VirtualTopicOf returns the virtual topic that feeds queue q when q is a
// consumer queue of one by ActiveMQ's default naming
// (Consumer.<name>.VirtualTopic.<rest>, <name> one segment, no wildcards).
func VirtualTopicOf(q destination.Destination) (destination.Destination, bool) {
	if q.Kind != destination.Queue || strings.ContainsAny(q.Name, "*>") {
		return destination.Destination{}, false
	}
	rest, ok := strings.CutPrefix(q.Name, consumerQueuePrefix)
	if !ok {
		return destination.Destination{}, false
	}
	name, topic, ok := strings.Cut(rest, ".")
	if !ok || name == "" || !strings.HasPrefix(topic, virtualTopicPrefix) || len(topic) == len(virtualTopicPrefix) {
		return destination.Destination{}, false
	}
	return destination.Destination{Kind: destination.Topic, Name: topic}, true
}

// VirtualTopicOverlaps returns, sorted, the virtual topics whose messages the
// table's live subscriptions take twice toward the remote broker: from the
// topic (a subscription on it, or on a wildcard that matches it, serving
// topic subscribers there) and from one of its consumer queues (serving that
// queue's consumers there). The remote broker puts each topic copy in its own
// consumer queues too, so their consumers get those messages twice: once
// from the topic copy, once from the queue copy. ActiveMQ's advice is to
// bridge the consumer queues or the virtual topic, not both (virtual
// destinations, "Avoiding Duplicate Message in a Network of Brokers"); its
// networkConnector hides the duplicate only where the remote queue's
// duplicate audit recognises the message id it keeps. The bridge warns.
func (t *Table) VirtualTopicOverlaps() []destination.Destination {
	var topics []destination.Destination
	for _, s := range t.subs {
		if d := s.cur.Destination; d.Kind == destination.Topic && !s.cur.Replay {
			topics = append(topics, d)
		}
	}
	var out []destination.Destination
	for _, s := range t.subs {
		vt, ok := VirtualTopicOf(s.cur.Destination)
		if !ok || s.cur.Replay || slices.Contains(out, vt) {
			continue
		}
		for _, d := range topics {
			if d == vt || matchesWildcard(d, vt) {
				out = append(out, vt)
				break
			}
		}
	}
	slices.SortFunc(out, func(a, b destination.Destination) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// matchesWildcard reports whether the wildcard destination w matches d.
func matchesWildcard(w, d destination.Destination) bool {
	if !strings.ContainsAny(w.Name, "*>") {
		return false
	}
	p, err := destination.ParsePattern(w.String())
	return err == nil && p.Match(d)
}
