// Package bench compares brokernet with ActiveMQ's own networkConnector on one
// machine: a producer on broker A, a consumer on broker B, 1 KiB messages. The
// benchmark itself is in bench_test.go (`make bench`); this file holds its
// producer, its consumer, the brokernet subprocess and CPU accounting.
package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-stomp/stomp/v3/frame"

	"github.com/brokernet/brokernet/transport/stomp"
)

// Headers the benchmark puts on every message.
const (
	HeaderPhase = "bench-ph"  // phase tag, see Phase
	HeaderSeq   = "bench-seq" // 0..n-1 within the phase
	HeaderTS    = "bench-ts"  // send time, UnixNano
)

// Phase is one batch of a run; sequence numbers restart in each.
type Phase int

// The phases of one path run.
const (
	Warmup Phase = iota
	Full
	Steady
	Repeat // a second full-speed phase (where the go-stomp pair runs: pair, harness, harness, pair)
	NumPhases
)

var phaseTags = [NumPhases]string{"w", "f", "s", "r"}

func (p Phase) String() string {
	return [NumPhases]string{"warm-up", "full-speed", "steady", "full-speed again"}[p]
}

func phaseOf(tag string) (Phase, bool) {
	for i, t := range phaseTags {
		if t == tag {
			return Phase(i), true
		}
	}
	return 0, false
}

// Body returns a 1 KiB text body (no NUL, so it may go without content-length).
func Body(size int) []byte { return bytes.Repeat([]byte{'x'}, size) }

// Dial connects to a STOMP URI.
func Dial(ctx context.Context, uri string) (*stomp.Conn, error) {
	u, err := stomp.ParseURI(uri)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	return stomp.Dial(ctx, u, stomp.Options{})
}

// SendOptions describe one producer batch.
type SendOptions struct {
	Dest       string
	Phase      Phase
	N          int
	Persistent bool
	Body       []byte
	// Rate paces the producer in messages per second (small batches on a 5 ms
	// ticker); 0 sends as fast as the in-flight bound allows.
	Rate float64
	// InFlight bounds the messages sent but not yet confirmed by the broker.
	// Default 1000.
	InFlight int
	// ReceiptEvery is how many non-persistent messages one receipt confirms: the
	// SENDs stream without receipts and every ReceiptEvery-th (and the last)
	// asks for one. Default 100.
	ReceiptEvery int
	// Batch is the most persistent messages per producer transaction. Default 100.
	Batch int
}

// SendStats is what a producer batch measured.
type SendStats struct {
	Start, End time.Time // first SEND queued, last RECEIPT received
}

