package config

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/brokernet/brokernet/destination"
	"github.com/brokernet/brokernet/discovery"
	"github.com/brokernet/brokernet/transport/stomp"
)

// mustParse parses src or fails the test.
func mustParse(t *testing.T, src string) *Config {
	t.Helper()
	cfg, err := Parse("test.toml", []byte(src))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return cfg
}

// parseErrors parses src, which must fail, and returns its problems.
func parseErrors(t *testing.T, src string) Errors {
	t.Helper()
	cfg, err := Parse("test.toml", []byte(src))
	if err == nil {
		t.Fatalf("Parse succeeded, want errors; got %+v", cfg)
	}
	var errs *Errors
	if !errors.As(err, &errs) {
		t.Fatalf("Parse error is %T, want *Errors: %v", err, err)
	}
	return *errs
}

func patternStrings(ps []destination.Pattern) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.String()
	}
	return out
}

func TestFiveMistakesAreAllReportedWithTheirLines(t *testing.T) {
	_, err := Load("testdata/five-mistakes.toml")
	var errs *Errors
	if !errors.As(err, &errs) {
		t.Fatalf("Load: want *Errors, got %T: %v", err, err)
	}
	want := []struct {
		line        int
		table, key  string
		msgContains string
	}{
		{4, "log", "level", `unknown level "verbose"`},
		{13, `networkConnector "to-dc2"`, "netwrokTTL", "did you mean networkTTL?"},
		{14, `networkConnector "to-dc2"`, "prefetchSize", "want at least 1"},
		{18, `networkConnector "to-dc3"`, "uri", `bad port "99999"`},
		{19, `networkConnector "to-dc3"`, "networkTTL", `want an integer, got string "two"`},
	}
	if len(*errs) != len(want) {
		t.Fatalf("got %d problems, want %d:\n%v", len(*errs), len(want), err)
	}
	for i, w := range want {
		e := (*errs)[i]
		if e.File != "testdata/five-mistakes.toml" || e.Line != w.line || e.Col != 1 || e.Table != w.table || e.Key != w.key || !strings.Contains(e.Msg, w.msgContains) {
			t.Errorf("problem %d = %+v, want line %d col 1 table %s key %s msg containing %q", i, e, w.line, w.table, w.key, w.msgContains)
		}
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != 5 {
		t.Fatalf("Error() has %d lines, want 5:\n%s", len(lines), err)
	}
	const first = `testdata/five-mistakes.toml:4:1: log: level: unknown level "verbose"; want trace, debug, info, warn or error`
	if lines[0] != first {
		t.Errorf("first line\n got %s\nwant %s", lines[0], first)
	}
	const last = `testdata/five-mistakes.toml:19:1: networkConnector "to-dc3": networkTTL: want an integer, got string "two"`
	if lines[4] != last {
		t.Errorf("last line\n got %s\nwant %s", lines[4], last)
	}
	if strings.Contains(err.Error(), "secret") {
		t.Errorf("the errors show a passcode:\n%s", err)
	}
}

func TestExamplesParse(t *testing.T) {
	for _, dir := range []string{"testdata", filepath.Join("..", "testdata")} {
		for _, c := range []struct {
			file string
			kind discovery.Kind
		}{
			{"static.toml", discovery.Static},
			{"masterslave.toml", discovery.MasterSlave},
			{"gossip.toml", discovery.Gossip},
		} {
			path := filepath.Join(dir, c.file)
			if dir != "testdata" {
				path = filepath.Join(dir, "federation-"+c.file)
			}
			t.Run(path, func(t *testing.T) {
				data, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				cfg, err := Parse(path, data)
				if err != nil {
					t.Fatalf("Parse:\n%v", err)
				}
				if len(cfg.Brokers) != 1 || len(cfg.Connectors) == 0 {
					t.Fatalf("got %d brokers, %d connectors", len(cfg.Brokers), len(cfg.Connectors))
				}
				if got := cfg.Connectors[0].URI.Kind; got != c.kind {
					t.Errorf("first connector's discovery kind = %v, want %v", got, c.kind)
				}
				for _, nc := range cfg.Connectors {
					if nc.Broker != cfg.Brokers[0].Name {
						t.Errorf("connector %q: broker %q, want %q", nc.Name, nc.Broker, cfg.Brokers[0].Name)
					}
				}
			})
		}
	}
}

func TestStaticExampleValues(t *testing.T) {
	cfg, err := Load("testdata/static.toml")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Log != (Log{Level: "info", Format: "json"}) || cfg.Admin.Listen != "127.0.0.1:9464" {
		t.Errorf("log %+v admin %+v", cfg.Log, cfg.Admin)
	}
	nc := cfg.Connectors[0]
	if nc.Name != "to-dc2" || nc.Line != 22 || len(nc.URI.URIs) != 2 || nc.URI.URIs[1].Hostname() != "10.0.0.3" {
		t.Errorf("connector 0: %+v", nc)
	}
	if nc.NetworkTTL != 2 || nc.MessageTTL != 2 || nc.ConsumerTTL != 1 || !nc.DecreaseNetworkConsumerPriority || nc.ConsumerPriorityBase != -5 {
		t.Errorf("connector 0 TTLs/priority: %+v", nc)
	}
	if got := patternStrings(nc.DynamicallyIncludedDestinations); !slices.Equal(got, []string{"queue://orders.>", "topic://prices.*"}) {
		t.Errorf("dynamicallyIncludedDestinations = %q", got)
	}
	if got := patternStrings(nc.ExcludedDestinations); !slices.Equal(got, []string{"queue://orders.internal.>"}) {
		t.Errorf("excludedDestinations = %q", got)
	}
	a := cfg.Connectors[1]
	if a.RemoteID != "audit-broker" || a.URI.URIs[0].(stomp.URI).Passcode != "secret" || a.URI.URIs[0].(stomp.URI).VHost != "audit" {
		t.Errorf("connector 1: %+v", a)
	}
	if a.Reconnect.Initial != 500*time.Millisecond || a.Reconnect.Max != time.Minute || a.Reconnect.Multiplier != 2 {
		t.Errorf("connector 1 reconnect: %+v", a.Reconnect)
	}
	if a.PrefetchSize != 100 || a.Window != 50 {
		t.Errorf("connector 1 prefetch/window: %d/%d", a.PrefetchSize, a.Window)
	}
	if strings.Contains(a.URI.String(), "secret") {
		t.Errorf("URI.String() shows the passcode: %s", a.URI)
	}
}

func TestGossipExampleValues(t *testing.T) {
	cfg, err := Load("testdata/gossip.toml")
	if err != nil {
		t.Fatal(err)
	}
	g := cfg.Connectors[0].Gossip
	if g == nil {
		t.Fatal("no gossip settings")
	}
	want := Gossip{Bind: "10.0.0.1:7946", Advertise: "10.0.0.1:7946", Join: []string{"10.0.0.2:7946", "10.0.0.3"},
		NodeName: "dc1-node1", AdvertiseBrokerURI: "stomp://10.0.0.1:61613"}
	if g.Bind != want.Bind || g.Advertise != want.Advertise || !slices.Equal(g.Join, want.Join) ||
		g.NodeName != want.NodeName || g.AdvertiseBrokerURI != want.AdvertiseBrokerURI || len(g.SecretKey) != 32 {
		t.Errorf("gossip = %+v, want %+v", *g, want)
	}
	// A checkout may leave the example key readable by others; nothing else.
	for _, w := range cfg.Warnings {
		if !strings.Contains(w, "chmod 600") {
			t.Errorf("warning: %q", w)
		}
	}
}

func TestDefaults(t *testing.T) {
	cfg := mustParse(t, `
[[broker]]
uri = "stomp://127.0.0.1:61613"

[[networkConnector]]
name = "NC"
uri = "stomp://10.0.0.2:61613"
`)
	if cfg.Log != Default().Log || cfg.Admin != Default().Admin {
		t.Errorf("log/admin = %+v %+v, want defaults", cfg.Log, cfg.Admin)
	}
	if len(cfg.Brokers) != 1 || cfg.Brokers[0].Name != "local" || cfg.Brokers[0].URI.Kind != discovery.Static {
		t.Fatalf("brokers = %+v", cfg.Brokers)
	}
	got := cfg.Connectors[0]
	want := DefaultConnector()
	want.Name, want.Broker, want.URI, want.Line = "NC", "local", got.URI, 5
	if !got.Equal(want) || got.Line != 5 {
		t.Errorf("connector =\n%+v\nwant\n%+v", got, want)
	}
	if got.NetworkTTL != 1 || got.MessageTTL != 1 || got.ConsumerTTL != 1 || !got.ConduitSubscriptions || !got.BridgeTempDestinations ||
		got.DecreaseNetworkConsumerPriority || !got.SuppressDuplicateTopicSubscriptions || got.SuppressDuplicateQueueSubscriptions ||
		got.PrefetchSize != 1000 || got.Window != 500 || got.DrainTimeout != 30*time.Second || got.Reconnect.Initial != time.Second || got.Reconnect.Max != 30*time.Second {
		t.Errorf("defaults: %+v", got)
	}
}

func TestValues(t *testing.T) {
	tests := []struct {
		name  string
		src   string
		check func(t *testing.T, nc NetworkConnector)
	}{
		{"networkTTL sets the message and consumer TTLs", `networkTTL = 3`, func(t *testing.T, nc NetworkConnector) {
			if nc.NetworkTTL != 3 || nc.MessageTTL != 3 || nc.ConsumerTTL != 3 {
				t.Errorf("TTLs %d/%d/%d", nc.NetworkTTL, nc.MessageTTL, nc.ConsumerTTL)
			}
		}},
		{"messageTTL and consumerTTL win over networkTTL", "networkTTL = 3\nmessageTTL = -1\nconsumerTTL = 1", func(t *testing.T, nc NetworkConnector) {
			if nc.NetworkTTL != 3 || nc.MessageTTL != -1 || nc.ConsumerTTL != 1 {
				t.Errorf("TTLs %d/%d/%d", nc.NetworkTTL, nc.MessageTTL, nc.ConsumerTTL)
			}
		}},
		{"integer durations are milliseconds", "initialReconnectDelay = 250\nmaxReconnectDelay = \"2000\"\nreplayDelay = 5", func(t *testing.T, nc NetworkConnector) {
			if nc.Reconnect.Initial != 250*time.Millisecond || nc.Reconnect.Max != 2*time.Second || nc.ReplayDelay != 5*time.Millisecond {
				t.Errorf("reconnect %+v replay %v", nc.Reconnect, nc.ReplayDelay)
			}
		}},
		{"a durable offline timeout", "durableOfflineTimeout = \"1h\"", func(t *testing.T, nc NetworkConnector) {
			if nc.DurableOfflineTimeout != time.Hour {
				t.Errorf("durableOfflineTimeout %v", nc.DurableOfflineTimeout)
			}
		}},
		{"a stuck-message interval", "stuckInterval = \"1m\"", func(t *testing.T, nc NetworkConnector) {
			if nc.StuckInterval != time.Minute {
				t.Errorf("stuckInterval %v", nc.StuckInterval)
			}
		}},
		{"the stuck-message count off", "stuckInterval = \"0s\"", func(t *testing.T, nc NetworkConnector) {
			if nc.StuckInterval != Off {
				t.Errorf("stuckInterval %v", nc.StuckInterval)
			}
		}},
		{"a drain timeout", "drainTimeout = \"20s\"", func(t *testing.T, nc NetworkConnector) {
			if nc.DrainTimeout != 20*time.Second {
				t.Errorf("drainTimeout %v", nc.DrainTimeout)
			}
		}},
		{"isolation by default", "", func(t *testing.T, nc NetworkConnector) {
			if !nc.IsolateDestinations || nc.DestinationWindow != 0 || nc.BlockedAfter != DefaultBlockedAfter {
				t.Errorf("isolateDestinations %v, destinationWindow %d, blockedAfter %v", nc.IsolateDestinations, nc.DestinationWindow, nc.BlockedAfter)
			}
		}},
		{"isolation tuned", "isolateDestinations = false\ndestinationWindow = 50\nblockedAfter = \"10s\"", func(t *testing.T, nc NetworkConnector) {
			if nc.IsolateDestinations || nc.DestinationWindow != 50 || nc.BlockedAfter != 10*time.Second {
				t.Errorf("isolateDestinations %v, destinationWindow %d, blockedAfter %v", nc.IsolateDestinations, nc.DestinationWindow, nc.BlockedAfter)
			}
		}},
		{"an integer multiplier is a number", "backOffMultiplier = 3", func(t *testing.T, nc NetworkConnector) {
			if nc.Reconnect.Multiplier != 3 {
				t.Errorf("multiplier %v", nc.Reconnect.Multiplier)
			}
		}},
		{"booleans are read", "duplex = true\nconduitSubscriptions = false\ndynamicOnly = true\nbridgeTempDestinations = false\nreplayWhenNoConsumers = true\nsuppressDuplicateTopicSubscriptions = false", func(t *testing.T, nc NetworkConnector) {
			if !nc.Duplex || nc.ConduitSubscriptions || !nc.DynamicOnly || nc.BridgeTempDestinations || !nc.ReplayWhenNoConsumers || nc.SuppressDuplicateTopicSubscriptions {
				t.Errorf("%+v", nc)
			}
		}},
		{"STOMP destination forms are patterns too", `excludedDestinations = ["/queue/a.b", "c.>"]`, func(t *testing.T, nc NetworkConnector) {
			if got := patternStrings(nc.ExcludedDestinations); !slices.Equal(got, []string{"queue://a.b", "c.>"}) {
				t.Errorf("excluded %q", got)
			}
		}},
		{"renames", `renames = ["queue://orders=queue://shop.orders", "/topic/a=/topic/b.c"]`, func(t *testing.T, nc NetworkConnector) {
			var got []string
			for _, r := range nc.Renames {
				got = append(got, r.String())
			}
			if !slices.Equal(got, []string{"queue://orders=queue://shop.orders", "topic://a=topic://b.c"}) {
				t.Errorf("renames %q", got)
			}
		}},
		{"rate limits", "rateLimit = 500\nbyteRateLimit = 1_048_576\n" + `destinationRateLimits = ["queue://backlog.>=200/s", "topic://prices.>= 2 MiB/s", "/queue/a=3kB/s"]`, func(t *testing.T, nc NetworkConnector) {
			if nc.RateLimit != 500 || nc.ByteRateLimit != 1<<20 {
				t.Errorf("rateLimit %d, byteRateLimit %d", nc.RateLimit, nc.ByteRateLimit)
			}
			var got []string
			for _, r := range nc.DestinationRateLimits {
				got = append(got, r.String())
			}
			if !slices.Equal(got, []string{"queue://backlog.>=200/s", "topic://prices.>=2097152B/s", "queue://a=3000B/s"}) {
				t.Errorf("destinationRateLimits %q", got)
			}
		}},
		{"content filters", `filter = "region = 'eu'"` + "\n" + `destinationFilters = ["queue://orders.>=amount > 100 AND note <> 'a=b'", "/topic/t = x IN ('(', ')')"]`, func(t *testing.T, nc NetworkConnector) {
			if nc.Filter != "region = 'eu'" {
				t.Errorf("filter %q", nc.Filter)
			}
			var got []string
			for _, f := range nc.DestinationFilters {
				got = append(got, f.String())
			}
			if !slices.Equal(got, []string{"queue://orders.>=amount > 100 AND note <> 'a=b'", "topic://t=x IN ('(', ')')"}) {
				t.Errorf("destinationFilters %q", got)
			}
		}},
		{"an empty list is no list", `dynamicallyIncludedDestinations = []`, func(t *testing.T, nc NetworkConnector) {
			if nc.DynamicallyIncludedDestinations != nil {
				t.Errorf("got %v", nc.DynamicallyIncludedDestinations)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := mustParse(t, "[[broker]]\nuri = \"stomp://127.0.0.1:61613\"\n[[networkConnector]]\nname = \"a\"\nuri = \"stomp://10.0.0.2:61613\"\n"+tc.src+"\n")
			tc.check(t, cfg.Connectors[0])
		})
	}
}

// brokerHeader is the start of most error cases: lines 1-2.
const brokerHeader = "[[broker]]\nuri = \"stomp://127.0.0.1:61613\"\n"

// connector is a valid connector header at lines 3-5, to append keys to.
const connector = brokerHeader + "[[networkConnector]]\nname = \"a\"\nuri = \"stomp://10.0.0.2:61613\"\n"

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		src  string
		// want are the expected lines of Error(), after "test.toml:", in order.
		want []string
	}{
		{"TOML syntax errors carry the parser's position", brokerHeader + "x = \n",
			[]string{"3:5: TOML syntax: expected value but found '\\n' instead"}},
		{"an empty file has no broker", "",
			[]string{" broker: missing: want at least one [[broker]] table with the uri of the local broker"}},
		{"unknown top-level keys get a suggestion", brokerHeader + "[[networkConnectors]]\nname = \"x\"\n",
			[]string{"3:1: networkConnectors: unknown key; did you mean networkConnector?"}},
		{"broker as a single table", "[broker]\nuri = \"stomp://127.0.0.1:61613\"\n",
			[]string{"1:1: broker: want [[broker]] (an array of tables), got a single [broker] table"}},
		{"ActiveMQ-only attributes are explained", connector + "password = \"u\"\nalwaysSyncSend = true\n",
			[]string{
				`6:1: networkConnector "a": password: unknown key; use userName and passwordFile (a file holding the password), or credentials in the uri`,
				`7:1: networkConnector "a": alwaysSyncSend: unknown key; brokernet always waits for the remote broker's confirmation`,
			}},
		{"case and underscores still suggest the key", connector + "network_ttl = 2\nPrefetchSize = 5\n",
			[]string{
				`6:1: networkConnector "a": network_ttl: unknown key; did you mean networkTTL?`,
				`7:1: networkConnector "a": PrefetchSize: unknown key; did you mean prefetchSize?`,
			}},
		{"wrong types", connector + "duplex = \"yes\"\nwindow = 1.5\nbackOffMultiplier = \"2\"\nexcludedDestinations = \"a.b\"\n",
			[]string{
				`6:1: networkConnector "a": duplex: want true or false, got string "yes"`,
				`7:1: networkConnector "a": window: want an integer, got float 1.5`,
				`8:1: networkConnector "a": backOffMultiplier: want a number, got string "2"`,
				`9:1: networkConnector "a": excludedDestinations: want an array of strings, got string "a.b"`,
			}},
		{"out-of-range numbers", connector + "networkTTL = 0\nmessageTTL = -2\nconsumerPriorityBase = 200\nwindow = 0\nbackOffMultiplier = 0.5\n",
			[]string{
				`6:1: networkConnector "a": networkTTL: want -1 (unlimited) or a hop count of at least 1, got 0`,
				`7:1: networkConnector "a": messageTTL: want -1 (unlimited) or a hop count of at least 1, got -2`,
				`8:1: networkConnector "a": consumerPriorityBase: want a priority in -128..127, got 200`,
				`9:1: networkConnector "a": window: want at least 1 unconfirmed message, got 0`,
				`10:1: networkConnector "a": backOffMultiplier: want a number of at least 1 (1 keeps the delay constant), got 0.5`,
			}},
		{"a stuck-message interval below a second", connector + "stuckInterval = \"100ms\"\n",
			[]string{`6:1: networkConnector "a": stuckInterval: want 0 (off) or at least 1s, got 100ms`}},
		{"a destination window beyond the window", connector + "window = 100\ndestinationWindow = 101\nblockedAfter = \"0s\"\n",
			[]string{
				`7:1: networkConnector "a": destinationWindow: want 0 (a quarter of window) or 1..window (100), got 101`,
				`8:1: networkConnector "a": blockedAfter: want more than 0, got 0s`,
			}},
		{"a drain timeout of 0", connector + "drainTimeout = 0\n",
			[]string{`6:1: networkConnector "a": drainTimeout: want more than 0, got 0s`}},
		{"maxReconnectDelay below initialReconnectDelay", connector + "initialReconnectDelay = \"10s\"\nmaxReconnectDelay = \"5s\"\n",
			[]string{`7:1: networkConnector "a": maxReconnectDelay: 5s is below initialReconnectDelay 10s`}},
		{"initialReconnectDelay above the default maximum", connector + "initialReconnectDelay = \"1m\"\n",
			[]string{`6:1: networkConnector "a": initialReconnectDelay: 1m0s is above maxReconnectDelay (default 30s); raise maxReconnectDelay too`}},
		{"bad durations", connector + "initialReconnectDelay = \"soon\"\nreplayDelay = -5\nmaxReconnectDelay = 0\n",
			[]string{
				`6:1: networkConnector "a": initialReconnectDelay: want a duration such as "500ms" or "30s", or integer milliseconds, got string "soon"`,
				`7:1: networkConnector "a": replayDelay: want a duration of at least 0, got -5`,
				`8:1: networkConnector "a": maxReconnectDelay: want more than 0, got 0s`,
			}},
		{"bad patterns are located by element", connector + "excludedDestinations = [\n  \"queue://ok\",\n  \"a..b\",\n  7,\n]\n",
			[]string{
				`8:3: networkConnector "a": excludedDestinations[1]: pattern "a..b": empty word 2 (a pattern must not start or end with '.' or contain "..")`,
				`9:3: networkConnector "a": excludedDestinations[2]: want a string, got integer 7`,
			}},
		{"bad renames are located by element", connector + "renames = [\n  \"queue://a=queue://b\",\n  \"queue://a=queue://c\",\n  \"queue://x\",\n]\n",
			[]string{
				`8:3: networkConnector "a": renames[1]: renames: queue://a is renamed twice (queue://b and queue://c)`,
				`9:3: networkConnector "a": renames[2]: rename "queue://x": want LOCAL=REMOTE (e.g. queue://orders=queue://shop.orders)`,
			}},
		{"bad rate limits", connector + "rateLimit = -1\ndestinationRateLimits = [\n  \"queue://a=500\",\n  \"queue://b=0/s\",\n  \"queue://c=5 TB/s\",\n  \"queue://d=500/s\",\n]\n",
			[]string{
				`6:1: networkConnector "a": rateLimit: want 0 (no limit) or messages per second, got -1`,
				`8:3: networkConnector "a": destinationRateLimits[0]: rate limit "queue://a=500": want PATTERN=RATE, RATE messages ("500/s") or bytes ("2MB/s") a second, e.g. queue://backlog.>=500/s`,
				`9:3: networkConnector "a": destinationRateLimits[1]: rate limit "queue://b=0/s": "0/s" is not a positive whole number a second; want PATTERN=RATE, RATE messages ("500/s") or bytes ("2MB/s") a second, e.g. queue://backlog.>=500/s`,
				`10:3: networkConnector "a": destinationRateLimits[2]: rate limit "queue://c=5 TB/s": "5 TB/s" is not a positive whole number a second; want PATTERN=RATE, RATE messages ("500/s") or bytes ("2MB/s") a second, e.g. queue://backlog.>=500/s`,
			}},
		{"bad content filters", connector + "filter = \"region = 'eu\"\ndestinationFilters = [\n  \"queue://a\",\n  \"queue://b=(x = 1\",\n  \"queue://c=\",\n  \"queue://d=x = 1)\",\n]\n",
			[]string{
				`6:1: networkConnector "a": filter: selector "region = 'eu": at 10: string has no closing quote`,
				`8:3: networkConnector "a": destinationFilters[0]: filter "queue://a": want PATTERN=SELECTOR, e.g. queue://orders.>=region = 'eu'`,
				`9:3: networkConnector "a": destinationFilters[1]: filter "queue://b=(x = 1": selector "(x = 1": at 7: want ")", found end of selector`,
				`10:3: networkConnector "a": destinationFilters[2]: filter "queue://c=": empty selector`,
				`11:3: networkConnector "a": destinationFilters[3]: filter "queue://d=x = 1)": selector "x = 1)": at 6: unexpected ")"`,
			}},
		{"unknown log format and admin address", "[log]\nformat = \"xml\"\n[admin]\nlisten = \"localhost\"\n" + brokerHeader,
			[]string{
				`2:1: log: format: unknown format "xml"; want json or console`,
				`4:1: admin: listen: want host:port, got "localhost" (or "" for no listener)`,
			}},
		{"missing name and uri are reported at the header", brokerHeader + "\n[[networkConnector]]\nduplex = true\n",
			[]string{
				`4:1: networkConnector #1: name: missing: every [[networkConnector]] needs a unique name`,
				`4:1: networkConnector #1: uri: missing: want a broker URI (stomp://, amqp://, tcp://, ...), static:(...), masterslave:(...) or gossip:`,
			}},
		{"duplicate names", connector + "[[networkConnector]]\nname = \"a\"\nuri = \"stomp://10.0.0.3:61613\"\n",
			[]string{`7:1: networkConnector "a": name: duplicate connector name "a" (first at line 3)`}},
		{"unknown broker", connector + "broker = \"lokal\"\n",
			[]string{`6:1: networkConnector "a": broker: unknown broker "lokal"; did you mean "local"?`}},
		{"several brokers need names and references", "[[broker]]\nname = \"b1\"\nuri = \"stomp://127.0.0.1:61613\"\n[[broker]]\nuri = \"stomp://127.0.0.1:61614\"\n[[broker]]\nname = \"b1\"\nuri = \"stomp://127.0.0.1:61615\"\n[[networkConnector]]\nname = \"a\"\nuri = \"stomp://10.0.0.2:61613\"\n",
			[]string{
				`4:1: broker #2: name: missing: with 3 [[broker]] tables, each needs a name`,
				`7:1: broker "b1": name: duplicate broker name "b1" (first at line 1)`,
				`9:1: networkConnector "a": broker: missing: with 3 [[broker]] tables, name the one to bridge from ("b1")`,
			}},
		{"bad broker URIs", "[[broker]]\nuri = \"gossip:\"\n[[broker]]\nname = \"x\"\nuri = \"static:(stomp://a:1,stomp://b:2)\"\n",
			[]string{
				`1:1: broker #1: name: missing: with 2 [[broker]] tables, each needs a name`,
				`2:1: broker #1: uri: want a broker URI (stomp://, amqp://, tcp://, ...) or masterslave:(...); gossip: finds remote brokers and belongs in a [[networkConnector]]`,
				`5:1: broker "x": uri: static:(...) with 2 URIs: a [[broker]] is one broker; use masterslave:(...) for a master/slave pair, or one [[broker]] each`,
			}},
		{"a connector to its own broker", brokerHeader + "[[networkConnector]]\nname = \"self\"\nuri = \"static:(stomp://10.0.0.9:61613,stomp://127.0.0.1:61613)\"\n",
			[]string{`5:1: networkConnector "self": uri: stomp://127.0.0.1:61613 is the local broker "local" itself`}},
		{"gossip: without its table", brokerHeader + "[[networkConnector]]\nname = \"g\"\nuri = \"gossip:\"\n",
			[]string{`5:1: networkConnector "g": uri: gossip: needs a [networkConnector.gossip] table (bind, join, ...) after this connector`}},
		{"a gossip table on a static connector", connector + "[networkConnector.gossip]\nbind = \"0.0.0.0:7946\"\n",
			[]string{`6:1: networkConnector "a": gossip: a gossip table belongs only to a connector with uri = "gossip:"; this uri is static`}},
		{"bad gossip settings", brokerHeader + "[[networkConnector]]\nname = \"g\"\nuri = \"gossip:\"\n  [networkConnector.gossip]\n  bind = \"0.0.0.0\"\n  advertise = \":7946\"\n  join = [\"10.0.0.2:x\", \"\"]\n  advertiseBrokerURI = \"masterslave:(stomp://a:1,stomp://b:2)\"\n  secretKeyFile = \"/nonexistent/key\"\n  bindd = 1\n",
			[]string{
				`7:3: networkConnector "g": gossip.bind: want host:port, got "0.0.0.0"`,
				`8:3: networkConnector "g": gossip.advertise: want host:port with a host, got ":7946" (or "" to let memberlist choose)`,
				`9:11: networkConnector "g": gossip.join[0]: bad port "x" (want 1..65535), got "10.0.0.2:x"`,
				`9:25: networkConnector "g": gossip.join[1]: want host or host:port, got ""`,
				`10:3: networkConnector "g": gossip.advertiseBrokerURI: broker URI "masterslave:(stomp://a:1,stomp://b:2)": unsupported scheme "masterslave" (want one of stomp://, stomp+ssl:// (STOMP), amqp://, amqps:// (AMQP 1.0), tcp://, ssl:// (OpenWire))`,
				`11:3: networkConnector "g": gossip.secretKeyFile: reading key: stat /nonexistent/key: no such file or directory`,
				`12:3: networkConnector "g": gossip.bindd: unknown key; did you mean bind?`,
			}},
		{"two gossip connectors on one port", brokerHeader + "[[networkConnector]]\nname = \"g1\"\nuri = \"gossip:\"\n[networkConnector.gossip]\ninsecure = true\n[[networkConnector]]\nname = \"g2\"\nuri = \"gossip:\"\n[networkConnector.gossip]\nbind = \"10.0.0.1:7946\"\ninsecure = true\n",
			[]string{`12:1: networkConnector "g2": gossip.bind: gossip bind 10.0.0.1:7946 clashes with connector "g1"'s 0.0.0.0:7946`}},
		{"remoteId needs a single static URI", brokerHeader + "[[networkConnector]]\nname = \"m\"\nuri = \"masterslave:(stomp://a:61613,stomp://b:61613)\"\nremoteId = \"x\"\n",
			[]string{`6:1: networkConnector "m": remoteId: only for a connector to one broker (one broker URI or static:(one URI)); masterslave:(stomp://a:61613,stomp://b:61613) has 2`}},
		{"keys in inline tables are located", "networkConnector = [{ name = \"a\", uri = \"stomp://10.0.0.2:61613\", window = -1 }]\n" + brokerHeader,
			[]string{`1:67: networkConnector "a": window: want at least 1 unconfirmed message, got -1`}},
		{"dotted keys are located", connector + "gossip.bind = 5\n",
			[]string{
				`6:1: networkConnector "a": gossip.bind: want a string, got integer 5`,
				`6:1: networkConnector "a": gossip: a gossip table belongs only to a connector with uri = "gossip:"; this uri is static`,
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			errs := parseErrors(t, tc.src)
			var got []string
			for _, e := range errs {
				got = append(got, strings.TrimPrefix(e.Error(), "test.toml:"))
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got\n\t%s\nwant\n\t%s", strings.Join(got, "\n\t"), strings.Join(tc.want, "\n\t"))
			}
		})
	}
}

