package testbroker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// RabbitOptions configures a RabbitMQ node. Zero values give a node with a
// generated name, every port picked with FreePorts, and the plugins
// rabbitmq_stomp, rabbitmq_amqp1_0, rabbitmq_event_exchange,
// rabbitmq_management and rabbitmq_federation enabled.
type RabbitOptions struct {
	// Name is the node's short name (the node is NAME@localhost); it may only
	// contain [A-Za-z0-9_-]. Default: derived from the test name.
	Name string
	// Conf holds extra rabbitmq.conf lines ("key = value"), e.g.
	// "management_agent.disable_metrics_collector = true".
	Conf []string
	// Ports; zero picks a free one. The defaults of a system node (5672,
	// 61613, 15672, 25672, 4369) are refused: ActiveMQ's STOMP port is
	// RabbitMQ's default too.
	AMQPPort, StompPort, MgmtPort, DistPort, EpmdPort int
}

// RabbitMQ is a running (or stopped) RabbitMQ 3.10 node with its own
// directory, node name, Erlang cookie and epmd.
type RabbitMQ struct {
	instance
	name string
	opt  RabbitOptions
}

// DefaultRabbitStartTimeout bounds starting a node (~6 s idle, ~15 s with
// several nodes starting at once on two cores).
const DefaultRabbitStartTimeout = 120 * time.Second

var (
	rabbitInstallOnce sync.Once
	rabbitInstallErr  error
)

// RabbitScriptPath returns the absolute path of testdata/rabbitmq.sh
// ($BROKERNET_RABBITMQ_SH overrides it).
func RabbitScriptPath() (string, error) { return findScript("rabbitmq.sh", "BROKERNET_RABBITMQ_SH") }

// InstallRabbitMQ runs `rabbitmq.sh install` once per process (a no-op when
// rabbitmq-server is installed).
func InstallRabbitMQ() error {
	return installOnce(&rabbitInstallOnce, &rabbitInstallErr, RabbitScriptPath)
}

// StartRabbitMQ starts a RabbitMQ node in a fresh temporary directory and
// registers a cleanup that kills it and removes the directory (also when the
// test fails; then the log tail is logged). It skips the test under -short
// and fails it on any error.
func StartRabbitMQ(tb testing.TB, opt RabbitOptions) *RabbitMQ {
	tb.Helper()
	return StartRabbitMQs(tb, opt)[0]
}

// StartRabbitMQs starts one node per option set, all at once (a node takes
// 6-15 s to boot), with the same cleanup and skipping as StartRabbitMQ.
func StartRabbitMQs(tb testing.TB, opts ...RabbitOptions) []*RabbitMQ {
	tb.Helper()
	if testing.Short() {
		tb.Skip("needs a RabbitMQ node (skipped with -short)")
	}
	if err := InstallRabbitMQ(); err != nil {
		tb.Fatalf("testbroker: %v", err)
	}
	nodes := make([]*RabbitMQ, len(opts))
	errs := make([]error, len(opts))
	var wg sync.WaitGroup
	for i, opt := range opts {
		if opt.Name == "" {
			opt.Name = rabbitName(tb.Name())
		}
		dir, err := os.MkdirTemp("", "rabbitmq-"+opt.Name+"-")
		if err != nil {
			errs[i] = err
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), DefaultRabbitStartTimeout)
			defer cancel()
			nodes[i], errs[i] = StartRabbit(ctx, dir, opt)
			if errs[i] != nil {
				os.RemoveAll(dir)
			}
		}()
	}
	wg.Wait()
	for _, r := range nodes {
		if r == nil {
			continue
		}
		r.closeAtCleanup(tb, r)
	}
	if err := errors.Join(errs...); err != nil {
		tb.Fatalf("testbroker: %v", err)
	}
	return nodes
}

// rabbitName makes a node name out of a test name: Erlang node names allow
// letters, digits, '_' and '-'.
func rabbitName(base string) string {
	n := defaultName(base)
	return strings.ReplaceAll(n, ".", "_")
}

