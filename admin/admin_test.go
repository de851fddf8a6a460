package admin

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/brokernet/brokernet/bridge"
	"github.com/brokernet/brokernet/internal/testkit/stomptest"
	"github.com/brokernet/brokernet/metrics"
)

func get(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
	body, _ := io.ReadAll(rec.Result().Body)
	return rec.Code, string(body)
}

func idleBridge(t *testing.T, name string) *bridge.Bridge {
	t.Helper()
	b, err := bridge.New(bridge.Config{
		Name:   name,
		Local:  stomptest.URI(t, "stomp://127.0.0.1:1"),
		Remote: stomptest.URI(t, "stomp://user:hunter2@127.0.0.1:2"),
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestEndpointsWithoutBrokers(t *testing.T) {
	t.Run("a process without bridges is healthy and ready", func(t *testing.T) {
		h := New(Options{Version: "v1"}).Handler()
		if code, body := get(t, h, "/healthz"); code != 200 || body != "ok\n" {
			t.Errorf("/healthz: %d %q", code, body)
		}
		if code, body := get(t, h, "/readyz"); code != 200 || !strings.Contains(body, `"ready": true`) {
			t.Errorf("/readyz: %d %s", code, body)
		}
	})
	t.Run("a bridge that is down makes readyz answer 503 naming it", func(t *testing.T) {
		b := idleBridge(t, "a->b")
		src := func() []metrics.Bridge {
			return []metrics.Bridge{{Connector: "bridge", Peer: "127.0.0.1:2", Bridge: b}}
		}
		h := New(Options{Bridges: src, Version: "v1"}).Handler()
		code, body := get(t, h, "/readyz")
		if code != http.StatusServiceUnavailable {
			t.Fatalf("/readyz: %d, want 503", code)
		}
		var doc struct {
			Ready   bool
			Reasons []Reason
		}
		if err := json.Unmarshal([]byte(body), &doc); err != nil {
			t.Fatal(err)
		}
		if doc.Ready || len(doc.Reasons) != 1 || doc.Reasons[0].Bridge != "a->b" || doc.Reasons[0].Peer != "127.0.0.1:2" {
			t.Errorf("/readyz body: %s", body)
		}
	})
	t.Run("status lists bridges and nodes without secrets", func(t *testing.T) {
		b := idleBridge(t, "a->b")
		b.Stats().Forwarded.Add(5)
		src := func() []metrics.Bridge {
			return []metrics.Bridge{{Connector: "bridge", Peer: "127.0.0.1:2", Bridge: b}}
		}
		h := New(Options{Bridges: src, Version: "v1"}).Handler()
		code, body := get(t, h, "/status")
		if code != 200 {
			t.Fatalf("/status: %d", code)
		}
		if strings.Contains(body, "hunter2") {
			t.Errorf("/status shows the passcode: %s", body)
		}
		var st Status
		if err := json.Unmarshal([]byte(body), &st); err != nil {
			t.Fatal(err)
		}
		if st.Version != "v1" || st.Ready || len(st.Bridges) != 1 || st.Bridges[0].Forwarded != 5 ||
			st.Bridges[0].Local != "127.0.0.1:1" || st.Bridges[0].Remote != "127.0.0.1:2" || st.Bridges[0].Window != bridge.DefaultWindow {
			t.Errorf("/status: %+v", st)
		}
		if len(st.Nodes) != 2 || st.Nodes[0].Role != "local" || st.Nodes[1].Role != "peer" || st.Nodes[1].Peer != "127.0.0.1:2" {
			t.Errorf("nodes: %+v", st.Nodes)
		}
		if st.Stuck == nil || st.StuckMeasured {
			t.Errorf("stuck: %v measured %v; want an empty list, not measured", st.Stuck, st.StuckMeasured)
		}
		if _, metricsBody := get(t, h, "/metrics"); !strings.Contains(metricsBody, `brokernet_forwarded_messages_total{bridge="a->b",connector="bridge",peer="127.0.0.1:2"} 5`) {
			t.Errorf("/metrics lacks the forwarded count:\n%s", metricsBody)
		}
	})
	t.Run("the topology page and its assets are embedded", func(t *testing.T) {
		h := New(Options{}).Handler()
		for path, want := range map[string]string{
			"/":          `<script src="app.js">`,
			"/app.js":    `fetch("status"`,
			"/style.css": `.edge.up line`,
		} {
			code, body := get(t, h, path)
			if code != 200 || !strings.Contains(body, want) {
				t.Errorf("%s: %d, body lacks %q", path, code, want)
			}
			if strings.Contains(body, "http://") || strings.Contains(body, "https://") {
				if !strings.Contains(body, "http://www.w3.org/2000/svg") || strings.Count(body, "http") > 1 {
					t.Errorf("%s refers to an external URL", path)
				}
			}
		}
	})
}

func TestFailureReasonsHideThePasscode(t *testing.T) {
	b, err := bridge.New(bridge.Config{
		Name:   "a->b",
		Local:  stomptest.URI(t, "stomp://admin:localsecret@127.0.0.1:1"),
		Remote: stomptest.URI(t, "stomp://user:remotesecret@127.0.0.1:2?initialReconnectDelay=50ms"),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); b.Run(ctx) }()
	defer func() { cancel(); <-done }()
	stomptest.Eventually(t, 10*time.Second, func() error {
		if _, _, lastErr := b.State(); lastErr == "" {
			return errors.New("no failure recorded yet")
		}
		return nil
	})
	src := func() []metrics.Bridge {
		return []metrics.Bridge{{Connector: "bridge", Peer: "127.0.0.1:2", Bridge: b}}
	}
	h := New(Options{Bridges: src}).Handler()
	for _, path := range []string{"/readyz", "/status", "/metrics"} {
		_, body := get(t, h, path)
		if strings.Contains(body, "secret") {
			t.Errorf("%s shows a passcode:\n%s", path, body)
		}
		if path != "/metrics" && !strings.Contains(body, "127.0.0.1:") {
			t.Errorf("%s does not say which broker failed:\n%s", path, body)
		}
	}
}
