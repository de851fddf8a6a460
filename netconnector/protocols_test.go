package netconnector

import (
	"strings"
	"testing"
	"time"

	"github.com/brokernet/brokernet/config"
	"github.com/brokernet/brokernet/discovery"
	"github.com/brokernet/brokernet/transport"
	"github.com/brokernet/brokernet/transport/endpoint"
)

func mustURI(t *testing.T, s string) transport.URI {
	t.Helper()
	u, err := endpoint.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// TestDiscoveredBrokersOfEveryProtocolGetTheConnectorsDefaults: a peer learnt
// without credentials or TLS files (as gossip gives them), whatever its
// protocol, is dialled with the connector's userName, password, CA and
// back-off; a URI's own credentials win.
func TestDiscoveredBrokersOfEveryProtocolGetTheConnectorsDefaults(t *testing.T) {
	nc := config.DefaultConnector()
	nc.Name, nc.Broker = "c", "local"
	nc.UserName, nc.Password = "bridge", "pw"
	nc.CAFile = "/etc/brokernet/ca.pem"
	nc.Reconnect.Initial = 7 * time.Millisecond
	c := &Connector{cfg: nc, local: config.Broker{Name: "local", URI: discovery.Spec{Kind: discovery.Static, URIs: []transport.URI{mustURI(t, "tcp://127.0.0.1:61616")}}}}
	for _, tc := range []struct{ peer, want string }{
		{"amqps://10.0.0.2", "amqps://bridge:pw@10.0.0.2:5671?ca=%2Fetc%2Fbrokernet%2Fca.pem"},
		{"ssl://10.0.0.3", "ssl://bridge:pw@10.0.0.3:61617?ca=%2Fetc%2Fbrokernet%2Fca.pem"},
		{"tcp://own:secret@10.0.0.4", "tcp://own:secret@10.0.0.4:61616"},
		{"stomp://10.0.0.5:61613", "stomp://bridge:pw@10.0.0.5:61613"},
	} {
		cfgs := c.bridgeConfigs(discovery.Peer{Key: "k", URIs: []transport.URI{mustURI(t, tc.peer)}})
		remote := cfgs[0].Remote.(transport.URI)
		if got := remote.WithSecrets(); !strings.HasPrefix(got, tc.want) {
			t.Errorf("peer %s dialled as %s, want %s", tc.peer, got, tc.want)
		}
		if remote.Backoff().Initial != 7*time.Millisecond || cfgs[0].Local.Backoff().Initial != 7*time.Millisecond {
			t.Errorf("peer %s: the connector's back-off is not applied", tc.peer)
		}
	}
}

func TestSameURIsComparesWhatIsDialled(t *testing.T) {
	a := []transport.URI{mustURI(t, "tcp://h:1"), mustURI(t, "amqp://u:p@h:2")}
	if !sameURIs(a, []transport.URI{mustURI(t, "tcp://h:1"), mustURI(t, "amqp://u:p@h:2")}) {
		t.Error("equal lists differ")
	}
	for _, b := range [][]transport.URI{
		{mustURI(t, "tcp://h:1"), mustURI(t, "amqp://u:other@h:2")},
		{mustURI(t, "stomp://h:1"), mustURI(t, "amqp://u:p@h:2")},
		{mustURI(t, "tcp://h:1")},
	} {
		if sameURIs(a, b) {
			t.Errorf("%v and %v are the same", a, b)
		}
	}
}
