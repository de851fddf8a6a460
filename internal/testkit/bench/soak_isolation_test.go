package bench

// The soak run's isolation mode (`make soak SOAKMODE=isolation`): two ActiveMQ
// brokers A and B bridged both ways over OpenWire by one `brokernet run`
// process (replay on), the path to B through a proxy. Two persistent streams
// are sent to A: soak, whose consumer moves between B and A, and slow.q, a
// queue of B under producer flow control (1 MB) whose consumer on B in turn
// stops acknowledging (the queue fills and blocks) and drains it again.
// Every few minutes the path to B freezes for 45 s (no byte either way,
// nothing closed). Each report prints, per stream, what was sent, received,
// in transit or lost, and duplicated, with brokernet's RSS, goroutines and
// blocked destinations; at the end nothing confirmed by A may be missing.

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/brokernet/brokernet/internal/testkit/faultproxy"
	"github.com/brokernet/brokernet/internal/testkit/stomptest"
	"github.com/brokernet/brokernet/internal/testkit/testbroker"
	"github.com/brokernet/brokernet/transport/stomp"
)

var (
	flagSoakMove   = flag.Duration("soak.move", 30*time.Second, "isolation mode: move soak's consumer to the other broker this often")
	flagSoakBlock  = flag.Duration("soak.block", 2*time.Minute, "isolation mode: switch slow.q between blocked and draining this often")
	flagSoakFreeze = flag.Duration("soak.freeze", 3*time.Minute, "isolation mode: freeze the path to B for 45 s this often")
)

const (
	soakSlowQueue = "/queue/slow.q"
	soakFrozenFor = 45 * time.Second
)

