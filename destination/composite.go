package destination

import "strings"

// Composite destinations: ActiveMQ reads a destination name holding commas as
// a composite destination, one destination per comma-separated member
// (ActiveMQDestination.getCompositeDestinations): a consumer of the queue
// "public.y,secret.x" receives the messages of both queues, and a message
// sent to it goes to both. A member may name its own kind with a URI prefix
// ("orders,topic://audit" is the queue orders and the topic audit); a member
// without one has the composite's kind. Each member's messages carry that
// member as their destination. RabbitMQ has no composites: there a comma is
// part of a queue's name.
//
// Rules that name destinations (include, exclude, static include) must be
// applied member by member: a composite is several destinations, and its
// whole name read as one says nothing about the messages it receives.

// CompositeSeparator separates the members of a composite destination's name.
const CompositeSeparator = ","

// IsComposite reports whether d's name is read by ActiveMQ as a composite
// destination: it holds a comma.
func (d Destination) IsComposite() bool {
	return strings.Contains(d.Name, CompositeSeparator)
}

// Members returns the destinations a composite destination stands for, in
// the order written, each once: members are trimmed of spaces, empty ones
// are skipped (as ActiveMQ does), and a member may carry its own kind as
// "queue://", "topic://", "temp-queue://" or "temp-topic://" (or the STOMP
// forms "/queue/", "/topic/", …). A destination that is not composite is its
// own only member. A member that names an unknown kind is taken with the
// composite's kind and its text as name, as ActiveMQ would.
func (d Destination) Members() []Destination {
	if !d.IsComposite() {
		return []Destination{d}
	}
	var out []Destination
	seen := make(map[Destination]bool)
	for _, part := range strings.Split(d.Name, CompositeSeparator) {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		m := Destination{Kind: d.Kind, Name: part}
		if strings.Contains(part, "://") || strings.HasPrefix(part, "/") {
			split := splitURI
			if strings.HasPrefix(part, "/") {
				split = splitStomp
			}
			if v, problem := split(part); problem == "" {
				m = v
			}
		}
		if !seen[m] {
			seen[m] = true
			out = append(out, m)
		}
	}
	return out
}
