package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/brokernet/brokernet/internal/testkit/stomptest"
	"github.com/brokernet/brokernet/internal/testkit/syncbuf"
	"github.com/brokernet/brokernet/internal/testkit/testbroker"
)

// startProc runs the brokernet binary with args until the test ends.
func startProc(t *testing.T, args ...string) *bridgeProc {
	t.Helper()
	p := &bridgeProc{logs: &syncbuf.Buffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(binPath, args...)
	p.cmd.Stdout, p.cmd.Stderr = p.logs, p.logs
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			t.Logf("%v output:\n%s", args[:1], p.logs.String())
		}
	})
	return p
}

// TestMasterSlaveFailover bridges A to a shared-storage master/slave pair given as
// masterslave:(B1,B2). B1 is killed in the middle of a stream of persistent
// messages; B2 takes over, the bridge follows it, and a consumer on B2 receives
// everything the consumer on B1 did not.
func TestMasterSlaveFailover(t *testing.T) {
	testbroker.Require(t)
	shared := t.TempDir()
	a := testbroker.StartActiveMQ(t, testbroker.Options{Name: "A", ID: "A-ms", Persistent: true})
	b1 := testbroker.StartActiveMQ(t, testbroker.Options{Name: "B1", ID: "B-ms", Persistent: true, DataDir: shared})
	b2 := testbroker.StartActiveMQ(t, testbroker.Options{Name: "B2", ID: "B-ms", Persistent: true, DataDir: shared, NoWait: true})

	const n = 3000
	remote := fmt.Sprintf("masterslave:(%s?initialReconnectDelay=200&maxReconnectDelay=1000,%s)", b1.StompURI(), b2.StompURI())
	startProc(t, "bridge", "--log-format", "json", a.StompURI(), remote)
	c1 := stomptest.SubscribeConfirmed(t, b1.StompURI(), "/queue/ms")
	waitConsumers(t, a, "ms", 1)

	prod := stomptest.Dial(t, a.StompURI())
	sent := make(chan error, 1)
	go func() { sent <- stomptest.Send(context.Background(), prod, "/queue/ms", 0, n, true) }()
	stomptest.Eventually(t, 60*time.Second, func() error {
		if got := c1.Distinct(); got < 500 {
			return fmt.Errorf("%d received on B1 before the kill", got)
		}
		return nil
	})
	if err := b1.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := b2.WaitReady(ctx); err != nil {
		t.Fatalf("slave never took over: %v", err)
	}
	t.Logf("B2 took over %s after B1 was killed", time.Since(killed).Round(time.Millisecond))
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	c2 := stomptest.Subscribe(t, b2.StompURI(), "/queue/ms")
	stomptest.Eventually(t, 90*time.Second, func() error {
		seen := map[int]bool{}
		for _, s := range append(c1.Seqs(), c2.Seqs()...) {
			seen[s] = true
		}
		if len(seen) != n {
			return fmt.Errorf("%d of %d messages received on B1 (%d) and B2 (%d)", len(seen), n, c1.Distinct(), c2.Distinct())
		}
		return nil
	})
	// At-least-once: what the bridge had forwarded but not yet acknowledged on A
	// when B1 died comes again, at most the window (default 500). B2 also
	// delivers again what the consumer on B1 held in doubt (received, its ACK
	// not confirmed when B1 died); those are the consumer's duplicates, not
	// the bridge's.
	const window = 500
	dups := c1.Count() + c2.Count() - n
	redelivered := c1.Redelivered(c2.Seqs())
	bridgeDups := dups - redelivered
	t.Logf("failover: %d on B1, %d on B2, %d duplicates: %d the bridge's (window %d), %d redelivered from the consumer's doubt",
		c1.Count(), c2.Count(), dups, bridgeDups, window, redelivered)
	if bridgeDups > window {
		t.Fatalf("the bridge duplicated %d messages across the failover, more than the window of %d", bridgeDups, window)
	}
}