// Send writes o.N messages on c and returns once the broker confirmed every one.
//
// Non-persistent SENDs stream without receipts and every o.ReceiptEvery-th asks
// for one. STOMP 1.2 ("RECEIPT") makes a receipt "a cumulative acknowledgment
// that all the previous frames have been received by the server"; ActiveMQ also
// handles one connection's frames in order on its transport thread, so by the
// time the RECEIPT comes the SENDs before it were handed to the destination. A
// refused SEND ends the connection with an ERROR, which fails Send. One receipt
// per message would make the broker write one frame per message and the
// benchmark measure its own round trips. Persistent messages go in
// transactions of up to o.Batch messages, each COMMIT with a receipt, so that
// the producer's own disk syncs on broker A do not cap what the forwarding
// paths can show. At most o.InFlight messages are unconfirmed.
func Send(ctx context.Context, c *stomp.Conn, o SendOptions) (SendStats, error) {
	if o.InFlight <= 0 {
		o.InFlight = 1000
	}
	if o.ReceiptEvery <= 0 {
		o.ReceiptEvery = 100
	}
	if o.Batch <= 0 {
		o.Batch = 100
	}
	// k is the number of messages one confirmation covers.
	k := o.ReceiptEvery
	if o.Persistent {
		k = o.Batch
	}
	k = min(k, o.InFlight)
	sem := make(chan struct{}, o.InFlight)
	errs := make(chan error, 1)
	release := func(n int) func(error) {
		return func(err error) {
			if err != nil {
				select {
				case errs <- err:
				default:
				}
			}
			for range n {
				<-sem
			}
		}
	}
	var tick *time.Ticker
	if o.Rate > 0 {
		tick = time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
	}
	tag := phaseTags[o.Phase]
	st := SendStats{Start: time.Now()}
	txSeq := 0
	tx := ""
	unconfirmed := 0 // messages sent since the last confirmation was asked for
	for i := 0; i < o.N; {
		due := o.N
		if o.Rate > 0 {
			due = min(o.N, int(math.Ceil(time.Since(st.Start).Seconds()*o.Rate)))
			if i >= due {
				select {
				case <-tick.C:
				case err := <-errs:
					return st, err
				case <-ctx.Done():
					return st, ctx.Err()
				}
				continue
			}
		}
		select {
		case sem <- struct{}{}:
		case err := <-errs:
			return st, err
		case <-ctx.Done():
			return st, fmt.Errorf("sending: %w", ctx.Err())
		}
		if o.Persistent && tx == "" {
			txSeq++
			tx = "bench-tx-" + strconv.Itoa(txSeq)
			if err := c.Write(ctx, frame.New(frame.BEGIN, frame.Transaction, tx)); err != nil {
				return st, err
			}
		}
		f := frame.New(frame.SEND, frame.Destination, o.Dest,
			HeaderPhase, tag,
			HeaderSeq, strconv.Itoa(i),
			HeaderTS, strconv.FormatInt(time.Now().UnixNano(), 10))
		f.Body = o.Body
		if o.Persistent {
			f.Header.Add("persistent", "true")
			f.Header.Add(frame.Transaction, tx)
		}
		i++
		unconfirmed++
		// Ask for a confirmation when k messages are out and at the end. A
		// paced persistent burst also ends its transaction, so that no message
		// waits for the next burst in an open transaction.
		confirm := unconfirmed == k || i == o.N || (o.Persistent && o.Rate > 0 && i >= due)
		switch {
		case !confirm:
			if err := c.Write(ctx, f); err != nil {
				return st, err
			}
		case o.Persistent:
			if err := c.Write(ctx, f); err != nil {
				return st, err
			}
			if err := c.WriteReceipt(ctx, frame.New(frame.COMMIT, frame.Transaction, tx), release(unconfirmed)); err != nil {
				return st, err
			}
			tx, unconfirmed = "", 0
		default:
			if err := c.WriteReceipt(ctx, f, release(unconfirmed)); err != nil {
				return st, err
			}
			unconfirmed = 0
		}
	}
	for range cap(sem) {
		select {
		case sem <- struct{}{}:
		case err := <-errs:
			return st, err
		case <-ctx.Done():
			return st, fmt.Errorf("waiting for receipts: %w", ctx.Err())
		}
	}
	st.End = time.Now()
	return st, nil
}

// phaseRecv is what a consumer saw of one phase.
type phaseRecv struct {
	n        int
	count    []uint8 // receptions per seq (saturating)
	lat      []int64 // latency of the first reception, ns
	distinct int
	dups     int
	bad      int // seq outside [0, n) or unparsable
	last     time.Time
	complete chan struct{} // closed when distinct reaches n
}

// Recorder keeps what one consumer received, per phase: which sequence numbers
// arrived how often, and the latency of each first arrival.
type Recorder struct {
	mu      sync.Mutex
	ph      [NumPhases]*phaseRecv
	foreign int // messages without a known phase tag
}

// Expect prepares the bookkeeping for phase p of n messages; call it before
// sending that phase.
func (c *Recorder) Expect(p Phase, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ph[p] = &phaseRecv{n: n, count: make([]uint8, n), lat: make([]int64, n), complete: make(chan struct{})}
}

