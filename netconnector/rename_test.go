package netconnector

import (
	"testing"

	"github.com/brokernet/brokernet/config"
	"github.com/brokernet/brokernet/destination"
	"github.com/brokernet/brokernet/discovery"
	"github.com/brokernet/brokernet/transport"
)

// TestDuplexRenamesAreInvertedForTheReverseBridge: a connector's renames
// name local destinations; the bridge from the peer back reads them the other
// way round.
func TestDuplexRenamesAreInvertedForTheReverseBridge(t *testing.T) {
	nc := config.DefaultConnector()
	nc.Name, nc.Broker, nc.Duplex = "c", "local", true
	r, err := destination.ParseRename("queue://orders=queue://shop.orders")
	if err != nil {
		t.Fatal(err)
	}
	nc.Renames = []destination.Rename{r}
	c := &Connector{cfg: nc, local: config.Broker{Name: "local", URI: discovery.Spec{Kind: discovery.Static, URIs: []transport.URI{mustURI(t, "tcp://127.0.0.1:61616")}}}}
	cfgs := c.bridgeConfigs(discovery.Peer{Key: "k", URIs: []transport.URI{mustURI(t, "amqp://10.0.0.2")}})
	if len(cfgs) != 2 {
		t.Fatalf("%d bridges, want 2", len(cfgs))
	}
	if got := cfgs[0].Renames; len(got) != 1 || got[0] != r {
		t.Errorf("forward bridge renames %v, want %v", got, r)
	}
	if got := cfgs[1].Renames; len(got) != 1 || got[0].Local != r.Remote || got[0].Remote != r.Local {
		t.Errorf("reverse bridge renames %v, want %s inverted", got, r)
	}
}
