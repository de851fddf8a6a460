// Package quickack keeps a TCP connection acknowledging what it reads promptly,
// and not more often than that, with socket calls that do not wake the Go
// runtime's monitor thread.
package quickack

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

// DefaultInterval is how often at most a connection acknowledges on its own
// initiative: a read sooner after the last acknowledgement leaves it to a
// timer that acknowledges when the interval is over, so nothing read waits
// longer than this for its ACK.
const DefaultInterval = 250 * time.Microsecond

// Wrap returns nc with its reads acknowledged at once, or within
// DefaultInterval of the last acknowledgement (nc itself if it is not a TCP
// connection).
//
// Brokers in their default configuration (ActiveMQ without
// transport.tcpNoDelay, on its STOMP and OpenWire connectors alike) write small
// frames — RECEIPTs, MESSAGEs, Responses — with Nagle's algorithm on: the next
// small segment waits until the previous one is acknowledged. The bridge
// writes rarely on the connections it mostly reads (one cumulative ACK per
// batch), so the kernel delays its ACKs (40 ms, growing to 200 ms, on Linux),
// and each such wait stalls the broker's next write. Measured here with one
// default-config ActiveMQ and cumulative ACKs every 200 messages at 2,000
// msg/s: p50 10.2 ms without, 0.14–0.18 ms with an ACK after every read. Over
// OpenWire without it the paced 2,000 msg/s bench showed stalls of up to
// 200 ms (Linux's longest ACK delay).
//
// An ACK after every read is too many while the broker streams: a reader that
// keeps up acknowledges each frame at once, which releases the broker's next
// small write at once, which wakes the reader for that one frame — one
// segment, one wake-up and one ACK per message on both sides, and the broker
// pays for it. Linux does the same by itself whenever a read empties the
// socket, unless the connection is in its delayed-ACK ("pingpong") mode. So
// every acknowledgement here sets TCP_QUICKACK (send the ACK now) and clears
// it again (back to delayed mode), and the reads between two of them, within
// the interval, share the timer's one. On the bench's direct path (one
// ActiveMQ, 1 KiB messages, full speed; perf stat per message, interleaved
// runs) the harness's consumer then read 0.14–0.40 times per message instead
// of 0.57–1.79 and the broker sent 0.07–0.17 packets per message instead of
// 0.26–0.76, close to a go-stomp consumer (0.06–0.09); at 2,000 msg/s p50 was
// 1.0–1.3 ms, as with an ACK after every read (bench/history/2026-12-02.md).
func Wrap(nc net.Conn) net.Conn {
	tc, ok := nc.(*net.TCPConn)
	if !ok {
		return nc
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return nc
	}
	q := &quickAck{Conn: nc, raw: raw, interval: DefaultInterval}
	q.setDelayed()
	return q
}

type quickAck struct {
	net.Conn
	raw      syscall.RawConn
	interval time.Duration

	mu      sync.Mutex
	ackedAt time.Time   // when a read or the timer last acknowledged
	timer   *time.Timer // the deferred acknowledgement; nil until the first
	due     bool        // timer is pending
	closed  bool
	acks    atomic.Int64 // acknowledgements so far, for tests
}

// Read reads from the connection and, if it got data, acknowledges now or,
// within interval of the last acknowledgement, when the interval is over.
//
// Reads and writes go to the socket as raw system calls, which the runtime
// does not bracket with entersyscall/exitsyscall. The socket is non-blocking
// (the runtime's poller waits for it, deadlines included), so a call never
// blocks and needs no bracket. The bracket is what costs: the first system
// call after the process was idle wakes the runtime's monitor thread (sysmon),
// which then polls every 20 µs until the process is idle again. A bridge
// forwarding a paced stream is idle between messages, so it paid that wake-up
// (a futex wake, a context switch, one or two nanosleeps) on every message: a
// third of its CPU at 2,000 msg/s under perf. With raw calls its CPU per
// message fell from 50 to 24–30 µs over STOMP and from 64–69 to 46–48 µs over
// OpenWire (bench A/B, bench/history/2026-12-02.md 08:34).
func (q *quickAck) Read(p []byte) (int, error) {
	n, err := q.rawRead(p)
	if n > 0 {
		q.read()
	}
	return n, err
}