func soakIsolation(t *testing.T) {
	var a, b *testbroker.ActiveMQ
	done := make(chan struct{})
	go func() {
		defer close(done)
		a = testbroker.StartActiveMQ(t, testbroker.Options{Name: "soakA", ID: "soak-A", Persistent: true, FullJIT: true})
	}()
	b = testbroker.StartActiveMQ(t, testbroker.Options{Name: "soakB", ID: "soak-B", Persistent: true, FullJIT: true,
		PolicyEntries: `<policyEntry queue="slow.>" producerFlowControl="true" memoryLimit="1mb"/>`})
	<-done
	if a == nil || b == nil {
		t.FailNow()
	}
	path := faultproxy.Start(t, b.OpenWireAddr())
	cmd, adminPort := startSoakBrokernet(t, func(adminPort int) string {
		return soakHeader(adminPort, a.OpenWireURI()) + fmt.Sprintf(`
[[networkConnector]]
name = "a-b"
broker = "a"
uri = "tcp://%s"
duplex = true
replayWhenNoConsumers = true
initialReconnectDelay = "200ms"
maxReconnectDelay = "2s"
`, path.Addr())
	})

	// soak: its consumer moves; all of them are counted.
	soak := []*stomptest.Consumer{stomptest.Subscribe(t, b.StompURI(), soakQueue)}
	onB := true
	// slow.q: a holder that never acknowledges blocks it; drainers drain it.
	var slow []*stomptest.Consumer
	holder := holdQueue(t, b.StompURI(), soakSlowQueue)
	blocked := true

	rate := *flagSoakRate
	prodSoak := newSoakProducer(a.StompURI(), soakQueue, rate, 0)
	prodSlow := newSoakProducer(a.StompURI(), soakSlowQueue, max(1, rate/10), 1024)
	ctx, cancel := context.WithCancel(context.Background())
	prodDone := make(chan struct{}, 2)
	for _, p := range []*soakProducer{prodSoak, prodSlow} {
		go func() { p.run(ctx); prodDone <- struct{}{} }()
	}

	start := time.Now()
	end := start.Add(*flagSoak)
	move := time.NewTicker(*flagSoakMove)
	defer move.Stop()
	block := time.NewTicker(*flagSoakBlock)
	defer block.Stop()
	freeze := time.NewTicker(*flagSoakFreeze)
	defer freeze.Stop()
	report := time.NewTicker(*flagSoakReport)
	defer report.Stop()
	var heal <-chan time.Time
	line := func(what string) {
		label := "in transit"
		if what == "final" {
			label = "LOST"
		}
		var parts []string
		for _, s := range []struct {
			name string
			p    *soakProducer
			cs   []*stomptest.Consumer
		}{{"soak", prodSoak, soak}, {"slow.q", prodSlow, slow}} {
			confirmed, maybe := s.p.counts()
			distinct, dups, missing := soakTally(s.p, s.cs)
			parts = append(parts, fmt.Sprintf("%s sent %d (+%d) received %d %s %d dups %d", s.name, confirmed, maybe, distinct, label, missing, dups))
		}
		fmt.Printf("soak %7s %-8s %s | brokernet RSS %d KiB goroutines %s blocked %s | %s\n",
			time.Since(start).Round(time.Second), what, strings.Join(parts, "; "), ProcRSS(cmd.Process.Pid),
			scrapeGoroutines(adminPort), scrapeSum(adminPort, "brokernet_blocked_destinations"), bridgeSummary(adminPort))
	}
	event := func(format string, args ...any) {
		fmt.Printf("soak %7s %s\n", time.Since(start).Round(time.Second), fmt.Sprintf(format, args...))
	}
	for time.Now().Before(end) {
		select {
		case <-move.C:
			onB = !onB
			uri, where := a.StompURI(), "A"
			if onB {
				uri, where = b.StompURI(), "B"
			}
			old := soak[len(soak)-1]
			soak = append(soak, stomptest.Subscribe(t, uri, soakQueue))
			old.Close()
			event("soak's consumer moved to %s", where)
		case <-block.C:
			if blocked {
				slow = append(slow, stomptest.Subscribe(t, b.StompURI(), soakSlowQueue))
				holder.Close()
				event("slow.q drains")
			} else {
				holder = holdQueue(t, b.StompURI(), soakSlowQueue)
				slow[len(slow)-1].Close()
				event("slow.q blocks (a consumer that never acknowledges)")
			}
			blocked = !blocked
		case <-freeze.C:
			if heal == nil {
				path.BlackHole()
				heal = time.After(soakFrozenFor)
				event("path to B frozen for %v", soakFrozenFor)
			}
		case <-heal:
			path.Heal()
			heal = nil
			event("path to B healed")
		case <-report.C:
			line("running")
		case <-time.After(time.Until(end)):
		}
	}
	cancel()
	<-prodDone
	<-prodDone
	if heal != nil {
		path.Heal()
	}
	line("stopped")
	// Everything must arrive: consumers on both brokers, slow.q drained.
	soak = append(soak, stomptest.Subscribe(t, a.StompURI(), soakQueue), stomptest.Subscribe(t, b.StompURI(), soakQueue))
	if blocked {
		slow = append(slow, stomptest.Subscribe(t, b.StompURI(), soakSlowQueue))
		holder.Close()
	}
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		_, _, lostSoak := soakTally(prodSoak, soak)
		_, _, lostSlow := soakTally(prodSlow, slow)
		if lostSoak+lostSlow == 0 {
			break
		}
		time.Sleep(time.Second)
	}
	line("final")
	_, _, lostSoak := soakTally(prodSoak, soak)
	_, _, lostSlow := soakTally(prodSlow, slow)
	if lostSoak+lostSlow > 0 {
		t.Fatalf("messages confirmed by broker A never reached a consumer: soak %d, slow.q %d", lostSoak, lostSlow)
	}
}

// holder is a consumer that takes one message and never acknowledges it: a
// queue under producer flow control fills up behind it.
type holder struct{ conn *stomp.Conn }

func holdQueue(t *testing.T, uri, dest string) holder {
	t.Helper()
	c := stomptest.Dial(t, uri)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := c.Subscribe(ctx, "hold", dest, "client-individual", "activemq.prefetchSize", "1"); err != nil {
		t.Fatal(err)
	}
	return holder{c}
}

// Close disconnects it: its message goes back to the queue.
func (h holder) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	h.conn.Close(ctx)
}

// scrapeSum adds up the samples of one metric from the admin endpoint.
func scrapeSum(port int, metric string) string {
	out, err := httpGet(port, "/metrics")
	if err != nil {
		return "?"
	}
	var sum float64
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, metric+"{") || strings.HasPrefix(l, metric+" ") {
			var v float64
			if _, err := fmt.Sscan(l[strings.LastIndexByte(l, ' ')+1:], &v); err == nil {
				sum += v
			}
		}
	}
	return fmt.Sprint(sum)
}
