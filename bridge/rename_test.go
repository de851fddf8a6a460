package bridge

import (
	"strings"
	"testing"
	"time"

	"github.com/brokernet/brokernet/destination"
)

// TestRenamedQueue: a remote consumer of the renamed destination makes demand
// on the local name and receives its messages; a remote consumer of the local
// name itself, renamed away, makes none.
func TestRenamedQueue(t *testing.T) {
	local, remote := newFakeBroker("A"), newFakeBroker("B")
	consumerOn(remote, "shop.orders")
	remote.consumers = append(remote.consumers, queueConsumer("ID:remote-2:1:1:1", "orders"))
	r, err := destination.ParseRename("queue://orders=queue://shop.orders")
	if err != nil {
		t.Fatal(err)
	}
	startFake(t, local, remote, Config{Renames: []destination.Rename{r}})
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

// TestRenamesOfCompositeMembers: a remote composite is renamed member by
// member, without the members renamed away.
func TestRenamesOfCompositeMembers(t *testing.T) {
	r, err := destination.ParseRename("queue://orders=queue://shop.orders")
	if err != nil {
		t.Fatal(err)
	}
	m, err := newRenames([]destination.Rename{r})
	if err != nil {
		t.Fatal(err)
	}
	q := func(n string) destination.Destination {
		return destination.Destination{Kind: destination.Queue, Name: n}
	}
	for _, tt := range []struct {
		remote destination.Destination
		want   destination.Destination
		ok     bool
	}{
		{q("shop.orders,audit"), q("queue://orders,queue://audit"), true},
		{q("orders,audit"), q("audit"), true},
		{q("orders, orders"), destination.Destination{}, false},
	} {
		got, ok := m.local(tt.remote)
		if got != tt.want || ok != tt.ok {
			t.Errorf("local(%v) = %v, %v; want %v, %v", tt.remote, got, ok, tt.want, tt.ok)
		}
	}
	if got, _ := (renames{}).local(q("a,b")); got != q("a,b") {
		t.Errorf("without renames a composite changed to %v", got)
	}
}
