package quickack

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"
)

func TestReadAcknowledgesAndKeepsDelayedMode(t *testing.T) {
	q, srv := pairConn(t, DefaultInterval)
	readOne(t, q, srv)
	if got := q.acks.Load(); got != 1 {
		t.Fatalf("%d acknowledgements after the first read, want 1", got)
	}
	var v int
	var gerr error
	q.raw.Control(func(fd uintptr) { v, gerr = syscall.GetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_QUICKACK) })
	// Linux reads TCP_QUICKACK back as "not in delayed-ACK (pingpong) mode".
	if gerr != nil || v != 0 {
		t.Fatalf("TCP_QUICKACK after an acknowledgement: %d (%v), want 0 (delayed mode)", v, gerr)
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

func TestReadsWithinTheIntervalShareOneDeferredAcknowledgement(t *testing.T) {
	q, srv := pairConn(t, time.Hour)
	readOne(t, q, srv) // the first read acknowledges at once
	for range 5 {
		readOne(t, q, srv)
	}
	if got := q.acks.Load(); got != 1 {
		t.Fatalf("%d acknowledgements after six reads within the interval, want 1 (the first read's)", got)
	}
	q.mu.Lock()
	due := q.due
	q.mu.Unlock()
	if !due {
		t.Fatal("reads within the interval left no deferred acknowledgement")
	}
}

func TestDeferredAcknowledgementComesWhenTheIntervalEnds(t *testing.T) {
	q, srv := pairConn(t, 20*time.Millisecond)
	readOne(t, q, srv)
	readOne(t, q, srv)
	// However the two reads were spaced, the second one is acknowledged: at
	// once if it came after the interval, by the timer otherwise.
	waitFor(t, 5*time.Second, "no acknowledgement for the second read", func() bool { return q.acks.Load() == 2 })
	time.Sleep(50 * time.Millisecond)
	if got := q.acks.Load(); got != 2 {
		t.Fatalf("%d acknowledgements for two reads, want 2", got)
	}
}

func TestCloseCancelsTheDeferredAcknowledgement(t *testing.T) {
	q, srv := pairConn(t, 50*time.Millisecond)
	readOne(t, q, srv)
	readOne(t, q, srv)
	q.Close()
	n := q.acks.Load()
	time.Sleep(100 * time.Millisecond)
	if got := q.acks.Load(); got != n {
		t.Fatalf("%d acknowledgements after Close, want none", got-n)
	}
}

func TestRawWriteAndReadCarryEveryByteInOrder(t *testing.T) {
	q, srv := pairConn(t, DefaultInterval)
	// More than the socket buffers hold: the write must wait for the reader
	// (EAGAIN, then the poller) and resume where it stopped.
	want := make([]byte, 8<<20)
	for i := range want {
		want[i] = byte(i * 7)
	}
	werr := make(chan error, 1)
	go func() {
		n, err := q.Write(want)
		if err == nil && n != len(want) {
			err = fmt.Errorf("wrote %d of %d bytes", n, len(want))
		}
		werr <- err
	}()
	got := make([]byte, len(want))
	if _, err := io.ReadFull(srv, got); err != nil {
		t.Fatal(err)
	}
	if err := <-werr; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("the bytes read differ from those written")
	}
	// And back: the server's bytes arrive through the raw reads.
	go srv.Write(want)
	back := make([]byte, len(want))
	if _, err := io.ReadFull(q, back); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(back, want) {
		t.Fatal("the bytes read back differ from those written")
	}
}

func TestRawReadReportsEndDeadlineAndClose(t *testing.T) {
	q, srv := pairConn(t, DefaultInterval)

	q.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	_, err := q.Read(make([]byte, 1))
	var ne net.Error
	if !errors.Is(err, os.ErrDeadlineExceeded) || !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("read past its deadline: %v, want a timeout (os.ErrDeadlineExceeded)", err)
	}
	q.SetReadDeadline(time.Time{})

	srv.Close()
	if _, err := q.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("read after the peer closed: %v, want io.EOF", err)
	}

	q.Close()
	if _, err := q.Read(make([]byte, 1)); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("read after Close: %v, want net.ErrClosed", err)
	}
	if _, err := q.Write([]byte{'x'}); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("write after Close: %v, want net.ErrClosed", err)
	}
}

func TestRawWriteReportsABrokenConnection(t *testing.T) {
	q, srv := pairConn(t, DefaultInterval)
	srv.(*net.TCPConn).SetLinger(0) // close with a reset
	srv.Close()
	buf := make([]byte, 64<<10)
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := q.Write(buf)
		if err != nil {
			if !errors.Is(err, syscall.EPIPE) && !errors.Is(err, syscall.ECONNRESET) {
				t.Fatalf("write to a reset connection: %v, want EPIPE or ECONNRESET", err)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("writes to a reset connection kept succeeding")
		}
	}
}
