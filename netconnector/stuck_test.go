package netconnector

import (
	"testing"
	"time"

	"github.com/brokernet/brokernet/bridge"
	"github.com/brokernet/brokernet/config"
	"github.com/brokernet/brokernet/discovery"
	"github.com/brokernet/brokernet/transport"
)

// TestStuckIntervalReachesBothBridges: a connector's stuckInterval is each
// bridge's, as it is: both mean the same by it (zero: the default;
// config.Off, which files and flags write as 0, is negative: off).
func TestStuckIntervalReachesBothBridges(t *testing.T) {
	for _, tc := range []struct {
		conf, want time.Duration
	}{
		{config.DefaultStuckInterval, bridge.DefaultStuckInterval},
		{time.Minute, time.Minute},
		{config.Off, config.Off},
		{0, 0},
	} {
		nc := config.DefaultConnector()
		nc.Name, nc.Broker, nc.Duplex, nc.StuckInterval = "c", "local", true, tc.conf
		c := &Connector{cfg: nc, local: config.Broker{Name: "local", URI: discovery.Spec{Kind: discovery.Static, URIs: []transport.URI{mustURI(t, "tcp://127.0.0.1:61616")}}}}
		cfgs := c.bridgeConfigs(discovery.Peer{Key: "k", URIs: []transport.URI{mustURI(t, "stomp://10.0.0.2:61613")}})
		if len(cfgs) != 2 {
			t.Fatalf("%d bridges, want 2", len(cfgs))
		}
		for _, bc := range cfgs {
			if tc.want == config.Off && bc.StuckInterval >= 0 {
				t.Errorf("stuckInterval off: bridge %s has %s, which is not off (negative)", bc.Name, bc.StuckInterval)
			}
			if bc.StuckInterval != tc.want {
				t.Errorf("stuckInterval %s: bridge %s has %s, want %s", tc.conf, bc.Name, bc.StuckInterval, tc.want)
			}
		}
	}
}

// TestDrainTimeoutReachesBothBridges: a connector's drainTimeout is the
// drain timeout of each of its bridges, the reverse one of a duplex peer too.
func TestDrainTimeoutReachesBothBridges(t *testing.T) {
	nc := config.DefaultConnector()
	nc.Name, nc.Broker, nc.Duplex, nc.DrainTimeout = "c", "local", true, 20*time.Second
	c := &Connector{cfg: nc, local: config.Broker{Name: "local", URI: discovery.Spec{Kind: discovery.Static, URIs: []transport.URI{mustURI(t, "tcp://127.0.0.1:61616")}}}}
	cfgs := c.bridgeConfigs(discovery.Peer{Key: "k", URIs: []transport.URI{mustURI(t, "stomp://10.0.0.2:61613")}})
	if len(cfgs) != 2 {
		t.Fatalf("%d bridges, want 2", len(cfgs))
	}
	for _, bc := range cfgs {
		if bc.DrainTimeout != 20*time.Second {
			t.Errorf("bridge %s: drain timeout %s, want 20s", bc.Name, bc.DrainTimeout)
		}
	}
}
