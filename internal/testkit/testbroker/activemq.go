// Package testbroker runs real ActiveMQ Classic 5.17 brokers (Debian package
// `activemq`) for integration tests and benchmarks. It shells out to
// testdata/activemq.sh in the module root, which installs the package and
// starts/stops instances out of throw-away directories.
package testbroker

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// Options configures a broker instance. Zero values give a non-persistent
// broker with a generated unique name.
type Options struct {
	// Name and ID are the brokerName and brokerId. The default name is derived
	// from the test name (or "broker" outside tests) plus a process-wide
	// counter; the default ID is Name + "-id". ActiveMQ only accepts
	// [A-Za-z0-9._:-] in a broker name (it replaces other characters).
	Name, ID string
	// Persistent enables KahaDB in DataDir.
	Persistent bool
	// DataDir is the data directory (KahaDB). Give two instances the same
	// DataDir for shared-storage master/slave. Default: DIR/data.
	DataDir string
	// NetworkConnectors are OpenWire URIs of other brokers, e.g.
	// "tcp://127.0.0.1:1234"; each becomes a native, non-duplex
	// <networkConnector uri="static:(URI)">. URIs starting with "static:" or
	// "masterslave:" are used as they are.
	NetworkConnectors []string
	// NetworkTTL is the networkTTL of the network connectors (default 1).
	NetworkTTL int
	// NetworkAttrs replaces the network connectors' default attribute
	// duplex="false" with these, verbatim XML attributes, e.g.
	// `duplex="true" bridgeTempDestinations="false"`.
	NetworkAttrs string
	// NetworkXML is verbatim XML inside each <networkConnector>, e.g.
	// `<excludedDestinations><queue physicalName="secret.>"/></excludedDestinations>`.
	NetworkXML string
	// BrokerAttrs are verbatim XML attributes added to <broker>, e.g.
	// `useVirtualDestSubs="true"`.
	BrokerAttrs string
	// PolicyEntries is verbatim XML of <policyEntry> elements for the
	// broker's destinationPolicy, e.g.
	// `<policyEntry queue="slow.>" producerFlowControl="true" memoryLimit="1mb"/>`.
	PolicyEntries string
	// NoWait makes Start return right after launching the JVM, without
	// waiting for the ports (a shared-storage slave opens none until it holds
	// the store lock). Use WaitReady later.
	NoWait bool
	// Xmx is the JVM heap limit, default "256m".
	Xmx string
	// FullJIT runs the JVM with its optimising compiler (C2), as users run
	// brokers: benchmarks want it. By default a test broker's JVM stops at
	// C1 (activemq.sh --quick-jit), which halves its start-up CPU (2.9 →
	// 1.6 s on the development machine) and spares it compiling code a short
	// test leaves soon; the bridge package's tests took 8.5 instead of 14 min
	// with it (with their other changes of 2026-12-02, bench/history/2026-12-02.md).
	FullJIT bool
	// DebianDefaults runs the broker as Debian's activemq package does
	// (activemq.sh --debian-defaults): -Xms512M -Xmx512M, the JVM's default
	// collector, UseDedicatedTaskRunner=true, ActiveMQ's default system usage
	// and, with Persistent, a plain KahaDB. Xmx is ignored. For benchmarks of
	// brokers as users run them.
	DebianDefaults bool
	// StompOptions and OpenWireOptions are appended to the transport
	// connectors' URIs, e.g. "transport.tcpNoDelay=true" or
	// "wireFormat.maxFrameSize=1048576". By default the connectors have
	// Debian's default transport settings (no tcpNoDelay), as users run them.
	StompOptions, OpenWireOptions string
	// StompPort and OpenWirePort are picked with FreePorts when zero.
	StompPort, OpenWirePort int
	// Users, when not empty, turns on simpleAuthenticationPlugin: only these
	// users (name → password) may connect; each is in groups "users" and its
	// own name.
	Users map[string]string
	// AdvisoryWriters, when set, adds an authorizationPlugin: users may read,
	// write and create every queue and read and create every topic, but only
	// these groups (comma-separated) may write topics, ActiveMQ.Advisory.>
	// included. (ActiveMQ grants the union of all matching entries, so any
	// write grant on topic=">" would reach the advisory topics.) Needs Users.
	AdvisoryWriters string
}