// record counts one message with the given header values, received at now.
func (c *Recorder) record(phase, seqText, tsText string, now time.Time) {
	p, ok := phaseOf(phase)
	seq, err1 := strconv.Atoi(seqText)
	ts, err2 := strconv.ParseInt(tsText, 10, 64)
	c.mu.Lock()
	defer c.mu.Unlock()
	var r *phaseRecv
	if ok {
		r = c.ph[p]
	}
	switch {
	case r == nil:
		c.foreign++
	case err1 != nil || err2 != nil || seq < 0 || seq >= r.n:
		r.bad++
	default:
		if r.count[seq] < 255 {
			r.count[seq]++
		}
		if r.count[seq] > 1 {
			r.dups++
			return
		}
		r.lat[seq] = now.UnixNano() - ts
		r.distinct++
		r.last = now
		if r.distinct == r.n {
			close(r.complete)
		}
	}
}

// wait waits until every message of phase p arrived, or until nothing new
// arrived for stall, or ctx or gone ends. It reports whether all arrived.
func (c *Recorder) wait(ctx context.Context, p Phase, stall time.Duration, gone <-chan struct{}) bool {
	c.mu.Lock()
	r := c.ph[p]
	c.mu.Unlock()
	t := time.NewTicker(stall / 4)
	defer t.Stop()
	lastN, lastChange := -1, time.Now()
	for {
		select {
		case <-r.complete:
			return true
		case <-ctx.Done():
			return false
		case <-gone:
			return false
		case now := <-t.C:
			c.mu.Lock()
			n := r.distinct
			c.mu.Unlock()
			if n != lastN {
				lastN, lastChange = n, now
			} else if now.Sub(lastChange) >= stall {
				return false
			}
		}
	}
}

// PhaseResult summarises one phase.
type PhaseResult struct {
	N, Distinct, Lost, Dups, Bad int
	Last                         time.Time // last first-time reception
	P50, P99, Max                time.Duration
}

// Result returns the summary of phase p.
func (c *Recorder) Result(p Phase) PhaseResult {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.ph[p]
	if r == nil {
		return PhaseResult{}
	}
	res := PhaseResult{N: r.n, Distinct: r.distinct, Lost: r.n - r.distinct, Dups: r.dups, Bad: r.bad, Last: r.last}
	lat := make([]int64, 0, r.distinct)
	for i, k := range r.count {
		if k > 0 {
			lat = append(lat, r.lat[i])
		}
	}
	if len(lat) > 0 {
		slices.Sort(lat)
		res.P50 = time.Duration(lat[(len(lat)-1)/2])
		res.P99 = time.Duration(lat[max(0, int(math.Ceil(0.99*float64(len(lat))))-1)])
		res.Max = time.Duration(lat[len(lat)-1])
	}
	return res
}

// Latencies returns the latency of each message of phase p by sequence
// number, -1 for one that never arrived.
func (c *Recorder) Latencies(p Phase) []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.ph[p]
	if r == nil {
		return nil
	}
	out := make([]time.Duration, r.n)
	for i, k := range r.count {
		out[i] = -1
		if k > 0 {
			out[i] = time.Duration(r.lat[i])
		}
	}
	return out
}

// Foreign is the number of messages that carried no known phase tag.
func (c *Recorder) Foreign() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.foreign
}

// Consumer records what arrives on one subscription (ack mode auto).
type Consumer struct {
	Recorder
	conn *stomp.Conn
	done chan struct{}
}

