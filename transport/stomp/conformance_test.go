package stomp

import (
	"testing"

	"github.com/brokernet/brokernet/internal/testkit/testbroker"
	"github.com/brokernet/brokernet/transport"
	"github.com/brokernet/brokernet/transport/transporttest"
)

// TestConnConformance holds the STOMP transport to the transport.Conn
// contract against ActiveMQ and RabbitMQ. STOMP cannot refuse one request: a
// refused SUBSCRIBE is an ERROR frame, which ends the connection.
func TestConnConformance(t *testing.T) {
	t.Run("ActiveMQ", func(t *testing.T) {
		t.Parallel()
		testbroker.Require(t)
		b := testbroker.StartActiveMQ(t, testbroker.Options{})
		u := parse(t, b.StompURI())
		transporttest.Run(t, transporttest.Features{
			Protocol: "stomp", Flavour: transport.ActiveMQ,
			Selectors: true, BadSelector: true, RefusalEndsConnection: true,
			Transactions: true, ConnectionID: true, ConfirmsEach: true,
		}, func(*testing.T) transport.Endpoint { return u })
	})
	t.Run("RabbitMQ", func(t *testing.T) {
		t.Parallel()
		r := testbroker.StartRabbitMQ(t, testbroker.RabbitOptions{})
		u := parse(t, r.StompURI())
		transporttest.Run(t, transporttest.Features{
			Protocol: "stomp", Flavour: transport.RabbitMQ, ConnectionID: true, UnsubscribeHolds: true,
		}, func(*testing.T) transport.Endpoint { return u })
	})
}

func parse(t *testing.T, s string) URI {
	t.Helper()
	u, err := ParseURI(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}