// StartRabbit starts a node whose configuration, data and logs live in dir
// and returns once its AMQP, STOMP and management ports answer and the
// management API serves /api/overview. The caller must Close it. On error
// the node (if any) has been killed; dir is left for inspection.
func StartRabbit(ctx context.Context, dir string, opt RabbitOptions) (*RabbitMQ, error) {
	if err := InstallRabbitMQ(); err != nil {
		return nil, err
	}
	script, err := RabbitScriptPath()
	if err != nil {
		return nil, err
	}
	if dir == "" {
		return nil, errors.New("testbroker: StartRabbit needs a directory")
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return nil, err
	}
	if opt.Name == "" {
		opt.Name = rabbitName("rabbit")
	}
	ports := []*int{&opt.AMQPPort, &opt.StompPort, &opt.MgmtPort, &opt.DistPort, &opt.EpmdPort}
	for _, p := range ports {
		if *p == 0 {
			free, err := FreePorts(1)
			if err != nil {
				return nil, fmt.Errorf("testbroker: %w", err)
			}
			*p = free[0]
		}
	}
	r := &RabbitMQ{instance: instance{script: script, dir: dir, kind: "node", label: opt.Name + "@localhost"}, name: opt.Name, opt: opt}
	if err := r.launch(ctx); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *RabbitMQ) launch(ctx context.Context) error {
	args := []string{
		"--dir", r.dir,
		"--name", r.name,
		"--amqp-port", strconv.Itoa(r.opt.AMQPPort),
		"--stomp-port", strconv.Itoa(r.opt.StompPort),
		"--mgmt-port", strconv.Itoa(r.opt.MgmtPort),
		"--dist-port", strconv.Itoa(r.opt.DistPort),
		"--epmd-port", strconv.Itoa(r.opt.EpmdPort),
	}
	for _, c := range r.opt.Conf {
		args = append(args, "--conf", c)
	}
	if err := r.start(ctx, args...); err != nil {
		return err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultRabbitStartTimeout)
		defer cancel()
	}
	if err := r.WaitReady(ctx); err != nil {
		r.Kill() //nolint:errcheck // best effort
		return err
	}
	return nil
}

// WaitReady waits until the AMQP, STOMP and management ports accept
// connections and GET /api/overview answers 200. It fails early if the node
// dies.
func (r *RabbitMQ) WaitReady(ctx context.Context) error {
	client := &http.Client{Timeout: 2 * time.Second}
	for {
		if !r.Running() {
			return fmt.Errorf("testbroker: node %s (pid %d) is not running; log tail:\n%s", r.Node(), r.Pid(), r.LogTail(40))
		}
		if dialable(ctx, r.StompAddr()) && dialable(ctx, r.AMQPAddr()) && r.overviewOK(ctx, client) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("testbroker: node %s not ready (AMQP %d, STOMP %d, management %d): %w; log tail:\n%s",
				r.Node(), r.opt.AMQPPort, r.opt.StompPort, r.opt.MgmtPort, ctx.Err(), r.LogTail(40))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (r *RabbitMQ) overviewOK(ctx context.Context, client *http.Client) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.ManagementURL()+"/api/overview", nil)
	if err != nil {
		return false
	}
	req.SetBasicAuth("guest", "guest")
	resp, err := client.Do(req)
	if err != nil {
		return false
	}
	io.Copy(io.Discard, resp.Body) //nolint:errcheck
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// Name returns the node's short name; Node the full Erlang node name.
func (r *RabbitMQ) Name() string { return r.name }

// Node returns NAME@localhost.
func (r *RabbitMQ) Node() string { return r.name + "@localhost" }

// AMQPPort returns the AMQP port (0-9-1 and 1.0 share it).
func (r *RabbitMQ) AMQPPort() int { return r.opt.AMQPPort }

// StompPort returns the STOMP port.
func (r *RabbitMQ) StompPort() int { return r.opt.StompPort }

// MgmtPort returns the management HTTP port.
func (r *RabbitMQ) MgmtPort() int { return r.opt.MgmtPort }

// AMQPAddr returns "127.0.0.1:PORT" of the AMQP listener.
func (r *RabbitMQ) AMQPAddr() string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(r.opt.AMQPPort))
}

// StompAddr returns "127.0.0.1:PORT" of the STOMP listener.
func (r *RabbitMQ) StompAddr() string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(r.opt.StompPort))
}

// StompURI returns "stomp://guest:guest@127.0.0.1:PORT".
func (r *RabbitMQ) StompURI() string { return "stomp://guest:guest@" + r.StompAddr() }

// AMQPURI returns "amqp://guest:guest@127.0.0.1:PORT".
func (r *RabbitMQ) AMQPURI() string { return "amqp://guest:guest@" + r.AMQPAddr() }

// ManagementURL returns "http://127.0.0.1:PORT" (user guest, password guest).
func (r *RabbitMQ) ManagementURL() string {
	return "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(r.opt.MgmtPort))
}

// Running reports whether the node's wrapper process is alive (not a
// zombie) and is the one of this directory: its environment names
// DIR/mnesia, as the script's status check does.
func (r *RabbitMQ) Running() bool {
	pid := r.Pid()
	if !live(pid) {
		return false
	}
	env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil || len(env) == 0 {
		// The wrapper is exec'ing the next program of its chain (the shell
		// script, erl, beam.smp): its environment reads empty or fails for
		// that moment. A live process with that pid is the node then; once
		// a WaitReady failed on it 0.29 s into a start.
		return true
	}
	dirs := []string{r.dir}
	if real, err := filepath.EvalSymlinks(r.dir); err == nil && real != r.dir {
		dirs = append(dirs, real)
	}
	for _, kv := range strings.Split(string(env), "\x00") {
		for _, d := range dirs {
			if kv == "RABBITMQ_MNESIA_BASE="+d+"/mnesia" {
				return true
			}
		}
	}
	return false
}