// Subscribe connects to uri and subscribes to dest with ack mode auto and the
// given ActiveMQ prefetch (0: the broker's default, 1000 for queues). The
// subscription is in place when it returns.
//
// With ack mode auto ActiveMQ acknowledges each message itself as it dispatches
// it (StompSubscription.onMessageDispatch), so the prefetch never fills; it is
// set anyway so that no broker-side limit of the consumer can cap a path.
func Subscribe(ctx context.Context, uri, dest string, prefetch int) (*Consumer, error) {
	conn, err := Dial(ctx, uri)
	if err != nil {
		return nil, err
	}
	c := &Consumer{conn: conn, done: make(chan struct{})}
	sctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	var headers []string
	if prefetch > 0 {
		headers = append(headers, "activemq.prefetchSize", strconv.Itoa(prefetch))
	}
	if err := conn.Subscribe(sctx, "bench", dest, "auto", headers...); err != nil {
		conn.Abort()
		return nil, err
	}
	go c.run()
	return c, nil
}

func (c *Consumer) run() {
	defer close(c.done)
	for f := range c.conn.Deliveries() {
		c.record(f.Header.Get(HeaderPhase), f.Header.Get(HeaderSeq), f.Header.Get(HeaderTS), time.Now())
	}
}

// Wait waits until every message of phase p arrived, or until nothing new
// arrived for stall, or ctx ends, or the connection ended. It reports whether
// all arrived.
func (c *Consumer) Wait(ctx context.Context, p Phase, stall time.Duration) bool {
	return c.wait(ctx, p, stall, c.done)
}

// Close disconnects the consumer.
func (c *Consumer) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c.conn.Close(ctx)
	c.conn.Abort()
	<-c.done
}

// ModuleRoot walks up from the working directory to the directory holding go.mod.
func ModuleRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", errors.New("go.mod not found above " + wd)
		}
	}
}

// BuildBrokernet builds ./cmd/brokernet of the module into dir and returns the
// binary's path.
func BuildBrokernet(dir string) (string, error) {
	root, err := ModuleRoot()
	if err != nil {
		return "", err
	}
	gotool, err := exec.LookPath("go")
	if err != nil {
		gotool = filepath.Join(os.Getenv("GOROOT"), "bin", "go")
	}
	bin := filepath.Join(dir, "brokernet")
	cmd := exec.Command(gotool, "build", "-o", bin, "./cmd/brokernet")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/brokernet: %v\n%s", err, out)
	}
	return bin, nil
}

// StopBrokernet stops a brokernet process the way an operator does: SIGINT,
// which drains its bridges, then SIGKILL if it has not ended within grace.
// It returns once the process is gone.
func StopBrokernet(cmd *exec.Cmd, grace time.Duration) {
	cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(grace):
		cmd.Process.Kill()
		<-done
	}
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
	max int
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.max {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

// Bridge is a running `brokernet bridge` subprocess.
type Bridge struct {
	cmd    *exec.Cmd
	stderr *tailBuffer
	waited chan struct{}
	werr   error
}

// BridgeUsage is what the bridge process used over its whole life.
type BridgeUsage struct {
	CPU      time.Duration // user + system
	MaxRSS   int64         // KiB
	ExitCode int
}

// StartBridge runs bin with args. It dies with the benchmark process (Pdeathsig).
func StartBridge(bin string, args ...string) (*Bridge, error) {
	cmd := exec.Command(bin, args...)
	br := &Bridge{cmd: cmd, stderr: &tailBuffer{max: 64 << 10}, waited: make(chan struct{})}
	cmd.Stdout = br.stderr
	cmd.Stderr = br.stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		br.werr = cmd.Wait()
		close(br.waited)
	}()
	return br, nil
}

// Pid is the bridge's process id.
func (br *Bridge) Pid() int { return br.cmd.Process.Pid }

// Exited is closed when the process has ended.
func (br *Bridge) Exited() <-chan struct{} { return br.waited }

// ExitSummary says how the process ended and quotes the last line it wrote, for
// a table row; "" while it runs.
func (br *Bridge) ExitSummary() string {
	select {
	case <-br.waited:
	default:
		return ""
	}
	return fmt.Sprintf("brokernet exited (code %d): %s", br.usage().ExitCode, br.LastLine())
}

