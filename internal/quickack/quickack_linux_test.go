package quickack

import (
	"io"
	"net"
	"syscall"
	"testing"
	"time"
)

func TestReadRearmsQuickAck(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		c.Write([]byte("frame"))
		io.Copy(io.Discard, c)
	}()
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	q := Wrap(nc)
	if _, ok := q.(*quickAck); !ok {
		t.Fatalf("Wrap of a TCP connection gave %T", q)
	}
	buf := make([]byte, 5)
	if _, err := io.ReadFull(q, buf); err != nil {
		t.Fatal(err)
	}
	raw, err := nc.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var v int
	var gerr error
	raw.Control(func(fd uintptr) { v, gerr = syscall.GetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_QUICKACK) })
	if gerr != nil || v != 1 {
		t.Fatalf("TCP_QUICKACK after a read: %d (%v), want 1", v, gerr)
	}
}

func TestWrapLeavesOtherConnections(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if Wrap(a) != a {
		t.Fatal("Wrap changed a connection that is not TCP")
	}
}

// pairConn returns a client connection wrapped with the given interval and the
// server's end, which writes whatever is sent on its channel.
func pairConn(t *testing.T, interval time.Duration) (*quickAck, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	srv, ok := <-accepted
	if !ok {
		t.Fatal("accept failed")
	}
	q := Wrap(nc).(*quickAck)
	q.interval = interval
	t.Cleanup(func() { q.Close(); srv.Close() })
	return q, srv
}

// readOne has the server write one byte and the client read it.
func readOne(t *testing.T, q *quickAck, srv net.Conn) {
	t.Helper()
	if _, err := srv.Write([]byte{'x'}); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(q, make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
}

func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %s", timeout, what)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestReadsWithinTheIntervalShareOneDeferredSetting(t *testing.T) {
	q, srv := pairConn(t, time.Hour)
	if got := q.arms.Load(); got != 1 {
		t.Fatalf("Wrap set the flag %d times, want 1", got)
	}
	readOne(t, q, srv) // the first read sets it at once
	for range 5 {
		readOne(t, q, srv)
	}
	if got := q.arms.Load(); got != 2 {
		t.Fatalf("flag set %d times after six reads within the interval, want 2 (Wrap and the first read)", got)
	}
	q.mu.Lock()
	due := q.due
	q.mu.Unlock()
	if !due {
		t.Fatal("reads within the interval left no deferred setting")
	}
}

func TestDeferredSettingComesWhenTheIntervalEnds(t *testing.T) {
	q, srv := pairConn(t, 20*time.Millisecond)
	readOne(t, q, srv)
	readOne(t, q, srv)
	// However the two reads were spaced, the flag is set for the second one:
	// at once if it came after the interval, by the timer otherwise.
	waitFor(t, 5*time.Second, "no setting for the second read", func() bool { return q.arms.Load() == 3 })
	time.Sleep(50 * time.Millisecond)
	if got := q.arms.Load(); got != 3 {
		t.Fatalf("flag set %d times for two reads, want 3 (Wrap and one per read)", got)
	}
}

func TestCloseCancelsTheDeferredSetting(t *testing.T) {
	q, srv := pairConn(t, 50*time.Millisecond)
	readOne(t, q, srv)
	readOne(t, q, srv)
	q.Close()
	n := q.arms.Load()
	time.Sleep(100 * time.Millisecond)
	if got := q.arms.Load(); got != n {
		t.Fatalf("flag set %d times after Close, want none", got-n)
	}
}
