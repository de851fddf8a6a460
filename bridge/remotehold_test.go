package bridge_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/brokernet/brokernet/admin"
	"github.com/brokernet/brokernet/bridge"
	"github.com/brokernet/brokernet/internal/testkit/amqptest"
	"github.com/brokernet/brokernet/internal/testkit/stomptest"
	"github.com/brokernet/brokernet/internal/testkit/testbroker"
	"github.com/brokernet/brokernet/metrics"
	"github.com/brokernet/brokernet/rabbitmq/mgmt"
	"github.com/brokernet/brokernet/transport"
	"github.com/brokernet/brokernet/transport/amqp"
)

// TestRemoteAlarmIsReported: a RabbitMQ remote whose memory alarm is set (the
// high watermark below what the node uses) while 200 messages wait on
// ActiveMQ for its consumer.
//
// Over STOMP RabbitMQ blocks the bridge's connection and says nothing on it;
// the bridge reports the hold with the alarm, read from the management API:
// Bridge.RemoteHold, the RemoteHeld gauge and a /readyz reason. Once the
// watermark is back, all 200 arrive, the report is gone and the bridge is
// ready.
//
// Over AMQP 1.0 RabbitMQ 3.10.8 blocks nothing: its AMQP 1.0 plugin accepts
// and routes publishes while the alarm is in force (measured with a bare
// go-amqp sender too). The bridge is not held and all 200 arrive during the
// alarm; nothing is reported, since nothing waits.
func TestRemoteAlarmIsReported(t *testing.T) {
	t.Parallel()
	testbroker.Require(t)
	for _, proto := range []string{"amqp", "stomp"} {
		t.Run(proto, func(t *testing.T) {
			t.Parallel()
			const n = 200
			r := testbroker.StartRabbitMQ(t, testbroker.RabbitOptions{})
			a := startBrokers(t, 1, false)[0]
			rep, subscribe := rabbitRemote(t, r, proto)
			c := subscribe("/queue/alarm.q")
			br := runBridge(t, bridge.Config{Local: stomptest.URI(t, a.StompURI()), Remote: rep, Demand: defaultDemand(),
				BlockedAfter: 2 * time.Second, Log: stomptest.Logger(t)})
			waitDemand(t, br, 1, 30*time.Second)

			ctx := context.Background()
			watermark := func(v string) {
				if out, err := r.Ctl(ctx, "set_vm_memory_high_watermark", v); err != nil {
					t.Fatalf("set_vm_memory_high_watermark %s: %v %s", v, err, out)
				}
			}
			watermark("0.000001")
			m, err := mgmt.New(r.ManagementURL(), "guest", "guest", nil)
			if err != nil {
				t.Fatal(err)
			}
			stomptest.Eventually(t, 30*time.Second, func() error {
				if alarms, err := m.Alarms(ctx); len(alarms) == 0 {
					return fmt.Errorf("no alarm yet (%v)", err)
				}
				return nil
			})
			stomptest.SendN(t, a.StompURI(), "/queue/alarm.q", 0, n, false)
			reasons := func() []admin.Reason {
				return admin.Reasons([]metrics.Bridge{{Connector: "bridge", Bridge: br.Bridge}})
			}
			if proto == "amqp" {
				waitAll(t, n, time.Minute, c)
				if alarms, _ := m.Alarms(ctx); len(alarms) == 0 {
					t.Fatal("the alarm cleared before the messages arrived: the test proves nothing")
				}
				if h := br.RemoteHold(); h != nil {
					t.Errorf("remote hold %s reported while RabbitMQ took every message", h)
				}
				if rs := reasons(); len(rs) != 0 {
					t.Errorf("not ready while RabbitMQ took every message: %+v", rs)
				}
				watermark("0.4")
				return
			}
			stomptest.Eventually(t, 60*time.Second, func() error {
				h := br.RemoteHold()
				if h == nil || len(h.Alarms) != 1 || h.Alarms[0] != "memory alarm on "+r.Node() {
					return fmt.Errorf("remote hold %+v, want the memory alarm of %s", h, r.Node())
				}
				if rs := reasons(); len(rs) != 1 || !rs[0].Held || !strings.Contains(rs[0].Error, "memory alarm on "+r.Node()) {
					return fmt.Errorf("readyz reasons %+v, want the hold", rs)
				}
				if br.Stats().RemoteHeld.Load() != 1 {
					return fmt.Errorf("RemoteHeld gauge 0")
				}
				return nil
			})
			t.Logf("reported: %s", br.RemoteHold())

			watermark("0.4")
			waitAll(t, n, time.Minute, c)
			stomptest.Eventually(t, 30*time.Second, func() error {
				if h := br.RemoteHold(); h != nil {
					return fmt.Errorf("still held: %+v", h)
				}
				if rs := reasons(); len(rs) != 0 {
					return fmt.Errorf("not ready: %+v", rs)
				}
				return nil
			})
			if g := br.Stats().RemoteHeld.Load(); g != 0 {
				t.Errorf("RemoteHeld gauge %d after the alarm", g)
			}
		})
	}
}

// rabbitRemote is RabbitMQ r as a bridge's remote over proto ("amqp" or
// "stomp"), reconnecting fast, with its management API, and a way to
// consume from it that reads what that protocol sent: RabbitMQ hands a STOMP
// consumer what came over AMQP 1.0 with its sections encoded, so over AMQP
// 1.0 it is read over AMQP 1.0.
func rabbitRemote(t *testing.T, r *testbroker.RabbitMQ, proto string) (transport.Endpoint, func(dest string) seqConsumer) {
	t.Helper()
	opts := "?initialReconnectDelay=100&maxReconnectDelay=500&management=" + r.ManagementURL()
	if proto == "amqp" {
		u, err := amqp.ParseURI(r.AMQPURI() + opts + "&stompPort=" + strconv.Itoa(r.StompPort()))
		if err != nil {
			t.Fatal(err)
		}
		return u, func(dest string) seqConsumer { return amqptest.Subscribe(t, r.AMQPURI(), r.ManagementURL(), dest) }
	}
	return stomptest.URI(t, r.StompURI()+opts), func(dest string) seqConsumer { return stomptest.Subscribe(t, r.StompURI(), dest) }
}
