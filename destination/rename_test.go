package destination

import (
	"strings"
	"testing"
)

func TestParseRename(t *testing.T) {
	r, err := ParseRename("queue://orders=/queue/shop.orders")
	if err != nil || r.Local != (Destination{Kind: Queue, Name: "orders"}) ||
		r.Remote != (Destination{Kind: Queue, Name: "shop.orders"}) {
		t.Fatalf("ParseRename = %+v, %v", r, err)
	}
	for in, want := range map[string]string{
		"queue://orders":                       "want LOCAL=REMOTE",
		"queue://orders=topic://orders":        "cannot become",
		"queue://orders.*=queue://shop.orders": "wildcard",
		"temp-queue://x=temp-queue://y":        "not a queue or topic",
		"queue://=queue://x":                   "queue://",
	} {
		if _, err := ParseRename(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseRename(%q) = %v, want an error with %q", in, err, want)
		}
	}
	q := func(n string) Destination { return Destination{Kind: Queue, Name: n} }
	if err := CheckRenames([]Rename{{q("a"), q("x")}, {q("a"), q("y")}}); err == nil || !strings.Contains(err.Error(), "renamed twice") {
		t.Errorf("one local name two ways: %v", err)
	}
	if err := CheckRenames([]Rename{{q("a"), q("x")}, {q("b"), q("x")}}); err == nil || !strings.Contains(err.Error(), "both renamed to") {
		t.Errorf("two local names to one: %v", err)
	}
	inv := InvertRenames([]Rename{{q("a"), q("x")}})
	if len(inv) != 1 || inv[0].Local != q("x") || inv[0].Remote != q("a") {
		t.Errorf("InvertRenames = %+v", inv)
	}
}
