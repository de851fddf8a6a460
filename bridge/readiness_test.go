package bridge_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/brokernet/brokernet/admin"
	"github.com/brokernet/brokernet/bridge"
	"github.com/brokernet/brokernet/internal/testkit/amqptest"
	"github.com/brokernet/brokernet/internal/testkit/faultproxy"
	"github.com/brokernet/brokernet/internal/testkit/stomptest"
	"github.com/brokernet/brokernet/internal/testkit/testbroker"
	"github.com/brokernet/brokernet/metrics"
	"github.com/brokernet/brokernet/transport/amqp"
)

// TestBlindToDemandIsNotReady: a RabbitMQ remote spoken over AMQP 1.0 whose
// demand is read over STOMP (the event exchange), the STOMP listener
// unreachable. The bridge is up (its connections are) but sees no demand:
// /readyz's reasons name it, with why, and `brokernet status` says blind.
// Once STOMP answers, the demand is seen, the bridge is ready and the
// messages waiting on ActiveMQ reach the RabbitMQ consumer.
func TestBlindToDemandIsNotReady(t *testing.T) {
	t.Parallel()
	testbroker.Require(t)
	r := testbroker.StartRabbitMQ(t, testbroker.RabbitOptions{})
	a := startBrokers(t, 1, false)[0]
	stompPath := faultproxy.Start(t, r.StompAddr())
	stompPath.Refuse(true)
	rep, err := amqp.ParseURI(fmt.Sprintf("amqp://guest:guest@%s?initialReconnectDelay=100&maxReconnectDelay=500&management=%s&stompPort=%d",
		r.AMQPAddr(), r.ManagementURL(), stompPath.Port()))
	if err != nil {
		t.Fatal(err)
	}
	br := runBridge(t, bridge.Config{Local: stomptest.URI(t, a.StompURI()), Remote: rep, Demand: defaultDemand(), Log: stomptest.Logger(t)})
	c := amqptest.Subscribe(t, r.AMQPURI(), r.ManagementURL(), "/queue/blind.q")
	stomptest.Eventually(t, 30*time.Second, func() error {
		if !br.Up() {
			return fmt.Errorf("bridge not up")
		}
		if !strings.Contains(br.DemandBlind(), "not visible") {
			return fmt.Errorf("demand blind %q, want the source's failure", br.DemandBlind())
		}
		return nil
	})
	reasons := admin.Reasons([]metrics.Bridge{{Connector: "bridge", Bridge: br.Bridge}})
	if len(reasons) != 1 || !reasons[0].Up || !strings.Contains(reasons[0].Error, "not visible") {
		t.Fatalf("readyz reasons %+v, want the bridge, up, blind to demand", reasons)
	}
	t.Logf("not ready: %s", reasons[0].Error)
	if got := br.Stats().DemandSubs.Load(); got != 0 {
		t.Fatalf("%d demand subscriptions while blind", got)
	}
	stomptest.SendN(t, a.StompURI(), "/queue/blind.q", 0, 100, false)

	stompPath.Refuse(false)
	stomptest.Eventually(t, 30*time.Second, func() error {
		if rs := admin.Reasons([]metrics.Bridge{{Connector: "bridge", Bridge: br.Bridge}}); len(rs) != 0 {
			return fmt.Errorf("still not ready: %+v", rs)
		}
		return nil
	})
	waitAll(t, 100, 30*time.Second, c)
}
