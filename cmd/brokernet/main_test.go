package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/brokernet/brokernet/internal/testkit/stomptest"
	"github.com/brokernet/brokernet/internal/testkit/syncbuf"
	"github.com/brokernet/brokernet/internal/testkit/testbroker"
)

// These tests run the real binary as a user would: flags, exit codes, signals.

var binPath string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "brokernet-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binPath = filepath.Join(dir, "brokernet")
	out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "building brokernet: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func runCLI(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binPath, args...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	code = 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return o.String(), e.String(), code
}

func TestUsageErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no command", nil, "Usage"},
		{"unknown command", []string{"brdge"}, `unknown command "brdge"`},
		{"missing remote", []string{"bridge", "stomp://127.0.0.1:1"}, "want LOCAL and REMOTE"},
		{"bad scheme", []string{"bridge", "http://h:1", "stomp://h:2"}, `LOCAL: broker URI "http://h:1": unsupported scheme "http"`},
		{"bad port", []string{"bridge", "stomp://h:1", "stomp://h:99999"}, `REMOTE: broker URI "stomp://h:99999": bad port "99999"`},
		{"unknown flag", []string{"bridge", "--dupelx", "stomp://h:1", "stomp://h:2"}, "flag provided but not defined: -dupelx"},
		{"bad int", []string{"bridge", "--window", "many", "stomp://h:1", "stomp://h:2"}, `invalid value "many" for flag -window`},
		{"zero window", []string{"bridge", "stomp://h:1", "stomp://h:2", "--window", "0"}, "--window 0"},
		{"bad pattern", []string{"bridge", "--include", "queue://a..b", "stomp://h:1", "stomp://h:2"}, "--include"},
		{"bad ttl", []string{"bridge", "--network-ttl", "-3", "stomp://h:1", "stomp://h:2"}, "--network-ttl -3"},
		{"stuck interval too short", []string{"bridge", "--stuck-interval", "10ms", "stomp://h:1", "stomp://h:2"}, "--stuck-interval 10ms: want 0 (off) or at least 1s, got 10ms"},
		{"sidecar stuck interval too short", []string{"sidecar", "--broker", "stomp://h:1", "--stuck-interval", "-1s"}, "--stuck-interval -1s: want 0 (off) or at least 1s, got -1s"},
		{"bad rename", []string{"bridge", "--rename", "queue://a=topic://b", "stomp://h:1", "stomp://h:2"}, `--rename: rename queue://a=topic://b: a queue cannot become a topic`},
		{"rename twice", []string{"bridge", "--rename", "queue://a=queue://b", "--rename", "queue://a=queue://c", "stomp://h:1", "stomp://h:2"}, "queue://a is renamed twice"},
		{"bad log level", []string{"bridge", "--log-level", "loud", "stomp://h:1", "stomp://h:2"}, `--log-level "loud"`},
		{"negative procs", []string{"bridge", "--procs", "-1", "stomp://h:1", "stomp://h:2"}, "brokernet bridge: --procs -1: want 1 to 1024 threads, or 0 for Go's default (all cores)"},
		{"procs not a number", []string{"sidecar", "--broker", "stomp://h:1", "--procs", "many"}, `invalid value "many" for flag -procs`},
		{"negative procs on run", []string{"run", "-c", "../../testdata/federation-static.toml", "--procs", "-2"}, "brokernet run: --procs -2"},
		{"same ids", []string{"bridge", "--local-id", "X", "--remote-id", "X", "stomp://h:1", "stomp://h:2"}, "same id"},
		{"password never shown", []string{"bridge", "stomp://u:hunter2@h:1", "stomp://u:hunter2@h:2?nope=1"}, `unknown option "nope"`},
		{"OpenWire password with '?' never shown", []string{"bridge", "tcp://u:2024?hunter2@h:1", "stomp://h:2"}, "ambiguous '@'"},
		{"AMQP password never shown", []string{"bridge", "stomp://h:1", "amqp://u:hunter2@h:2?nope=1"}, `unknown option "nope"`},
		{"an unknown scheme lists every protocol", []string{"bridge", "mqtt://h:1", "stomp://h:2"}, "want one of stomp://, stomp+ssl:// (STOMP), amqp://, amqps:// (AMQP 1.0), tcp://, ssl:// (OpenWire)"},
		// Parsed past the URIs (only the later window check fails): every
		// protocol is accepted as LOCAL, REMOTE and in a static: list.
		{"AMQP and OpenWire URIs are accepted", []string{"bridge", "--window", "0", "amqp://u:hunter2@h:1", "tcp://u:hunter2@h:2"}, "--window 0"},
		{"OpenWire LOCAL, mixed static REMOTE", []string{"bridge", "--window", "0", "ssl://h:1", "static:(amqps://h:2,tcp://h:3,stomp://h:4)"}, "--window 0"},
		{"sidecar takes an OpenWire broker", []string{"sidecar", "--broker", "tcp://h:1", "--advertise-broker", "ssl://h.example:61617", "--gossip-timings", "x"}, `--gossip-timings "x"`},
		{"sidecar takes an AMQP broker", []string{"sidecar", "--broker", "amqp://u:hunter2@h:1", "--gossip-timings", "x"}, `--gossip-timings "x"`},
		{"a mixed static REMOTE is one broker each", []string{"bridge", "--remote-id", "R", "tcp://h:1", "static:(tcp://u:hunter2@a:1,amqp://b:2)"}, "static:(tcp://u:***@a:1,amqp://b:2) has 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, stderr, code := runCLI(t, tt.args...)
			if code != 2 {
				t.Errorf("exit code %d, want 2; stderr:\n%s", code, stderr)
			}
			if !strings.Contains(stderr, tt.want) {
				t.Errorf("stderr %q does not contain %q", stderr, tt.want)
			}
			if strings.Contains(stderr, "hunter2") {
				t.Errorf("stderr leaks a password: %q", stderr)
			}
		})
	}
}

