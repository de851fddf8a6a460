package openwire

import (
	"context"
	"strings"
	"testing"

	"github.com/brokernet/brokernet/destination"
	"github.com/brokernet/brokernet/internal/testkit/testbroker"
	"github.com/brokernet/brokernet/transport"
	"github.com/brokernet/brokernet/transport/transporttest"
)

// TestDurableSubscriptionsListsOfflineOnes: the broker lists a durable
// subscription whose subscriber is offline, and stops listing it once it is
// destroyed; a queue consumer and a durable subscription outside include are
// not listed.
func TestDurableSubscriptionsListsOfflineOnes(t *testing.T) {
	b := startBroker(t, testbroker.Options{})
	ctx := context.Background()
	topic := destination.Destination{Kind: destination.Topic, Name: "sync.prices"}
	other := destination.Destination{Kind: destination.Topic, Name: "elsewhere"}
	c := dial(t, b.OpenWireURI()+"?clientId=sync-client")
	for _, s := range []transport.Subscription{
		{ID: "d", Destination: topic, DurableName: "offline-sub", Selector: "k = 'a'", Prefetch: 10},
		{ID: "e", Destination: other, DurableName: "not-included", Prefetch: 10},
	} {
		tok, _ := c.Subscribe(ctx, s)
		if ev, _ := transporttest.WaitToken(t, c, tok); ev.Kind != transport.Confirmed {
			t.Fatalf("durable subscribe %s: %+v", s.ID, ev)
		}
		if err := c.Unsubscribe(ctx, s.ID); err != nil { // offline, kept
			t.Fatal(err)
		}
	}
	u, err := ParseURI(b.OpenWireURI() + "?clientId=sync-client") // its own connection drops the client id in use
	if err != nil {
		t.Fatal(err)
	}
	include := []destination.Destination{{Kind: destination.Topic, Name: "sync.>"}}
	got, err := u.DurableSubscriptions(ctx, "", include)
	if err != nil {
		t.Fatal(err)
	}
	want := transport.DurableSubscription{ClientID: "sync-client", Name: "offline-sub", Destination: topic, Selector: "k = 'a'"}
	if len(got) != 1 || got[0] != want {
		t.Fatalf("durable subscriptions %+v, want [%+v]", got, want)
	}
	// Asked for this broker by its id, the same; for another, an error.
	if got, err := u.DurableSubscriptions(ctx, b.ID(), include); err != nil || len(got) != 1 {
		t.Fatalf("asking broker %q: %+v, %v", b.ID(), got, err)
	}
	if got, err := u.DurableSubscriptions(ctx, "ID:another-broker", include); err == nil || !strings.Contains(err.Error(), "answered by broker") {
		t.Fatalf("asking for another broker: %+v, %v; want an error naming the broker that answered", got, err)
	}
	stok, _ := c.Sync(ctx)
	transporttest.WaitToken(t, c, stok)
	if err := c.DestroyDurable(ctx, transport.Subscription{ID: "d", Destination: topic, DurableName: "offline-sub"}); err != nil {
		t.Fatal(err)
	}
	got, err = u.DurableSubscriptions(ctx, "", include)
	if err != nil || len(got) != 0 {
		t.Fatalf("after destroying it: %+v, %v; want none", got, err)
	}
	if _, err := u.DurableSubscriptions(ctx, "", []destination.Destination{{Kind: destination.Queue, Name: "q"}}); err == nil {
		t.Fatal("a queue was accepted as a durable topic pattern")
	}
}
