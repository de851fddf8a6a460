package demand

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/brokernet/brokernet/advisory"
	"github.com/brokernet/brokernet/destination"
)

func xq(name string) destination.Destination {
	return destination.Destination{Kind: destination.Queue, Name: name}
}

func xadded(id string, d destination.Destination) advisory.Event {
	return advisory.Event{Kind: advisory.ConsumerAdded, Consumer: advisory.Consumer{ID: id, Destination: d}, ConsumerCount: 1}
}

func filterOpts(t *testing.T, include, exclude []string) Options {
	t.Helper()
	f, err := destination.ParseFilter(include, exclude)
	if err != nil {
		t.Fatal(err)
	}
	return Options{Conduit: true, ConsumerTTL: 1, MessageTTL: 1, LocalID: "L", RemoteID: "R", Filter: f}
}

// summary renders events as "+id@dest" and "-id".
func xsummary(evs []advisory.Event) []string {
	var out []string
	for _, e := range evs {
		if e.Kind == advisory.ConsumerRemoved {
			out = append(out, "-"+e.Consumer.ID)
		} else {
			out = append(out, "+"+e.Consumer.ID+"@"+e.Consumer.Destination.Name)
		}
	}
	return out
}

func TestExpander(t *testing.T) {
	type step struct {
		consumer *advisory.Event
		dest     *advisory.DestinationEvent
		want     []string
	}
	cons := func(e advisory.Event) *advisory.Event { return &e }
	dest := func(name string, removed bool) *advisory.DestinationEvent {
		return &advisory.DestinationEvent{Destination: xq(name), Removed: removed}
	}
	removed := func(id string) *advisory.Event {
		return &advisory.Event{Kind: advisory.ConsumerRemoved, Consumer: advisory.Consumer{ID: id}}
	}
	tests := []struct {
		name             string
		include, exclude []string
		steps            []step
	}{
		{"a wildcard over an exclusion is narrowed to the allowed destinations", nil, []string{"queue://secret.>"}, []step{
			{dest: dest("orders", false), want: nil},
			{dest: dest("secret.x", false), want: nil},
			{consumer: cons(xadded("c1", xq(">"))), want: []string{"+c1|queue://orders@orders"}},
			{dest: dest("billing", false), want: []string{"+c1|queue://billing@billing"}},
			{dest: dest("secret.y", false), want: nil},
			{dest: dest("orders", true), want: []string{"-c1|queue://orders"}},
			{consumer: removed("c1"), want: []string{"-c1|queue://billing"}},
		}},
		{"a wildcard within the rules passes unchanged", nil, []string{"queue://secret.>"}, []step{
			{consumer: cons(xadded("c1", xq("orders.>"))), want: []string{"+c1@orders.>"}},
			{consumer: removed("c1"), want: []string{"-c1"}},
		}},
		{"a concrete excluded destination passes to the table, which refuses it", nil, []string{"queue://secret.>"}, []step{
			{consumer: cons(xadded("c1", xq("secret.x"))), want: []string{"+c1@secret.x"}},
		}},
		{"a wildcard wider than the includes is narrowed", []string{"queue://app.>"}, nil, []step{
			{dest: dest("app.a", false)},
			{dest: dest("other", false)},
			{consumer: cons(xadded("c1", xq("*"))), want: nil},
			{consumer: cons(xadded("c2", xq(">"))), want: []string{"+c2|queue://app.a@app.a"}},
		}},
		{"re-adding a wildcard consumer replaces its expansions", nil, []string{"queue://secret.>"}, []step{
			{dest: dest("a", false)},
			{consumer: cons(xadded("c1", xq(">"))), want: []string{"+c1|queue://a@a"}},
			{consumer: cons(xadded("c1", xq("b.>"))), want: []string{"-c1|queue://a", "+c1@b.>"}},
		}},
		{"a composite consumer is split into its members, the excluded one dropped by the table", nil, []string{"queue://secret.>"}, []step{
			{consumer: cons(xadded("c1", xq("public.y,secret.x"))), want: []string{"+c1|queue://public.y@public.y", "+c1|queue://secret.x@secret.x"}},
			{consumer: removed("c1"), want: []string{"-c1|queue://public.y", "-c1|queue://secret.x"}},
		}},
		{"a composite member that is a wildcard over an exclusion is narrowed", nil, []string{"queue://secret.>"}, []step{
			{dest: dest("orders", false)},
			{dest: dest("secret.x", false)},
			{consumer: cons(xadded("c1", xq("audit, >"))), want: []string{"+c1|queue://audit@audit", "+c1|queue://>|queue://orders@orders"}},
			{dest: dest("billing", false), want: []string{"+c1|queue://>|queue://billing@billing"}},
			{consumer: removed("c1"), want: []string{"-c1|queue://audit", "-c1|queue://>|queue://billing", "-c1|queue://>|queue://orders"}},
		}},
		{"composite members may name their own kind, and repeat", nil, nil, []step{
			{consumer: cons(xadded("c1", xq("a,topic://b,a,,"))), want: []string{"+c1|queue://a@a", "+c1|topic://b@b"}},
			{consumer: cons(xadded("c1", xq("c"))), want: []string{"-c1|queue://a", "-c1|topic://b", "+c1@c"}},
		}},
		{"a durable subscriber of a composite topic passes whole, for the table to refuse", nil, nil, []step{
			{consumer: cons(advisory.Event{Kind: advisory.ConsumerAdded, Consumer: advisory.Consumer{ID: "d1",
				Destination: destination.Destination{Kind: destination.Topic, Name: "a,b"}, SubscriptionName: "s"}}), want: []string{"+d1@a,b"}},
		}},
		{"a durable wildcard subscriber that needs narrowing makes no demand", nil, []string{"topic://secret.>"}, []step{
			{consumer: cons(advisory.Event{Kind: advisory.ConsumerAdded, Consumer: advisory.Consumer{ID: "d1",
				Destination: destination.Destination{Kind: destination.Topic, Name: ">"}, SubscriptionName: "s"}}), want: nil},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := NewExpander(filterOpts(t, tt.include, tt.exclude))
			for i, s := range tt.steps {
				var got []advisory.Event
				if s.consumer != nil {
					got = x.Consumer(*s.consumer)
				} else {
					got = x.Destination(*s.dest)
				}
				if !slices.Equal(xsummary(got), s.want) {
					t.Fatalf("step %d: got %v, want %v", i+1, xsummary(got), s.want)
				}
			}
		})
	}
}

