package quickack

import (
	"io"
	"net"
	"syscall"
	"testing"
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