func TestErrorsNeverShowPasscodes(t *testing.T) {
	for _, src := range []string{
		brokerHeader + "[[networkConnector]]\nname = \"a\"\nuri = \"stomp://u:hunter2@10.0.0.2:0\"\n",
		brokerHeader + "[[networkConnector]]\nname = \"a\"\nuri = \"static:(stomp://u:hunter2@10.0.0.2:61613,stomp://u:hunter2@h/x)\"\n",
		brokerHeader + "[[networkConnector]]\nname = \"a\"\nuri = \"ftp://u:hunter2@10.0.0.2\"\n",
		brokerHeader + "[[networkConnector]]\nname = \"a\"\nuri = \"stomp://u:hunter2@10.0.0.2\"\nwindow = \"stomp://u:hunter2@10.0.0.2\"\n",
		"[[broker]]\nuri = \"stomp://u:hunter2@%zz\"\n",
		"[[broker]]\nuri = \"stomp://u:hunter2@127.0.0.1:61613\"\n[[networkConnector]]\nname = \"a\"\nuri = \"stomp://u:hunter2@127.0.0.1:61613\"\n",
	} {
		_, err := Parse("test.toml", []byte(src))
		if err == nil {
			t.Errorf("no error for\n%s", src)
			continue
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("error shows the passcode: %v", err)
		}
	}
}

func TestSecretKeyFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string, mode os.FileMode) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), mode); err != nil {
			t.Fatal(err)
		}
	}
	write("good.key", "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=\n", 0o600) // 32 bytes
	write("open.key", "MDEyMzQ1Njc4OWFiY2RlZg==", 0o644)                       // 16 bytes
	write("short.key", "MDEyMzQ1Njc=", 0o600)                                  // 8 bytes
	write("text.key", "not base64 at all!", 0o600)
	src := func(key string) string {
		return brokerHeader + "[[networkConnector]]\nname = \"g\"\nuri = \"gossip:\"\n[networkConnector.gossip]\nsecretKeyFile = \"" + key + "\"\n"
	}
	// Relative names are relative to the directory of the config file.
	cfg, err := Parse(filepath.Join(dir, "federation.toml"), []byte(src("good.key")))
	if err != nil {
		t.Fatal(err)
	}
	if got := string(cfg.Connectors[0].Gossip.SecretKey); got != "0123456789abcdef0123456789abcdef" {
		t.Errorf("key = %q", got)
	}
	cfg, err = Parse("elsewhere.toml", []byte(src(filepath.Join(dir, "open.key"))))
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Connectors[0].Gossip.SecretKey) != 16 || !slices.ContainsFunc(cfg.Warnings, func(w string) bool {
		return strings.Contains(w, "open.key is readable by other users")
	}) {
		t.Errorf("key %d bytes, warnings %q", len(cfg.Connectors[0].Gossip.SecretKey), cfg.Warnings)
	}
	for key, want := range map[string]string{
		"short.key": "short.key: got a 8-byte key; want 16, 24 or 32 bytes",
		"text.key":  "text.key: not base64; want a base64 key",
		".":         "is not a regular file",
	} {
		_, err := Parse(filepath.Join(dir, "federation.toml"), []byte(src(key)))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want %q", key, err, want)
		}
		if err != nil && strings.Contains(err.Error(), "MDEy") {
			t.Errorf("%s: error shows the key: %v", key, err)
		}
	}
}

