package activemqxml

import (
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/brokernet/brokernet/config"
	"github.com/brokernet/brokernet/destination"
	"github.com/brokernet/brokernet/discovery"
	"github.com/brokernet/brokernet/transport/openwire"
)

func TestImportRoundTrip(t *testing.T) {
	xml, err := os.ReadFile("../../testdata/activemq-network.xml")
	if err != nil {
		t.Fatal(err)
	}
	out, warnings, err := Import(xml, "")
	if err != nil {
		t.Fatalf("Import: %v\n%s", err, out)
	}
	again, _, _ := Import(xml, "")
	if again != out {
		t.Errorf("the output differs between two runs")
	}
	cfg, err := config.Parse("imported.toml", []byte(out))
	if err != nil {
		t.Fatalf("Parse of the import:\n%v\n%s", err, out)
	}

	if len(cfg.Brokers) != 1 || cfg.Brokers[0].Name != "dc1" || cfg.Brokers[0].URI.String() != "stomp://127.0.0.1:61614" {
		t.Errorf("brokers = %+v (want dc1 at the XML's STOMP port 61614)", cfg.Brokers)
	}
	if len(cfg.Connectors) != 2 {
		t.Fatalf("%d connectors, want 2:\n%s", len(cfg.Connectors), out)
	}

	a := cfg.Connectors[0]
	if a.Name != "to-dc2" || a.Broker != "dc1" || a.URI.Kind != discovery.Static || len(a.URI.URIs) != 2 {
		t.Errorf("to-dc2: %+v", a)
	}
	for i, host := range []string{"dc2-a.example", "dc2-b.example"} {
		u := a.URI.URIs[i].(openwire.URI)
		if u.Host != host || u.Port != 61616 || u.TLS || u.User != "bridge" || u.Password != "s3cret&more" {
			t.Errorf("to-dc2 member %d = %+v", i, u)
		}
	}
	if a.Duplex || a.NetworkTTL != 3 || a.MessageTTL != 3 || a.ConsumerTTL != 1 || !a.ConduitSubscriptions ||
		!a.DecreaseNetworkConsumerPriority || a.ConsumerPriorityBase != -10 || !a.SuppressDuplicateQueueSubscriptions ||
		!a.SuppressDuplicateTopicSubscriptions || a.PrefetchSize != 500 || a.DynamicOnly || !a.BridgeTempDestinations {
		t.Errorf("to-dc2 options: %+v", a)
	}
	if a.Reconnect.Initial != 200*time.Millisecond || a.Reconnect.Max != 10*time.Second || a.Reconnect.Multiplier != 1 {
		t.Errorf("to-dc2 reconnect: %+v", a.Reconnect)
	}
	if !a.ReplayWhenNoConsumers || a.ReplayDelay != 500*time.Millisecond {
		t.Errorf("to-dc2 replay: %v %v", a.ReplayWhenNoConsumers, a.ReplayDelay)
	}
	for _, c := range []struct {
		name      string
		got, want []string
	}{
		{"static", patternStrings(a.StaticallyIncludedDestinations), []string{"queue://orders.eu"}},
		{"dynamic", patternStrings(a.DynamicallyIncludedDestinations), []string{"queue://orders.>", "topic://prices.*"}},
		{"excluded", patternStrings(a.ExcludedDestinations), []string{"queue://orders.internal.>", "queue://orders.audit", "topic://ActiveMQ.Advisory.>"}},
	} {
		if !slices.Equal(c.got, c.want) {
			t.Errorf("to-dc2 %s destinations = %q, want %q", c.name, c.got, c.want)
		}
	}

	b := cfg.Connectors[1]
	if b.Name != "to-dc3" || b.URI.Kind != discovery.MasterSlave || len(b.URI.URIs) != 2 ||
		b.URI.URIs[0].Hostname() != "dc3-master.example" || b.URI.URIs[1].Addr() != "dc3-slave.example:61616" || b.URI.URIs[1].Protocol() != "openwire" || b.URI.URIs[0].HasPassword() {
		t.Errorf("to-dc3: %+v", b)
	}
	if !b.Duplex || b.NetworkTTL != 2 || b.MessageTTL != 4 || b.ConsumerTTL != 2 || !b.DynamicOnly || b.BridgeTempDestinations ||
		b.SuppressDuplicateTopicSubscriptions || b.DecreaseNetworkConsumerPriority || b.PrefetchSize != 1000 {
		t.Errorf("to-dc3 options: %+v", b)
	}

	all := strings.Join(warnings, "\n")
	for _, want := range []string{
		`activemq.xml:29: networkConnector "to-dc2": attributes brokernet cannot map, left out: alwaysSyncSend="true", advisoryPrefetchSize="100"`,
		`credentials`,
		`conditionalNetworkBridgeFilterFactory`,
	} {
		if !strings.Contains(all, want) {
			t.Errorf("no warning contains %q; warnings:\n%s", want, all)
		}
	}
	if strings.Contains(all, "s3cret") {
		t.Errorf("a warning shows the password:\n%s", all)
	}
}