// sidecar starts `brokernet sidecar` next to broker b.
func sidecar(t *testing.T, b *testbroker.ActiveMQ, name string, gossipPort, adminPort int, join []int) *bridgeProc {
	t.Helper()
	args := []string{"sidecar", "--log-format", "json", "--gossip-timings", "fast", "--broker", b.StompURI(), "--node-name", name,
		"--gossip-bind", fmt.Sprintf("127.0.0.1:%d", gossipPort), "--admin-listen", fmt.Sprintf("127.0.0.1:%d", adminPort)}
	for _, j := range join {
		args = append(args, "--join", fmt.Sprintf("127.0.0.1:%d", j))
	}
	return startProc(t, args...)
}

type statusDoc struct {
	Bridges []struct {
		Connector, Peer, Bridge string
		Up                      bool
		Forwarded               int64
		Sessions                int64
	} `json:"bridges"`
}

func adminStatus(port int) (statusDoc, error) {
	var doc statusDoc
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(fmt.Sprintf("http://127.0.0.1:%d/status", port))
	if err != nil {
		return doc, err
	}
	defer resp.Body.Close()
	return doc, json.NewDecoder(resp.Body).Decode(&doc)
}

// peersUp counts the distinct peers with an up bridge in a sidecar's status.
func peersUp(port int) (int, error) {
	doc, err := adminStatus(port)
	if err != nil {
		return 0, err
	}
	peers := map[string]bool{}
	for _, b := range doc.Bridges {
		if b.Up {
			peers[b.Peer] = true
		}
	}
	return len(peers), nil
}

// TestGossipSidecars runs a sidecar next to each of three brokers; a fourth
// joins later; one sidecar is killed while messages flow.
func TestGossipSidecars(t *testing.T) {
	testbroker.Require(t)
	bs := make([]*testbroker.ActiveMQ, 4)
	for i := range bs[:3] {
		bs[i] = testbroker.StartActiveMQ(t, testbroker.Options{Name: fmt.Sprintf("G%d", i+1), ID: fmt.Sprintf("G%d-gossip", i+1)})
	}
	ports, err := testbroker.FreePorts(8)
	if err != nil {
		t.Fatal(err)
	}
	gossip, admin := ports[:4], ports[4:]
	procs := make([]*bridgeProc, 4)
	for i := range 3 {
		procs[i] = sidecar(t, bs[i], fmt.Sprintf("s%d", i+1), gossip[i], admin[i], gossip[:3])
	}
	for i := range 3 {
		stomptest.Eventually(t, 30*time.Second, func() error {
			n, err := peersUp(admin[i])
			if err != nil || n != 2 {
				return fmt.Errorf("sidecar %d bridges %d peers (%v), want 2", i+1, n, err)
			}
			return nil
		})
	}
	c3 := stomptest.Subscribe(t, bs[2].StompURI(), "/queue/gossip")
	waitConsumers(t, bs[0], "gossip", 1)
	stomptest.SendN(t, bs[0].StompURI(), "/queue/gossip", 0, 200, false)
	c3.WaitDistinct(200, 30*time.Second)

	// A fourth broker and sidecar join; nobody restarts.
	bs[3] = testbroker.StartActiveMQ(t, testbroker.Options{Name: "G4", ID: "G4-gossip"})
	procs[3] = sidecar(t, bs[3], "s4", gossip[3], admin[3], gossip[:1])
	c4 := stomptest.Subscribe(t, bs[3].StompURI(), "/queue/gossip4")
	waitConsumers(t, bs[0], "gossip4", 1)
	stomptest.SendN(t, bs[0].StompURI(), "/queue/gossip4", 0, 200, false)
	c4.WaitDistinct(200, 30*time.Second)

	// Kill sidecar 3 while broker 1 sends to broker 3's consumer. The stream
	// depends on it: sidecar 1 bridges G1→G3 only while s3 is a member. What
	// is sent once the others dropped s3 stays on G1 until s3 comes back;
	// then every message arrives.
	prod := stomptest.Dial(t, bs[0].StompURI())
	sent := make(chan error, 1)
	go func() { sent <- stomptest.Send(context.Background(), prod, "/queue/gossip", 200, 1000, false) }()
	stomptest.Eventually(t, 30*time.Second, func() error {
		if got := c3.Distinct(); got < 700 {
			return fmt.Errorf("%d received on G3 before the kill", got)
		}
		return nil
	})
	if err := procs[2].cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	for _, i := range []int{0, 1, 3} {
		stomptest.Eventually(t, 20*time.Second, func() error {
			n, err := peersUp(admin[i])
			if err != nil || n != 2 {
				return fmt.Errorf("sidecar %d bridges %d peers (%v), want 2 after s3 died", i+1, n, err)
			}
			return nil
		})
	}
	t.Logf("the other sidecars dropped s3 within %s", time.Since(killed).Round(time.Millisecond))
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	// With s3 gone nothing carries G1's messages to G3 once s1's bridge to it
	// drained: the rest waits on G1.
	stomptest.Eventually(t, 30*time.Second, func() error { return bs[0].CheckQueueConsumers("gossip", 0) })
	if err := stomptest.Send(context.Background(), prod, "/queue/gossip", 1200, 2000, false); err != nil {
		t.Fatal(err)
	}
	atKill := c3.Distinct()
	if atKill >= 3200 {
		t.Fatalf("all messages arrived although the member carrying them was gone: the test does not depend on it")
	}
	procs[2] = sidecar(t, bs[2], "s3", gossip[2], admin[2], []int{gossip[0]})
	c3.WaitDistinct(3200, 60*time.Second)
	t.Logf("G3 had %d of 3200 while s3 was gone; all arrived after it rejoined, %d duplicates", atKill, c3.Duplicates())
	if d := c3.Duplicates(); d > 500 {
		t.Fatalf("%d duplicates, more than the window of 500", d)
	}
}

