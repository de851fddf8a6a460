package discovery

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/brokernet/brokernet/transport/stomp"
)

// TestGossipMetadataCarriesNoCredentials joins a plain memberlist node (what an
// eavesdropper or any member runs) and reads a sidecar's metadata: no login, no
// passcode, no local file names; the broker address is all it learns.
func TestGossipMetadataCarriesNoCredentials(t *testing.T) {
	const secret = "Pw9marker"
	a := startMember(t, "a", nil, withLocal(LocalBroker{
		URI: "stomp://bridgeuser:" + secret + "@10.0.0.5:61613?clientId=cid&vhost=v", BrokerID: "ID:a",
	}))
	spy := startRawNode(t, "spy", `{"u":"stomp://h:1"}`, a.addr())
	var meta string
	waitFor(t, 5*time.Second, "the spy to read a's metadata", func() bool {
		for _, n := range spy.ml.Members() {
			if n.Name == "a" {
				meta = string(n.Meta)
				return meta != ""
			}
		}
		return false
	})
	for _, leak := range []string{secret, "bridgeuser", "cid"} {
		if strings.Contains(meta, leak) {
			t.Errorf("gossip metadata %s carries %q", meta, leak)
		}
	}
	if !strings.Contains(meta, "10.0.0.5:61613") || !strings.Contains(meta, "vhost=v") {
		t.Errorf("gossip metadata %s lost the broker address", meta)
	}

	t.Run("credentials an old member advertises are ignored", func(t *testing.T) {
		startRawNode(t, "old", `{"u":"stomp://u:`+secret+`@10.0.0.6:1?clientId=x","id":"ID:old"}`, a.addr())
		waitFor(t, 5*time.Second, "a to see old", func() bool { return slices.Contains(a.keys(), "old") })
		for _, p := range a.agent.Members() {
			if p.Key == "old" && (p.URIs[0].Login != "" || p.URIs[0].Passcode != "" || p.URIs[0].ClientID != "") {
				t.Fatalf("peer old kept advertised credentials: %+v", p.URIs[0])
			}
		}
		if strings.Contains(a.log.String(), secret) {
			t.Fatal("an advertised passcode was logged")
		}
	})
}

// TestGossipRefusesExposedUnencryptedBind: gossip without a key listens only on
// loopback unless Insecure says so.
func TestGossipRefusesExposedUnencryptedBind(t *testing.T) {
	key := make([]byte, 32)
	local := LocalBroker{URI: "stomp://h:1"}
	tests := []struct {
		name string
		cfg  GossipConfig
		ok   bool
	}{
		{"every interface without a key is refused", GossipConfig{BindAddr: "0.0.0.0:0"}, false},
		{"the default bind without a key is refused", GossipConfig{}, false},
		{"a private address without a key is refused", GossipConfig{BindAddr: "10.1.2.3:7946"}, false},
		{"IPv6 any without a key is refused", GossipConfig{BindAddr: "[::]:0"}, false},
		{"loopback without a key is allowed", GossipConfig{BindAddr: "127.0.0.1:0"}, true},
		{"IPv6 loopback without a key is allowed", GossipConfig{BindAddr: "[::1]:0"}, true},
		{"every interface with a key is allowed", GossipConfig{BindAddr: "0.0.0.0:0", SecretKey: key}, true},
		{"every interface marked insecure is allowed", GossipConfig{BindAddr: "0.0.0.0:0", Insecure: true}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.Local = local
			_, err := NewGossip(tt.cfg)
			if tt.ok != (err == nil) {
				t.Fatalf("NewGossip = %v, want ok %v", err, tt.ok)
			}
			if err != nil {
				if !errors.Is(err, ErrInsecureGossip) || strings.Count(err.Error(), "\n") != 0 ||
					!strings.Contains(err.Error(), "secretKeyFile") || !strings.Contains(err.Error(), "--gossip-insecure") {
					t.Fatalf("error %q: want one line naming the key and insecure options", err)
				}
			}
		})
	}
}

func TestAllowList(t *testing.T) {
	a, err := ParseAllowList([]string{"10.0.0.0/8", "192.168.1.7", "Broker.Example", "fd00::/8"})
	if err != nil {
		t.Fatal(err)
	}
	for host, want := range map[string]bool{
		"10.2.3.4": true, "11.0.0.1": false, "192.168.1.7": true, "192.168.1.8": false,
		"broker.example": true, "BROKER.EXAMPLE": true, "evil.example": false, "broker.example.evil": false,
		"fd00::1": true, "fe80::1": false,
	} {
		if got := a.Allows(stomp.URI{Host: host}); got != want {
			t.Errorf("Allows(%s) = %v, want %v", host, got, want)
		}
	}
	if !(AllowList{}).Allows(stomp.URI{Host: "anything"}) {
		t.Error("the empty list must allow everything")
	}
	for _, bad := range []string{"10.0.0.0/33", "", "a b", "h:1"} {
		if _, err := ParseAllowList([]string{bad}); err == nil {
			t.Errorf("ParseAllowList(%q) accepted", bad)
		}
	}
}

// TestGossipAllowedBrokers: members advertising a broker outside allowedBrokers
// are skipped and logged; the others are peers.
func TestGossipAllowedBrokers(t *testing.T) {
	allow, err := ParseAllowList([]string{"10.0.0.0/8", "broker.example"})
	if err != nil {
		t.Fatal(err)
	}
	a := startMember(t, "a", nil, func(c *GossipConfig) { c.AllowedBrokers = allow })
	startRawNode(t, "outside", `{"u":"stomp://192.168.9.9:1"}`, a.addr())
	startRawNode(t, "evil-name", `{"u":"stomp://evil.example:1"}`, a.addr())
	startRawNode(t, "inside", `{"u":"stomp://10.9.9.9:1"}`, a.addr())
	startRawNode(t, "named", `{"u":"stomp://broker.example:1"}`, a.addr())
	waitFor(t, 5*time.Second, "a to see the allowed members", func() bool { return a.sees("inside", "named") })
	waitFor(t, 5*time.Second, "a to log the refused members", func() bool {
		l := a.log.String()
		return strings.Contains(l, "peer=outside") && strings.Contains(l, "peer=evil-name")
	})
	if keys := a.keys(); len(keys) != 2 {
		t.Fatalf("a sees %v, want only inside and named", keys)
	}
}
