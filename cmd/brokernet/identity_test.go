package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/brokernet/brokernet/internal/testkit/faultproxy"
	"github.com/brokernet/brokernet/internal/testkit/jmstest"
	"github.com/brokernet/brokernet/internal/testkit/stomptest"
	"github.com/brokernet/brokernet/internal/testkit/testbroker"
)

// TestSIGKILLDuplicatesSeenByJMS is issue 23's crash run, seen by a JMS
// application: a bridge A⇄B (--duplex, window 500) is SIGKILLed in the middle of
// 10,000 persistent messages from ActiveMQ's JMS producer on A and started
// again; a JMS consumer on B (ActiveMQ's client, whose duplicate detection is
// on by default) counts what it gets.
//
//   - Over OpenWire the forwarded message keeps its MessageId, so what the
//     killed bridge had sent but not acknowledged on A, sent again by the new
//     one, is recognised and dropped by B (its queue's cursor audit): the
//     application sees every message once. (Before, the bridge
//     gave every forwarded message a new id: 10,169 delivered, 169 twice.)
//
//   - Over STOMP B assigns new ids, so the application does see the messages
//     sent again, with new JMSMessageIDs; each carries its original id in
//     BrokernetID, by which it can tell them.
//
//   - Non-persistent messages keep their ids too, but ActiveMQ 5.17 audits
//     no non-persistent send: B drops a copy sent again only while the
//     first is still paged in ("duplicate message … from cursor"), and
//     ActiveMQ's JMS client let the others through (measured: 0, 0, 98,
//     191, 344, 345, 389 and 500 of them, each with the JMSMessageID of its
//     first copy). Once B's statistics still counted 159 messages after
//     every one had been received (not seen again in 7 runs), so B's count
//     is reported for this row, not waited on.
//
// BROKERNET_IDS_BIN runs another brokernet binary instead of this tree's
// (to measure an older one the same way).
func TestSIGKILLDuplicatesSeenByJMS(t *testing.T) {
	const n, window = 10000, 500
	for _, row := range []struct {
		name          string
		stomp         bool
		nonPersistent bool
		maxDups       int // duplicates the application may see
	}{{"OpenWire", false, false, 0}, {"STOMP", true, false, window}, {"OpenWire non-persistent", false, true, window}} {
		t.Run(row.name, func(t *testing.T) {
			a, b := startPair(t)
			q := "kill.ids"
			// The bridge reaches B through a proxy that delays each direction
			// by 25 ms, so that whenever it is killed some messages B has
			// stored still have their confirmations on the way: the new
			// bridge must send them again. (Straight to B, a kill could find
			// nothing unconfirmed, and the run would show nothing.)
			target := b.OpenWireAddr()
			if row.stomp {
				target = b.StompAddr()
			}
			proxy := faultproxy.Start(t, target)
			proxy.SetLatency(25 * time.Millisecond)
			remote := "tcp://" + proxy.Addr()
			if row.stomp {
				remote = "stomp://" + proxy.Addr()
			}
			// The consumer prints every message until it is stopped.
			cons := jmstest.Start(t, "Ident", "consume", b.OpenWireURI(), "queue://"+q, "", "0", "600000")
			cons.WaitLine(t, "READY", time.Minute)
			// The messages wait on A, so that the bridge forwards at full
			// speed with its window full when it is killed.
			mode := "persistent"
			if row.nonPersistent {
				mode = "nonpersistent"
			}
			jmstest.Run(t, 5*time.Minute, "Jms", "produce", a.OpenWireURI(), "queue://"+q, strconv.Itoa(n), mode)
			args := []string{"--duplex", "--window", strconv.Itoa(window), a.OpenWireURI(), remote}
			p := startIdentBridge(t, args...)
			received := func() int { return len(jmstest.Prefixed(cons.Lines(), "MSG ")) }
			stomptest.Eventually(t, 2*time.Minute, func() error {
				if got := received(); got < 2000 {
					return fmt.Errorf("%d received before the kill", got)
				}
				return nil
			})
			if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			<-p.done
			atKill := received()
			startIdentBridge(t, args...)

			// Done when every message was received and neither broker holds
			// one any more (none pending, none in flight): nothing more can
			// arrive. (Non-persistent: B's count is reported, not waited on;
			// see above.)
			var msgs []jmstest.IdentMsg
			stomptest.Eventually(t, 3*time.Minute, func() error {
				msgs = jmstest.IdentMsgs(t, cons.Lines())
				if d := distinct(msgs, func(m jmstest.IdentMsg) string { return strconv.Itoa(m.I) }); d < n {
					return fmt.Errorf("%d of %d distinct messages received", d, n)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				for _, br := range []*testbroker.ActiveMQ{a, b} {
					st, err := br.QueueStats(ctx, q)
					if err != nil {
						return err
					}
					if st.InflightCount != 0 || st.Size != 0 && (br == a || !row.nonPersistent) {
						return fmt.Errorf("broker %s still holds %d messages (%d in flight)", br.Name(), st.Size, st.InflightCount)
					}
				}
				return nil
			})
			msgs = jmstest.IdentMsgs(t, cons.Lines())
			seqs := distinct(msgs, func(m jmstest.IdentMsg) string { return strconv.Itoa(m.I) })
			origs := distinct(msgs, func(m jmstest.IdentMsg) string { return m.Orig })
			dups := len(msgs) - seqs
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			dlq := "no ActiveMQ.DLQ" // where what B's audits dropped may go
			if st, err := b.QueueStats(ctx, "ActiveMQ.DLQ"); err == nil {
				dlq = fmt.Sprintf("ActiveMQ.DLQ holds %d", st.Size)
			}
			// What B itself recognised as sent again and dropped.
			dropped := 0
			for _, l := range strings.Split(b.LogTail(1<<20), "\n") {
				if strings.Contains(l, "cursor got duplicate") || strings.Contains(l, "Duplicate message add attempt rejected") || strings.Contains(l, "from cursor, is cursor audit") {
					dropped++
				}
			}
			// What B stored twice (its enqueue count beyond n): copies sent
			// again that got past B's audits, for its consumers (here
			// ActiveMQ's JMS client, which drops a message id it has seen
			// without a word) to tell.
			left, stored := "nothing", int64(0)
			if st, err := b.QueueStats(ctx, q); err == nil {
				stored = st.EnqueueCount - n
				if st.Size != 0 {
					left = fmt.Sprintf("%d messages", st.Size)
				}
			}
			t.Logf("%s: killed after %d received; the JMS application on B got %d messages, %d distinct, %d twice; distinct BrokernetID %d; B dropped %d sent again (its log), stored %d twice and holds %s; B has %s",
				row.name, atKill, len(msgs), seqs, dups, origs, dropped, stored, left, dlq)
			if seqs != n {
				t.Fatalf("%d of %d distinct messages", seqs, n)
			}
			if dups > row.maxDups {
				t.Errorf("the JMS application saw %d duplicates, want at most %d", dups, row.maxDups)
			}
			if dropped == 0 && stored <= 0 && dups == 0 {
				t.Errorf("nothing reached B twice: the kill left nothing to send again, so the run shows nothing")
			}
			if row.stomp && origs != n {
				t.Errorf("%d distinct BrokernetID among %d messages, want %d (each message's original id)", origs, len(msgs), n)
			}
		})
	}
}

// startIdentBridge runs `brokernet bridge` with args, or the binary
// BROKERNET_IDS_BIN names.
func startIdentBridge(t *testing.T, args ...string) *bridgeProc {
	t.Helper()
	if bin := os.Getenv("BROKERNET_IDS_BIN"); bin != "" {
		saved := binPath
		binPath = bin
		defer func() { binPath = saved }()
	}
	return startBridgeProc(t, args...)
}

func distinct(ms []jmstest.IdentMsg, key func(jmstest.IdentMsg) string) int {
	seen := make(map[string]bool, len(ms))
	for _, m := range ms {
		seen[key(m)] = true
	}
	return len(seen)
}
