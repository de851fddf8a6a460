package config

import (
	"strings"
	"testing"
)

// TestEveryProtocolIsAcceptedWhereABrokerURIIs: AMQP 1.0 and OpenWire URIs
// pass the configuration check as broker uri, in static:/masterslave: lists
// and as the advertised gossip URI.
func TestEveryProtocolIsAcceptedWhereABrokerURIIs(t *testing.T) {
	src := `
[[broker]]
name = "dc1"
uri = "tcp://10.0.0.1:61616"

[[broker]]
name = "rabbit"
uri = "amqp://u:pw@10.0.0.9:5672?vhost=v"

[[networkConnector]]
name = "ow"
broker = "dc1"
uri = "static:(tcp://10.0.0.2:61616,amqps://10.0.0.3,stomp://10.0.0.4:61613)"

[[networkConnector]]
name = "ms"
broker = "rabbit"
uri = "masterslave:(ssl://m.example,ssl://s.example:61618)"

[[networkConnector]]
name = "g"
broker = "dc1"
uri = "gossip:"
[networkConnector.gossip]
bind = "127.0.0.1:7946"
advertiseBrokerURI = "amqp://10.0.0.1:5672"
`
	cfg := mustParse(t, src)
	var got []string
	for _, b := range cfg.Brokers {
		got = append(got, b.URI.String())
	}
	for _, nc := range cfg.Connectors {
		got = append(got, nc.URI.String())
	}
	want := []string{
		"tcp://10.0.0.1:61616",
		"amqp://u:***@10.0.0.9:5672?vhost=v",
		"static:(tcp://10.0.0.2:61616,amqps://10.0.0.3:5671,stomp://10.0.0.4:61613)",
		"masterslave:(ssl://m.example:61617,ssl://s.example:61618)",
		"gossip:",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("URIs\n\t%s\nwant\n\t%s", strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
	}
	if p := cfg.Connectors[0].URI.URIs[0].Protocol(); p != "openwire" {
		t.Errorf("tcp:// is protocol %q, want openwire", p)
	}
	if err := cfg.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
	if cfg.Connectors[2].Gossip.AdvertiseBrokerURI != "amqp://10.0.0.1:5672" {
		t.Errorf("advertiseBrokerURI = %q", cfg.Connectors[2].Gossip.AdvertiseBrokerURI)
	}
}

// TestAConnectorToItsOwnBrokerIsFoundPerProtocol: the same address over the
// same protocol is the local broker; another protocol's port is not.
func TestAConnectorToItsOwnBrokerIsFoundPerProtocol(t *testing.T) {
	errs := parseErrors(t, "[[broker]]\nuri = \"tcp://10.0.0.1:61616\"\n[[networkConnector]]\nname = \"self\"\nuri = \"static:(tcp://10.0.0.1:61616)\"\n")
	if !strings.Contains(errs.Error(), "self") {
		t.Errorf("errors %v do not name the connector to its own broker", errs)
	}
	mustParse(t, "[[broker]]\nuri = \"tcp://10.0.0.1:61616\"\n[[networkConnector]]\nname = \"other\"\nuri = \"static:(stomp://10.0.0.1:61613)\"\n")
}
