package admin_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/brokernet/brokernet/admin"
	"github.com/brokernet/brokernet/bridge"
	"github.com/brokernet/brokernet/demand"
	"github.com/brokernet/brokernet/internal/testkit/stomptest"
	"github.com/brokernet/brokernet/internal/testkit/syncbuf"
	"github.com/brokernet/brokernet/internal/testkit/testbroker"
	"github.com/brokernet/brokernet/metrics"
)

// logLines returns the JSON log lines written to b so far, decoded.
func logLines(t *testing.T, b *syncbuf.Buffer) []map[string]any {
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(b.Bytes()))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("log line is not JSON: %q", sc.Text())
		}
		out = append(out, m)
	}
	return out
}

// fetch GETs path from the admin server and returns status and body.
func fetch(base, path string) (int, []byte, error) {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(base + path)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, body, err
}

func status(base string) (admin.Status, error) {
	var st admin.Status
	_, body, err := fetch(base, "/status")
	if err != nil {
		return st, err
	}
	return st, json.Unmarshal(body, &st)
}

// demandFor reports whether bridge name has an active demand subscription for dest.
func demandFor(st admin.Status, name, dest string) bool {
	for _, b := range st.Bridges {
		if b.Bridge != name {
			continue
		}
		for _, d := range b.Demand {
			if d.Destination == dest && d.Active {
				return true
			}
		}
	}
	return false
}

