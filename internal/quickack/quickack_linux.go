// Package quickack keeps a TCP connection acknowledging what it reads promptly.
package quickack

import (
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// DefaultInterval is how often at most a connection's reads set TCP_QUICKACK:
// a read sooner after the last setting leaves it to a timer that sets it when
// the interval is over, so no acknowledgement waits longer than this.
//
// Setting it after every read, as brokernet first did, paces a broker that
// writes with Nagle's algorithm on to one frame per segment while the reader
// keeps up: each read acknowledges at once, which releases the broker's next
// small write at once, which wakes the reader for that one frame. On the
// bench's direct path at full speed (one ActiveMQ, 1 KiB messages, the
// harness's consumer) that cost 0.7–0.9 reads and 0.3–0.4 setsockopt calls per
// message in the reader, 0.3–0.4 packets per message from the broker, and
// reached 6,500–11,200 msg/s; with this interval 0.1–0.3 reads, 0.02–0.06
// setsockopt, 0.15–0.18 packets and 12,500–17,100 msg/s (bench/RESULTS.md,
// 2026-12-02). At 2,000 msg/s the p50 latency stayed at 1.3–1.5 ms either way;
// without TCP_QUICKACK it reaches 10–12 ms.
const DefaultInterval = time.Millisecond

// Wrap returns nc with its reads setting TCP_QUICKACK at most once per
// DefaultInterval (nc itself if it is not a TCP connection).
//
// Brokers in their default configuration (ActiveMQ without
// transport.tcpNoDelay, on its STOMP and OpenWire connectors alike) write small
// frames — RECEIPTs, MESSAGEs, Responses — with Nagle's algorithm on: the next
// segment waits until the previous one is acknowledged. The bridge writes
// rarely on the connections it mostly reads (one cumulative ACK per batch), so
// the kernel delays its ACKs (40 ms, growing to 200 ms, on Linux), and each
// such wait stalls the broker's next write. Measured here with one
// default-config ActiveMQ and cumulative ACKs every 200 messages at 2,000
// msg/s: p50 10.2 ms without, 0.14–0.18 ms with TCP_QUICKACK re-armed after
// every read. Linux clears the flag by itself, hence it is set again after
// reads. Over OpenWire without it the paced 2,000 msg/s bench showed stalls of
// up to 200 ms (Linux's longest ACK delay).
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
	q.arm()
	return q
}

type quickAck struct {
	net.Conn
	raw      syscall.RawConn
	interval time.Duration

	mu      sync.Mutex
	armedAt time.Time   // when a read or the timer last set the flag
	timer   *time.Timer // the deferred setting; nil until the first
	due     bool        // timer is pending
	closed  bool
	arms    atomic.Int64 // settings so far, for tests
}

// Read reads from the connection and, if it got data, sets TCP_QUICKACK now
// or, within interval of the last setting, when the interval is over.
// Setting it makes Linux acknowledge what has been read at once (unless more
// waits unread) and leave its delayed-acknowledgement (pingpong) mode.
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
	if now.Sub(q.armedAt) >= q.interval {
		q.armedAt = now
		q.mu.Unlock()
		q.arm()
		return
	}
	if !q.due && !q.closed {
		q.due = true
		d := q.armedAt.Add(q.interval).Sub(now)
		if q.timer == nil {
			q.timer = time.AfterFunc(d, q.deferred)
		} else {
			q.timer.Reset(d)
		}
	}
	q.mu.Unlock()
}

// deferred is the timer's setting, for the reads since the last one.
func (q *quickAck) deferred() {
	q.mu.Lock()
	q.due = false
	q.armedAt = time.Now()
	closed := q.closed
	q.mu.Unlock()
	if !closed {
		q.arm()
	}
}

// Close stops a pending deferred setting and closes the connection.
func (q *quickAck) Close() error {
	q.mu.Lock()
	q.closed = true
	if q.timer != nil {
		q.timer.Stop()
	}
	q.mu.Unlock()
	return q.Conn.Close()
}

func (q *quickAck) arm() {
	q.arms.Add(1)
	q.raw.Control(func(fd uintptr) {
		syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_QUICKACK, 1)
	})
}