// ActiveMQ is a running (or stopped) broker instance.
type ActiveMQ struct {
	instance
	dataDir  string
	name, id string
	opt      Options
	stomp    int
	openwire int
}

// DefaultStartTimeout bounds Start and Restart when the context has no deadline.
const DefaultStartTimeout = 60 * time.Second

var (
	installOnceAMQ sync.Once
	installErrAMQ  error

	scriptOnce sync.Once
	scriptPath string
	scriptErr  error

	nameCounter atomic.Int64
)

// ScriptPath returns the absolute path of testdata/activemq.sh, found by
// walking up to the module root (go.mod) from this source file or, failing
// that, from the working directory. $BROKERNET_ACTIVEMQ_SH overrides it.
func ScriptPath() (string, error) {
	scriptOnce.Do(func() { scriptPath, scriptErr = findScript("activemq.sh", "BROKERNET_ACTIVEMQ_SH") })
	return scriptPath, scriptErr
}

// Install runs `activemq.sh install` once per process. It is a no-op (and
// fast) when ActiveMQ and the extra jars are already installed.
func Install() error { return installOnce(&installOnceAMQ, &installErrAMQ, ScriptPath) }

var nonNameChars = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

func defaultName(base string) string {
	base = strings.Trim(nonNameChars.ReplaceAllString(base, "_"), "_.-")
	if base == "" {
		base = "broker"
	}
	if len(base) > 40 {
		base = base[:40]
	}
	return fmt.Sprintf("%s-%d", base, nameCounter.Add(1))
}