func TestGossipDefaults(t *testing.T) {
	cfg := mustParse(t, "[[broker]]\nuri = \"stomp://10.0.0.1:61613\"\n[[networkConnector]]\nname = \"g\"\nuri = \"gossip:\"\n[networkConnector.gossip]\ninsecure = true\n")
	g := cfg.Connectors[0].Gossip
	if want := (Gossip{Bind: DefaultGossipBind}); g.Bind != want.Bind || !g.Insecure || g.AdvertiseBrokerURI != "" || g.NodeName != "" || g.Join != nil || g.SecretKey != nil {
		t.Errorf("gossip = %+v, want %+v", *g, want)
	}
	if len(cfg.Warnings) != 0 {
		t.Errorf("warnings %q", cfg.Warnings)
	}
}

func TestGossipWarnings(t *testing.T) {
	tests := []struct {
		name, broker, gossip string
		want                 []string
	}{
		{"a loopback broker cannot be dialled by others", "stomp://127.0.0.1:61613", "",
			[]string{`test.toml:3: networkConnector "g": gossip advertises the local broker as stomp://127.0.0.1:61613, which other members cannot dial; set gossip.advertiseBrokerURI`}},
		{"an advertised URI replaces the broker's", "stomp://127.0.0.1:61613", `advertiseBrokerURI = "stomp://10.0.0.1:61613"`, nil},
		{"the broker's passcode is not advertised, silently", "stomp://u:pw@10.0.0.1:61613", "", nil},
		{"an advertised passcode is dropped with a warning", "stomp://10.0.0.1:61613", `advertiseBrokerURI = "stomp://u:pw@localhost:61613"`,
			[]string{
				`test.toml:3: networkConnector "g": gossip advertises the local broker as stomp://u:***@localhost:61613, which other members cannot dial; set gossip.advertiseBrokerURI`,
				`test.toml:3: networkConnector "g": the passcode of gossip.advertiseBrokerURI is not gossiped; members log in with their own userName and passwordFile`,
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := mustParse(t, "[[broker]]\nuri = \""+tc.broker+"\"\n[[networkConnector]]\nname = \"g\"\nuri = \"gossip:\"\n[networkConnector.gossip]\nbind = \"127.0.0.1:7946\"\n"+tc.gossip+"\n")
			if !slices.Equal(cfg.Warnings, tc.want) {
				t.Errorf("warnings\n\t%s\nwant\n\t%s", strings.Join(cfg.Warnings, "\n\t"), strings.Join(tc.want, "\n\t"))
			}
			if strings.Contains(strings.Join(cfg.Warnings, ""), "pw") {
				t.Errorf("a warning shows the passcode")
			}
		})
	}
}

