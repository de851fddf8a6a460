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

// TestBridgeTempDestinationsFlagReachesTheConnector: --bridge-temp-destinations
// (default true, as ActiveMQ's bridgeTempDestinations) becomes the
// connector's bridgeTempDestinations, false included.
func TestBridgeTempDestinationsFlagReachesTheConnector(t *testing.T) {
	local, remote := bridgeURIs(t, "tcp://127.0.0.1:61616", "tcp://127.0.0.1:61617")
	for _, args := range [][]string{nil, {"--bridge-temp-destinations=false"}, {"--bridge-temp-destinations"}} {
		var f bridgeFlags
		fs := newFlagSet("bridge")
		fs.BoolVar(&f.bridgeTemp, "bridge-temp-destinations", true, "")
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		f.networkTTL, f.prefetch, f.window, f.logLevel, f.logFormat = 1, 1000, 500, "info", "console"
		cfg, err := f.config(local, remote)
		if err != nil {
			t.Fatal(err)
		}
		want := len(args) == 0 || args[0] == "--bridge-temp-destinations"
		if got := cfg.Connectors[0].BridgeTempDestinations; got != want {
			t.Errorf("%q: connector has bridgeTempDestinations %v, want %v", args, got, want)
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
