package bridge_test

import (
	"sync"
	"testing"
	"time"

	"github.com/brokernet/brokernet/bridge"
	"github.com/brokernet/brokernet/destination"
	"github.com/brokernet/brokernet/internal/testkit/stomptest"
	"github.com/brokernet/brokernet/internal/testkit/testbroker"
)

// TestRenameActiveMQQueueToRabbitMQ: ActiveMQ queue orders.N is RabbitMQ
// queue shop.orders.N (a per-connector rename): the RabbitMQ consumer of
// shop.orders.N makes demand on orders.N and gets its messages; a RabbitMQ
// consumer of orders.N itself makes no demand.
func TestRenameActiveMQQueueToRabbitMQ(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("needs brokers")
	}
	var amq *testbroker.ActiveMQ
	var rmq *testbroker.RabbitMQ
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		rmq = testbroker.StartRabbitMQs(t, testbroker.RabbitOptions{})[0]
	}()
	amq = startBrokers(t, 1, false)[0]
	wg.Wait()
	if rmq == nil {
		t.FailNow()
	}
	local, remote := activemqSide{amq}, rabbitSide{r: rmq, amqp: true}
	q := unique("orders")
	cfg := bridge.Config{
		Local: local.Endpoint(t), Remote: remote.Endpoint(t),
		Demand: defaultDemand(), Log: stomptest.Logger(t),
		Renames: []destination.Rename{{
			Local:  destination.Destination{Kind: destination.Queue, Name: q},
			Remote: destination.Destination{Kind: destination.Queue, Name: "shop." + q},
		}},
	}
	b := runBridge(t, cfg)
	shadowed := remote.Subscribe(t, remote.Queue(q))
	renamed := remote.Subscribe(t, remote.Queue("shop."+q))
	waitDemand(t, b, 1, 20*time.Second)
	local.Send(t, local.Queue(q), 0, 50, true)
	renamed.WaitDistinct(50, 30*time.Second)
	if n := shadowed.Count(); n != 0 {
		t.Errorf("the consumer of %s on RabbitMQ got %d messages, want none (its name was renamed away)", q, n)
	}
	if n := b.Stats().DemandSubs.Load(); n != 1 {
		t.Errorf("%d demand subscriptions, want 1 (on %s)", n, q)
	}
}