func TestLoad(t *testing.T) {
	if _, err := Load(filepath.Join(t.TempDir(), "missing.toml")); err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load of a missing file: %v", err)
	}
	path := filepath.Join(t.TempDir(), "f.toml")
	if err := os.WriteFile(path, []byte("[[broker]]\nuri = \"stomp://u:pw@127.0.0.1:61613\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Warnings) != 2 || !strings.Contains(cfg.Warnings[0], "nothing will be bridged") ||
		!strings.Contains(cfg.Warnings[1], "holds passcodes and is readable by other users") {
		t.Errorf("warnings %q", cfg.Warnings)
	}
}

func TestEqualAndFingerprint(t *testing.T) {
	const base = brokerHeader + `
[[networkConnector]]
name = "a"
uri = "static:(stomp://u:pw@10.0.0.2:61613)"
excludedDestinations = ["queue://x.>"]
`
	a := mustParse(t, base).Connectors[0]
	moved := mustParse(t, "# a comment\n\n"+base+"dynamicallyIncludedDestinations = []\n").Connectors[0]
	if a.Line == moved.Line {
		t.Fatal("test needs different lines")
	}
	if !a.Equal(moved) || a.Fingerprint() != moved.Fingerprint() {
		t.Errorf("moving a connector changed it")
	}
	sameAsSTOMP := mustParse(t, strings.Replace(base, "queue://x.>", "/queue/x.>", 1)).Connectors[0]
	if !a.Equal(sameAsSTOMP) {
		t.Errorf("the same pattern in STOMP form is a change")
	}
	for _, change := range []string{"window = 10\n", "duplex = true\n", "initialReconnectDelay = \"2s\"\n", "excludedDestinations = [\"queue://y.>\"]\n"} {
		src := base + change
		if strings.HasPrefix(change, "excludedDestinations") {
			src = strings.Replace(base, "excludedDestinations = [\"queue://x.>\"]\n", change, 1)
		}
		b := mustParse(t, src).Connectors[0]
		if a.Equal(b) || a.Fingerprint() == b.Fingerprint() {
			t.Errorf("%q is not seen as a change", change)
		}
	}
	pw := mustParse(t, strings.Replace(base, "u:pw@", "u:other@", 1)).Connectors[0]
	if a.Equal(pw) || a.Fingerprint() == pw.Fingerprint() {
		t.Errorf("a new passcode is not seen as a change")
	}
	if strings.Contains(a.Fingerprint(), "pw") || len(a.Fingerprint()) != 32 {
		t.Errorf("fingerprint %q", a.Fingerprint())
	}
}

func TestChanges(t *testing.T) {
	prev := mustParse(t, brokerHeader+`
[[networkConnector]]
name = "keep"
uri = "stomp://10.0.0.2:61613"
[[networkConnector]]
name = "edit"
uri = "stomp://10.0.0.3:61613"
[[networkConnector]]
name = "drop"
uri = "stomp://10.0.0.4:61613"
`)
	next := mustParse(t, brokerHeader+`
[[networkConnector]]
name = "new"
uri = "stomp://10.0.0.5:61613"
[[networkConnector]]
name = "edit"
uri = "stomp://10.0.0.3:61613"
window = 7
[[networkConnector]]
name = "keep"
uri = "stomp://10.0.0.2:61613"
`)
	added, removed, changed := next.Changes(prev)
	if !slices.Equal(added, []string{"new"}) || !slices.Equal(removed, []string{"drop"}) || !slices.Equal(changed, []string{"edit"}) {
		t.Errorf("added %q removed %q changed %q", added, removed, changed)
	}
	// A new broker URI restarts every connector on it.
	moved := mustParse(t, strings.Replace(string(brokerHeader), "61613", "61620", 1)+"[[networkConnector]]\nname = \"keep\"\nuri = \"stomp://10.0.0.2:61613\"\n")
	if _, _, changed := moved.Changes(prev); !slices.Equal(changed, []string{"keep"}) {
		t.Errorf("changed %q after the broker moved", changed)
	}
	if added, _, _ := prev.Changes(nil); len(added) != 3 {
		t.Errorf("from nothing: added %q", added)
	}
}

func TestSuggest(t *testing.T) {
	for k, want := range map[string]string{
		"netwrokTTL":            "networkTTL",
		"networkTtl":            "networkTTL",
		"prefetch_size":         "prefetchSize",
		"exludedDestinations":   "excludedDestinations",
		"duplx":                 "duplex",
		"completelyUnrelated":   "",
		"ur":                    "uri",
		"window2":               "window",
		"initialReconnectDelya": "initialReconnectDelay",
	} {
		if got := suggest(k, ConnectorKeys); got != want {
			t.Errorf("suggest(%q) = %q, want %q", k, got, want)
		}
	}
}

func TestValidate(t *testing.T) {
	for _, file := range []string{"testdata/static.toml", "testdata/masterslave.toml", "testdata/gossip.toml"} {
		cfg, err := Load(file)
		if err != nil {
			t.Fatal(err)
		}
		if err := cfg.Validate(); err != nil {
			t.Errorf("%s: Validate of a parsed file: %v", file, err)
		}
	}

	// A Config built in code: its problems have no file positions.
	valid := func() Config {
		cfg := mustParse(t, connector)
		cfg.src = nil
		return *cfg
	}
	tests := []struct {
		name   string
		change func(c *Config)
		want   []string
	}{
		{"no change", func(c *Config) {}, nil},
		{"no broker", func(c *Config) { c.Brokers = nil; c.Connectors = nil }, []string{"broker: missing: want at least one [[broker]] table with the uri of the local broker"}},
		{"bad log settings", func(c *Config) { c.Log = Log{} }, []string{
			`log: level: unknown level ""; want trace, debug, info, warn or error`,
			`log: format: unknown format ""; want json or console`,
		}},
		{"zero connector values", func(c *Config) {
			c.Connectors[0] = NetworkConnector{Name: "z", Broker: "nope"}
		}, []string{
			`networkConnector "z": broker: unknown broker "nope"; the [[broker]] names are "local"`,
			`networkConnector "z": uri: missing: want a broker URI (stomp://, amqp://, tcp://, ...), static:(...), masterslave:(...) or gossip:`,
			`networkConnector "z": networkTTL: want -1 (unlimited) or a hop count of at least 1, got 0`,
			`networkConnector "z": messageTTL: want -1 (unlimited) or a hop count of at least 1, got 0`,
			`networkConnector "z": consumerTTL: want -1 (unlimited) or a hop count of at least 1, got 0`,
			`networkConnector "z": prefetchSize: want at least 1 (network consumers do not poll), got 0`,
			`networkConnector "z": window: want at least 1 unconfirmed message, got 0`,
			`networkConnector "z": blockedAfter: want more than 0, got 0s`,
			`networkConnector "z": drainTimeout: want more than 0, got 0s`,
			// A zero Reconnect leaves each broker URI's own back-off.
		}},
		{"a stuck-message interval below a second", func(c *Config) { c.Connectors[0].StuckInterval = -time.Second }, []string{
			`networkConnector "a": stuckInterval: want 0 (off) or at least 1s, got -1s`,
		}},
		{"a half-set back-off", func(c *Config) {
			c.Connectors[0].Reconnect.Initial = 0
			c.Connectors[0].Reconnect.Multiplier = 0.5
		}, []string{
			`networkConnector "a": initialReconnectDelay: want more than 0, got 0s`,
			`networkConnector "a": backOffMultiplier: want a number of at least 1 (1 keeps the delay constant), got 0.5`,
		}},
		{"gossip without settings, and settings without gossip", func(c *Config) {
			g := c.Connectors[0]
			g.Name, g.URI, g.Gossip = "g", discovery.Spec{Kind: discovery.Gossip}, nil
			c.Connectors[0].Gossip = &Gossip{Bind: DefaultGossipBind, Insecure: true}
			c.Connectors = append(c.Connectors, g)
		}, []string{
			`networkConnector "a": gossip: a gossip table belongs only to a connector with uri = "gossip:"; this uri is static`,
			`networkConnector "g": uri: gossip: needs a [networkConnector.gossip] table (bind, join, ...) after this connector`,
		}},
		{"bad gossip settings", func(c *Config) {
			c.Connectors[0].URI = discovery.Spec{Kind: discovery.Gossip}
			c.Connectors[0].Gossip = &Gossip{Bind: "x", Join: []string{"a:b"}, SecretKey: []byte("short"), AdvertiseBrokerURI: "nope"}
		}, []string{
			`networkConnector "a": gossip.bind: want host:port, got "x"`,
			`networkConnector "a": gossip.join[0]: bad port "b" (want 1..65535), got "a:b"`,
			`networkConnector "a": gossip.secretKeyFile: got a 5-byte key; want 16, 24 or 32 bytes`,
			`networkConnector "a": gossip.advertiseBrokerURI: broker URI "nope": missing scheme (want one of stomp://, stomp+ssl:// (STOMP), amqp://, amqps:// (AMQP 1.0), tcp://, ssl:// (OpenWire))`,
		}},
		{"duplicates", func(c *Config) {
			c.Brokers = append(c.Brokers, c.Brokers[0])
			c.Connectors = append(c.Connectors, c.Connectors[0])
		}, []string{
			`broker "local": name: duplicate broker name "local"`,
			`networkConnector "a": name: duplicate connector name "a"`,
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := valid()
			tc.change(&cfg)
			err := cfg.Validate()
			var got []string
			if err != nil {
				var errs *Errors
				if !errors.As(err, &errs) {
					t.Fatalf("error %T, want *Errors", err)
				}
				for _, e := range *errs {
					got = append(got, e.Error())
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got\n\t%s\nwant\n\t%s", strings.Join(got, "\n\t"), strings.Join(tc.want, "\n\t"))
			}
		})
	}
}

func TestDecodeSecretKey(t *testing.T) {
	for in, want := range map[string]string{
		"MDEyMzQ1Njc4OWFiY2RlZg==":                     "",
		"MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3":             "",
		"MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=": "",
		"MDEyMzQ1Njc=":                                 "got a 8-byte key",
		"not base64!":                                  "not base64",
	} {
		key, err := DecodeSecretKey(in)
		switch {
		case want == "" && (err != nil || len(key) < 16):
			t.Errorf("%q: %v", in, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("%q: got %v, want %q", in, err, want)
		case err != nil && strings.Contains(err.Error(), in):
			t.Errorf("%q: the error shows the key: %v", in, err)
		}
	}
}

func TestGossipTimings(t *testing.T) {
	const src = `
[[broker]]
uri = "stomp://10.0.0.1:61613"
[[networkConnector]]
name = "g"
uri = "gossip:"
  [networkConnector.gossip]
  bind = "127.0.0.1:7946"
  timings = %q
`
	cfg := mustParse(t, fmt.Sprintf(src, "fast"))
	if got := cfg.Connectors[0].Gossip.Timings; got != GossipTimingsFast {
		t.Fatalf("timings = %q, want fast", got)
	}
	errs := parseErrors(t, fmt.Sprintf(src, "slow"))
	if len(errs) != 1 || errs[0].Line != 9 || !strings.Contains(errs[0].Msg, `unknown timings "slow"`) {
		t.Fatalf("errors = %v", errs)
	}
}

// TestConnectorKeysListEveryOption: the keys a file may hold are the option
// table's and those decoded on their own, each once.
func TestConnectorKeysListEveryOption(t *testing.T) {
	own := []string{"name", "broker", "uri", "staticallyIncludedDestinations", "dynamicallyIncludedDestinations",
		"excludedDestinations", "renames", "destinationRateLimits", "destinationFilters", "passwordFile", "caFile", "certFile", "keyFile", "gossip"}
	want := slices.Clone(own)
	for _, o := range connectorOptions {
		want = append(want, o.key)
	}
	got := slices.Clone(ConnectorKeys)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("ConnectorKeys\n%q\nwant\n%q", got, want)
	}
}

// TestFlagsAndFileMeanTheSame: the same settings given as flags and in a
// file make the same connector, and their problems are the same, named by
// the flag or located in the file.
func TestFlagsAndFileMeanTheSame(t *testing.T) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	cf := NewFlags(fs, "a")
	cf.Options("networkTTL", "consumerTTL", "window", "stuckInterval", "bridgeTempDestinations", "rateLimit", "filter")
	cf.Lists()
	if err := fs.Parse([]string{"--network-ttl", "3", "--consumer-ttl", "1", "--window", "20", "--stuck-interval", "0",
		"--bridge-temp-destinations=false", "--exclude", "queue://x.>", "--rate-limit", "500", "--destination-rate-limit", "queue://b.>=1MB/s",
		"--filter", "a = 1", "--destination-filter", "queue://b.>=b = 2"}); err != nil {
		t.Fatal(err)
	}
	cfg := cf.Config()
	cfg.Brokers[0].URI = mustParse(t, brokerHeader).Brokers[0].URI
	remote := mustParse(t, connector).Connectors[0].URI
	cfg.Connectors[0].URI = remote
	fromFlags, err := cf.Validate()
	if err != nil {
		t.Fatal(err)
	}
	fromFile := mustParse(t, connector+"networkTTL = 3\nconsumerTTL = 1\nwindow = 20\nstuckInterval = 0\nbridgeTempDestinations = false\nexcludedDestinations = [\"queue://x.>\"]\nrateLimit = 500\ndestinationRateLimits = [\"queue://b.>=1MB/s\"]\nfilter = \"a = 1\"\ndestinationFilters = [\"queue://b.>=b = 2\"]\n")
	if a, b := fromFlags.Connectors[0], fromFile.Connectors[0]; !a.Equal(b) {
		t.Errorf("from flags\n%+v\nfrom the file\n%+v", a, b)
	}
	if nc := fromFlags.Connectors[0]; nc.MessageTTL != 3 || nc.ConsumerTTL != 1 || nc.StuckInterval != Off {
		t.Errorf("from flags: %+v", nc)
	}

	fs = flag.NewFlagSet("t", flag.ContinueOnError)
	cf = NewFlags(fs, "a")
	cf.Options("window")
	if err := fs.Parse([]string{"--window", "0"}); err != nil {
		t.Fatal(err)
	}
	cf.Config().Brokers[0].URI, cf.Connector().URI = cfg.Brokers[0].URI, remote
	_, err = cf.Validate()
	fileErrs := parseErrors(t, connector+"window = 0\n")
	if err == nil || err.Error() != "--window 0: "+fileErrs[0].Msg || fileErrs[0].Line != 6 {
		t.Errorf("flags: %v\nfile: %v", err, fileErrs)
	}
}
