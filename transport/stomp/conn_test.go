package stomp

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-stomp/stomp/v3/frame"
)

// fakeBroker is a scripted STOMP peer on loopback: it answers CONNECT and lets each
// test decide what to do with the frames that follow.
type fakeBroker struct {
	t         *testing.T
	ln        net.Listener
	connected string // extra CONNECTED headers, "k:v\n" lines
	handle    func(f *frame.Frame, w *brokerWriter)
}

type brokerWriter struct {
	mu  sync.Mutex
	enc encoder
}

func (w *brokerWriter) send(f *frame.Frame) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.enc.writeFrame(f)
	w.enc.w.Flush()
}

func newFakeBroker(t *testing.T, connected string, handle func(*frame.Frame, *brokerWriter)) *fakeBroker {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &fakeBroker{t: t, ln: ln, connected: connected, handle: handle}
	t.Cleanup(func() { ln.Close() })
	go b.serve()
	return b
}

// acceptOne listens on loopback and hands the first connection to serve,
// which may script a broker by hand; the connection and the listener close
// when serve returns and when the test ends.
func acceptOne(t *testing.T, serve func(nc net.Conn)) net.Listener {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		defer nc.Close()
		serve(nc)
	}()
	return ln
}

func (b *fakeBroker) uri(t *testing.T, query string) URI {
	u, err := ParseURI("stomp://" + b.ln.Addr().String() + query)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// dial connects to b with the URI query and opts, and returns a context
// ending after timeout for the test's calls; the connection is aborted and
// the context cancelled when the test ends.
func (b *fakeBroker) dial(t *testing.T, query string, opts Options, timeout time.Duration) (context.Context, *Conn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	c, err := Dial(ctx, b.uri(t, query), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Abort)
	return ctx, c
}

func (b *fakeBroker) serve() {
	for {
		nc, err := b.ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer nc.Close()
			r := bufio.NewReader(nc)
			w := &brokerWriter{enc: encoder{w: bufio.NewWriter(nc), escape: true}}
			// The client's frames are parsed with go-stomp's reader: an independent decoder.
			fr := frame.NewReader(r)
			for {
				f, err := fr.Read()
				if err != nil {
					return
				}
				if f == nil {
					continue
				}
				if f.Command == frame.CONNECT {
					c := frame.New(frame.CONNECTED, frame.Version, "1.2", frame.Server, "ActiveMQ/5.17.2")
					for _, l := range strings.Split(strings.TrimSpace(b.connected), "\n") {
						if k, v, ok := strings.Cut(l, ":"); ok {
							c.Header.Add(k, v)
						}
					}
					w.send(c)
					continue
				}
				b.handle(f, w)
			}
		}()
	}
}

func TestReceiptsArePipelined(t *testing.T) {
	// The broker holds every receipt until it has seen 50 receipted frames: a client
	// that waits for one receipt before sending the next frame would hang here.
	var held []string
	var mu sync.Mutex
	b := newFakeBroker(t, "", func(f *frame.Frame, w *brokerWriter) {
		id, ok := f.Header.Contains(frame.Receipt)
		if !ok {
			return
		}
		mu.Lock()
		held = append(held, id)
		release := len(held) == 50
		mu.Unlock()
		if release {
			for _, id := range held {
				w.send(frame.New(frame.RECEIPT, frame.ReceiptId, id))
			}
		}
	})
	ctx, c := b.dial(t, "", Options{}, 5*time.Second)
	if c.Flavour() != ActiveMQ {
		t.Errorf("flavour = %v, want activemq", c.Flavour())
	}
	done := make(chan error, 50)
	for i := 0; i < 50; i++ {
		f := frame.New(frame.SEND, frame.Destination, "/queue/q")
		f.Body = []byte("x")
		if err := c.WriteReceipt(ctx, f, func(err error) { done <- err }); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 50; i++ {
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("receipt %d: %v", i, err)
			}
		case <-ctx.Done():
			t.Fatalf("only %d of 50 receipts arrived", i)
		}
	}
}

func TestConnectionLossFailsPendingReceipts(t *testing.T) {
	b := newFakeBroker(t, "", func(f *frame.Frame, w *brokerWriter) {
		if f.Command == frame.COMMIT {
			w.send(frame.New(frame.ERROR, frame.Message, "transaction unknown", frame.ReceiptId, f.Header.Get(frame.Receipt)))
		}
	})
	ctx, c := b.dial(t, "", Options{}, 5*time.Second)
	other := make(chan error, 1)
	if err := c.WriteReceipt(ctx, frame.New(frame.SEND, frame.Destination, "/queue/q"), func(err error) { other <- err }); err != nil {
		t.Fatal(err)
	}
	err := c.Request(ctx, frame.New(frame.COMMIT, frame.Transaction, "t1"))
	var be *BrokerError
	if !errors.As(err, &be) || be.Message != "transaction unknown" {
		t.Fatalf("commit error = %v, want the broker's ERROR", err)
	}
	select {
	case err := <-other:
		if err == nil {
			t.Fatal("pending receipt succeeded after the connection failed")
		}
	case <-ctx.Done():
		t.Fatal("pending receipt never failed")
	}
	<-c.Done()
	if err := c.Write(ctx, frame.New(frame.SEND)); err == nil {
		t.Fatal("write on a failed connection succeeded")
	}
}

func TestHeartBeatZeroMeansNone(t *testing.T) {
	// A broker answering heart-beat:0,0 sends nothing while idle; the client must not
	// time out (go-stomp v3.1.3 does, after its own interval plus 5 s).
	b := newFakeBroker(t, "heart-beat:0,0", func(*frame.Frame, *brokerWriter) {})
	_, c := b.dial(t, "?heartBeat=100", Options{}, 5*time.Second)
	if c.expectEvery != 0 || c.sendEvery != 0 {
		t.Fatalf("heart-beats negotiated as send %v, expect %v; want none", c.sendEvery, c.expectEvery)
	}
}

