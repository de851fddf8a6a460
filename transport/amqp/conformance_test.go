package amqp

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/brokernet/brokernet/transport"
	"github.com/brokernet/brokernet/transport/transporttest"
)

// TestConnConformance holds the AMQP 1.0 transport to the transport.Conn
// contract against RabbitMQ, which has no selectors over AMQP 1.0.
func TestConnConformance(t *testing.T) {
	r := sharedRabbit(t)
	u, err := ParseURI(r.AMQPURI())
	if err != nil {
		t.Fatal(err)
	}
	var seq atomic.Int64
	run := time.Now().UnixNano()
	transporttest.Run(t, transporttest.Features{
		Protocol: "amqp", Flavour: transport.RabbitMQ, ConnectionID: true,
		// Any message-id is kept.
		NewID: func() string { return fmt.Sprintf("conformance-%d-%d", run, seq.Add(1)) },
	}, func(*testing.T) transport.Endpoint { return u })
}
