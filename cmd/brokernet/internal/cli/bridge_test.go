package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/brokernet/brokernet/config"
	"github.com/brokernet/brokernet/discovery"
	"github.com/brokernet/brokernet/transport"
	"github.com/brokernet/brokernet/transport/endpoint"
)

// bridgeConfig parses the bridge command's flags and URIs into its
// configuration, as runBridge does.
func bridgeConfig(t *testing.T, local, remote string, args ...string) (*config.Config, error) {
	t.Helper()
	var f bridgeFlags
	fs := newFlagSet("bridge")
	f.register(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	l, r := bridgeURIs(t, local, remote)
	return f.config(l, r)
}

// TestRenameFlagsReachTheConnector: --rename becomes the connector's renames,
// in the order given.
func TestRenameFlagsReachTheConnector(t *testing.T) {
	cfg, err := bridgeConfig(t, "stomp://127.0.0.1:61613", "amqp://127.0.0.1:5672",
		"--rename", "queue://orders=queue://shop.orders", "--rename", "/topic/a=/topic/b")
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
// connector's stuckInterval; 0 is config.Off, and no flag the default.
func TestStuckIntervalFlagReachesTheConnector(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want time.Duration
	}{
		{nil, config.DefaultStuckInterval},
		{[]string{"--stuck-interval", "0"}, config.Off},
		{[]string{"--stuck-interval", "2m"}, 2 * time.Minute},
	} {
		cfg, err := bridgeConfig(t, "stomp://127.0.0.1:61613", "stomp://127.0.0.1:61614", tc.args...)
		if err != nil {
			t.Fatal(err)
		}
		if got := cfg.Connectors[0].StuckInterval; got != tc.want {
			t.Errorf("%q: connector has %s, want %s", tc.args, got, tc.want)
		}
	}
}

// TestBridgeTempDestinationsFlagReachesTheConnector: --bridge-temp-destinations
// (default true, as ActiveMQ's bridgeTempDestinations) becomes the
// connector's bridgeTempDestinations, false included.
func TestBridgeTempDestinationsFlagReachesTheConnector(t *testing.T) {
	for _, args := range [][]string{nil, {"--bridge-temp-destinations=false"}, {"--bridge-temp-destinations"}} {
		cfg, err := bridgeConfig(t, "tcp://127.0.0.1:61616", "tcp://127.0.0.1:61617", args...)
		if err != nil {
			t.Fatal(err)
		}
		want := len(args) == 0 || args[0] == "--bridge-temp-destinations"
		if got := cfg.Connectors[0].BridgeTempDestinations; got != want {
			t.Errorf("%q: connector has bridgeTempDestinations %v, want %v", args, got, want)
		}
	}
}

// TestFlagsHaveTheFileDefaults: the bridge command's connector is
// DefaultConnector, as a file's is, apart from what the command sets.
func TestFlagsHaveTheFileDefaults(t *testing.T) {
	cfg, err := bridgeConfig(t, "stomp://127.0.0.1:61613", "stomp://127.0.0.1:61614")
	if err != nil {
		t.Fatal(err)
	}
	got := cfg.Connectors[0]
	want := config.DefaultConnector()
	want.Name, want.Broker, want.URI, want.Reconnect = "bridge", "local", got.URI, transport.Reconnect{}
	if !got.Equal(want) {
		t.Errorf("connector\n%+v\nwant\n%+v", got, want)
	}
}

// TestFlagProblemsNameTheFlag: every problem is reported at once, each by
// the flag (and value) that set it; an unset --message-ttl is --network-ttl's.
func TestFlagProblemsNameTheFlag(t *testing.T) {
	_, err := bridgeConfig(t, "stomp://127.0.0.1:61613", "stomp://127.0.0.1:61614",
		"--network-ttl", "0", "--window", "0", "--log-level", "loud", "--include", "a..b",
		"--rename", "queue://a=queue://b", "--rename", "queue://a=queue://c", "--stuck-interval", "10ms")
	if err == nil {
		t.Fatal("no error")
	}
	want := []string{
		`--network-ttl 0: want -1 (unlimited) or a hop count of at least 1, got 0`,
		`--window 0: want at least 1 unconfirmed message, got 0`,
		`--log-level "loud": unknown level "loud"; want trace, debug, info, warn or error`,
		`--include: pattern "a..b": empty word 2`,
		`--rename queue://a=queue://c: renames: queue://a is renamed twice (queue://b and queue://c)`,
		`--stuck-interval 10ms: want 0 (off) or at least 1s, got 10ms`,
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("errors lack %q:\n%v", w, err)
		}
	}
	if n := strings.Count(err.Error(), "--network-ttl 0"); n != 1 {
		t.Errorf("--network-ttl reported %d times:\n%v", n, err)
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