// LastLine is the last line the process wrote, shortened to 200 bytes.
func (br *Bridge) LastLine() string {
	last := ""
	for _, l := range strings.Split(strings.TrimSpace(br.Output()), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			last = l
		}
	}
	if len(last) > 200 {
		last = last[:200] + "…"
	}
	return last
}

// Output is the tail of its stdout and stderr.
func (br *Bridge) Output() string { return br.stderr.String() }

// Stop sends SIGTERM, waits up to timeout for the drain (then SIGKILL), and
// returns the process's resource usage.
func (br *Bridge) Stop(timeout time.Duration) (BridgeUsage, error) {
	select {
	case <-br.waited:
	default:
		br.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-br.waited:
		case <-time.After(timeout):
			br.cmd.Process.Kill()
			<-br.waited
			return br.usage(), fmt.Errorf("brokernet did not exit within %s of SIGTERM; killed", timeout)
		}
	}
	u := br.usage()
	if br.werr != nil {
		return u, fmt.Errorf("brokernet exited: %v", br.werr)
	}
	return u, nil
}

// Kill ends the process at once (cleanup after a failure).
func (br *Bridge) Kill() {
	select {
	case <-br.waited:
	default:
		br.cmd.Process.Kill()
		<-br.waited
	}
}

func (br *Bridge) usage() BridgeUsage {
	ps := br.cmd.ProcessState
	if ps == nil {
		return BridgeUsage{ExitCode: -1}
	}
	u := BridgeUsage{ExitCode: ps.ExitCode(), CPU: ps.UserTime() + ps.SystemTime()}
	if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
		u.MaxRSS = ru.Maxrss
		u.CPU = time.Duration(syscall.TimevalToNsec(ru.Utime) + syscall.TimevalToNsec(ru.Stime))
	}
	return u
}

// ProcRSS is the resident set size of process pid in KiB (VmRSS of
// /proc/PID/status); 0 if it cannot be read.
func ProcRSS(pid int) int64 {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return n
		}
	}
	return 0
}

// ProcCPU is the user+system CPU time of process pid so far, from
// /proc/PID/stat (10 ms resolution); 0 if it cannot be read.
func ProcCPU(pid int) time.Duration {
	if pid <= 0 {
		return 0
	}
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	return statCPU(string(data))
}

// statCPU is utime+stime of a /proc/PID/stat or /proc/PID/task/TID/stat line.
func statCPU(stat string) time.Duration {
	// Fields after the parenthesised command (which may hold spaces): state is
	// field 3; utime and stime are fields 14 and 15.
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(stat[i+1:])
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	const hz = 100 // USER_HZ on Linux
	return time.Duration(ut+st) * time.Second / hz
}

// CPUSample is the CPU time used so far by the processes a path runs on, and
// by the machine as a whole; the difference of two samples is what a phase cost.
type CPUSample struct {
	At                       time.Time
	BrokerA, BrokerB, Bridge time.Duration // from /proc/PID/stat, 10 ms resolution
	Bench                    time.Duration // this process (producer, consumer, bookkeeping), getrusage
	Machine                  time.Duration // all cores, /proc/stat
	// IOA, IOB and IOBridge count the read and write system calls of the
	// brokers and the bridge (/proc/PID/io): how many segments and wake-ups
	// a message costs each of them.
	IOA, IOB, IOBridge IOCalls

	// JVMA and JVMB split the brokers' CPU time by thread kind.
	JVMA, JVMB JVMThreads
}

// IOCalls counts read-like and write-like system calls (/proc/PID/io syscr
// and syscw: read, readv, recv… and write, writev, send…).
type IOCalls struct{ Reads, Writes int64 }

// ProcIO returns the I/O system calls process pid made so far (zero if it
// cannot be read).
func ProcIO(pid int) IOCalls {
	if pid <= 0 {
		return IOCalls{}
	}
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/io")
	if err != nil {
		return IOCalls{}
	}
	var c IOCalls
	for line := range strings.Lines(string(data)) {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ": ")
		if !ok {
			continue
		}
		n, _ := strconv.ParseInt(v, 10, 64)
		switch k {
		case "syscr":
			c.Reads = n
		case "syscw":
			c.Writes = n
		}
	}
	return c
}