func TestHelpAndVersion(t *testing.T) {
	out, _, code := runCLI(t, "version")
	if code != 0 || !strings.HasPrefix(out, "brokernet ") {
		t.Fatalf("version: code %d, output %q", code, out)
	}
	out, _, code = runCLI(t, "bridge", "--help")
	if code != 0 || !strings.Contains(out, "Usage: brokernet bridge") || !strings.Contains(out, "-duplex") {
		t.Fatalf("bridge --help: code %d, output %q", code, out)
	}
	out, _, code = runCLI(t, "--help")
	if code != 0 || !strings.Contains(out, "bridge") {
		t.Fatalf("--help: code %d, output %q", code, out)
	}
}

// bridgeProc is a brokernet bridge running as a child process.
type bridgeProc struct {
	cmd  *exec.Cmd
	logs *syncbuf.Buffer
	done chan struct{}
}

func startBridgeProc(t *testing.T, args ...string) *bridgeProc {
	t.Helper()
	return startProc(t, append([]string{"bridge", "--log-format", "json"}, args...)...)
}

// waitConsumers waits until queue q on broker b has n consumers (our demand
// subscription shows up as a consumer on the local broker).
func waitConsumers(t *testing.T, b *testbroker.ActiveMQ, q string, n int64) {
	t.Helper()
	stomptest.Eventually(t, 30*time.Second, func() error { return b.CheckQueueConsumers(q, n) })
}

func startPair(t *testing.T) (a, b *testbroker.ActiveMQ) {
	t.Helper()
	testbroker.Require(t)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		a = testbroker.StartActiveMQ(t, testbroker.Options{Name: "A", ID: "A-" + t.Name(), Persistent: true})
	}()
	go func() {
		defer wg.Done()
		b = testbroker.StartActiveMQ(t, testbroker.Options{Name: "B", ID: "B-" + t.Name(), Persistent: true})
	}()
	wg.Wait()
	if a == nil || b == nil {
		t.FailNow()
	}
	return a, b
}

// TestSIGKILLMidStreamLosesNothing kills the bridge with SIGKILL in the middle of
// 10,000 persistent messages and starts it again: the consumer on B gets all of
// them, with no more duplicates than the in-flight window.
func TestSIGKILLMidStreamLosesNothing(t *testing.T) {
	a, b := startPair(t)
	const n, window = 10000, 500
	c := stomptest.Subscribe(t, b.StompURI(), "/queue/kill")
	args := []string{"--window", fmt.Sprint(window), a.StompURI(), b.StompURI()}
	p := startBridgeProc(t, args...)
	waitConsumers(t, a, "kill", 1)

	prod := stomptest.Dial(t, a.StompURI())
	sent := make(chan error, 1)
	go func() { sent <- stomptest.Send(context.Background(), prod, "/queue/kill", 0, n, true) }()
	stomptest.Eventually(t, 60*time.Second, func() error {
		if got := c.Distinct(); got < 2000 {
			return fmt.Errorf("%d received before the kill", got)
		}
		return nil
	})
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-p.done
	atKill := c.Distinct()
	startBridgeProc(t, args...)
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	stomptest.Eventually(t, 90*time.Second, func() error {
		if got := c.Distinct(); got < n {
			return fmt.Errorf("%d of %d distinct messages received", got, n)
		}
		return nil
	})
	t.Logf("killed after %d messages; %d duplicates afterwards (window %d)", atKill, c.Duplicates(), window)
	if d := c.Duplicates(); d > window {
		t.Fatalf("%d duplicates, more than the window of %d", d, window)
	}
}

