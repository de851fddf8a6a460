package bench

// The soak run (`make soak`, not part of `make test`), in its chain mode (the
// isolation mode is soak_isolation_test.go): a stream of persistent
// messages through a chain of three ActiveMQ brokers A → B → C, bridged by one
// `brokernet run` process with two connectors, while the brokers are SIGKILLed and
// restarted in turn and the consumer on C is replaced again and again. Each minute
// it prints what was sent, received, lost and duplicated, and the brokernet
// process's RSS and goroutines; at the end nothing confirmed by A may be missing.

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-stomp/stomp/v3/frame"

	"github.com/brokernet/brokernet/internal/testkit/stomptest"
	"github.com/brokernet/brokernet/internal/testkit/testbroker"
	"github.com/brokernet/brokernet/transport/stomp"
)

var (
	flagSoak        = flag.Duration("soak", 0, "run the soak test for this long (0: skip it)")
	flagSoakRate    = flag.Int("soak.rate", 1000, "messages per second sent to broker A")
	flagSoakRestart = flag.Duration("soak.restart", 3*time.Minute, "SIGKILL and restart one broker (A, B, C in turn) this often")
	flagSoakChurn   = flag.Duration("soak.churn", 20*time.Second, "replace the consumer on C this often")
	flagSoakReport  = flag.Duration("soak.report", time.Minute, "print a report line this often")
	flagSoakMode    = flag.String("soak.mode", "chain", "chain: broker kills along A → B → C; isolation: a blocked destination, a frozen link and moving consumers between A and B (soak_isolation_test.go)")
)

const soakQueue = "/queue/soak"

func TestSoak(t *testing.T) {
	if *flagSoak <= 0 {
		t.Skip("soak runs only with -soak DURATION (make soak)")
	}
	testbroker.Require(t)
	switch *flagSoakMode {
	case "chain":
	case "isolation":
		soakIsolation(t)
		return
	default:
		t.Fatalf("unknown -soak.mode %q: want chain or isolation", *flagSoakMode)
	}
	var brokers [3]*testbroker.ActiveMQ
	var wg sync.WaitGroup
	for i, name := range []string{"A", "B", "C"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			brokers[i] = testbroker.StartActiveMQ(t, testbroker.Options{Name: "soak" + name, ID: "soak-" + name, Persistent: true, FullJIT: true})
		}()
	}
	wg.Wait()
	for _, b := range brokers {
		if b == nil {
			t.FailNow()
		}
	}
	a, b, c := brokers[0], brokers[1], brokers[2]

	cmd, adminPort := startSoakBrokernet(t, func(adminPort int) string { return soakConfig(a, b, c, adminPort) })

	var consumers []*stomptest.Consumer
	consumers = append(consumers, stomptest.Subscribe(t, c.StompURI(), soakQueue))
	prod := newSoakProducer(a.StompURI(), soakQueue, *flagSoakRate, 0)
	ctx, cancel := context.WithCancel(context.Background())
	prodDone := make(chan struct{})
	go func() { defer close(prodDone); prod.run(ctx) }()

	start := time.Now()
	end := start.Add(*flagSoak)
	restart := time.NewTicker(*flagSoakRestart)
	defer restart.Stop()
	churn := time.NewTicker(*flagSoakChurn)
	defer churn.Stop()
	report := time.NewTicker(*flagSoakReport)
	defer report.Stop()
	next := 0
	line := func(what string) {
		confirmed, maybe := prod.counts()
		distinct, dups, missing := soakTally(prod, consumers)
		// Until the end, a confirmed message not received yet is still in transit.
		label := "in transit"
		if what == "final" {
			label = "LOST"
		}
		fmt.Printf("soak %7s %-8s sent %d (+%d unconfirmed) received %d %s %d duplicates %d | brokernet RSS %d KiB goroutines %s | %s\n",
			time.Since(start).Round(time.Second), what, confirmed, maybe, distinct, label, missing, dups,
			ProcRSS(cmd.Process.Pid), scrapeGoroutines(adminPort), bridgeSummary(adminPort))
	}
	for time.Now().Before(end) {
		select {
		case <-restart.C:
			victim := brokers[next%3]
			next++
			rctx, rcancel := context.WithTimeout(context.Background(), 90*time.Second)
			t0 := time.Now()
			if err := victim.Restart(rctx); err != nil {
				rcancel()
				t.Fatalf("restarting %s: %v", victim.Name(), err)
			}
			rcancel()
			fmt.Printf("soak %7s restarted %s (SIGKILL) in %v\n", time.Since(start).Round(time.Second), victim.Name(), time.Since(t0).Round(time.Millisecond))
			if victim == c { // its consumer died with it
				consumers = append(consumers, stomptest.Subscribe(t, c.StompURI(), soakQueue))
			}
		case <-churn.C:
			old := consumers[len(consumers)-1]
			consumers = append(consumers, stomptest.Subscribe(t, c.StompURI(), soakQueue))
			old.Close()
		case <-report.C:
			line("running")
		case <-time.After(time.Until(end)):
		}
	}
	cancel()
	<-prodDone
	line("stopped")
	// Everything A confirmed must arrive; allow the chain time to catch up.
	deadline := time.Now().Add(3 * time.Minute)
	for {
		_, _, lost := soakTally(prod, consumers)
		if lost == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Second)
	}
	line("final")
	if _, _, lost := soakTally(prod, consumers); lost > 0 {
		t.Fatalf("%d messages confirmed by broker A never reached the consumer on C", lost)
	}
}

