package admin

import (
	"strings"
	"testing"
)

func TestWriteMetrics(t *testing.T) {
	var b strings.Builder
	WriteMetrics(&b, []BridgeSnapshot{{Connector: "nc", Peer: `p"1`, Bridge: "a->b", Up: true, Forwarded: 42, DemandSubs: 3}})
	out := b.String()
	for _, want := range []string{
		`brokernet_bridge_up{connector="nc",peer="p\"1",bridge="a->b"} 1`,
		`brokernet_forwarded_messages_total{connector="nc",peer="p\"1",bridge="a->b"} 42`,
		`brokernet_demand_subscriptions{connector="nc",peer="p\"1",bridge="a->b"} 3`,
		"# TYPE brokernet_forwarded_messages_total counter",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("metrics lack %q:\n%s", want, out)
		}
	}
}