// TestSIGINTDrainsAndExitsZero interrupts a forwarding bridge: it stops taking
// messages, finishes what is in flight, and exits 0; nothing is lost, nothing
// doubled, and no message is left on either broker once consumed.
func TestSIGINTDrainsAndExitsZero(t *testing.T) {
	a, b := startPair(t)
	const n = 3000
	c := stomptest.Subscribe(t, b.StompURI(), "/queue/drain")
	p := startBridgeProc(t, a.StompURI(), b.StompURI())
	waitConsumers(t, a, "drain", 1)
	stomptest.SendN(t, a.StompURI(), "/queue/drain", 0, n, true)
	stomptest.Eventually(t, 30*time.Second, func() error {
		if got := c.Distinct(); got < 500 {
			return fmt.Errorf("%d received before the interrupt", got)
		}
		return nil
	})
	if err := p.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
	case <-time.After(40 * time.Second):
		t.Fatal("bridge did not exit after SIGINT")
	}
	if code := p.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("exit code %d after SIGINT, want 0", code)
	}
	// Whatever did not reach B is still on A: together, nothing is missing. A
	// drain acknowledges on A everything B confirmed, so nothing arrives twice.
	local := stomptest.Subscribe(t, a.StompURI(), "/queue/drain")
	stomptest.Eventually(t, 30*time.Second, func() error {
		seen := map[int]bool{}
		for _, s := range append(c.Seqs(), local.Seqs()...) {
			seen[s] = true
		}
		if len(seen) != n {
			return fmt.Errorf("%d of %d messages on B (%d) and A (%d)", len(seen), n, c.Distinct(), local.Distinct())
		}
		return nil
	})
	if total := c.Count() + local.Count(); total != n {
		t.Fatalf("%d messages received for %d sent: the drain left forwarded messages unacknowledged on A", total, n)
	}
	t.Logf("drained: %d on B, %d left on A, none twice", c.Count(), local.Count())
	// And nothing is left behind on either broker (in flight, unacknowledged).
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stomptest.Eventually(t, 30*time.Second, func() error {
		for _, br := range []*testbroker.ActiveMQ{a, b} {
			st, err := br.QueueStats(ctx, "drain")
			if err != nil {
				return err
			}
			if st.Size != 0 || st.InflightCount != 0 {
				return fmt.Errorf("broker %s still holds %d messages on queue drain (%d in flight)", br.Name(), st.Size, st.InflightCount)
			}
		}
		return nil
	})
	if !strings.Contains(p.logs.String(), "draining") {
		t.Errorf("bridge did not log its drain:\n%s", p.logs.String())
	}
}

// TestCheckReportsEveryMistake: a configuration with five different mistakes is
// refused with all five, each with its line, before anything connects.
func TestCheckReportsEveryMistake(t *testing.T) {
	_, stderr, code := runCLI(t, "check", "-c", "../../config/testdata/five-mistakes.toml")
	if code != 2 {
		t.Fatalf("exit %d, want 2; stderr:\n%s", code, stderr)
	}
	for _, want := range []string{
		"five-mistakes.toml:4:1: log: level",
		"five-mistakes.toml:13:1: networkConnector \"to-dc2\": netwrokTTL: unknown key; did you mean networkTTL?",
		"five-mistakes.toml:14:1: networkConnector \"to-dc2\": prefetchSize",
		"five-mistakes.toml:18:1: networkConnector \"to-dc3\": uri",
		"five-mistakes.toml:19:1: networkConnector \"to-dc3\": networkTTL: want an integer",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	if strings.Contains(stderr, "secret") {
		t.Errorf("stderr leaks a passcode:\n%s", stderr)
	}
	// run refuses the same file the same way.
	if _, _, code := runCLI(t, "run", "-c", "../../config/testdata/five-mistakes.toml"); code != 2 {
		t.Fatalf("run exit %d, want 2", code)
	}
}

// TestExampleConfigsAreValid: the example configurations the README points to pass
// `brokernet check`.
func TestExampleConfigsAreValid(t *testing.T) {
	for _, f := range []string{"federation-static.toml", "federation-masterslave.toml", "federation-gossip.toml"} {
		out, stderr, code := runCLI(t, "check", "-c", filepath.Join("..", "..", "testdata", f))
		if code != 0 || !strings.Contains(out, ": ok") {
			t.Errorf("check %s: exit %d\n%s%s", f, code, out, stderr)
		}
	}
}