// startSoakBrokernet builds brokernet and runs `brokernet run` with the
// configuration config makes for a free admin port; it is interrupted (and
// its log tail printed if the test failed) at cleanup.
func startSoakBrokernet(t *testing.T, config func(adminPort int) string) (*exec.Cmd, int) {
	t.Helper()
	dir := t.TempDir()
	bin, err := BuildBrokernet(dir)
	if err != nil {
		t.Fatal(err)
	}
	adminPort := testbroker.FreePort(t)
	conf := filepath.Join(dir, "soak.toml")
	if err := os.WriteFile(conf, []byte(config(adminPort)), 0o600); err != nil {
		t.Fatal(err)
	}
	logf, err := os.Create(filepath.Join(dir, "brokernet.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "run", "-c", conf)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		defer logf.Close()
		StopBrokernet(cmd, 45*time.Second)
		if t.Failed() {
			out, _ := os.ReadFile(logf.Name())
			t.Logf("brokernet log tail:\n%s", tail(string(out), 40))
		}
	})
	return cmd, adminPort
}

func soakConfig(a, b, c *testbroker.ActiveMQ, adminPort int) string {
	conn := func(name, broker, remote string) string {
		return fmt.Sprintf(`
[[networkConnector]]
name = %q
broker = %q
uri = %q
networkTTL = 2
initialReconnectDelay = "200ms"
maxReconnectDelay = "2s"
`, name, broker, remote)
	}
	return soakHeader(adminPort, a.StompURI()) + fmt.Sprintf(`
[[broker]]
name = "b"
uri = %q
`, b.StompURI()) + conn("a-to-b", "a", b.StompURI()) + conn("b-to-c", "b", c.StompURI())
}

// soakHeader is the start of a soak run's configuration: JSON logs, the
// admin endpoint on adminPort, and broker "a" at uri.
func soakHeader(adminPort int, uri string) string {
	return fmt.Sprintf(`[log]
level = "info"
format = "json"

[admin]
listen = "127.0.0.1:%d"

[[broker]]
name = "a"
uri = %q
`, adminPort, uri)
}

// soakProducer sends persistent messages at a fixed rate, reconnecting after a
// failure. A message counts as sent when A's RECEIPT confirmed it; one whose
// receipt was lost with the connection may or may not be stored ("maybe").
type soakProducer struct {
	uri  string
	dest string
	rate int
	pad  []byte // appended to each body

	mu        sync.Mutex
	next      int
	confirmed map[int]bool
	maybe     map[int]bool
}

