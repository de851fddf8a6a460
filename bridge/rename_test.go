package bridge

import (
	"strings"
	"testing"
	"time"

	"github.com/brokernet/brokernet/destination"
)

func TestParseRename(t *testing.T) {
	r, err := ParseRename("queue://orders=/queue/shop.orders")
	if err != nil || r.Local != (destination.Destination{Kind: destination.Queue, Name: "orders"}) ||
		r.Remote != (destination.Destination{Kind: destination.Queue, Name: "shop.orders"}) {
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
	q := func(n string) destination.Destination { return destination.Destination{Kind: destination.Queue, Name: n} }
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

// TestRenamedQueue: a remote consumer of the renamed destination makes demand
// on the local name and receives its messages; a remote consumer of the local
// name itself, renamed away, makes none.
func TestRenamedQueue(t *testing.T) {
	local, remote := newFakeBroker("A"), newFakeBroker("B")
	consumerOn(remote, "shop.orders")
	remote.consumers = append(remote.consumers, queueConsumer("ID:remote-2:1:1:1", "orders"))
	r, err := ParseRename("queue://orders=queue://shop.orders")
	if err != nil {
		t.Fatal(err)
	}
	startFake(t, local, remote, Config{Renames: []Rename{r}})
	local.put("orders", 10)
	local.put("shop.orders", 3) // no demand: the remote's shop.orders is the local orders
	waitFor(t, 5*time.Second, "10 forwarded", func() bool { return len(remote.receivedBodies()) == 10 })
	remote.mu.Lock()
	for _, m := range remote.received {
		if m.Destination.Name != "shop.orders" || !strings.HasPrefix(string(m.Body), "orders-") {
			t.Errorf("remote received %q on %s, want the local orders' messages on shop.orders", m.Body, m.Destination)
		}
	}
	remote.mu.Unlock()
	local.mu.Lock()
	defer local.mu.Unlock()
	for _, c := range local.conns {
		for _, s := range c.subs {
			if s.sub.Destination.Name != "orders" {
				t.Errorf("a demand subscription on %s", s.sub.Destination)
			}
		}
	}
}
