package endpoint_test

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/brokernet/brokernet/destination"
	"github.com/brokernet/brokernet/internal/testkit/amqptest"
	"github.com/brokernet/brokernet/internal/testkit/stomptest"
	"github.com/brokernet/brokernet/internal/testkit/testbroker"
	"github.com/brokernet/brokernet/transport"
	"github.com/brokernet/brokernet/transport/endpoint"
)

func TestMain(m *testing.M) { testbroker.Main(m) }

// TestSyncedSettlementsSurviveSIGKILL: once a Sync is confirmed, the
// settlements before it are on the broker's disk. The broker is SIGKILLed the
// moment a Sync's confirmation arrives; after its restart, no message whose
// settlement was confirmed may come back, and none settled later may be lost.
//
// This holds only if the confirmation waits for the journal: a persistent
// ActiveMQ confirms a command once handled, and handling an acknowledgement
// only queues the removals for KahaDB's journal writer. To make the writer
// lag as it does on a busy broker with a slow disk, a producer keeps it busy
// with persistent sends and strace delays every fsync of the broker by 30 ms.
// With the confirmation on the empty transaction's BEGIN (before the fix),
// 25 to 100 confirmed messages came back in four of six rounds.
func TestSyncedSettlementsSurviveSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a broker")
	}
	if _, err := exec.LookPath("strace"); err != nil {
		t.Fatal("strace is needed to slow the broker's fsyncs (testdata/tools.sh installs it):", err)
	}
	a := testbroker.StartActiveMQ(t, testbroker.Options{Persistent: true})
	for _, tc := range []struct{ name, uri string }{
		{"stomp", a.StompURI()},
		{"openwire", a.OpenWireURI()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for round := range 3 {
				killAfterSync(t, a, tc.uri, fmt.Sprintf("crash.%s.%d", tc.name, round), 6+2*round)
			}
		})
	}
}

// killAfterSync consumes a queue of persistent messages over uri, settling and
// syncing every 25, SIGKILLs the broker when the k-th Sync is confirmed, and
// checks what comes back after the restart.
func killAfterSync(t *testing.T, a *testbroker.ActiveMQ, uri, q string, k int) {
	t.Helper()
	const n, per = 4000, 25
	stomptest.SendN(t, a.StompURI(), "/queue/"+q, 0, n, true)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	load, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	slow := exec.CommandContext(load, "strace", "-f", "-qq", "-o", "/dev/null",
		"-e", "trace=fsync,fdatasync", "-e", "inject=fsync,fdatasync:delay_enter=30000",
		"-p", strconv.Itoa(a.Pid()))
	if err := slow.Start(); err != nil {
		t.Fatal(err)
	}
	defer slow.Wait() //nolint:errcheck // killed by stopLoad, or gone with the broker
	pc := stomptest.Dial(t, a.StompURI())
	go stomptest.Send(load, pc, "/queue/"+q+".load", 0, 1_000_000, true) //nolint:errcheck // ends with the broker

	ep, err := endpoint.Parse(uri)
	if err != nil {
		t.Fatal(err)
	}
	c, err := ep.Dial(ctx, transport.DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Abort()
	dest, err := destination.Parse("queue://" + q)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Subscribe(ctx, transport.Subscription{ID: "s", Destination: dest, Prefetch: 500}); err != nil {
		t.Fatal(err)
	}
	syncs := make(map[transport.Token]int) // a Sync's token → the last seq it settles
	var refs []transport.Ref
	settled, confirmed, confirmations := -1, -1, 0
	for confirmations < k {
		var ev transport.Event
		select {
		case ev = <-c.Events():
		case <-ctx.Done():
			t.Fatalf("%d Syncs confirmed, %d messages settled, before the deadline", confirmations, settled+1)
		}
		switch ev.Kind {
		case transport.Delivery:
			refs = append(refs, ev.Ref)
			if len(refs) < per {
				continue
			}
			if err := c.Settle(ctx, "s", refs, transport.Accepted); err != nil {
				t.Fatal(err)
			}
			refs = refs[:0]
			s, ok := amqptest.Seq(ev.Msg)
			if !ok {
				t.Fatalf("a delivery without stomptest's seq property: %+v", ev.Msg)
			}
			settled = s
			tok, err := c.Sync(ctx)
			if err != nil {
				t.Fatal(err)
			}
			syncs[tok] = settled
		case transport.Confirmed:
			if last, ok := syncs[ev.Token]; ok {
				confirmed = max(confirmed, last)
				confirmations++
			}
		case transport.Refused:
			t.Fatal(ev.Err)
		}
	}
	if err := syscall.Kill(a.Pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	stopLoad()
	c.Abort()
	if err := a.Restart(ctx); err != nil {
		t.Fatal(err)
	}

	// The broker redelivers in queue order: once every message settled after
	// the last confirmation is back, so is any confirmed one it forgot.
	after := stomptest.Subscribe(t, a.StompURI(), "/queue/"+q)
	defer after.Close()
	stomptest.Eventually(t, time.Minute, func() error {
		if m := after.Missing(settled+1, n-settled-1); len(m) > 0 {
			return fmt.Errorf("%d messages settled after the kill (or never) have not come back, first %v", len(m), m[:min(5, len(m))])
		}
		return nil
	})
	back := 0
	for _, s := range after.Seqs() {
		if s <= confirmed {
			back++
		}
	}
	t.Logf("%s: Syncs confirmed the settlement of 0–%d, settled 0–%d; after the kill %d of the confirmed came back", q, confirmed, settled, back)
	if back > 0 {
		t.Errorf("%d messages whose settlement a Sync confirmed came back after a SIGKILL", back)
	}
}