// Ctl runs rabbitmqctl against this node (e.g. "close_all_connections", "x")
// and returns its output.
func (r *RabbitMQ) Ctl(ctx context.Context, args ...string) (string, error) {
	out, err := r.run(ctx, append([]string{"ctl", "--dir", r.dir, "--"}, args...)...)
	if err != nil {
		return out, fmt.Errorf("testbroker: rabbitmqctl %s on %s: %w", strings.Join(args, " "), r.Node(), err)
	}
	return out, nil
}

// Stop shuts the node down cleanly (SIGTERM; SIGKILL after 30 s).
func (r *RabbitMQ) Stop() error { return r.stop(30 * time.Second) }

// Restart starts the node again with the same name, ports and data (a
// running node is killed first) and waits until it is ready.
func (r *RabbitMQ) Restart(ctx context.Context) error {
	if err := r.Kill(); err != nil {
		return err
	}
	return r.launch(ctx)
}

// Close kills the node and removes its directory. It is idempotent.
func (r *RabbitMQ) Close() error {
	return r.close(func(pid int) {
		if pid > 0 {
			syscall.Kill(-pid, syscall.SIGKILL) //nolint:errcheck // last resort: the node's process group
		}
	})
}

// LogTail returns the last n lines of the node's log and of its stdout.
func (r *RabbitMQ) LogTail(n int) string {
	logs, _ := filepath.Glob(filepath.Join(r.dir, "log", "*.log"))
	return r.logTail(append(logs, filepath.Join(r.dir, "stdout.log")), n, n)
}

// nodeLog is the path of the node's own log file.
func (r *RabbitMQ) nodeLog() string { return filepath.Join(r.dir, "log", r.Node()+".log") }

// LogSize is the current length of the node's log, a mark for LogSince.
func (r *RabbitMQ) LogSize() int64 {
	fi, err := os.Stat(r.nodeLog())
	if err != nil {
		return 0
	}
	return fi.Size()
}

// LogSince returns what the node logged after mark (LogSize). The node
// buffers its log writes: a line may appear a few seconds after the event.
func (r *RabbitMQ) LogSince(mark int64) string {
	data, err := os.ReadFile(r.nodeLog())
	if err != nil || int64(len(data)) < mark {
		return ""
	}
	return string(data[mark:])
}

// RabbitQueueStats is what the management API says about one queue.
type RabbitQueueStats struct {
	Durable   bool `json:"durable"`
	Messages  int  `json:"messages"`                // ready + unacknowledged
	Ready     int  `json:"messages_ready"`          // waiting for a consumer
	Unacked   int  `json:"messages_unacknowledged"` // delivered, not yet acknowledged
	Consumers int  `json:"consumers"`
	// Counted says the answer carried message counts at all: a queue the
	// statistics collector has not heard from yet (right after a node
	// start) is listed without them, which would read as 0 messages.
	Counted bool `json:"-"`
}

// ErrNoQueue says the management API knows no queue of that name.
var ErrNoQueue = errors.New("no such queue")

// QueueStats reads GET /api/queues/%2F/NAME. The counts come from the
// statistics collector and lag by up to collect_statistics_interval (5 s by
// default; RabbitOptions.Conf "collect_statistics_interval = 1000" shortens
// it), so poll them with a deadline. A missing queue is an error naming it.
func (r *RabbitMQ) QueueStats(ctx context.Context, name string) (RabbitQueueStats, error) {
	var st RabbitQueueStats
	u := r.ManagementURL() + "/api/queues/%2F/" + url.PathEscape(name)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return st, err
	}
	req.SetBasicAuth("guest", "guest")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return st, fmt.Errorf("testbroker: queue %q on %s: %w", name, r.Node(), err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusNotFound {
		return st, fmt.Errorf("testbroker: queue %q on %s: %w", name, r.Node(), ErrNoQueue)
	}
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("testbroker: queue %q on %s: HTTP %d: %s", name, r.Node(), resp.StatusCode, strings.TrimSpace(string(body)))
	}
	var counted struct {
		Messages *int `json:"messages"`
	}
	if err := errors.Join(json.Unmarshal(body, &st), json.Unmarshal(body, &counted)); err != nil {
		return st, fmt.Errorf("testbroker: queue %q on %s: %w", name, r.Node(), err)
	}
	st.Counted = counted.Messages != nil
	return st, nil
}

// ClassicRecovery finds the last line of a RabbitMQ log saying how many
// classic queues the node recovered at its start ("Recovering N queues of
// type rabbit_classic_queue took …"): the line, N (-1 if unreadable), and
// whether there was one.
func ClassicRecovery(log string) (line string, n int, ok bool) {
	for _, l := range strings.Split(log, "\n") {
		i := strings.Index(l, "Recovering ")
		if i < 0 || !strings.Contains(l, " queues of type rabbit_classic_queue") {
			continue
		}
		line, n, ok = strings.TrimSpace(l), -1, true
		if f := strings.Fields(l[i:]); len(f) > 1 {
			if v, err := strconv.Atoi(f[1]); err == nil {
				n = v
			}
		}
	}
	return line, n, ok
}