// TestReloadRestartsOnlyChangedConnector runs a federation of two connectors, edits
// one and sends SIGHUP: only that one restarts; the other's stream loses nothing
// and its bridge keeps its session.
func TestReloadRestartsOnlyChangedConnector(t *testing.T) {
	testbroker.Require(t)
	l := testbroker.StartActiveMQ(t, testbroker.Options{Name: "L", ID: "L-reload"})
	p1 := testbroker.StartActiveMQ(t, testbroker.Options{Name: "P1", ID: "P1-reload"})
	p2 := testbroker.StartActiveMQ(t, testbroker.Options{Name: "P2", ID: "P2-reload"})
	adminPort := testbroker.FreePort(t)
	write := func(prefetch2 int) string {
		return fmt.Sprintf(`
[log]
level = "info"
format = "json"
[admin]
listen = "127.0.0.1:%d"
[[broker]]
uri = %q
[[networkConnector]]
name = "one"
uri = %q
[[networkConnector]]
name = "two"
uri = %q
prefetchSize = %d
`, adminPort, l.StompURI(), p1.StompURI(), p2.StompURI(), prefetch2)
	}
	path := filepath.Join(t.TempDir(), "federation.toml")
	if err := os.WriteFile(path, []byte(write(1000)), 0o600); err != nil {
		t.Fatal(err)
	}
	out, stderr, code := runCLI(t, "check", "-c", path)
	if code != 0 {
		t.Fatalf("check: %d %s %s", code, out, stderr)
	}
	p := startProc(t, "run", "-c", path)
	c1 := stomptest.Subscribe(t, p1.StompURI(), "/queue/reload")
	waitConsumers(t, l, "reload", 1)
	sessions := func(conn string) int64 {
		doc, err := adminStatus(adminPort)
		if err != nil {
			return -1
		}
		for _, b := range doc.Bridges {
			if b.Connector == conn {
				return b.Sessions
			}
		}
		return 0
	}
	if s := sessions("one"); s != 1 {
		t.Fatalf("connector one has %d sessions before the reload", s)
	}

	prod := stomptest.Dial(t, l.StompURI())
	sent := make(chan error, 1)
	go func() { sent <- stomptest.Send(context.Background(), prod, "/queue/reload", 0, 5000, false) }()
	stomptest.Eventually(t, 30*time.Second, func() error {
		if c1.Distinct() < 500 {
			return fmt.Errorf("%d received before the reload", c1.Distinct())
		}
		return nil
	})

	// An invalid file is refused and changes nothing.
	if err := os.WriteFile(path, []byte("[[networkConnector]]\nname = 3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p.cmd.Process.Signal(syscall.SIGHUP)
	stomptest.Eventually(t, 10*time.Second, func() error {
		if !strings.Contains(p.logs.String(), "reload refused") {
			return fmt.Errorf("no refusal logged")
		}
		return nil
	})

	if err := os.WriteFile(path, []byte(write(50)), 0o600); err != nil {
		t.Fatal(err)
	}
	p.cmd.Process.Signal(syscall.SIGHUP)
	stomptest.Eventually(t, 20*time.Second, func() error {
		if !strings.Contains(p.logs.String(), `"restarted":["two"]`) {
			return fmt.Errorf("no reload of connector two logged")
		}
		return nil
	})
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	c1.WaitDistinct(5000, 60*time.Second)
	if s := sessions("one"); s != 1 {
		t.Fatalf("connector one has %d sessions after the reload; it was restarted", s)
	}
	if d := c1.Duplicates(); d != 0 {
		t.Fatalf("%d duplicates on the untouched connector", d)
	}
}

// TestImportRoundTrip imports an activemq.xml whose networkConnector points at a
// real broker, checks the result, runs it, and sees it bridge.
func TestImportRoundTrip(t *testing.T) {
	testbroker.Require(t)
	l := testbroker.StartActiveMQ(t, testbroker.Options{Name: "L", ID: "L-import"})
	r := testbroker.StartActiveMQ(t, testbroker.Options{Name: "R", ID: "R-import"})
	dir := t.TempDir()
	xml := fmt.Sprintf(`<beans xmlns="http://www.springframework.org/schema/beans">
  <broker xmlns="http://activemq.apache.org/schema/core" brokerName="L">
    <networkConnectors>
      <networkConnector name="to-r" uri="static:(tcp://127.0.0.1:%d)" networkTTL="2" prefetchSize="500">
        <excludedDestinations><queue physicalName="secret.>"/></excludedDestinations>
      </networkConnector>
    </networkConnectors>
  </broker>
</beans>`, r.OpenWirePort())
	xmlPath := filepath.Join(dir, "activemq.xml")
	if err := os.WriteFile(xmlPath, []byte(xml), 0o600); err != nil {
		t.Fatal(err)
	}
	out, stderr, code := runCLI(t, "import", "--broker-uri", l.StompURI(), xmlPath)
	if code != 0 {
		t.Fatalf("import: exit %d\n%s", code, stderr)
	}
	// The OpenWire member stays OpenWire, at the remote broker's own port: the
	// imported configuration runs as it is.
	if want := fmt.Sprintf("static:(tcp://127.0.0.1:%d)", r.OpenWirePort()); !strings.Contains(out, want) {
		t.Errorf("import did not keep the OpenWire member %s:\n%s", want, out)
	}
	conf := out
	confPath := filepath.Join(dir, "federation.toml")
	if err := os.WriteFile(confPath, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	if o, e, c := runCLI(t, "check", "-c", confPath); c != 0 {
		t.Fatalf("check of the imported config: exit %d\n%s%s\n%s", c, o, e, conf)
	}
	startProc(t, "run", "-c", confPath)
	pub := stomptest.Subscribe(t, r.StompURI(), "/queue/orders")
	stomptest.Subscribe(t, r.StompURI(), "/queue/secret.plans")
	waitConsumers(t, l, "orders", 1)
	stomptest.SendN(t, l.StompURI(), "/queue/orders", 0, 100, false)
	stomptest.SendN(t, l.StompURI(), "/queue/secret.plans", 0, 10, false)
	pub.WaitDistinct(100, 30*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := l.QueueStats(ctx, "secret.plans")
	if err != nil {
		t.Fatal(err)
	}
	if st.Size != 10 || st.ConsumerCount != 0 {
		t.Fatalf("excluded queue on L: size %d, consumers %d; want 10 and 0", st.Size, st.ConsumerCount)
	}
}
