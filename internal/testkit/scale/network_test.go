package scale

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/brokernet/brokernet/destination"
	"github.com/brokernet/brokernet/internal/testkit/bench"
	"github.com/brokernet/brokernet/internal/testkit/netsim"
	"github.com/brokernet/brokernet/internal/testkit/stomptest"
	"github.com/brokernet/brokernet/internal/testkit/testbroker"
)

var (
	flagNetwork = flag.Bool("scale.network", false, "start a network of brokers with a brokernet daemon each and measure it (make scale)")
	flagBrokers = flag.Int("scale.brokers", 20, "brokers in the ring and random networks")
	flagMesh    = flag.Int("scale.mesh", 8, "brokers in the full mesh (the first ones), joined by gossip sidecars")
	flagTopos   = flag.String("scale.topologies", "ring,random-3,mesh", "topologies to measure, in order")
	flagXmx     = flag.String("scale.xmx", "128m", "JVM heap of each broker")
	flagRate    = flag.Int("scale.rate", 1000, "msg/s of the load phase")
	flagHops    = flag.Int("scale.hops", 5, "distance of the demand propagation measurement (at most the network's diameter)")
	flagTTLPlus = flag.Int("scale.ttlextra", 0, "networkTTL above that distance, so that a route avoiding a killed broker may exist within the TTL")
	flagNetOut  = flag.String("scale.netout", "", "write the results as CSV to this file (e.g. bench/scale/network.csv)")
)

// node is one broker with the brokernet process next to it.
type node struct {
	broker *testbroker.ActiveMQ
	d      *daemon
}

// daemon is a brokernet process (sidecar or run -c) with its admin endpoint.
type daemon struct {
	cmd     *exec.Cmd
	admin   int
	logPath string
	done    chan struct{}
}

func startDaemon(t *testing.T, bin, logPath string, admin int, args ...string) *daemon {
	t.Helper()
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	d := &daemon{cmd: exec.Command(bin, args...), admin: admin, logPath: logPath, done: make(chan struct{})}
	d.cmd.Stdout, d.cmd.Stderr = logf, logf
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { d.cmd.Wait(); logf.Close(); close(d.done) }()
	t.Cleanup(func() { d.stop() })
	return d
}

// stop drains the daemon (SIGINT), killing it after 45 s.
func (d *daemon) stop() {
	select {
	case <-d.done:
		return
	default:
	}
	d.cmd.Process.Signal(os.Interrupt)
	select {
	case <-d.done:
	case <-time.After(45 * time.Second):
		d.cmd.Process.Kill()
		<-d.done
	}
}

func (d *daemon) kill() {
	d.cmd.Process.Signal(syscall.SIGKILL)
	<-d.done
}

// sample is what a daemon's admin endpoint says: bridges up, demand
// subscriptions and goroutines.
type sample struct {
	up, demand, goroutines int
}

func (d *daemon) sample() (sample, error) {
	m, err := metrics(d.admin)
	if err != nil {
		return sample{}, err
	}
	var s sample
	for _, n := range bridgesUp(m) {
		s.up += n
	}
	for _, l := range strings.Split(m, "\n") {
		if strings.HasPrefix(l, "brokernet_demand_subscriptions{") {
			f, _ := strconv.ParseFloat(l[strings.LastIndexByte(l, ' ')+1:], 64)
			s.demand += int(f)
		}
	}
	s.goroutines = int(gauge(m, "go_goroutines"))
	return s, nil
}

// netResult is one topology's measurements.
type netResult struct {
	topology                 string
	brokers, bridges, ttl    int
	converge                 time.Duration
	hops                     int
	demandAt, firstMsg, gone time.Duration
	demandSubs, predicted    int
	dropSidecar              time.Duration // mesh: others stop their bridges to a killed sidecar's broker
	reroute                  time.Duration // first message after a route broker's SIGKILL
	lost, dups, sent         int
	rssKiB                   int64 // mean per daemon
	goroutines               int   // mean per daemon
	idleCPU, loadCPU         float64
	loadRate                 float64 // msg/s the load phase reached
}

