package testbroker

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// Ports are picked at random below the kernel's ephemeral range, so that
// outgoing connections (which take ephemeral ports) can never grab a port
// between the moment it is handed out and the moment the broker binds it.
// Within a process a port is handed out at most once; across processes
// (go test runs packages in parallel) a reservation file per port in
// $TMPDIR/brokernet-testbroker-ports holds the owning pid.

const (
	portRangeLow  = 20000
	portRangeHigh = 32000 // exclusive; lowered further if the ephemeral range starts below it
)

// defaultPorts are brokers' well-known ports, never handed out: a system
// broker may hold them, and testdata/rabbitmq.sh refuses them (25672,
// RabbitMQ's distribution port, lies in the range above).
var defaultPorts = map[int]bool{
	1883: true, 4369: true, 5671: true, 5672: true, 8161: true, 15672: true,
	25672: true, 61613: true, 61614: true, 61616: true, 61617: true,
}

var (
	portMu    sync.Mutex
	usedPorts = map[int]bool{}
	pruneOnce sync.Once
)

func reservationDir() string {
	return filepath.Join(os.TempDir(), "brokernet-testbroker-ports")
}

// pruneReservations removes the reservations of processes that are gone.
func pruneReservations() {
	dir := reservationDir()
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		path := filepath.Join(dir, e.Name())
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		if owner, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && owner > 0 && !processExists(owner) {
			os.Remove(path)
		}
	}
}

// FreePort returns a free TCP port on 127.0.0.1, failing the test if none can be found.
func FreePort(tb testing.TB) int {
	tb.Helper()
	ports, err := FreePorts(1)
	if err != nil {
		tb.Fatalf("testbroker: %v", err)
	}
	return ports[0]
}

// FreePorts returns n distinct free TCP ports on 127.0.0.1. A port is never
// returned twice within one process.
func FreePorts(n int) ([]int, error) {
	portMu.Lock()
	defer portMu.Unlock()
	pruneOnce.Do(pruneReservations)
	lo, hi := portRange()
	out := make([]int, 0, n)
	for attempts := 0; len(out) < n; attempts++ {
		if attempts > 5000 {
			return nil, fmt.Errorf("no free port found in [%d,%d) after %d attempts", lo, hi, attempts)
		}
		var p int
		if hi-lo < 1000 {
			// Odd ephemeral range configuration: let the kernel choose.
			var err error
			if p, err = kernelPort(); err != nil {
				return nil, err
			}
		} else {
			p = lo + rand.IntN(hi-lo)
		}
		if defaultPorts[p] || usedPorts[p] || !canListen(p) || !reservePort(p) {
			continue
		}
		usedPorts[p] = true
		out = append(out, p)
	}
	return out, nil
}

func portRange() (lo, hi int) {
	lo, hi = portRangeLow, portRangeHigh
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if eph, err := strconv.Atoi(f[0]); err == nil && eph < hi {
				hi = eph
			}
		}
	}
	return lo, hi
}

func canListen(p int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
	if err != nil {
		return false
	}
	l.Close()
	return true
}

func kernelPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// reservePort claims p across processes. Reservations of dead processes are
// taken over. If the reservation directory is unusable, it claims nothing and
// reports success (the in-process set still applies).
func reservePort(p int) bool {
	dir := reservationDir()
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return true
	}
	path := filepath.Join(dir, strconv.Itoa(p))
	me := strconv.Itoa(os.Getpid())
	for range 2 {
		// Write the pid to a private file, then hard-link it into place: the
		// link is atomic and fails if the port is already reserved, and a
		// reservation is never seen half-written.
		tmp, err := os.CreateTemp(dir, ".tmp-")
		if err != nil {
			return true
		}
		_, werr := tmp.WriteString(me)
		tmp.Close()
		lerr := os.Link(tmp.Name(), path)
		os.Remove(tmp.Name())
		if werr != nil {
			return true
		}
		if lerr == nil {
			return true
		}
		if !errors.Is(lerr, os.ErrExist) {
			return true
		}
		b, rerr := os.ReadFile(path)
		if rerr != nil {
			continue // removed concurrently: retry
		}
		owner, aerr := strconv.Atoi(strings.TrimSpace(string(b)))
		if aerr == nil && owner == os.Getpid() {
			return true
		}
		if aerr == nil && owner > 0 && processExists(owner) {
			return false
		}
		os.Remove(path) // stale: take it over
	}
	return false
}

func processExists(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