// TestExpanderKeepsTheRulesForEveryMessage drives an Expander and a Table with
// random destinations and wildcard consumers. Whatever happens, every demand
// subscription of the table either is a concrete destination the rules permit
// or a wildcard whose every match they permit: no message of an excluded or
// not included destination can reach one.
func TestExpanderKeepsTheRulesForEveryMessage(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 9))
	names := []string{"a", "a.b", "secret", "secret.x", "secret.x.y", "app.a", "app.secret.k", "b.c"}
	wilds := []string{">", "*", "a.>", "secret.>", "*.x", "app.>", "app.*.k", "*.*", "b.c",
		"a,secret.x", "b.c,secret.>", "app.a, app.secret.k", "queue://a.b,topic://secret.x", "*.x,a"}
	for _, rules := range []struct{ include, exclude []string }{
		{nil, []string{"queue://secret.>"}},
		{[]string{"queue://app.>"}, []string{"queue://app.secret.>"}},
		{[]string{"a.>", "b.>"}, nil},
	} {
		opts := filterOpts(t, rules.include, rules.exclude)
		x := NewExpander(opts)
		tab := New(opts)
		tab.Start()
		live := map[string]bool{}
		for i := 0; i < 3000; i++ {
			var evs []advisory.Event
			switch r.IntN(3) {
			case 0:
				evs = x.Destination(advisory.DestinationEvent{Destination: xq(names[r.IntN(len(names))]), Removed: r.IntN(3) == 0})
			case 1:
				id := fmt.Sprintf("c%d", r.IntN(6))
				evs = x.Consumer(xadded(id, xq(wilds[r.IntN(len(wilds))])))
				live[id] = true
			default:
				id := fmt.Sprintf("c%d", r.IntN(6))
				if live[id] {
					evs = x.Consumer(advisory.Event{Kind: advisory.ConsumerRemoved, Consumer: advisory.Consumer{ID: id}})
					delete(live, id)
				}
			}
			for _, e := range evs {
				tab.Apply(e)
			}
			for _, s := range tab.Subscriptions() {
				d := s.Destination
				if d.IsComposite() {
					t.Fatalf("rules %v: step %d: demand for the composite %s", rules, i, d)
				}
				if d.IsWildcard() {
					if !opts.Filter.AllowsAll(destination.PatternOf(d)) {
						t.Fatalf("rules %v: step %d: wildcard demand %s reaches forbidden destinations", rules, i, d)
					}
				} else if !opts.Filter.Allows(d) {
					t.Fatalf("rules %v: step %d: demand for forbidden %s", rules, i, d)
				}
			}
		}
	}
}

// TestExpanderNeeded checks that destination advisories are asked for whenever
// a remote wildcard or a static include could need narrowing.
func TestExpanderNeeded(t *testing.T) {
	if NewExpander(opts()).Needed() {
		t.Fatal("no rules, yet narrowing is needed")
	}
	static := Options{StaticInclude: []destination.Pattern{mustPattern(t, "queue://orders.>")}}
	if NewExpander(static).Needed() {
		t.Fatal("a static include alone needs no narrowing")
	}
	static.Filter.Exclude = []destination.Pattern{mustPattern(t, "queue://orders.secret")}
	if !NewExpander(static).Needed() {
		t.Fatal("a static include with an exclusion inside it needs narrowing")
	}
}
