package main

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/brokernet/brokernet/internal/testkit/stomptest"
	"github.com/brokernet/brokernet/internal/testkit/testbroker"
)

// TestBridgeAdminAndStatusCommand runs `brokernet bridge --duplex --admin` between
// two brokers and reads it with `brokernet status`, as an operator would.
func TestBridgeAdminAndStatusCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("needs ActiveMQ brokers")
	}
	a, b := startPair(t)
	port := testbroker.FreePort(t)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	startBridgeProc(t, "--duplex", "--admin", addr, a.StompURI(), b.StompURI())
	stomptest.Subscribe(t, b.StompURI(), "/queue/ops.orders")
	waitConsumers(t, a, "ops.orders", 1)
	stomptest.Eventually(t, 30*time.Second, func() error {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("/readyz: %s", resp.Status)
		}
		return nil
	})
	var out string
	stomptest.Eventually(t, 30*time.Second, func() error {
		stdout, stderr, code := runCLI(t, "status", "--admin", addr)
		if code != 0 {
			return fmt.Errorf("status: exit %d: %s", code, stderr)
		}
		out = stdout
		for _, want := range []string{", ready", a.StompAddr() + "->" + b.StompAddr(), b.StompAddr() + "->" + a.StompAddr(), "queue://ops.orders",
			"Stuck messages\n  (none)"} {
			if !strings.Contains(out, want) {
				return fmt.Errorf("status output lacks %q:\n%s", want, out)
			}
		}
		return nil
	})
	t.Logf("brokernet status:\n%s", out)
}
