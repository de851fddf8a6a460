package openwire

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/brokernet/brokernet/internal/testkit/testbroker"
	"github.com/brokernet/brokernet/transport"
	"github.com/brokernet/brokernet/transport/transporttest"
)

// TestConnConformance holds the OpenWire transport to the transport.Conn
// contract against ActiveMQ.
func TestConnConformance(t *testing.T) {
	b := startBroker(t, testbroker.Options{})
	u, err := ParseURI(b.OpenWireURI())
	if err != nil {
		t.Fatal(err)
	}
	var seq atomic.Int64
	run := time.Now().UnixNano()
	transporttest.Run(t, transporttest.Features{
		Protocol: "openwire", Flavour: transport.ActiveMQ,
		Selectors: true, BadSelector: true, Transactions: true, ConnectionID: true,
		UnsubscribeUnmarked: true, ConfirmsEach: true,
		// An ActiveMQ MessageId (KeepsID): connection id, session, producer, sequence.
		NewID: func() string { return fmt.Sprintf("ID:conformance-%d-1:1:1:1:%d", run, seq.Add(1)) },
	}, func(*testing.T) transport.Endpoint { return u })
}