func TestHeartBeatTimeoutEndsConnection(t *testing.T) {
	// The broker promises heart-beats every 100 ms and then sends nothing.
	b := newFakeBroker(t, "heart-beat:100,0", func(*frame.Frame, *brokerWriter) {})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Dial(ctx, b.uri(t, "?heartBeat=100"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.Done():
		if !strings.Contains(c.Err().Error(), "heart-beat") {
			t.Fatalf("err = %v, want a heart-beat timeout", c.Err())
		}
	case <-ctx.Done():
		t.Fatal("silent broker was not detected")
	}
}

func TestConnectRefusedByBroker(t *testing.T) {
	ln := acceptOne(t, func(nc net.Conn) {
		frame.NewReader(nc).Read()
		w := bufio.NewWriter(nc)
		(&encoder{w: w}).writeFrame(frame.New(frame.ERROR, frame.Message, "Authentication failed"))
		w.Flush()
	})
	u, _ := ParseURI("stomp://alice:s3cret@" + ln.Addr().String())
	_, err := Dial(context.Background(), u, Options{})
	if err == nil || !strings.Contains(err.Error(), "Authentication failed") {
		t.Fatalf("err = %v, want the broker's refusal", err)
	}
	if strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("error leaks the passcode: %v", err)
	}
}

func TestInboxKeepsOrderAndCloses(t *testing.T) {
	q := newInbox(10)
	done := make(chan struct{})
	const n = 5000
	go func() {
		for i := 0; i < n; i++ {
			// Every third frame is auto-acknowledged: more than the limit of 10 in
			// all, so push waits for pop now and then.
			if err := q.push(frame.New(frame.MESSAGE, "seq", strconv.Itoa(i)), i%3 == 0, done, time.Minute); err != nil {
				t.Error(err)
				return
			}
		}
		q.close()
	}()
	for i := 0; i < n; i++ {
		f, ok := q.pop(done)
		if !ok {
			t.Fatalf("inbox closed after %d frames", i)
		}
		if got := f.Header.Get("seq"); got != strconv.Itoa(i) {
			t.Fatalf("frame %d has seq %s", i, got)
		}
	}
	if _, ok := q.pop(done); ok {
		t.Fatal("pop after close and drain returned a frame")
	}
}

// TestReceiptsFlowWhileDeliveriesAreNotRead: a consumer that stops reading
// Deliveries does not stop RECEIPTs (the bridge acknowledges with receipts while
// its window is full).
func TestReceiptsFlowWhileDeliveriesAreNotRead(t *testing.T) {
	b := newFakeBroker(t, "", func(f *frame.Frame, w *brokerWriter) {
		if f.Command == frame.SUBSCRIBE {
			for i := 0; i < 3000; i++ {
				m := frame.New(frame.MESSAGE, frame.Subscription, "s", frame.MessageId, strconv.Itoa(i), frame.ContentLength, "512")
				m.Body = make([]byte, 512)
				w.send(m)
			}
		}
		if id, ok := f.Header.Contains(frame.Receipt); ok {
			w.send(frame.New(frame.RECEIPT, frame.ReceiptId, id))
		}
	})
	ctx, c := b.dial(t, "", Options{DeliveryQueue: 10}, 10*time.Second)
	if err := c.Write(ctx, frame.New(frame.SUBSCRIBE, frame.Id, "s", frame.Destination, "/queue/q")); err != nil {
		t.Fatal(err)
	}
	// Nobody reads Deliveries; a request must still complete.
	if err := c.Request(ctx, frame.New(frame.ACK, frame.Id, "x")); err != nil {
		t.Fatalf("receipt did not arrive while deliveries were unread: %v", err)
	}
	got := 0
	for range 3000 {
		select {
		case <-c.Deliveries():
			got++
		case <-ctx.Done():
			t.Fatalf("only %d of 3000 messages delivered", got)
		}
	}
}

// TestHalfOpenDetectedWithinTwoHeartBeats: the client asks for heart-beats at half
// its interval and gives up after three of them: a broker that answers like
// ActiveMQ (the intervals swapped) and then goes silent is noticed after 1.5
// intervals, never later than two.
func TestHalfOpenDetectedWithinTwoHeartBeats(t *testing.T) {
	connect := make(chan string, 1)
	ln := acceptOne(t, func(nc net.Conn) {
		f, err := frame.NewReader(nc).Read()
		if err != nil {
			return
		}
		hb := f.Header.Get(frame.HeartBeat)
		connect <- hb
		x, y, _ := strings.Cut(hb, ",")
		w := bufio.NewWriter(nc)
		(&encoder{w: w}).writeFrame(frame.New(frame.CONNECTED, frame.Version, "1.2", frame.HeartBeat, y+","+x))
		w.Flush()
		io.Copy(io.Discard, nc) // then silence, the socket open
	})
	u, _ := ParseURI("stomp://" + ln.Addr().String() + "?heartBeat=1000")
	c, err := Dial(context.Background(), u, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Abort()
	start := time.Now()
	if hb := <-connect; hb != "1000,500" {
		t.Fatalf("CONNECT heart-beat %q, want 1000,500", hb)
	}
	select {
	case <-c.Done():
		took := time.Since(start)
		t.Logf("silent broker noticed after %v (heart-beat 1s)", took)
		if took > 2*time.Second {
			t.Fatalf("noticed after %v, more than two heart-beat intervals", took)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("silent broker never noticed")
	}
}