func newSoakProducer(uri, dest string, rate, pad int) *soakProducer {
	return &soakProducer{uri: uri, dest: dest, rate: rate, pad: []byte(strings.Repeat("x", pad)),
		confirmed: map[int]bool{}, maybe: map[int]bool{}}
}

func (p *soakProducer) counts() (confirmed, maybe int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.confirmed), len(p.maybe)
}

func (p *soakProducer) run(ctx context.Context) {
	u, err := stomp.ParseURI(p.uri)
	if err != nil {
		panic(err)
	}
	for ctx.Err() == nil {
		dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		conn, err := stomp.Dial(dctx, u, stomp.Options{})
		cancel()
		if err != nil {
			time.Sleep(200 * time.Millisecond)
			continue
		}
		p.send(ctx, conn)
		conn.Abort()
	}
}

// send paces messages in 10 ms slices until ctx ends or the connection fails.
func (p *soakProducer) send(ctx context.Context, conn *stomp.Conn) {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	per := max(1, p.rate/100)
	for {
		select {
		case <-ctx.Done():
			// Wait briefly for the last receipts.
			cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			conn.Close(cctx)
			cancel()
			return
		case <-conn.Done():
			return
		case <-tick.C:
		}
		for i := 0; i < per; i++ {
			p.mu.Lock()
			seq := p.next
			p.next++
			p.maybe[seq] = true
			p.mu.Unlock()
			f := frame.New(frame.SEND, frame.Destination, p.dest, "seq", strconv.Itoa(seq), "persistent", "true")
			f.Body = append([]byte("soak message "+strconv.Itoa(seq)+" "), p.pad...)
			err := conn.WriteReceipt(ctx, f, func(err error) {
				if err == nil {
					p.mu.Lock()
					delete(p.maybe, seq)
					p.confirmed[seq] = true
					p.mu.Unlock()
				}
			})
			if err != nil {
				return
			}
		}
	}
}

// soakTally counts what the consumers received: distinct confirmed-or-maybe
// messages, duplicates, and confirmed messages not (yet) received.
func soakTally(p *soakProducer, cs []*stomptest.Consumer) (distinct, dups, lost int) {
	seen := map[int]int{}
	for _, c := range cs {
		for _, s := range c.Seqs() {
			seen[s]++
		}
	}
	for _, k := range seen {
		dups += k - 1
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for s := range p.confirmed {
		if seen[s] == 0 {
			lost++
		}
	}
	return len(seen), dups, lost
}

// scrapeGoroutines reads go_goroutines from the admin endpoint's /metrics.
func scrapeGoroutines(port int) string {
	out, err := httpGet(port, "/metrics")
	if err != nil {
		return "?"
	}
	for _, l := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(l, "go_goroutines "); ok {
			return v
		}
	}
	return "?"
}

// bridgeSummary lists each bridge's up state, forwarded count and sessions from
// the admin endpoint's /metrics.
func bridgeSummary(port int) string {
	out, err := httpGet(port, "/metrics")
	if err != nil {
		return "admin: " + err.Error()
	}
	var parts []string
	for _, l := range strings.Split(out, "\n") {
		for _, m := range []string{"brokernet_bridge_up", "brokernet_forwarded_messages_total", "brokernet_sessions_total"} {
			if strings.HasPrefix(l, m+"{") {
				i := strings.Index(l, `connector="`)
				j := strings.LastIndexByte(l, ' ')
				if i >= 0 && j > 0 {
					name := l[i+len(`connector="`):]
					name = name[:strings.IndexByte(name, '"')]
					parts = append(parts, fmt.Sprintf("%s %s=%s", name, strings.TrimPrefix(strings.TrimPrefix(m, "brokernet_"), "bridge_"), l[j+1:]))
				}
			}
		}
	}
	return strings.Join(parts, " ")
}

func httpGet(port int, path string) (string, error) {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(fmt.Sprintf("http://127.0.0.1:%d%s", port, path))
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var sb strings.Builder
	_, err = bufio.NewReader(resp.Body).WriteTo(&sb)
	return sb.String(), err
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
