package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/brokernet/brokernet/internal/testkit/stomptest"
	"github.com/brokernet/brokernet/internal/testkit/syncbuf"
	"github.com/brokernet/brokernet/internal/testkit/testbroker"
)

// TestSecurityRefusals: settings that would expose gossip, the admin endpoint
// or a passcode are refused at start with one line and exit 2.
func TestSecurityRefusals(t *testing.T) {
	dir := t.TempDir()
	adminToml := filepath.Join(dir, "admin.toml")
	os.WriteFile(adminToml, []byte("[admin]\nlisten = \"0.0.0.0:0\"\n[[broker]]\nuri = \"stomp://127.0.0.1:1\"\n"), 0o600)
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"unencrypted gossip on every interface", []string{"sidecar", "--broker", "stomp://127.0.0.1:1", "--gossip-bind", "0.0.0.0:0"},
			[]string{"gossip is not encrypted", "--secret-key-file", "--gossip-insecure"}},
		{"a passcode with '?'", []string{"bridge", "stomp://u:Secret?pw@host:1", "stomp://h:2"}, []string{"percent-encode"}},
		{"a missing CA file", []string{"bridge", "stomp+ssl://h:1?ca=/nonexistent/ca.pem", "stomp://h:2"}, []string{"/nonexistent/ca.pem"}},
		{"a password without user", []string{"bridge", "--broker-password-file", adminToml, "stomp://h:1", "stomp://h:2"}, []string{"needs a user"}},
		{"an exposed admin endpoint", []string{"run", "-c", adminToml}, []string{"admin endpoint reachable", "tokenFile"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, stderr, code := runCLI(t, tt.args...)
			if code != 2 || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
				t.Fatalf("exit %d, want 2 and one line; stderr:\n%s", code, stderr)
			}
			for _, w := range tt.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr %q lacks %q", stderr, w)
				}
			}
			// Letters: a temporary directory's name in a message has random
			// digits (CI once met "2024" in one).
			if strings.Contains(stderr, "?pw") || strings.Contains(stderr, "Secret") {
				t.Errorf("stderr shows the passcode: %q", stderr)
			}
		})
	}
}

// TestBridgeCredentialsFromEnvironment: two brokers that require a login; the
// bridge gets the password from BROKERNET_BROKER_PASSWORD, not from argv, and
// forwards.
func TestBridgeCredentialsFromEnvironment(t *testing.T) {
	if testing.Short() {
		t.Skip("starts brokers")
	}
	users := map[string]string{"bridge": "Pw9marker"}
	a := testbroker.StartActiveMQ(t, testbroker.Options{Name: "envA", Users: users})
	b := testbroker.StartActiveMQ(t, testbroker.Options{Name: "envB", Users: users})
	p := &bridgeProc{logs: &syncbuf.Buffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(binPath, "bridge", "--log-format", "json", a.StompURI(), b.StompURI())
	p.cmd.Env = append(os.Environ(), "BROKERNET_BROKER_USER=bridge", "BROKERNET_BROKER_PASSWORD=Pw9marker")
	p.cmd.Stdout, p.cmd.Stderr = p.logs, p.logs
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() { p.cmd.Process.Kill(); <-p.done })
	withCreds := func(br *testbroker.ActiveMQ) string { return "stomp://bridge:Pw9marker@" + br.StompAddr() }
	cons := stomptest.Subscribe(t, withCreds(b), "/queue/env.q")
	stomptest.Eventually(t, 20*time.Second, func() error {
		if !strings.Contains(p.logs.String(), "bridge up") {
			return os.ErrNotExist
		}
		return nil
	})
	stomptest.SendN(t, withCreds(a), "/queue/env.q", 0, 20, false)
	cons.WaitDistinct(20, 20*time.Second)
	if strings.Contains(p.logs.String(), "Pw9marker") {
		t.Fatal("the bridge logged the password")
	}
}
