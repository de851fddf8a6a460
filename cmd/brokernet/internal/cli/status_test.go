package cli

import (
	"bytes"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/brokernet/brokernet/admin"
	"github.com/brokernet/brokernet/bridge"
	"github.com/brokernet/brokernet/internal/testkit/stomptest"
	"github.com/brokernet/brokernet/metrics"
)

func TestPrintStatusTables(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	st := admin.Status{
		Version: "v9", Started: now.Add(-3 * time.Hour), Ready: true,
		Bridges: []admin.BridgeStatus{{
			Bridge: "a->b", Peer: "b:61613", Up: true, Rate: 1234.5, Forwarded: 99, InFlight: 3, Window: 500,
			DemandSubs: 1, Since: now.Add(-42 * time.Second),
			Demand: []bridge.DemandInfo{{Destination: "queue://orders.eu", Consumers: []string{"c1", "c2"}, Priority: -5,
				Path: []string{"C", "B"}, Selector: "region = 'eu'", Active: true}},
		}},
		Stuck: []admin.Stuck{}, StuckMeasured: false,
	}
	var b bytes.Buffer
	printStatus(&b, st, now)
	out := b.String()
	for _, want := range []string{
		"brokernet v9, up 3h, ready",
		"Bridges\n  bridge  peer     up   forwarded/s  forwarded  in flight  demand  since  last error\n",
		"  a->b    b:61613  yes  1234.5       99         3/500      1       42s",
		"Demand\n  destination        bridge  consumers  priority  hops  path  selector\n",
		"  queue://orders.eu  a->b    2          -5        2     C>B   region = 'eu'",
		"Stuck messages\n  (not measured)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestPrintStatusStuck(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		name string
		st   admin.Status
		want string
	}{
		{"none measured", admin.Status{Stuck: []admin.Stuck{}, StuckMeasured: true}, "Stuck messages\n  (none)"},
		{"a queue", admin.Status{StuckMeasured: true, Stuck: []admin.Stuck{{Broker: "b:61613", Destination: "queue://moved",
			Messages: 630, Demand: []string{"a:61613"}}}},
			"Stuck messages\n  broker   destination    messages  demand at\n  b:61613  queue://moved  630       a:61613"},
		{"partly measured", admin.Status{Stuck: []admin.Stuck{{Broker: "b:61613", Destination: "queue://moved", Messages: 1}}},
			"Stuck messages\n  (not measured on every bridge)\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			printStatus(&b, tc.st, now)
			if !strings.Contains(b.String(), tc.want) {
				t.Errorf("output lacks %q:\n%s", tc.want, b.String())
			}
		})
	}
}

func TestStatusCommandReadsAdminEndpoint(t *testing.T) {
	b, err := bridge.New(bridge.Config{
		Name:   "a->b",
		Local:  stomptest.URI(t, "stomp://127.0.0.1:1"),
		Remote: stomptest.URI(t, "stomp://u:topsecret@127.0.0.1:2"),
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(admin.New(admin.Options{Version: "v-test",
		Bridges: func() []metrics.Bridge {
			return []metrics.Bridge{{Connector: "bridge", Peer: "127.0.0.1:2", Bridge: b}}
		},
	}).Handler())
	defer srv.Close()

	for _, addr := range []string{srv.URL, strings.TrimPrefix(srv.URL, "http://")} {
		var stdout, stderr bytes.Buffer
		if code := Main([]string{"status", "--admin", addr}, &stdout, &stderr); code != 0 {
			t.Fatalf("status --admin %s: exit %d: %s", addr, code, stderr.String())
		}
		out := stdout.String()
		for _, want := range []string{"brokernet v-test", "NOT READY (1 bridge(s) down)", "a->b", "127.0.0.1:2", "(none)"} {
			if !strings.Contains(out, want) {
				t.Errorf("output lacks %q:\n%s", want, out)
			}
		}
		if strings.Contains(out, "topsecret") {
			t.Errorf("output shows the passcode:\n%s", out)
		}
	}

	t.Run("an unreachable endpoint is an error naming it", func(t *testing.T) {
		srv := httptest.NewServer(nil)
		addr := srv.URL
		srv.Close()
		var stdout, stderr bytes.Buffer
		if code := Main([]string{"status", "--admin", addr, "--timeout", "2s"}, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), addr) {
			t.Errorf("exit %d, stderr %q; want 1 naming %s", code, stderr.String(), addr)
		}
	})
	t.Run("a bad URL is a usage error", func(t *testing.T) {
		var stdout, stderr bytes.Buffer
		if code := Main([]string{"status", "--admin", "ftp://x"}, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), "ftp://x") {
			t.Errorf("exit %d, stderr %q", code, stderr.String())
		}
	})
}

func TestStatusCommandSendsTheToken(t *testing.T) {
	h := admin.New(admin.Options{Version: "v-tok"}).Handler()
	srv := httptest.NewServer(admin.RequireToken(h, "tok-123"))
	defer srv.Close()
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte("tok-123\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := Main([]string{"status", "--admin", srv.URL, "--token-file", file}, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), "brokernet v-tok") {
		t.Errorf("with the token: exit %d, stdout %q, stderr %q", code, stdout.String(), stderr.String())
	}
	stdout.Reset()
	stderr.Reset()
	if code := Main([]string{"status", "--admin", srv.URL}, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), "401") {
		t.Errorf("without the token: exit %d, stderr %q; want 1 and 401", code, stderr.String())
	}
}

func TestPrintStatusHeld(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	hold := &bridge.RemoteHold{Since: now.Add(-time.Minute), Unconfirmed: 200, Alarms: []string{"memory alarm on rabbit@r1"}}
	st := admin.Status{
		Version: "v9", Started: now.Add(-time.Hour),
		Bridges: []admin.BridgeStatus{{Bridge: "a->r", Peer: "r:61613", Up: true, InFlight: 200, Window: 500,
			Since: now.Add(-time.Hour), RemoteHold: hold}},
		Reasons: []admin.Reason{{Bridge: "a->r", Up: true, Held: true, Since: hold.Since, Error: hold.String()}},
		Stuck:   []admin.Stuck{},
	}
	var b bytes.Buffer
	printStatus(&b, st, now)
	out := b.String()
	for _, want := range []string{
		"NOT READY (1 bridge(s) held by the remote broker)",
		"  a->r    r:61613  held",
		"memory alarm on rabbit@r1",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestPrintStatusFullQueue(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	full := bridge.BlockedInfo{Destination: "queue://orders", Since: now.Add(-time.Minute), Waiting: 120,
		Reason: "the remote queue is full (max-length 50, overflow reject-publish; holds 50 messages)"}
	st := admin.Status{
		Version: "v9", Started: now.Add(-time.Hour),
		Bridges: []admin.BridgeStatus{{Bridge: "a->r", Peer: "r:61613", Up: true, Window: 500,
			Since: now.Add(-time.Hour), Blocked: []bridge.BlockedInfo{full}}},
		Reasons: []admin.Reason{{Bridge: "a->r", Up: true, Held: true, Since: full.Since, Destination: full.Destination,
			Error: full.Destination + ": " + full.Reason}},
		Stuck: []admin.Stuck{},
	}
	var b bytes.Buffer
	printStatus(&b, st, now)
	out := b.String()
	for _, want := range []string{
		"NOT READY (1 destination(s) refused by a full remote queue)",
		"  a->r    r:61613  yes",
		"queue://orders",
		"max-length 50, overflow reject-publish",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