// TestNetwork starts -scale.brokers ActiveMQ brokers one after the other
// (small heaps), then for each topology a brokernet process next to each:
// static `run -c` daemons linking the ring or random-3 neighbours, gossip
// sidecars for the mesh of the first -scale.mesh brokers. It measures
// convergence, demand propagation -scale.hops away and back, demand
// subscriptions network-wide against netsim's prediction for the same graph,
// a route broker's SIGKILL under a persistent stream (reroute time, lost,
// duplicates), a sidecar's SIGKILL (mesh), and each daemon's RSS,
// goroutines and CPU at idle and under -scale.rate msg/s.
func TestNetwork(t *testing.T) {
	if !*flagNetwork {
		t.Skip("runs only with -scale.network (make scale): starts a network of brokers")
	}
	testbroker.Require(t)
	n := *flagBrokers
	dir := t.TempDir()
	bin, err := bench.BuildBrokernet(dir)
	if err != nil {
		t.Fatal(err)
	}
	// Staggered: each broker is listening before the next JVM starts, so
	// that start-up does not starve the machine.
	nodes := make([]*node, n)
	for i := range n {
		t0 := time.Now()
		b := testbroker.StartActiveMQ(t, testbroker.Options{
			Name: fmt.Sprintf("scale%02d", i), ID: fmt.Sprintf("scale-%02d", i), Persistent: true, Xmx: *flagXmx, FullJIT: true,
		})
		nodes[i] = &node{broker: b}
		t.Logf("broker %d up in %v, RSS %d MiB", i, time.Since(t0).Round(time.Millisecond), bench.ProcRSS(b.Pid())/1024)
	}
	var results []netResult
	for _, name := range strings.Split(*flagTopos, ",") {
		topo, degree, err := netsim.ParseTopology(strings.TrimSpace(name))
		if err != nil {
			t.Fatal(err)
		}
		size := n
		if topo == netsim.Mesh {
			size = min(n, *flagMesh)
		}
		edges, err := netsim.Edges(topo, size, degree, rand.New(rand.NewPCG(1, 3)))
		if err != nil {
			t.Fatal(err)
		}
		r := measureTopology(t, bin, dir, strings.TrimSpace(name), topo, degree, nodes[:size], edges)
		results = append(results, r)
		// Written after every topology, so that a run cut short keeps what it measured.
		writeNetwork(t, results)
	}
}