func (c IOCalls) sub(o IOCalls) IOCalls { return IOCalls{c.Reads - o.Reads, c.Writes - o.Writes} }

// TakeCPU samples the CPU time of the given processes (0: none), this process
// and the machine, and the given processes' I/O system calls.
func TakeCPU(pidA, pidB, pidBridge int) CPUSample {
	return CPUSample{
		At:      time.Now(),
		BrokerA: ProcCPU(pidA),
		BrokerB: ProcCPU(pidB),
		Bridge:  ProcCPU(pidBridge),
		Bench:   SelfCPU(),
		Machine: MachineCPU(),

		IOA:      ProcIO(pidA),
		IOB:      ProcIO(pidB),
		IOBridge: ProcIO(pidBridge),

		JVMA: JVMThreadCPU(pidA),
		JVMB: JVMThreadCPU(pidB),
	}
}

// Sub returns the CPU used between earlier sample o and s.
func (s CPUSample) Sub(o CPUSample) CPUUse {
	return CPUUse{
		Wall:    s.At.Sub(o.At),
		BrokerA: s.BrokerA - o.BrokerA,
		BrokerB: s.BrokerB - o.BrokerB,
		Bridge:  s.Bridge - o.Bridge,
		Bench:   s.Bench - o.Bench,
		Machine: s.Machine - o.Machine,

		IOA:      s.IOA.sub(o.IOA),
		IOB:      s.IOB.sub(o.IOB),
		IOBridge: s.IOBridge.sub(o.IOBridge),

		JVMA: s.JVMA.sub(o.JVMA),
		JVMB: s.JVMB.sub(o.JVMB),
	}
}

// CPUUse is the CPU time spent during one phase, and the I/O system calls
// made in it.
type CPUUse struct {
	Wall                                     time.Duration
	BrokerA, BrokerB, Bridge, Bench, Machine time.Duration
	IOA, IOB, IOBridge                       IOCalls
	JVMA, JVMB                               JVMThreads
}

// Other is the machine's CPU time not spent by the measured processes: kernel
// threads (KahaDB fsync), other sessions on the machine.
func (u CPUUse) Other() time.Duration {
	return max(0, u.Machine-u.BrokerA-u.BrokerB-u.Bridge-u.Bench)
}

// SelfCPU is this process's user+system CPU time so far.
func SelfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(syscall.TimevalToNsec(ru.Utime) + syscall.TimevalToNsec(ru.Stime))
}

// MachineCPU is the total busy (non-idle) CPU time of the machine so far, from
// /proc/stat.
func MachineCPU() time.Duration {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(data), "\n")
	f := strings.Fields(line)
	if len(f) < 5 || f[0] != "cpu" {
		return 0
	}
	var busy int64
	// user nice system idle iowait irq softirq steal guest guest_nice; guest
	// time is already part of user.
	for _, j := range []int{0, 1, 2, 5, 6, 7} {
		if j+1 < len(f) {
			v, _ := strconv.ParseInt(f[j+1], 10, 64)
			busy += v
		}
	}
	return time.Duration(busy) * time.Second / 100
}

// WaitQuiet samples the machine's busy share (0..1 of all cores) over 1 s
// windows until it is below threshold or maxWait has passed, and returns the
// last sample and the time spent waiting.
func WaitQuiet(maxWait time.Duration, threshold float64, cores int) (float64, time.Duration) {
	t0 := time.Now()
	for {
		b0, w0 := MachineCPU(), time.Now()
		time.Sleep(time.Second)
		busy := (MachineCPU() - b0).Seconds() / (time.Since(w0).Seconds() * float64(cores))
		if busy < threshold || time.Since(t0) >= maxWait {
			return busy, time.Since(t0)
		}
	}
}