// TestAdminAgainstRealBrokers runs a duplex bridge between two ActiveMQ brokers
// with the admin endpoints, and checks what an operator sees: demand in
// /status, forwarding in /metrics, the topology page in a real browser, and
// /readyz plus the logs while the remote broker is down and after it is back.
func TestAdminAgainstRealBrokers(t *testing.T) {
	if testing.Short() {
		t.Skip("needs ActiveMQ brokers")
	}
	if err := testbroker.Install(); err != nil {
		t.Fatal(err)
	}
	var brokers [2]*testbroker.ActiveMQ
	var wg sync.WaitGroup
	for i, name := range []string{"A", "B"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			brokers[i] = testbroker.StartActiveMQ(t, testbroker.Options{Name: name, ID: name + "-admin"})
		}()
	}
	wg.Wait()
	if brokers[0] == nil || brokers[1] == nil {
		t.FailNow()
	}
	a, b := brokers[0], brokers[1]

	logs := &syncbuf.Buffer{}
	log := zerolog.New(io.MultiWriter(logs, zerolog.TestWriter{T: t})).With().Timestamp().Logger()
	// Short back-off so the down period shows several attempts.
	fast := "?initialReconnectDelay=200ms&maxReconnectDelay=800ms"
	opts := demand.Options{Conduit: true, ConsumerTTL: 1, MessageTTL: 1, PriorityBase: -5, Prefetch: 1000}
	var running []metrics.Bridge
	ctx, cancel := context.WithCancel(context.Background())
	var runs sync.WaitGroup
	t.Cleanup(func() { cancel(); runs.Wait() })
	for _, d := range []struct {
		name          string
		local, remote *testbroker.ActiveMQ
	}{{"A->B", a, b}, {"B->A", b, a}} {
		br, err := bridge.New(bridge.Config{
			Name:   d.name,
			Local:  stomptest.URI(t, d.local.StompURI()+fast),
			Remote: stomptest.URI(t, d.remote.StompURI()+fast),
			Demand: opts,
			Log:    log,
		})
		if err != nil {
			t.Fatal(err)
		}
		// As `brokernet bridge --duplex` lists them: the peer is B both ways.
		running = append(running, metrics.Bridge{Connector: "bridge", Peer: b.StompAddr(), Reverse: d.local == b, Bridge: br})
		runs.Add(1)
		go func() { defer runs.Done(); br.Run(ctx) }()
	}
	srv, err := admin.Listen("127.0.0.1:0", admin.Options{
		Bridges: func() []metrics.Bridge { return running }, Version: "test", Log: log,
	})
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ctx)
	base := "http://" + srv.Addr()

	stomptest.Eventually(t, 60*time.Second, func() error {
		code, body, err := fetch(base, "/readyz")
		if err != nil || code != 200 {
			return fmt.Errorf("/readyz: %d %s %v", code, body, err)
		}
		return nil
	})

	// Demand: a queue consumer on B, a topic subscriber on A.
	cons := stomptest.Subscribe(t, b.StompURI(), "/queue/orders.eu")
	stomptest.Subscribe(t, a.StompURI(), "/topic/prices.usd")
	stomptest.Eventually(t, 30*time.Second, func() error {
		st, err := status(base)
		if err != nil {
			return err
		}
		if !demandFor(st, "A->B", "queue://orders.eu") || !demandFor(st, "B->A", "topic://prices.usd") {
			return fmt.Errorf("demand not in /status yet: %+v", st.Bridges)
		}
		return nil
	})
	st, _ := status(base)
	for _, br := range st.Bridges {
		for _, d := range br.Demand {
			if len(d.Consumers) != 1 || d.Priority != 0 || len(d.Path) != 1 {
				t.Errorf("%s demand %s: consumers %v priority %d path %v; want one consumer, priority 0, a one-broker path",
					br.Bridge, d.Destination, d.Consumers, d.Priority, d.Path)
			}
		}
	}

	const n = 500
	stomptest.SendN(t, a.StompURI(), "/queue/orders.eu", 1, n, false)
	cons.WaitDistinct(n, 60*time.Second)
	stomptest.Eventually(t, 30*time.Second, func() error {
		_, body, err := fetch(base, "/metrics")
		if err != nil {
			return err
		}
		for _, want := range []string{
			fmt.Sprintf(`brokernet_forwarded_messages_total{bridge="A->B",connector="bridge",peer=%q} %d`, b.StompAddr(), n),
			fmt.Sprintf(`brokernet_forward_latency_seconds_count{bridge="A->B",connector="bridge",peer=%q} %d`, b.StompAddr(), n),
			fmt.Sprintf(`brokernet_in_flight_messages{bridge="A->B",connector="bridge",peer=%q} 0`, b.StompAddr()),
		} {
			if !bytes.Contains(body, []byte(want)) {
				return fmt.Errorf("/metrics lacks %s", want)
			}
		}
		return nil
	})
	for _, r := range running {
		if r.Name() == "A->B" {
			_, c, sum := r.Stats().ForwardLatency.Snapshot()
			_, bc, bsum := r.Stats().CommitBatch.Snapshot()
			t.Logf("A->B: %d messages, mean forward latency %.2f ms, %d commits of %.1f messages on average",
				c, 1000*sum/float64(c), bc, bsum/float64(bc))
		}
	}
	st, _ = status(base)
	for _, br := range st.Bridges {
		if br.Bridge == "A->B" && br.ForwardedBytes < int64(n*len("message 1")) {
			t.Errorf("A->B forwarded %d bytes, want at least %d", br.ForwardedBytes, n*len("message 1"))
		}
	}

	t.Run("topology page in headless Chromium names the brokers and the demand", func(t *testing.T) {
		chromium := findChromium(t)
		// A steady stream while the browser renders, so the edge carries a rate.
		sctx, stopStream := context.WithCancel(context.Background())
		streamed := make(chan error, 1)
		go func() {
			c := stomptest.Dial(t, a.StompURI())
			seq := n + 1
			tick := time.NewTicker(50 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-sctx.Done():
					streamed <- nil
					return
				case <-tick.C:
				}
				if err := stomptest.Send(sctx, c, "/queue/orders.eu", seq, 10, false); err != nil && sctx.Err() == nil {
					streamed <- err
					return
				}
				seq += 10
			}
		}()
		defer func() {
			stopStream()
			if err := <-streamed; err != nil {
				t.Errorf("streaming: %v", err)
			}
		}()
		stomptest.Eventually(t, 20*time.Second, func() error {
			st, err := status(base)
			if err != nil {
				return err
			}
			for _, br := range st.Bridges {
				if br.Bridge == "A->B" && br.Rate < 50 {
					return fmt.Errorf("A->B at %.1f msg/s", br.Rate)
				}
			}
			return nil
		})
		dom := runChromium(t, chromium, base+"/", "--dump-dom")
		for _, want := range []string{a.StompAddr(), b.StompAddr(), "A-admin", "B-admin", "queue://orders.eu", "topic://prices.usd", "2/2 bridges up", "msg/s",
			"B-admin → A-admin"} {
			if !strings.Contains(dom, want) {
				t.Errorf("rendered page lacks %q", want)
			}
		}
		png := filepath.Join(t.TempDir(), "topology.png")
		if dst := os.Getenv("BROKERNET_SCREENSHOT"); dst != "" {
			png = dst
		}
		runChromium(t, chromium, base+"/", "--screenshot="+png, "--window-size=1200,900", "--hide-scrollbars")
		data, err := os.ReadFile(png)
		if err != nil || !bytes.HasPrefix(data, []byte("\x89PNG")) {
			t.Errorf("no PNG screenshot at %s: %v", png, err)
		}
		if t.Failed() {
			t.Log(dom)
		}
	})

	// The remote broker goes away: not ready, with a reason per bridge, and at
	// most one log line per reconnect attempt.
	before := len(logLines(t, logs))
	reconnects := func() int64 {
		var n int64
		for _, r := range running {
			n += r.Stats().SessionFailure.Load()
		}
		return n
	}
	r0 := reconnects()
	if err := b.Kill(); err != nil {
		t.Fatal(err)
	}
	stomptest.Eventually(t, 30*time.Second, func() error {
		code, body, err := fetch(base, "/readyz")
		if err != nil {
			return err
		}
		if code != http.StatusServiceUnavailable {
			return fmt.Errorf("/readyz: %d, want 503", code)
		}
		var doc struct {
			Ready   bool
			Reasons []admin.Reason
		}
		if err := json.Unmarshal(body, &doc); err != nil {
			return err
		}
		if len(doc.Reasons) != 2 || doc.Reasons[0].Error == "" || doc.Reasons[1].Error == "" {
			return fmt.Errorf("/readyz reasons: %s", body)
		}
		return nil
	})
	stomptest.Eventually(t, 30*time.Second, func() error {
		if d := reconnects() - r0; d < 8 {
			return fmt.Errorf("%d reconnect attempts so far", d)
		}
		return nil
	})
	// A bridge counts an attempt, then logs its line: every attempt counted
	// before the lines are read must have its line soon, and no line may lack
	// an attempt counted after they were read.
	attempts := reconnects() - r0
	var down []map[string]any
	reconnecting := 0
	stomptest.Eventually(t, 10*time.Second, func() error {
		down = logLines(t, logs)[before:]
		reconnecting = 0
		for _, l := range down {
			if l["message"] == "bridge down, reconnecting" {
				reconnecting++
			}
		}
		if int64(reconnecting) < attempts {
			return fmt.Errorf("%d reconnect lines for %d attempts", reconnecting, attempts)
		}
		return nil
	})
	if after := reconnects() - r0; int64(reconnecting) > after {
		t.Errorf("%d reconnect lines for %d attempts", reconnecting, after)
	}
	for _, l := range down {
		if l["message"] == "bridge down, reconnecting" {
			for _, k := range []string{"bridge", "side", "attempt", "retry_in", "error", "level", "time"} {
				if _, ok := l[k]; !ok {
					t.Errorf("reconnect line lacks field %q: %v", k, l)
				}
			}
		}
	}
	// Apart from the reconnect lines, each bridge says little: its state
	// change once (here: nothing else is expected while the broker is down).
	if extra := len(down) - reconnecting; extra > 6 {
		t.Errorf("%d log lines besides the %d reconnect lines while the broker was down (storm):\n%v", extra, reconnecting, down)
	}
	t.Logf("broker down: %d reconnect attempts, %d log lines", attempts, len(down))

	rctx, rcancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer rcancel()
	if err := b.Restart(rctx); err != nil {
		t.Fatal(err)
	}
	stomptest.Eventually(t, 60*time.Second, func() error {
		code, body, err := fetch(base, "/readyz")
		if err != nil || code != 200 {
			return fmt.Errorf("/readyz after restart: %d %s %v", code, body, err)
		}
		return nil
	})
}