// amq wraps network connectors (and more) in a broker element.
func amq(inner string) []byte {
	return []byte(`<beans xmlns="http://www.springframework.org/schema/beans"><broker xmlns="http://activemq.apache.org/schema/core" brokerName="b">` +
		inner + `</broker></beans>`)
}

func TestImportCases(t *testing.T) {
	tests := []struct {
		name     string
		xml      []byte
		local    string
		wantTOML []string // substrings of the output
		wantWarn []string // substrings of some warning
		wantErr  string
	}{
		{
			name:     "OpenWire members stay OpenWire; without a STOMP connector the local port is 61613",
			xml:      amq(`<networkConnectors><networkConnector uri="static:(tcp://h:61616)"/></networkConnectors>`),
			wantTOML: []string{`name = "NC"`, `uri = "static:(tcp://h:61616)"`, `[[broker]]` + "\n" + `name = "b"` + "\n" + `uri = "stomp://127.0.0.1:61613"`},
			wantWarn: []string{"decreaseNetworkConsumerPriority is not set"},
		},
		{
			name:     "an explicit local broker URI wins, and ssl stays OpenWire over TLS",
			xml:      amq(`<networkConnectors><networkConnector name="x" uri="static:(ssl://h:61617)" decreaseNetworkConsumerPriority="false"/></networkConnectors><transportConnectors><transportConnector uri="auto://0.0.0.0:5671"/></transportConnectors>`),
			local:    "stomp://10.1.1.1:61613",
			wantTOML: []string{`uri = "stomp://10.1.1.1:61613"`, `uri = "static:(ssl://h:61617)"`},
		},
		{
			name:     "multicast becomes gossip with a warning",
			xml:      amq(`<networkConnectors><networkConnector name="m1" uri="multicast://default"/><networkConnector name="m2" uri="multicast://default?group=x"/></networkConnectors>`),
			wantTOML: []string{`uri = "gossip:"`, `[networkConnector.gossip]`, `bind = "0.0.0.0:7946"`, `bind = "0.0.0.0:7947"`},
			wantWarn: []string{"multicast discovery is not supported; converted to gossip:"},
		},
		{
			name:     "unknown attributes and children are listed, never dropped silently",
			xml:      amq(`<networkConnectors><networkConnector name="u" uri="static:(tcp://h:61616)" fancy="1" remotePassword="pw" remoteUserName="r" staticBridge="true"><durableDestinations><topic physicalName="t"/></durableDestinations></networkConnector></networkConnectors>`),
			wantTOML: []string{`uri = "static:(tcp://r:pw@h:61616)"`},
			wantWarn: []string{`attributes brokernet cannot map, left out: fancy="1", staticBridge="true"`, "child element <durableDestinations> has no brokernet equivalent"},
		},
		{
			name:     "failover inside static becomes masterslave",
			xml:      amq(`<networkConnectors><networkConnector name="f" uri="static:(failover:(tcp://a:61616,tcp://b:61616)?randomize=false)?maxReconnectAttempts=0"/></networkConnectors>`),
			wantTOML: []string{`uri = "masterslave:(tcp://a:61616,tcp://b:61616)"`},
			wantWarn: []string{"became masterslave:(...)", "maxReconnectAttempts=0"},
		},
		{
			name:     "duplicate names are made unique",
			xml:      amq(`<networkConnectors><networkConnector uri="static:(tcp://a:61616)"/><networkConnector uri="static:(tcp://b:61616)"/></networkConnectors>`),
			wantTOML: []string{`name = "NC"`, `name = "NC-2"`},
			wantWarn: []string{`renamed from "NC"`},
		},
		{
			name:     "destination options and temp destinations",
			xml:      amq(`<networkConnectors><networkConnector name="d" uri="static:(tcp://a:61616)"><dynamicallyIncludedDestinations><topic physicalName="t.>?forceDurable=true"/><tempQueue physicalName="x"/><bean/></dynamicallyIncludedDestinations></networkConnector></networkConnectors>`),
			wantTOML: []string{`dynamicallyIncludedDestinations = ["topic://t.>", "temp-queue://x"]`},
			wantWarn: []string{`destination options "?forceDurable=true" are not supported`, "<bean> in <dynamicallyIncludedDestinations>"},
		},
		{
			name:     "bad values are left out with a warning",
			xml:      amq(`<networkConnectors><networkConnector name="v" uri="static:(tcp://a:61616)" duplex="maybe" networkTTL="two" prefetchSize="${p}"/></networkConnectors>`),
			wantWarn: []string{`duplex="maybe" is not a boolean`, `networkTTL="two" is not an integer`, `prefetchSize="${p}": property placeholders are not expanded`},
		},
		{
			name:     "nio and auto members are written tcp and ssl, OpenWire options kept, others dropped",
			xml:      amq(`<networkConnectors><networkConnector name="n" uri="static:(nio://a:61616?wireFormat.maxInactivityDuration=0&amp;soTimeout=5,auto+ssl://b:61617,stomp://c:61613?x=1)"/></networkConnectors>`),
			wantTOML: []string{`uri = "static:(tcp://a:61616?wireFormat.maxInactivityDuration=0,ssl://b:61617,stomp://c:61613)"`},
			wantWarn: []string{"nio://a:61616 → tcp://a:61616, auto+ssl://b:61617 → ssl://b:61617", `member a:61616: transport options "soTimeout=5" dropped`, `member c:61613: transport options "x=1" dropped`},
		},
		{
			name:    "placeholders in the uri need editing",
			xml:     amq(`<networkConnectors><networkConnector name="p" uri="static:(tcp://${remote}:61616)"/></networkConnectors>`),
			wantErr: "needs editing",
		},
		{
			name:    "vm transport cannot be bridged",
			xml:     amq(`<networkConnectors><networkConnector name="vm" uri="static:(vm://localhost)"/></networkConnectors>`),
			wantErr: "needs editing",
		},
		{
			name:    "no network connectors",
			xml:     amq(``),
			wantErr: "nothing to import",
		},
		{
			name:    "not ActiveMQ",
			xml:     []byte(`<beans/>`),
			wantErr: "not an ActiveMQ broker configuration",
		},
		{
			name:    "not XML",
			xml:     []byte(`<broker`),
			wantErr: "reading activemq.xml",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, warnings, err := Import(tc.xml, tc.local)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Import: %v\n%s", err, out)
			}
			for _, w := range tc.wantTOML {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			all := strings.Join(warnings, "\n")
			for _, w := range tc.wantWarn {
				if !strings.Contains(all, w) {
					t.Errorf("no warning contains %q:\n%s", w, all)
				}
			}
			if strings.Contains(all, `"pw"`) || strings.Contains(all, ":pw@") {
				t.Errorf("a warning shows a password:\n%s", all)
			}
		})
	}
}

// FuzzImport checks that Import never panics and that what it
// returns without error parses.
func FuzzImport(f *testing.F) {
	if data, err := os.ReadFile("../../testdata/activemq-network.xml"); err == nil {
		f.Add(data)
	}
	f.Add(amq(`<networkConnectors><networkConnector name="m" uri="multicast://default"/><networkConnector uri="static:(failover:(tcp://a:1,tcp://b:2))?useExponentialBackOff=false"/></networkConnectors>`))
	f.Fuzz(func(t *testing.T, data []byte) {
		out, _, err := Import(data, "")
		if err != nil {
			return
		}
		if _, err := config.Parse("imported.toml", []byte(out)); err != nil {
			t.Fatalf("import without error does not parse: %v\n%s", err, out)
		}
	})
}

func patternStrings(ps []destination.Pattern) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.String()
	}
	return out
}
