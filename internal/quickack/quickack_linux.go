// Package quickack keeps a TCP connection acknowledging what it reads promptly,
// and not more often than that.
package quickack

import (
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
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
// 1.0–1.3 ms, as with an ACK after every read (bench/RESULTS.md, 2026-12-02).
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
func (q *quickAck) Read(p []byte) (int, error) {
	n, err := q.Conn.Read(p)
	if n > 0 {
		q.read()
	}
	return n, err
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
		syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_QUICKACK, 1)
		syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_QUICKACK, 0)
	})
}

// setDelayed puts the connection in delayed-ACK mode.
func (q *quickAck) setDelayed() {
	q.raw.Control(func(fd uintptr) {
		syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_QUICKACK, 0)
	})
}