// StartActiveMQ installs ActiveMQ if needed, starts a broker in a fresh
// temporary directory and registers a cleanup that kills it and removes the
// directory (also when the test fails; then the log tail is logged too).
// Any error fails the test.
//
// Under -short (make unit) it skips the test instead: unit runs need no broker
// and must not install one.
func StartActiveMQ(tb testing.TB, opt Options) *ActiveMQ {
	tb.Helper()
	Require(tb)
	if opt.Name == "" {
		opt.Name = defaultName(tb.Name())
	}
	dir, err := os.MkdirTemp("", "activemq-"+opt.Name+"-")
	if err != nil {
		tb.Fatalf("testbroker: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), DefaultStartTimeout)
	defer cancel()
	b, err := Start(ctx, dir, opt)
	if err != nil {
		os.RemoveAll(dir)
		tb.Fatalf("testbroker: %v", err)
	}
	b.closeAtCleanup(tb, b)
	return b
}

// Start starts a broker whose configuration, logs and (by default) data live
// in dir. Unless opt.NoWait, it returns once the STOMP port accepts
// connections. The caller must Close the broker. On error the JVM (if any)
// has been killed; dir is left for inspection.
func Start(ctx context.Context, dir string, opt Options) (*ActiveMQ, error) {
	if err := Install(); err != nil {
		return nil, err
	}
	script, err := ScriptPath()
	if err != nil {
		return nil, err
	}
	if dir == "" {
		return nil, errors.New("testbroker: Start needs a directory")
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return nil, err
	}
	if opt.Name == "" {
		opt.Name = defaultName("broker")
	}
	if opt.ID == "" {
		opt.ID = opt.Name + "-id"
	}
	if opt.Xmx == "" {
		opt.Xmx = "256m"
	}
	if opt.StompPort == 0 || opt.OpenWirePort == 0 {
		ports, err := FreePorts(2)
		if err != nil {
			return nil, fmt.Errorf("testbroker: %w", err)
		}
		if opt.StompPort == 0 {
			opt.StompPort = ports[0]
		}
		if opt.OpenWirePort == 0 {
			opt.OpenWirePort = ports[1]
		}
	}
	dataDir := opt.DataDir
	if dataDir == "" {
		dataDir = filepath.Join(dir, "data")
	}
	if dataDir, err = filepath.Abs(dataDir); err != nil {
		return nil, err
	}
	b := &ActiveMQ{
		instance: instance{script: script, dir: dir, kind: "broker", label: opt.Name},
		dataDir:  dataDir,
		name:     opt.Name,
		id:       opt.ID,
		opt:      opt,
		stomp:    opt.StompPort,
		openwire: opt.OpenWirePort,
	}
	if err := b.launch(ctx, !opt.NoWait); err != nil {
		return nil, err
	}
	return b, nil
}

// launch runs `activemq.sh start --no-wait` and, if wait, WaitReady.
func (b *ActiveMQ) launch(ctx context.Context, wait bool) error {
	args := []string{
		"--dir", b.dir,
		"--name", b.name,
		"--id", b.id,
		"--stomp-port", strconv.Itoa(b.stomp),
		"--openwire-port", strconv.Itoa(b.openwire),
		"--data-dir", b.dataDir,
		"--xmx", b.opt.Xmx,
	}
	if b.opt.Persistent {
		args = append(args, "--persistent")
	}
	if !b.opt.FullJIT {
		args = append(args, "--quick-jit")
	}
	if b.opt.DebianDefaults {
		args = append(args, "--debian-defaults")
	}
	for _, nc := range b.opt.NetworkConnectors {
		args = append(args, "--network-connector", nc)
	}
	if b.opt.NetworkTTL != 0 {
		args = append(args, "--network-ttl", strconv.Itoa(b.opt.NetworkTTL))
	}
	if b.opt.NetworkAttrs != "" {
		args = append(args, "--network-attrs", b.opt.NetworkAttrs)
	}
	if b.opt.NetworkXML != "" {
		args = append(args, "--network-xml", b.opt.NetworkXML)
	}
	if b.opt.BrokerAttrs != "" {
		args = append(args, "--broker-attrs", b.opt.BrokerAttrs)
	}
	if b.opt.PolicyEntries != "" {
		args = append(args, "--policy-entries", b.opt.PolicyEntries)
	}
	for name, pw := range b.opt.Users {
		args = append(args, "--user", name+":"+pw)
	}
	if b.opt.AdvisoryWriters != "" {
		args = append(args, "--advisory-writers", b.opt.AdvisoryWriters)
	}
	if b.opt.StompOptions != "" {
		args = append(args, "--stomp-options", b.opt.StompOptions)
	}
	if b.opt.OpenWireOptions != "" {
		args = append(args, "--openwire-options", b.opt.OpenWireOptions)
	}
	if err := b.start(ctx, args...); err != nil {
		return err
	}
	if !wait {
		return nil
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultStartTimeout)
		defer cancel()
	}
	if err := b.WaitReady(ctx); err != nil {
		b.Kill() //nolint:errcheck // best effort
		return err
	}
	return nil
}

// Name returns the brokerName.
func (b *ActiveMQ) Name() string { return b.name }

// ID returns the brokerId.
func (b *ActiveMQ) ID() string { return b.id }

// StompPort returns the STOMP port on 127.0.0.1.
func (b *ActiveMQ) StompPort() int { return b.stomp }

// OpenWirePort returns the OpenWire port on 127.0.0.1.
func (b *ActiveMQ) OpenWirePort() int { return b.openwire }

// StompAddr returns "127.0.0.1:PORT" of the STOMP connector.
func (b *ActiveMQ) StompAddr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(b.stomp)) }

// StompURI returns "stomp://127.0.0.1:PORT".
func (b *ActiveMQ) StompURI() string { return "stomp://" + b.StompAddr() }

// OpenWireAddr returns "127.0.0.1:PORT" of the OpenWire connector.
func (b *ActiveMQ) OpenWireAddr() string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(b.openwire))
}

// OpenWireURI returns "tcp://127.0.0.1:PORT", suitable for another broker's
// Options.NetworkConnectors.
func (b *ActiveMQ) OpenWireURI() string { return "tcp://" + b.OpenWireAddr() }