// findChromium returns the browser's path. It is missing only where `make deps`
// was not run; the test then skips, but only after checking that `make deps`
// would install it.
func findChromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	tools, err := os.ReadFile("../testdata/tools.sh")
	if err != nil || !bytes.Contains(tools, []byte("chromium")) {
		t.Fatalf("chromium is not installed and testdata/tools.sh (make deps) does not install it: %v", err)
	}
	mk, err := os.ReadFile("../Makefile")
	if err != nil || !bytes.Contains(mk, []byte("testdata/tools.sh")) {
		t.Fatalf("chromium is not installed and make deps does not run testdata/tools.sh: %v", err)
	}
	t.Skip("chromium is not installed; `make deps` installs it")
	return ""
}

// runChromium runs headless Chromium on url with args and returns its stdout.
// The virtual time budget lets the page fetch /status and render before the
// DOM is dumped or the screenshot taken.
func runChromium(t *testing.T, chromium, url string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	all := append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
		"--user-data-dir=" + t.TempDir(), "--virtual-time-budget=5000"}, args...)
	cmd := exec.CommandContext(ctx, chromium, append(all, url)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %v: %v\n%s", args, err, stderr.String())
	}
	return stdout.String()
}

// TestTopologyPageShowsDownBridges renders the page for bridges whose brokers
// do not answer: the edges are marked down and the summary says not ready.
func TestTopologyPageShowsDownBridges(t *testing.T) {
	if testing.Short() {
		t.Skip("runs Chromium")
	}
	chromium := findChromium(t)
	ctx, cancel := context.WithCancel(context.Background())
	var runs sync.WaitGroup
	t.Cleanup(func() { cancel(); runs.Wait() })
	var list []metrics.Bridge
	for _, remote := range []string{"127.0.0.1:2", "127.0.0.1:3"} {
		br, err := bridge.New(bridge.Config{
			Name:   "L->" + remote,
			Local:  stomptest.URI(t, "stomp://127.0.0.1:1"),
			Remote: stomptest.URI(t, "stomp://"+remote),
			Log:    zerolog.Nop(),
		})
		if err != nil {
			t.Fatal(err)
		}
		list = append(list, metrics.Bridge{Connector: "static", Peer: "stomp://" + remote, Bridge: br})
		runs.Add(1)
		go func() { defer runs.Done(); br.Run(ctx) }()
	}
	srv, err := admin.Listen("127.0.0.1:0", admin.Options{Bridges: func() []metrics.Bridge { return list }, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ctx)
	dom := runChromium(t, chromium, "http://"+srv.Addr()+"/", "--dump-dom")
	for _, want := range []string{"0/2 bridges up", "127.0.0.1:2", "127.0.0.1:3", `class="edge down"`, "no demand"} {
		if !strings.Contains(dom, want) {
			t.Errorf("rendered page lacks %q", want)
		}
	}
	if t.Failed() {
		t.Log(dom)
	}
}
