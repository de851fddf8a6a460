package scale

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/brokernet/brokernet/internal/testkit/bench"
	"github.com/brokernet/brokernet/internal/testkit/stomptest"
	"github.com/brokernet/brokernet/internal/testkit/testbroker"
)

var (
	flagDaemon = flag.Bool("scale.daemon", false, "measure one brokernet run process with many connectors (make scale-daemon)")
	flagSizes  = flag.String("scale.connectors", "1,10,50,100", "connector counts to measure, one fresh process each; the largest also reloads")
	flagOut    = flag.String("scale.out", "", "write the measurements as CSV to this file (e.g. bench/scale/daemon.csv)")
)

// daemonRow is what one brokernet run process with Connectors connectors
// cost.
type daemonRow struct {
	Connectors int
	Startup    time.Duration // process start to every bridge up (admin /metrics)
	RSSKiB     int64         // once the goroutine count is steady
	Goroutines int
	IdleCPU    float64 // CPU share (1 = one core) over 10 s of idle
	// For the largest count: SIGHUP with one connector changed.
	Reload        time.Duration // SIGHUP to the "configuration reloaded" log line
	ReloadForward time.Duration // that line to a message sent then reaching the remote consumer
	Restarted     []string
}

// TestManyConnectors runs `brokernet run -c` with 1, 10, 50 and 100
// [[networkConnector]]s from broker A to broker B, each with its own name and
// include filter (queue://scale.NNN.>), and measures start-up, RSS,
// goroutines and idle CPU; on the largest it changes one connector's
// prefetchSize, sends SIGHUP and measures the reload, checking that only that
// connector restarted and that it forwards again.
func TestManyConnectors(t *testing.T) {
	if !*flagDaemon {
		t.Skip("runs only with -scale.daemon (make scale-daemon): starts two brokers and several daemons")
	}
	testbroker.Require(t)
	var sizes []int
	for _, f := range strings.Split(*flagSizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			t.Fatalf("-scale.connectors: %q is not a positive count", f)
		}
		sizes = append(sizes, n)
	}
	slices.Sort(sizes)
	a := testbroker.StartActiveMQ(t, testbroker.Options{Name: "scaleA", ID: "scale-A", Xmx: "384m", FullJIT: true})
	b := testbroker.StartActiveMQ(t, testbroker.Options{Name: "scaleB", ID: "scale-B", Xmx: "384m", FullJIT: true})
	dir := t.TempDir()
	bin, err := bench.BuildBrokernet(dir)
	if err != nil {
		t.Fatal(err)
	}
	var rows []daemonRow
	for _, k := range sizes {
		rows = append(rows, runDaemon(t, bin, dir, a, b, k, k == sizes[len(sizes)-1]))
	}
	var out bytes.Buffer
	cw := csv.NewWriter(&out)
	cw.Write([]string{"connectors", "startup_ms", "rss_kib", "goroutines", "idle_cpu", "reload_ms", "reload_forward_ms"})
	t.Logf("| connectors | start-up | RSS | RSS/bridge | goroutines | goroutines/bridge | idle CPU |")
	for _, r := range rows {
		perRSS, perG := "–", "–"
		if r.Connectors > rows[0].Connectors {
			d := float64(r.Connectors - rows[0].Connectors)
			perRSS = fmt.Sprintf("%.0f KiB", float64(r.RSSKiB-rows[0].RSSKiB)/d)
			perG = fmt.Sprintf("%.1f", float64(r.Goroutines-rows[0].Goroutines)/d)
		}
		t.Logf("| %d | %v | %d KiB | %s | %d | %s | %.1f%% |", r.Connectors, r.Startup.Round(time.Millisecond), r.RSSKiB, perRSS,
			r.Goroutines, perG, 100*r.IdleCPU)
		cw.Write([]string{strconv.Itoa(r.Connectors), strconv.FormatInt(r.Startup.Milliseconds(), 10), strconv.FormatInt(r.RSSKiB, 10),
			strconv.Itoa(r.Goroutines), strconv.FormatFloat(r.IdleCPU, 'f', 4, 64),
			strconv.FormatInt(r.Reload.Milliseconds(), 10), strconv.FormatInt(r.ReloadForward.Milliseconds(), 10)})
		if r.Reload > 0 {
			t.Logf("SIGHUP with one of %d connectors changed: reloaded in %v (restarted %v), forwarding again %v later",
				r.Connectors, r.Reload.Round(time.Millisecond), r.Restarted, r.ReloadForward.Round(time.Millisecond))
		}
	}
	cw.Flush()
	if *flagOut != "" {
		if err := os.WriteFile(*flagOut, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// daemonConfig is a federation file with k connectors from A to B; prefetch
// overrides the prefetchSize of connector changed (-1: none).
func daemonConfig(a, b *testbroker.ActiveMQ, adminPort, k, changed int) string {
	var s strings.Builder
	fmt.Fprintf(&s, "[log]\nlevel = \"info\"\nformat = \"json\"\n\n[admin]\nlisten = \"127.0.0.1:%d\"\n\n[[broker]]\nuri = %q\n", adminPort, a.StompURI())
	for i := range k {
		prefetch := 1000
		if i == changed {
			prefetch = 500
		}
		fmt.Fprintf(&s, "\n[[networkConnector]]\nname = \"scale-%03d\"\nuri = %q\ndynamicallyIncludedDestinations = [\"queue://scale.%03d.>\"]\nprefetchSize = %d\n",
			i, b.StompURI(), i, prefetch)
	}
	return s.String()
}

func runDaemon(t *testing.T, bin, dir string, a, b *testbroker.ActiveMQ, k int, reload bool) daemonRow {
	t.Helper()
	row := daemonRow{Connectors: k}
	port := testbroker.FreePort(t)
	conf := filepath.Join(dir, fmt.Sprintf("federation-%d.toml", k))
	if err := os.WriteFile(conf, []byte(daemonConfig(a, b, port, k, -1)), 0o600); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, fmt.Sprintf("brokernet-%d.log", k))
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(bin, "run", "-c", conf)
	cmd.Stdout, cmd.Stderr = logf, logf
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		bench.StopBrokernet(cmd, 45*time.Second)
	}
	t.Cleanup(func() {
		stop()
		if t.Failed() {
			out, _ := os.ReadFile(logPath)
			lines := strings.Split(strings.TrimSpace(string(out)), "\n")
			t.Logf("brokernet (%d connectors) log tail:\n%s", k, strings.Join(lines[max(0, len(lines)-30):], "\n"))
		}
	})
	defer stop()

	stomptest.Eventually(t, 5*time.Minute, func() error {
		m, err := metrics(port)
		if err != nil {
			return err
		}
		if up := bridgesUp(m); len(up) != k {
			return fmt.Errorf("%d of %d connectors have a bridge up", len(up), k)
		}
		return nil
	})
	row.Startup = time.Since(start)

	// Steady state: the same goroutine count three times in a row.
	var last []int
	stomptest.Eventually(t, time.Minute, func() error {
		m, err := metrics(port)
		if err != nil {
			return err
		}
		last = append(last, int(gauge(m, "go_goroutines")))
		if n := len(last); n >= 3 && last[n-1] == last[n-2] && last[n-2] == last[n-3] {
			return nil
		}
		time.Sleep(500 * time.Millisecond)
		return errors.New("goroutine count still moving")
	})
	row.Goroutines = last[len(last)-1]
	row.RSSKiB = bench.ProcRSS(cmd.Process.Pid)
	c0, t0 := bench.ProcCPU(cmd.Process.Pid), time.Now()
	time.Sleep(10 * time.Second) // idle CPU is a rate: it needs a window
	row.IdleCPU = float64(bench.ProcCPU(cmd.Process.Pid)-c0) / float64(time.Since(t0))
	if !reload {
		return row
	}

	// Change one connector and reload.
	changed := k / 2
	name := fmt.Sprintf("scale-%03d", changed)
	dest := fmt.Sprintf("/queue/scale.%03d.reload", changed)
	consumer := stomptest.Subscribe(t, b.StompURI(), dest)
	if err := os.WriteFile(conf, []byte(daemonConfig(a, b, port, k, changed)), 0o600); err != nil {
		t.Fatal(err)
	}
	offset, _ := logf.Seek(0, 2)
	hup := time.Now()
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	var reloaded struct {
		Message   string   `json:"message"`
		Started   []string `json:"started"`
		Restarted []string `json:"restarted"`
		Stopped   []string `json:"stopped"`
	}
	stomptest.Eventually(t, 2*time.Minute, func() error {
		out, err := os.ReadFile(logPath)
		if err != nil {
			return err
		}
		for _, l := range strings.Split(string(out[min(int(offset), len(out)):]), "\n") {
			if strings.Contains(l, `"configuration reloaded"`) {
				return json.Unmarshal([]byte(l), &reloaded)
			}
		}
		return errors.New("no \"configuration reloaded\" line yet")
	})
	row.Reload = time.Since(hup)
	row.Restarted = reloaded.Restarted
	if !slices.Equal(reloaded.Restarted, []string{name}) || len(reloaded.Started) > 0 || len(reloaded.Stopped) > 0 {
		t.Fatalf("reload with %s changed: started %v, restarted %v, stopped %v", name, reloaded.Started, reloaded.Restarted, reloaded.Stopped)
	}
	sent := time.Now()
	stomptest.SendN(t, a.StompURI(), dest, 0, 1, false)
	stomptest.Eventually(t, 2*time.Minute, func() error {
		if consumer.Count() == 0 {
			// Demand may come after the message: the message waits on A
			// for the new bridge's demand subscription.
			return fmt.Errorf("the message sent to A's %s after the reload has not reached B", dest)
		}
		return nil
	})
	row.ReloadForward = time.Since(sent)
	stomptest.Eventually(t, time.Minute, func() error {
		m, err := metrics(port)
		if err != nil {
			return err
		}
		if up := bridgesUp(m); len(up) != k {
			return fmt.Errorf("after the reload %d of %d connectors have a bridge up", len(up), k)
		}
		return nil
	})
	return row
}
