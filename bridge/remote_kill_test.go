package bridge_test

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/brokernet/brokernet/bridge"
	"github.com/brokernet/brokernet/internal/testkit/stomptest"
	"github.com/brokernet/brokernet/internal/testkit/testbroker"
)

// TestRabbitMQKilledKeepsWhatWasAcknowledged is the no-loss invariant at its
// sharpest: RabbitMQ (the remote) is SIGKILLed while the bridge streams
// persistent messages into it, and every message the bridge had acknowledged on
// ActiveMQ (the local) must be on RabbitMQ after its restart. The remote
// consumer that makes the demand never acknowledges, so RabbitMQ keeps all it
// was given; the bridge is stopped before counting, so what it had not
// acknowledged is back on ActiveMQ. Each seq must be on one broker or the other.
//
// Over STOMP this failed before sends towards RabbitMQ carried a receipt each:
// RabbitMQ 3.10's STOMP plugin answers a COMMIT as soon as it has handed the
// transaction's messages to its channel, not when they are stored.
func TestRabbitMQKilledKeepsWhatWasAcknowledged(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("needs brokers")
	}
	a := startBrokers(t, 1, true)[0]
	r := testbroker.StartRabbitMQ(t, testbroker.RabbitOptions{})
	for _, row := range []struct {
		name string
		amqp bool
	}{{"STOMP", false}, {"AMQP", true}} {
		t.Run(row.name, func(t *testing.T) {
			const n = 5000
			local, remote := activemqSide{a}, rabbitSide{r: r, amqp: row.amqp}
			q := unique("kill." + row.name)
			hold := holdDemand(t, r, q)
			br := runBridge(t, bridge.Config{
				Local: local.Endpoint(t), Remote: remote.Endpoint(t),
				Demand: defaultDemand(), Log: stomptest.Logger(t),
			})
			waitDemand(t, br, 1, 20*time.Second)
			// The producer keeps sending while RabbitMQ dies, so that the kill
			// lands mid-stream.
			pub := stomptest.Dial(t, a.StompURI())
			sent := make(chan error, 1)
			go func() { sent <- stomptest.Send(context.Background(), pub, local.Queue(q), 0, n, true) }()
			stomptest.Eventually(t, 60*time.Second, func() error {
				if f := br.Stats().Forwarded.Load(); f < n/10 {
					return fmt.Errorf("%d forwarded, waiting for %d", f, n/10)
				}
				return nil
			})
			// SIGKILL the node's process group at once (the script's kill,
			// which also reaps epmd, takes a while), then clean up.
			if err := syscall.Kill(-r.Pid(), syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			killedAt := br.Stats().Forwarded.Load()
			if err := r.Kill(); err != nil {
				t.Fatal(err)
			}
			hold()
			if err := <-sent; err != nil {
				t.Fatal(err)
			}
			if err := br.stop(); err != nil {
				t.Fatal(err)
			}
			acked := br.Stats().Forwarded.Load()
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			if err := r.Restart(ctx); err != nil {
				t.Fatal(err)
			}
			left := queueSize(t, a, q)
			onA := local.Subscribe(t, local.Queue(q))
			onR := remote.Subscribe(t, remote.Queue(q))
			var missing []int
			stomptest.Eventually(t, 60*time.Second, func() error {
				have := make(map[int]bool, n)
				for _, c := range []consumer{onA, onR} {
					for _, s := range c.Seqs() {
						have[s] = true
					}
				}
				missing = missing[:0]
				for i := 0; i < n; i++ {
					if !have[i] {
						missing = append(missing, i)
					}
				}
				if len(missing) > 0 {
					return fmt.Errorf("%d of %d messages are on neither broker (acknowledged on ActiveMQ when RabbitMQ died: %d, by the end: %d; left on ActiveMQ: %d; on RabbitMQ after its restart: %d so far)",
						len(missing), n, killedAt, acked, left, onR.Distinct())
				}
				return nil
			})
			t.Logf("acknowledged on ActiveMQ when RabbitMQ died: %d, by the end: %d; left on ActiveMQ: %d; on RabbitMQ after its restart: %d (%d both, at most the window)",
				killedAt, acked, left, onR.Distinct(), int(left)+onR.Distinct()-n)
		})
	}
}

// holdDemand makes demand for queue q on RabbitMQ with a consumer that takes
// one message and never acknowledges it, so that the queue keeps everything the
// bridge sends. It returns a function that closes the consumer's connection.
func holdDemand(t *testing.T, r *testbroker.RabbitMQ, q string) func() {
	t.Helper()
	c := stomptest.Dial(t, r.StompURI())
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := c.Subscribe(ctx, "hold", "/queue/"+q, "client-individual", "prefetch-count", "1"); err != nil {
		t.Fatal(err)
	}
	go func() {
		for range c.Deliveries() {
		}
	}()
	return c.Abort
}