func writeNetwork(t *testing.T, results []netResult) {
	t.Helper()
	var out bytes.Buffer
	cw := csv.NewWriter(&out)
	cw.Write([]string{"topology", "brokers", "bridges", "ttl", "converge_ms", "hops", "demand_ms", "first_msg_ms", "gone_ms",
		"demand_subs", "predicted", "drop_sidecar_ms", "reroute_ms", "sent", "lost", "dups",
		"rss_kib_per_daemon", "goroutines_per_daemon", "idle_cpu_per_daemon", "load_rate", "load_cpu_per_daemon"})
	for i, r := range results {
		if i == len(results)-1 {
			t.Logf("%s: %d brokers, %d bridges, ttl %d: converged %v; demand %d hops away after %v, first message %v, gone %v; "+
				"demand subscriptions %d (netsim predicts %d); sidecar drop %v; reroute %v, %d sent, %d lost, %d duplicates; "+
				"per daemon (%.1f bridges) RSS %d KiB, %d goroutines, CPU idle %.1f%%, at %.0f msg/s %.1f%%",
				r.topology, r.brokers, r.bridges, r.ttl, r.converge.Round(time.Millisecond), r.hops, r.demandAt.Round(time.Millisecond),
				r.firstMsg.Round(time.Millisecond), r.gone.Round(time.Millisecond), r.demandSubs, r.predicted, r.dropSidecar.Round(time.Millisecond),
				r.reroute.Round(time.Millisecond), r.sent, r.lost, r.dups, float64(r.bridges)/float64(r.brokers), r.rssKiB, r.goroutines,
				100*r.idleCPU, r.loadRate, 100*r.loadCPU)
		}
		ms := func(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }
		cw.Write([]string{r.topology, strconv.Itoa(r.brokers), strconv.Itoa(r.bridges), strconv.Itoa(r.ttl), ms(r.converge), strconv.Itoa(r.hops),
			ms(r.demandAt), ms(r.firstMsg), ms(r.gone), strconv.Itoa(r.demandSubs), strconv.Itoa(r.predicted), ms(r.dropSidecar), ms(r.reroute),
			strconv.Itoa(r.sent), strconv.Itoa(r.lost), strconv.Itoa(r.dups), strconv.FormatInt(r.rssKiB, 10), strconv.Itoa(r.goroutines),
			strconv.FormatFloat(r.idleCPU, 'f', 4, 64), strconv.FormatFloat(r.loadRate, 'f', 0, 64), strconv.FormatFloat(r.loadCPU, 'f', 4, 64)})
	}
	cw.Flush()
	if *flagNetOut != "" {
		if err := os.WriteFile(*flagNetOut, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// bfs returns hop distances from src over edges, skipping broker skip (-1: none).
func bfs(n int, edges []netsim.Edge, src, skip int) []int {
	adj := make([][]int, n)
	for _, e := range edges {
		adj[e.A] = append(adj[e.A], e.B)
		adj[e.B] = append(adj[e.B], e.A)
	}
	dist := make([]int, n)
	for i := range dist {
		dist[i] = -1
	}
	dist[src] = 0
	q := []int{src}
	for len(q) > 0 {
		v := q[0]
		q = q[1:]
		for _, w := range adj[v] {
			if w != skip && dist[w] < 0 {
				dist[w] = dist[v] + 1
				q = append(q, w)
			}
		}
	}
	return dist
}

func measureTopology(t *testing.T, bin, dir, name string, topo netsim.Topology, degree int, nodes []*node, edges []netsim.Edge) netResult {
	n := len(nodes)
	r := netResult{topology: name, brokers: n, bridges: 2 * len(edges)}
	// Demand travels from X = broker 0 to F, the broker -scale.hops away (or
	// the farthest); networkTTL is that distance plus -scale.ttlextra.
	dist := bfs(n, edges, 0, -1)
	far := 0
	for i, d := range dist {
		if d <= *flagHops && d > dist[far] {
			far = i
		}
	}
	r.hops, r.ttl = dist[far], dist[far]+*flagTTLPlus
	neighbours := make([][]int, n)
	for _, e := range edges {
		neighbours[e.A] = append(neighbours[e.A], e.B)
		neighbours[e.B] = append(neighbours[e.B], e.A)
	}

	// Start a daemon next to every broker; the clock runs from the last start.
	gossip := make([]int, n)
	for i := range gossip {
		gossip[i] = testbroker.FreePort(t)
	}
	for i, nd := range nodes {
		admin := testbroker.FreePort(t)
		logPath := filepath.Join(dir, fmt.Sprintf("%s-%02d.log", name, i))
		if topo == netsim.Mesh {
			args := []string{"sidecar", "--broker", nd.broker.StompURI(), "--gossip-bind", fmt.Sprintf("127.0.0.1:%d", gossip[i]),
				"--gossip-timings", "fast", "--node-name", fmt.Sprintf("sc-%02d", i), "--network-ttl", strconv.Itoa(r.ttl),
				"--decrease-network-consumer-priority",
				"--admin", fmt.Sprintf("127.0.0.1:%d", admin), "--log-format", "json"}
			if i > 0 {
				args = append(args, "--join", fmt.Sprintf("127.0.0.1:%d", gossip[0]))
			}
			nd.d = startDaemon(t, bin, logPath, admin, args...)
			continue
		}
		var peers []string
		for _, j := range neighbours[i] {
			peers = append(peers, nodes[j].broker.StompURI())
		}
		// Demand travels networkTTL hops; messages as far as they need
		// (their path keeps them from looping), and shorter routes have the
		// higher priority. With messageTTL = networkTTL and equal
		// priorities, queue messages that took a side route strand on the
		// broker where their hops ran out (measured at N = 6: 114 of 457
		// stuck on one broker), as in ActiveMQ.
		conf := fmt.Sprintf("[log]\nlevel = \"info\"\nformat = \"json\"\n\n[admin]\nlisten = \"127.0.0.1:%d\"\n\n[[broker]]\nuri = %q\n\n"+
			"[[networkConnector]]\nname = \"net\"\nuri = \"static:(%s)\"\nnetworkTTL = %d\nmessageTTL = -1\ndecreaseNetworkConsumerPriority = true\n"+
			"initialReconnectDelay = \"200ms\"\nmaxReconnectDelay = \"2s\"\n",
			admin, nd.broker.StompURI(), strings.Join(peers, ","), r.ttl)
		path := filepath.Join(dir, fmt.Sprintf("%s-%02d.toml", name, i))
		if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
			t.Fatal(err)
		}
		nd.d = startDaemon(t, bin, logPath, admin, "run", "-c", path)
	}
	defer func() {
		for _, nd := range nodes {
			nd.d.stop()
		}
	}()
	last := time.Now()
	want := make([]int, n)
	for i := range nodes {
		want[i] = len(neighbours[i])
	}
	waitUp(t, nodes, want, 10*time.Minute)
	r.converge = time.Since(last)

	// Idle cost per daemon.
	r.rssKiB, r.goroutines, r.idleCPU = daemonCost(t, nodes, 10*time.Second)

	// Demand propagation.
	queue := "scale." + name + ".demand"
	x, f := nodes[0].broker, nodes[far].broker
	start := time.Now()
	consumer := stomptest.Subscribe(t, x.StompURI(), "/queue/"+queue)
	stomptest.Eventually(t, 5*time.Minute, func() error {
		s, err := f.QueueStats(context.Background(), queue)
		if err != nil || s.ConsumerCount == 0 {
			return fmt.Errorf("no demand on broker %d yet (%v)", far, err)
		}
		return nil
	})
	r.demandAt = time.Since(start)
	sent := time.Now()
	stomptest.SendN(t, f.StompURI(), "/queue/"+queue, 0, 1, true)
	stomptest.Eventually(t, 5*time.Minute, func() error {
		if consumer.Count() == 0 {
			return errors.New("the message has not arrived")
		}
		return nil
	})
	r.firstMsg = time.Since(sent)
	// Demand subscriptions network-wide, once they stop changing.
	var prev = -1
	stomptest.Eventually(t, 2*time.Minute, func() error {
		total := 0
		for _, nd := range nodes {
			s, err := nd.d.sample()
			if err != nil {
				return err
			}
			total += s.demand
		}
		if total != prev {
			prev = total
			time.Sleep(time.Second)
			return errors.New("demand subscriptions still changing")
		}
		r.demandSubs = total
		return nil
	})
	r.predicted = predict(t, topo, degree, n, r.ttl)
	if r.demandSubs != r.predicted {
		// The simulator is trusted beyond what runs here only while it
		// agrees with the real network where both run.
		t.Errorf("%s: %d demand subscriptions network-wide, netsim predicts %d for the same graph", name, r.demandSubs, r.predicted)
	}
	consumer.Close()
	start = time.Now()
	stomptest.Eventually(t, 5*time.Minute, func() error {
		s, err := f.QueueStats(context.Background(), queue)
		if err == nil && s.ConsumerCount > 0 {
			return fmt.Errorf("broker %d still has %d demand subscriptions", far, s.ConsumerCount)
		}
		return nil
	})
	r.gone = time.Since(start)

	// Load: -scale.rate msg/s from F to X for 10 s.
	load := "scale." + name + ".load"
	lc := stomptest.Subscribe(t, x.StompURI(), "/queue/"+load)
	stomptest.Eventually(t, 5*time.Minute, func() error {
		s, err := f.QueueStats(context.Background(), load)
		if err != nil || s.ConsumerCount == 0 {
			return errors.New("no demand for the load queue yet")
		}
		return nil
	})
	cpu0 := daemonsCPU(nodes)
	t0 := time.Now()
	total := paced(t, f.StompURI(), "/queue/"+load, *flagRate, 10*time.Second, false)
	r.loadRate = float64(total) / time.Since(t0).Seconds()
	lc.WaitDistinct(total, 5*time.Minute)
	r.loadCPU = float64(daemonsCPU(nodes)-cpu0) / float64(time.Since(t0)) / float64(n)
	lc.Close()

	// A sidecar's SIGKILL (mesh): the others stop their bridges to its broker.
	if topo == netsim.Mesh && n > 2 {
		victim := n - 1
		nodes[victim].d.kill()
		killed := time.Now()
		want := make([]int, n)
		for i := range want {
			want[i] = n - 2
		}
		waitUpExcept(t, nodes, want, victim, 2*time.Minute)
		r.dropSidecar = time.Since(killed)
	}

	// A route broker's SIGKILL under a persistent stream from F to X.
	r.reroute, r.sent, r.lost, r.dups = routeFailure(t, nodes, edges, far, r.ttl, name)
	return r
}

// predict is netsim's count of demand subscriptions for one queue consumer on
// broker 0 in the same graph (queues: no duplicate suppression by default).
func predict(t *testing.T, topo netsim.Topology, degree, n, ttl int) int {
	c := netsim.DefaultConfig()
	c.Topology, c.Degree, c.Brokers, c.NetworkTTL = topo, degree, n, ttl
	c.Suppress, c.Kind = false, destination.Queue
	s, err := netsim.New(c)
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.Measure(func() { s.AddConsumer(0, "q") })
	if err != nil {
		t.Fatal(err)
	}
	return p.Subs
}

func waitUp(t *testing.T, nodes []*node, want []int, timeout time.Duration) {
	waitUpExcept(t, nodes, want, -1, timeout)
}

func waitUpExcept(t *testing.T, nodes []*node, want []int, skip int, timeout time.Duration) {
	t.Helper()
	stomptest.Eventually(t, timeout, func() error {
		for i, nd := range nodes {
			if i == skip {
				continue
			}
			s, err := nd.d.sample()
			if err != nil {
				return fmt.Errorf("daemon %d: %v", i, err)
			}
			if s.up != want[i] {
				return fmt.Errorf("daemon %d has %d bridges up, want %d", i, s.up, want[i])
			}
		}
		return nil
	})
}

// daemonCost returns the mean RSS, goroutines and CPU share of the daemons
// over window.
func daemonCost(t *testing.T, nodes []*node, window time.Duration) (int64, int, float64) {
	c0, t0 := daemonsCPU(nodes), time.Now()
	time.Sleep(window) // CPU is a rate: it needs a window
	cpu := float64(daemonsCPU(nodes)-c0) / float64(time.Since(t0)) / float64(len(nodes))
	var rss int64
	var g int
	for _, nd := range nodes {
		rss += bench.ProcRSS(nd.d.cmd.Process.Pid)
		s, err := nd.d.sample()
		if err != nil {
			t.Fatal(err)
		}
		g += s.goroutines
	}
	return rss / int64(len(nodes)), g / len(nodes), cpu
}

func daemonsCPU(nodes []*node) time.Duration {
	var sum time.Duration
	for _, nd := range nodes {
		select {
		case <-nd.d.done:
		default:
			sum += bench.ProcCPU(nd.d.cmd.Process.Pid)
		}
	}
	return sum
}

// paced sends to dest at rate msg/s for d and returns how many were sent
// (numbered from 0; persistent ones each confirmed by a receipt).
func paced(t *testing.T, uri, dest string, rate int, d time.Duration, persistent bool) int {
	t.Helper()
	c := stomptest.Dial(t, uri)
	defer c.Close(context.Background())
	tick := time.Second / time.Duration(rate)
	start := time.Now()
	i := 0
	for time.Since(start) < d {
		if err := stomptest.Send(context.Background(), c, dest, i, 1, persistent); err != nil {
			t.Fatalf("sending %d: %v", i, err)
		}
		i++
		if ahead := time.Duration(i)*tick - time.Since(start); ahead > 0 {
			time.Sleep(ahead)
		}
	}
	return i
}

// routeFailure streams persistent messages from F to X while the broker next
// to F on the shortest route is SIGKILLed, and restarted after the stream
// found another route within ttl hops (or after 10 s if there is none). It returns the time
// from the kill to the first message sent after it reaching X, and the
// counts once everything arrived.
func routeFailure(t *testing.T, nodes []*node, edges []netsim.Edge, far, ttl int, name string) (time.Duration, int, int, int) {
	n := len(nodes)
	toX := bfs(n, edges, 0, -1)
	victim := -1
	for _, e := range edges {
		for _, v := range []int{e.A, e.B} {
			other := e.A + e.B - v
			if other == far && v != 0 && toX[v] == toX[far]-1 {
				victim = v
			}
		}
	}
	if far == 0 || victim < 0 || toX[far] < 2 {
		t.Logf("%s: no broker between X and F to kill (distance %d)", name, toX[far])
		return 0, 0, 0, 0
	}
	queue := "/queue/scale." + name + ".failover"
	x, f := nodes[0].broker, nodes[far].broker
	consumer := stomptest.Subscribe(t, x.StompURI(), queue)
	defer consumer.Close()
	stomptest.Eventually(t, 5*time.Minute, func() error {
		s, err := f.QueueStats(context.Background(), strings.TrimPrefix(queue, "/queue/"))
		if err != nil || s.ConsumerCount == 0 {
			return errors.New("no demand for the failover queue yet")
		}
		return nil
	})
	var (
		mu       sync.Mutex
		sentAt   = map[int]time.Time{}
		stopSend = make(chan struct{})
		sendDone = make(chan int)
	)
	c := stomptest.Dial(t, f.StompURI())
	go func() {
		i := 0
		for {
			select {
			case <-stopSend:
				sendDone <- i
				return
			default:
			}
			if err := stomptest.Send(context.Background(), c, queue, i, 1, true); err != nil {
				sendDone <- i
				return
			}
			mu.Lock()
			sentAt[i] = time.Now()
			mu.Unlock()
			i++
			time.Sleep(10 * time.Millisecond)
		}
	}()
	consumer.WaitDistinct(50, 2*time.Minute)
	if err := nodes[victim].broker.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	var reroute time.Duration
	alternative := bfs(n, edges, 0, victim)[far]
	if alternative > 0 && alternative <= ttl {
		stomptest.Eventually(t, 3*time.Minute, func() error {
			mu.Lock()
			defer mu.Unlock()
			for _, s := range consumer.Seqs() {
				if at, ok := sentAt[s]; ok && at.After(killed) {
					reroute = time.Since(killed)
					return nil
				}
			}
			return errors.New("no message sent after the kill has arrived")
		})
	} else {
		t.Logf("%s: no other route of at most %d hops (networkTTL) avoids broker %d: the stream waits for its restart", name, ttl, victim)
		time.Sleep(10 * time.Second)
	}
	if err := nodes[victim].broker.Restart(context.Background()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Second)
	close(stopSend)
	sent := <-sendDone
	// Everything confirmed by F must arrive; what waited on the killed broker
	// arrives after its restart.
	stomptest.Eventually(t, 5*time.Minute, func() error {
		if m := consumer.Missing(0, sent); len(m) > 0 {
			return fmt.Errorf("%d of %d messages missing (first %d)", len(m), sent, m[0])
		}
		return nil
	})
	return reroute, sent, len(consumer.Missing(0, sent)), consumer.Duplicates()
}
