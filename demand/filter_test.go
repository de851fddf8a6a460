package demand

import (
	"testing"

	"github.com/brokernet/brokernet/advisory"
	"github.com/brokernet/brokernet/destination"
	"github.com/brokernet/brokernet/hop"
)

// TestContentFilters checks the selector each kind of subscription gets from
// a connector-wide filter and one per destination pattern.
func TestContentFilters(t *testing.T) {
	ordersEU := mustPattern(t, "queue://orders.>")
	filtered := func() Options {
		o := opts()
		o.ContentFilters = []ContentFilter{{Selector: "region = 'eu'"}, {Pattern: &ordersEU, Selector: "amount > 100"}}
		return o
	}
	qOrdersEU := destination.Destination{Kind: destination.Queue, Name: "orders.eu"}
	qAll := destination.Destination{Kind: destination.Queue, Name: ">"}
	for _, tc := range []struct {
		name string
		c    advisory.Consumer
		want string
	}{
		{"a consumer without selector gets the connector's filter", plain("c1", qOther), "region = 'eu'"},
		{"its own selector is kept", advisory.Consumer{ID: "c1", Destination: qOther, Selector: "x = 1"}, "(region = 'eu') AND (x = 1)"},
		{"a matching pattern adds its filter", plain("c1", qOrdersEU), "(region = 'eu') AND (amount > 100)"},
		{"a wildcard consumer takes the filters of all it may get", plain("c1", qAll), "(region = 'eu') AND (amount > 100)"},
		{"a topic is not a queue pattern's", plain("c1", destination.Destination{Kind: destination.Topic, Name: "orders.eu"}), "region = 'eu'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			changes, d := New(filtered()).Apply(added(tc.c))
			if d.Action != Added || len(changes) != 1 {
				t.Fatalf("Apply: %+v, %d changes", d, len(changes))
			}
			s := changes[0].Sub
			user, _, ok := hop.ParseSelector(s.Selector)
			if s.UserSelector != tc.want || !ok || user != tc.want {
				t.Fatalf("user selector %q (parsed %q from %q), want %q", s.UserSelector, user, s.Selector, tc.want)
			}
		})
	}
	t.Run("static includes and replays are filtered too", func(t *testing.T) {
		o := filtered()
		o.StaticInclude = []destination.Pattern{mustPattern(t, "queue://audit")}
		changes := New(o).Start()
		if len(changes) != 1 || changes[0].Sub.UserSelector != "region = 'eu'" {
			t.Fatalf("static: %+v", changes)
		}
		o = filtered()
		o.ReplayWhenNoConsumers = true
		tbl := New(o)
		tbl.Apply(added(plain("c1", qOrdersEU)))
		sub := tbl.replaySpec(qOrdersEU)
		if sub == nil || sub.UserSelector != "(region = 'eu') AND (amount > 100)" {
			t.Fatalf("replay: %+v", sub)
		}
	})
	if err := (Options{LocalID: "L", RemoteID: "R", ContentFilters: []ContentFilter{{}}}).Validate(); err == nil {
		t.Error("a filter without selector is valid")
	}
}
