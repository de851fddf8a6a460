package demand

import (
	"slices"
	"testing"

	"github.com/brokernet/brokernet/destination"
)

func TestVirtualTopicOf(t *testing.T) {
	q := func(name string) destination.Destination {
		return destination.Destination{Kind: destination.Queue, Name: name}
	}
	tests := []struct {
		name string
		in   destination.Destination
		want string // "" for none
	}{
		{"a consumer queue names its virtual topic", q("Consumer.X.VirtualTopic.Orders"), "VirtualTopic.Orders"},
		{"the topic may have several segments", q("Consumer.billing.VirtualTopic.orders.eu"), "VirtualTopic.orders.eu"},
		{"a plain queue is none", q("orders"), ""},
		{"the consumer name is one segment", q("Consumer.a.b.VirtualTopic.Orders"), ""},
		{"an empty consumer name is none", q("Consumer..VirtualTopic.Orders"), ""},
		{"the topic needs a name after VirtualTopic.", q("Consumer.X.VirtualTopic."), ""},
		{"wildcards are none", q("Consumer.*.VirtualTopic.>"), ""},
		{"topics are none", destination.Destination{Kind: destination.Topic, Name: "Consumer.X.VirtualTopic.Orders"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := VirtualTopicOf(tt.in)
			if ok != (tt.want != "") || ok && (got.Kind != destination.Topic || got.Name != tt.want) {
				t.Fatalf("VirtualTopicOf(%v) = %v, %v; want %q", tt.in, got, ok, tt.want)
			}
		})
	}
}

// TestVirtualTopicOverlaps: a virtual topic is reported while the table takes
// it both from the topic (directly or through a wildcard) and from one of its
// consumer queues.
func TestVirtualTopicOverlaps(t *testing.T) {
	vt := destination.Destination{Kind: destination.Topic, Name: "VirtualTopic.Orders"}
	cq := destination.Destination{Kind: destination.Queue, Name: "Consumer.X.VirtualTopic.Orders"}
	all := destination.Destination{Kind: destination.Topic, Name: "VirtualTopic.>"}
	tbl := New(opts())
	b := newBroker()
	check := func(st step, want ...destination.Destination) {
		t.Helper()
		runStepsOn(t, tbl, b, []step{st})
		if got := tbl.VirtualTopicOverlaps(); !slices.Equal(got, want) {
			t.Fatalf("after %s %s: overlaps %v, want %v", st.ev.Kind, st.ev.Consumer.ID, got, want)
		}
	}
	check(step{ev: added(plain("q1", cq)), action: Added, changes: subOnly})
	check(step{ev: added(plain("t1", vt)), action: Added, changes: subOnly}, vt)
	check(step{ev: removed("t1"), action: Removed, changes: unsubOnly})
	check(step{ev: added(plain("w1", all)), action: Added, changes: subOnly}, vt)
	check(step{ev: removed("q1"), action: Removed, changes: unsubOnly})
}
