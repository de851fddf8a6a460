package faultproxy

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/go-stomp/stomp/v3/frame"
)

// backend accepts connections and hands their server ends to the test.
func backend(t *testing.T) (addr string, conns <-chan net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan net.Conn, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
			ch <- c
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return ln.Addr().String(), ch
}

// pair dials through a new proxy and returns client and server ends.
func pair(t *testing.T) (*Proxy, net.Conn, net.Conn) {
	t.Helper()
	addr, conns := backend(t)
	p := Start(t, addr)
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	select {
	case s := <-conns:
		for deadline := time.Now().Add(5 * time.Second); p.Open() == 0; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("proxy never registered the connection")
			}
		}
		return p, c, s
	case <-time.After(5 * time.Second):
		t.Fatal("proxy never connected to the backend")
	}
	return nil, nil, nil
}

func stompFrame(cmd string, kv ...string) []byte {
	var b bytes.Buffer
	b.WriteString(cmd + "\n")
	for i := 0; i+1 < len(kv); i += 2 {
		b.WriteString(kv[i] + ":" + kv[i+1] + "\n")
	}
	b.WriteString("\nbody\x00")
	return b.Bytes()
}

// readFrames reads frames with go-stomp's reader until n arrived or the stream
// ended; it returns the commands and the error that ended it (nil after n).
func readFrames(c net.Conn, n int, timeout time.Duration) ([]string, error) {
	c.SetReadDeadline(time.Now().Add(timeout))
	defer c.SetReadDeadline(time.Time{})
	r := frame.NewReader(bufio.NewReader(c))
	var cmds []string
	for len(cmds) < n {
		f, err := r.Read()
		if err != nil {
			return cmds, err
		}
		if f != nil {
			cmds = append(cmds, f.Command)
		}
	}
	return cmds, nil
}

func TestPassesBytesUnchanged(t *testing.T) {
	_, c, s := pair(t)
	in := append(stompFrame("SEND", "destination", "/queue/a", "k", "v\\cw"), '\n', '\r', '\n')
	in = append(in, []byte("SEND\ncontent-length:3\n\na\x00b\x00")...)
	go c.Write(in)
	got := make([]byte, len(in))
	s.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(s, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, in) {
		t.Fatalf("got %q, want %q", got, in)
	}
	// Not STOMP: passed on raw.
	junk := []byte("\x00\x01binary \xff stream\n")
	go s.Write(junk)
	got = make([]byte, len(junk))
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, junk) {
		t.Fatalf("raw bytes: got %q, %v", got, err)
	}
}

func TestCutBeforeCommit(t *testing.T) {
	p, c, s := pair(t)
	p.CutWhen(func(f Frame) Action {
		if f.Dir == ToServer && f.Command == "COMMIT" {
			return CutBefore
		}
		return Pass
	})
	var out []byte
	out = append(out, stompFrame("SEND", "transaction", "t1")...)
	out = append(out, stompFrame("SEND", "transaction", "t1")...)
	out = append(out, stompFrame("COMMIT", "transaction", "t1", "receipt", "r1")...)
	c.Write(out)
	cmds, err := readFrames(s, 3, 5*time.Second)
	if len(cmds) != 2 || err == nil || isTimeout(err) {
		t.Fatalf("broker got %v then %v; want 2 SENDs then a cut", cmds, err)
	}
	if _, err := c.Read(make([]byte, 1)); err == nil || isTimeout(err) {
		t.Fatalf("client read after the cut: %v, want the end of the stream", err)
	}
	if p.Cuts() != 1 || p.Seen(ToServer, "SEND") != 2 {
		t.Fatalf("cuts %d, SENDs seen %d", p.Cuts(), p.Seen(ToServer, "SEND"))
	}
}