func (q *quickAck) rawRead(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	var n int
	var errno syscall.Errno
	err := q.raw.Read(func(fd uintptr) bool {
		for {
			r, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
			switch e {
			case syscall.EINTR:
				continue
			case syscall.EAGAIN:
				return false
			}
			n, errno = int(r), e
			return true
		}
	})
	switch {
	case err != nil:
		return 0, q.opError("read", err)
	case errno != 0:
		return 0, q.opError("read", errno)
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

// Write writes p to the socket with raw system calls (see Read).
func (q *quickAck) Write(p []byte) (int, error) {
	written := 0
	var errno syscall.Errno
	err := q.raw.Write(func(fd uintptr) bool {
		for written < len(p) {
			rest := p[written:]
			r, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&rest[0])), uintptr(len(rest)))
			switch e {
			case 0:
				written += int(r)
			case syscall.EINTR:
			case syscall.EAGAIN:
				return false
			default:
				errno = e
				return true
			}
		}
		return true
	})
	switch {
	case err != nil:
		return written, q.opError("write", err)
	case errno != 0:
		return written, q.opError("write", errno)
	}
	return written, nil
}

// opError reports err as net.Conn's methods do: a *net.OpError whose Err is
// the cause (os.ErrDeadlineExceeded, net.ErrClosed or an errno), so that
// errors.Is and net.Error's Timeout work on it as on any connection's errors.
func (q *quickAck) opError(op string, err error) error {
	if oe, ok := err.(*net.OpError); ok {
		err = oe.Err // the raw connection's "raw-read"/"raw-write" wrapper
	}
	return &net.OpError{Op: op, Net: "tcp", Source: q.LocalAddr(), Addr: q.RemoteAddr(), Err: err}
}

func (q *quickAck) read() {
	now := time.Now()
	q.mu.Lock()
	if now.Sub(q.ackedAt) >= q.interval {
		q.ackedAt = now
		q.mu.Unlock()
		q.ack()
		return
	}
	if !q.due && !q.closed {
		q.due = true
		d := q.ackedAt.Add(q.interval).Sub(now)
		if q.timer == nil {
			q.timer = time.AfterFunc(d, q.deferred)
		} else {
			q.timer.Reset(d)
		}
	}
	q.mu.Unlock()
}

// deferred is the timer's acknowledgement, for the reads since the last one.
func (q *quickAck) deferred() {
	q.mu.Lock()
	q.due = false
	q.ackedAt = time.Now()
	closed := q.closed
	q.mu.Unlock()
	if !closed {
		q.ack()
	}
}

// Close stops a pending deferred acknowledgement and closes the connection.
func (q *quickAck) Close() error {
	q.mu.Lock()
	q.closed = true
	if q.timer != nil {
		q.timer.Stop()
	}
	q.mu.Unlock()
	return q.Conn.Close()
}

// ack sends the ACK for what has been read, if one is pending and nothing
// more waits unread (Linux: setting TCP_QUICKACK leaves delayed mode and
// sends a scheduled ACK), and returns the connection to delayed mode, so that
// the kernel does not acknowledge every following read by itself.
func (q *quickAck) ack() {
	q.acks.Add(1)
	q.raw.Control(func(fd uintptr) {
		setQuickAck(fd, 1)
		setQuickAck(fd, 0)
	})
}

// setQuickAck sets TCP_QUICKACK with a raw system call (see Read).
func setQuickAck(fd uintptr, v int32) {
	syscall.RawSyscall6(syscall.SYS_SETSOCKOPT, fd, syscall.IPPROTO_TCP, syscall.TCP_QUICKACK,
		uintptr(unsafe.Pointer(&v)), unsafe.Sizeof(v), 0)
}

// setDelayed puts the connection in delayed-ACK mode.
func (q *quickAck) setDelayed() {
	q.raw.Control(func(fd uintptr) { setQuickAck(fd, 0) })
}