// Running reports whether the broker's JVM is alive.
func (b *ActiveMQ) Running() bool { return b.alive(b.Pid()) }

// alive reports whether pid is a live (non-zombie) JVM of this instance.
func (b *ActiveMQ) alive(pid int) bool {
	if !live(pid) {
		return false
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	if len(cmdline) == 0 {
		// A process in the middle of execve shows an empty command line.
		return true
	}
	want := "-Dactivemq.base=" + b.dir
	for _, arg := range bytes.Split(cmdline, []byte{0}) {
		if string(arg) == want {
			return true
		}
	}
	// The script resolves symlinks in the dir (pwd -P); accept that form too.
	if real, err := filepath.EvalSymlinks(b.dir); err == nil && real != b.dir {
		want = "-Dactivemq.base=" + real
		for _, arg := range bytes.Split(cmdline, []byte{0}) {
			if string(arg) == want {
				return true
			}
		}
	}
	return false
}

// WaitReady waits until the STOMP (and OpenWire) port accepts TCP
// connections, e.g. for a shared-storage slave started with NoWait. It fails
// early if the JVM dies.
func (b *ActiveMQ) WaitReady(ctx context.Context) error {
	pid := b.Pid()
	for {
		if !b.alive(pid) {
			return fmt.Errorf("testbroker: broker %s (pid %d) is not running; log tail:\n%s", b.name, pid, b.LogTail(40))
		}
		// Both connectors listening means the broker has started: the
		// OpenWire connector is opened after the STOMP one.
		if dialable(ctx, b.StompAddr()) && dialable(ctx, b.OpenWireAddr()) {
			if b.alive(pid) {
				return nil
			}
			continue
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("testbroker: broker %s not listening on %s: %w; log tail:\n%s", b.name, b.StompAddr(), ctx.Err(), b.LogTail(40))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Stop shuts the broker down gracefully (SIGTERM, SIGKILL after 20 s).
func (b *ActiveMQ) Stop() error { return b.stop(20 * time.Second) }

// Restart starts the broker again with the same ports, directory and data
// (after Kill or Stop; a running broker is killed first) and waits until it
// listens.
func (b *ActiveMQ) Restart(ctx context.Context) error {
	if err := b.Kill(); err != nil {
		return err
	}
	return b.launch(ctx, true)
}

// Close kills the broker and removes its directory. It is idempotent. A
// DataDir outside the directory is left alone.
func (b *ActiveMQ) Close() error {
	return b.close(func(pid int) {
		// Last resort, without the script.
		if b.alive(pid) {
			syscall.Kill(pid, syscall.SIGKILL) //nolint:errcheck
		}
	})
}

// LogTail returns the last n lines of the broker log (activemq.log), followed
// by the last lines of the JVM's stdout/stderr (stdout.log).
func (b *ActiveMQ) LogTail(n int) string {
	// stdout.log is mostly the JVM's start banner: 10 lines of it.
	return b.logTail([]string{filepath.Join(b.dir, "activemq.log"), filepath.Join(b.dir, "stdout.log")}, n, 10)
}

// Require skips tb under -short (unit runs start no broker) and otherwise
// installs ActiveMQ, failing tb if that fails. Every test that needs a broker
// calls it, directly or through StartActiveMQ.
func Require(tb testing.TB) {
	tb.Helper()
	if testing.Short() {
		tb.Skip("needs a broker: skipped under -short")
	}
	if err := Install(); err != nil {
		tb.Fatalf("testbroker: %v", err)
	}
}

// Main is a TestMain for packages whose tests need ActiveMQ: it installs it
// (once; a no-op when present) and runs the tests. Under -short it installs
// nothing: the broker tests skip themselves (Require).
func Main(m *testing.M) {
	flag.Parse()
	if !testing.Short() {
		if err := Install(); err != nil {
			fmt.Fprintln(os.Stderr, "installing ActiveMQ:", err)
			os.Exit(1)
		}
	}
	os.Exit(m.Run())
}
