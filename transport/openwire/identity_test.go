package openwire

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/brokernet/brokernet/destination"
	"github.com/brokernet/brokernet/internal/testkit/stomptest"
	"github.com/brokernet/brokernet/internal/testkit/testbroker"
	"github.com/brokernet/brokernet/transport"
	"github.com/brokernet/brokernet/transport/transporttest"
)

// TestSentIDsAndTheBrokersAudit: what ActiveMQ (persistent, KahaDB) makes of
// the ids Send gives messages. Each case sends two messages to a queue of its
// own with no consumer, and counts what the queue holds. An ActiveMQ
// MessageId sent again is dropped (the queue's audit keys on its producer id
// and sequence); a foreign id is not kept (KeepsID): each message gets a
// MessageId of this connection's producer, so two messages with one foreign
// id are two messages.
func TestSentIDsAndTheBrokersAudit(t *testing.T) {
	b := startBroker(t, testbroker.Options{Persistent: true})
	p := dial(t, b.OpenWireURI())
	ctx := context.Background()
	for _, c := range []struct {
		name string
		ids  [2]string
		want int64
	}{
		{"an ActiveMQ MessageId sent twice is stored once", [2]string{"ID:a-1-2-3:1:1:1:5", "ID:a-1-2-3:1:1:1:5"}, 1},
		{"two ActiveMQ MessageIds are both stored", [2]string{"ID:a-1-2-3:1:1:1:5", "ID:a-1-2-3:1:1:1:6"}, 2},
		{"two messages with one foreign id are both stored", [2]string{"order-17", "order-17"}, 2},
		{"no id: the connection's own", [2]string{"", ""}, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			q := destination.Destination{Kind: destination.Queue, Name: fmt.Sprintf("ow.ids.%d", time.Now().UnixNano())}
			for k, id := range c.ids {
				m := &transport.Message{ID: id, Destination: q, Persistent: true, Priority: -1, Body: []byte(fmt.Sprint(k))}
				if err := p.Send(ctx, m); err != nil {
					t.Fatal(err)
				}
				tok, err := p.Commit(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if ev, _ := transporttest.WaitToken(t, p, tok); ev.Kind != transport.Confirmed {
					t.Fatalf("commit: %+v", ev)
				}
			}
			stomptest.Eventually(t, 10*time.Second, func() error {
				st, err := b.QueueStats(ctx, q.Name)
				if err != nil {
					return err
				}
				if st.Size != c.want {
					return fmt.Errorf("queue holds %d, want %d", st.Size, c.want)
				}
				return nil
			})
		})
	}
}