func TestCutAfterReceiptOfCommit(t *testing.T) {
	p, c, s := pair(t)
	commits := map[string]bool{}
	p.CutWhen(func(f Frame) Action {
		switch {
		case f.Dir == ToServer && f.Command == "COMMIT":
			commits[f.Get("receipt")] = true
		case f.Dir == ToClient && f.Command == "RECEIPT" && commits[f.Get("receipt-id")]:
			return CutAfter
		}
		return Pass
	})
	c.Write(stompFrame("COMMIT", "transaction", "t1", "receipt", "r7"))
	if _, err := readFrames(s, 1, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	s.Write(append(stompFrame("RECEIPT", "receipt-id", "r1"), stompFrame("RECEIPT", "receipt-id", "r7")...))
	s.Write(stompFrame("MESSAGE", "message-id", "late"))
	cmds, err := readFrames(c, 3, 5*time.Second)
	if len(cmds) != 2 || err == nil || isTimeout(err) {
		t.Fatalf("client got %v then %v; want both RECEIPTs then a cut", cmds, err)
	}
}

func TestBlackHoleIsHalfOpenUntilHealed(t *testing.T) {
	p, c, s := pair(t)
	p.BlackHole()
	c.Write(stompFrame("SEND", "n", "1"))
	s.Write(stompFrame("MESSAGE", "n", "2"))
	// Nothing arrives and nothing closes: both reads time out.
	if _, err := readFrames(s, 1, 300*time.Millisecond); !isTimeout(err) {
		t.Fatalf("broker side: %v, want silence", err)
	}
	if _, err := readFrames(c, 1, 300*time.Millisecond); !isTimeout(err) {
		t.Fatalf("client side: %v, want silence", err)
	}
	p.Heal()
	if cmds, err := readFrames(s, 1, 5*time.Second); err != nil || cmds[0] != "SEND" {
		t.Fatalf("after heal the broker got %v, %v", cmds, err)
	}
	if cmds, err := readFrames(c, 1, 5*time.Second); err != nil || cmds[0] != "MESSAGE" {
		t.Fatalf("after heal the client got %v, %v", cmds, err)
	}
}

func TestLatency(t *testing.T) {
	p, c, s := pair(t)
	p.SetLatency(200 * time.Millisecond)
	start := time.Now()
	c.Write(stompFrame("SEND"))
	if _, err := readFrames(s, 1, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 200*time.Millisecond {
		t.Fatalf("one way took %v, want at least 200 ms", d)
	}
}

func TestBandwidth(t *testing.T) {
	p, c, s := pair(t)
	p.SetBandwidth(1 << 20)
	const size = 1 << 20
	body := strings.Repeat("x", size)
	start := time.Now()
	go c.Write([]byte("SEND\n\n" + body + "\x00"))
	if _, err := readFrames(s, 1, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	// The first 10 ms slice goes at once, so 1 MiB at 1 MiB/s takes at least 0.99 s.
	if d := time.Since(start); d < 900*time.Millisecond {
		t.Fatalf("1 MiB at 1 MiB/s took %v", d)
	}
}

func TestRefuseAndCutAll(t *testing.T) {
	p, c, _ := pair(t)
	p.CutAll()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil || isTimeout(err) {
		t.Fatalf("read after CutAll: %v", err)
	}
	p.Refuse(true)
	// A refused connection is reset: the dial or the first read fails.
	if c2, err := net.Dial("tcp", p.Addr()); err == nil {
		defer c2.Close()
		c2.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := c2.Read(make([]byte, 1)); err == nil || isTimeout(err) {
			t.Fatalf("read on a refused connection: %v", err)
		}
	}
	for deadline := time.Now().Add(5 * time.Second); p.Accepted() != 2; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("accepted %d, want 2", p.Accepted())
		}
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// A binary stream with no end of line (OpenWire's first command) is passed on
// at once, not held waiting for a STOMP line.
func TestBinaryWithoutLinePassesAtOnce(t *testing.T) {
	_, c, s := pair(t)
	in := []byte{0, 0, 0, 5, 1, 'A', 'c', 't', 'i'}
	go c.Write(in)
	got := make([]byte, len(in))
	s.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(s, got); err != nil || !bytes.Equal(got, in) {
		t.Fatalf("got %q, %v; want %q", got, err, in)
	}
}
