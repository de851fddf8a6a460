package main

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/brokernet/brokernet/internal/testkit/stomptest"
	"github.com/brokernet/brokernet/internal/testkit/testbroker"
)

// TestDemandWaitOnAChain links four ActiveMQ brokers A - B - C - D with three
// `brokernet bridge --duplex` processes, one admin endpoint each, as sidecars
// would. `brokernet demand wait queue://chain.q --broker A` fails while no
// consumer exists, and exits 0 once a consumer on D has made demand there; a
// message sent to A right after it reaches that consumer, and `brokernet
// demand` shows the route D > C > B > A.
func TestDemandWaitOnAChain(t *testing.T) {
	if testing.Short() {
		t.Skip("needs ActiveMQ brokers")
	}
	t.Parallel()
	testbroker.Require(t)
	names := []string{"A", "B", "C", "D"}
	brokers := make([]*testbroker.ActiveMQ, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			brokers[i] = testbroker.StartActiveMQ(t, testbroker.Options{Name: name, ID: name + "-chain"})
		}()
	}
	wg.Wait()
	for _, b := range brokers {
		if b == nil {
			t.FailNow()
		}
	}
	var admins []string
	for i := range len(brokers) - 1 {
		addr := fmt.Sprintf("127.0.0.1:%d", testbroker.FreePort(t))
		admins = append(admins, addr)
		startBridgeProc(t, "--duplex", "--network-ttl", "3", "--admin", addr, brokers[i].StompURI(), brokers[i+1].StompURI())
	}
	adminFlag := strings.Join(admins, ",")
	stomptest.Eventually(t, 60*time.Second, func() error {
		for _, addr := range admins {
			resp, err := http.Get("http://" + addr + "/readyz")
			if err != nil {
				return err
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("%s/readyz: %s", addr, resp.Status)
			}
		}
		return nil
	})

	_, stderr, code := runCLI(t, "demand", "wait", "queue://chain.q", "--broker", "A-chain", "--timeout", "2s", "--admin", adminFlag)
	if code != 1 || !strings.Contains(stderr, "no demand for queue://chain.q on A-chain after 2s; no broker has demand for queue://chain.q") {
		t.Fatalf("demand wait without a consumer: exit %d, %q; want 1 and no demand", code, stderr)
	}

	waiter := startProc(t, "demand", "wait", "chain.q", "--broker", "A-chain", "--timeout", "60s", "--admin", adminFlag)
	start := time.Now()
	c := stomptest.Subscribe(t, brokers[3].StompURI(), "/queue/chain.q")
	select {
	case <-waiter.done:
	case <-time.After(70 * time.Second):
		t.Fatalf("demand wait did not return in 70 s:\n%s", waiter.logs.String())
	}
	out := waiter.logs.String()
	if code := waiter.cmd.ProcessState.ExitCode(); code != 0 || !strings.Contains(out, "demand on A-chain (D-chain > C-chain > B-chain > A-chain)") {
		t.Fatalf("demand wait: exit %d:\n%s", code, out)
	}
	t.Logf("demand wait returned %v after the consumer on D subscribed: %s", time.Since(start).Round(time.Millisecond), strings.TrimSpace(out))

	// The signal means the path is live: a message sent to A now reaches D.
	stomptest.SendN(t, brokers[0].StompURI(), "/queue/chain.q", 0, 1, true)
	c.WaitDistinct(1, 30*time.Second)

	stdout, stderr, code := runCLI(t, "demand", "--admin", adminFlag)
	if code != 0 {
		t.Fatalf("demand: exit %d: %s", code, stderr)
	}
	for _, want := range []string{"Demand seen by 3 brokernet endpoint(s)", "queue://chain.q",
		"C-chain       D-chain       1     D-chain > C-chain  ",
		"B-chain       D-chain       2     D-chain > C-chain > B-chain  ",
		"A-chain       D-chain       3     D-chain > C-chain > B-chain > A-chain  "} {
		if !strings.Contains(stdout, want) {
			t.Errorf("demand output lacks %q:\n%s", want, stdout)
		}
	}
	t.Logf("brokernet demand:\n%s", stdout)
}
