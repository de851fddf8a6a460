package stomp

import (
	"testing"
	"time"

	"github.com/go-stomp/stomp/v3/frame"

	"github.com/brokernet/brokernet/destination"
	"github.com/brokernet/brokernet/transport"
)

// TestSubscribeConsumerFlags: exclusive and retroactive subscriptions become
// ActiveMQ's activemq.exclusive and activemq.retroactive headers; RabbitMQ gets
// neither, and never its own "exclusive" header, which would declare an
// exclusive queue (refused on a queue that exists: RESOURCE_LOCKED).
func TestSubscribeConsumerFlags(t *testing.T) {
	for _, tt := range []struct {
		name, query string
		want        map[string]string // header -> value, "" for absent
	}{
		{"ActiveMQ gets the activemq headers", "", map[string]string{
			"activemq.exclusive": "true", "activemq.retroactive": "true", "exclusive": ""}},
		{"RabbitMQ gets none", "?flavor=rabbitmq", map[string]string{
			"activemq.exclusive": "", "activemq.retroactive": "", "exclusive": ""}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			subs := make(chan *frame.Frame, 1)
			b := newFakeBroker(t, "", func(f *frame.Frame, w *brokerWriter) {
				if f.Command == frame.SUBSCRIBE {
					subs <- f
				}
			})
			ctx, c := b.dial(t, tt.query, Options{}, 5*time.Second)
			bc := NewBrokerConn(c)
			if _, err := bc.Subscribe(ctx, transport.Subscription{ID: "s1", Prefetch: 10, Exclusive: true, Retroactive: true,
				Destination: destination.Destination{Kind: destination.Queue, Name: "q"}}); err != nil {
				t.Fatal(err)
			}
			select {
			case f := <-subs:
				for h, want := range tt.want {
					got, ok := f.Header.Contains(h)
					if want == "" && ok || want != "" && got != want {
						t.Errorf("header %s = %q (present %v), want %q", h, got, ok, want)
					}
				}
			case <-ctx.Done():
				t.Fatal("no SUBSCRIBE")
			}
		})
	}
}
