package netconnector_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/brokernet/brokernet/config"
	"github.com/brokernet/brokernet/discovery"
	"github.com/brokernet/brokernet/internal/testkit/stomptest"
	"github.com/brokernet/brokernet/internal/testkit/testbroker"
	"github.com/brokernet/brokernet/netconnector"
)

func TestMain(m *testing.M) { testbroker.Main(m) }

func brokerSpec(t *testing.T, uris ...string) discovery.Spec {
	t.Helper()
	spec := discovery.Spec{Kind: discovery.Static}
	for _, u := range uris {
		spec.URIs = append(spec.URIs, stomptest.URI(t, u))
	}
	return spec
}

// runConnector runs a connector until the test ends.
func runConnector(t *testing.T, nc config.NetworkConnector, local config.Broker, agent discovery.Agent) *netconnector.Connector {
	t.Helper()
	c, err := netconnector.New(nc, local, agent, stomptest.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); c.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return c
}

// waitPeerUp waits until the connector's bridge to peer key is up.
func waitPeerUp(t *testing.T, c *netconnector.Connector, key string, timeout time.Duration) {
	t.Helper()
	stomptest.Eventually(t, timeout, func() error {
		for _, st := range c.Status() {
			if st.Key == key && st.Up {
				return nil
			}
		}
		return fmt.Errorf("peer %s not bridged; status %+v", key, c.Status())
	})
}

// TestStaticPeerDownAtStart: three static peers, one of them down at start. The
// two that are up are bridged at once; the third within its back-off after it starts.
func TestStaticPeerDownAtStart(t *testing.T) {
	testbroker.Require(t)
	var l, p1, p2 *testbroker.ActiveMQ
	var wg sync.WaitGroup
	for _, b := range []struct {
		dst  **testbroker.ActiveMQ
		name string
	}{{&l, "L"}, {&p1, "P1"}, {&p2, "P2"}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			*b.dst = testbroker.StartActiveMQ(t, testbroker.Options{Name: b.name, ID: b.name + "-static"})
		}()
	}
	wg.Wait()
	if l == nil || p1 == nil || p2 == nil {
		t.FailNow()
	}
	ports, err := testbroker.FreePorts(2)
	if err != nil {
		t.Fatal(err)
	}
	p3URI := fmt.Sprintf("stomp://127.0.0.1:%d", ports[0])

	nc := config.DefaultConnector()
	nc.Name = "static-test"
	nc.Reconnect.Initial, nc.Reconnect.Max = 200*time.Millisecond, time.Second
	nc.URI = brokerSpec(t, p1.StompURI(), p2.StompURI(), p3URI)
	local := config.Broker{Name: "local", URI: brokerSpec(t, l.StompURI())}
	c := runConnector(t, nc, local, nil)

	start := time.Now()
	waitPeerUp(t, c, nc.URI.URIs[0].String(), 15*time.Second)
	waitPeerUp(t, c, nc.URI.URIs[1].String(), 15*time.Second)
	t.Logf("two live peers bridged %s after start", time.Since(start).Round(time.Millisecond))

	for _, p := range []*testbroker.ActiveMQ{p1, p2} {
		cons := stomptest.Subscribe(t, p.StompURI(), "/queue/static."+p.Name())
		stomptest.Eventually(t, 10*time.Second, func() error {
			return l.CheckQueueConsumers("static."+p.Name(), 1)
		})
		stomptest.SendN(t, l.StompURI(), "/queue/static."+p.Name(), 0, 100, false)
		cons.WaitDistinct(100, 20*time.Second)
	}

	p3 := testbroker.StartActiveMQ(t, testbroker.Options{Name: "P3", ID: "P3-static", StompPort: ports[0], OpenWirePort: ports[1]})
	up := time.Now()
	waitPeerUp(t, c, nc.URI.URIs[2].String(), 10*time.Second)
	t.Logf("third peer bridged %s after it started", time.Since(up).Round(time.Millisecond))
	cons := stomptest.Subscribe(t, p3.StompURI(), "/queue/static.P3")
	stomptest.Eventually(t, 10*time.Second, func() error { return l.CheckQueueConsumers("static.P3", 1) })
	stomptest.SendN(t, l.StompURI(), "/queue/static.P3", 0, 100, false)
	cons.WaitDistinct(100, 20*time.Second)
}
