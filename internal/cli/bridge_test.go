package cli

import (
	"testing"
	"time"

	"github.com/brokernet/brokernet/discovery"
	"github.com/brokernet/brokernet/transport"
	"github.com/brokernet/brokernet/transport/endpoint"
)

// TestRenameFlagsReachTheConnector: --rename becomes the connector's renames,
// in the order given.
func TestRenameFlagsReachTheConnector(t *testing.T) {
	local, remote := bridgeURIs(t, "stomp://127.0.0.1:61613", "amqp://127.0.0.1:5672")
	f := bridgeFlags{networkTTL: 1, prefetch: 1000, window: 500, logLevel: "info", logFormat: "console",
		rename: stringList{"queue://orders=queue://shop.orders", "/topic/a=/topic/b"}}
	cfg, err := f.config(local, remote)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range cfg.Connectors[0].Renames {
		got = append(got, r.String())
	}
	if len(got) != 2 || got[0] != "queue://orders=queue://shop.orders" || got[1] != "topic://a=topic://b" {
		t.Errorf("renames %q", got)
	}
}

// TestStuckIntervalFlagReachesTheConnector: --stuck-interval becomes the
// connector's stuckInterval, 0 included (off).
func TestStuckIntervalFlagReachesTheConnector(t *testing.T) {
	local, remote := bridgeURIs(t, "stomp://127.0.0.1:61613", "stomp://127.0.0.1:61614")
	for _, d := range []time.Duration{0, time.Minute} {
		f := bridgeFlags{networkTTL: 1, prefetch: 1000, window: 500, logLevel: "info", logFormat: "console", stuckInterval: d}
		cfg, err := f.config(local, remote)
		if err != nil {
			t.Fatal(err)
		}
		if got := cfg.Connectors[0].StuckInterval; got != d {
			t.Errorf("--stuck-interval %s: connector has %s", d, got)
		}
	}
}

// bridgeURIs parses the bridge command's LOCAL and REMOTE arguments.
func bridgeURIs(t *testing.T, local, remote string) (transport.URI, discovery.Spec) {
	t.Helper()
	l, err := endpoint.Parse(local)
	if err != nil {
		t.Fatal(err)
	}
	r, err := discovery.ParseURI(remote)
	if err != nil {
		t.Fatal(err)
	}
	return l, r
}
