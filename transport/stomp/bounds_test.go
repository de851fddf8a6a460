package stomp

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-stomp/stomp/v3/frame"
)

// pipeConn connects a Conn over net.Pipe (no socket buffers: a write returns only
// once the peer read it) to serve, which gets the broker's end after CONNECTED.
func pipeConn(t *testing.T, opts Options, serve func(nc net.Conn, r *bufio.Reader)) *Conn {
	t.Helper()
	client, server := net.Pipe()
	t.Cleanup(func() { client.Close(); server.Close() })
	go func() {
		r := bufio.NewReader(server)
		if _, err := frame.NewReader(r).Read(); err != nil {
			return
		}
		io.WriteString(server, "CONNECTED\nversion:1.2\nheart-beat:0,0\n\n\x00")
		serve(server, r)
	}()
	u, err := ParseURI("stomp://pipe:61613?heartBeat=0")
	if err != nil {
		t.Fatal(err)
	}
	opts.defaults()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := newConn(ctx, client, u, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Abort)
	return c
}

// countFrames reads the client's frames with go-stomp's reader, counting SENDs;
// every read of at most chunk bytes is followed by pause (a slow link).
func countFrames(r io.Reader, chunk int, pause time.Duration, n *atomic.Int64) {
	fr := frame.NewReader(bufio.NewReaderSize(&slowReader{r, chunk, pause}, chunk))
	for {
		f, err := fr.Read()
		if err != nil {
			return
		}
		if f != nil && f.Command == frame.SEND {
			n.Add(1)
		}
	}
}

type slowReader struct {
	r     io.Reader
	chunk int
	pause time.Duration
}

func (s *slowReader) Read(p []byte) (int, error) {
	if len(p) > s.chunk {
		p = p[:s.chunk]
	}
	n, err := s.r.Read(p)
	time.Sleep(s.pause)
	return n, err
}

func bigSend(size int) *frame.Frame {
	f := frame.New(frame.SEND, frame.Destination, "/queue/big")
	f.Body = []byte(strings.Repeat("x", size))
	return f
}

// TestWriteDeadlineCoversOneWriteNotABurst: a burst of 3 MiB to a peer reading at
// most 4 MB/s (16 KiB, then a 4 ms pause) takes at least 0.75 s, beyond the 500 ms
// write timeout, yet the peer never stops reading, so the connection must survive.
// One 64 KiB write takes ~16 ms here, so a loaded machine has plenty of room.
func TestWriteDeadlineCoversOneWriteNotABurst(t *testing.T) {
	var got atomic.Int64
	c := pipeConn(t, Options{WriteTimeout: 500 * time.Millisecond}, func(nc net.Conn, r *bufio.Reader) {
		countFrames(r, 16<<10, 4*time.Millisecond, &got)
	})
	ctx := context.Background()
	if err := c.Write(ctx, bigSend(10)); err != nil {
		t.Fatal(err)
	}
	waitCount(t, c, &got, 1)
	start := time.Now()
	const n = 3
	for i := 0; i < n; i++ {
		if err := c.Write(ctx, bigSend(1<<20)); err != nil {
			t.Fatal(err)
		}
	}
	waitCount(t, c, &got, n+1)
	t.Logf("3 MiB burst took %v with a 500 ms write timeout", time.Since(start))
}

// TestFirstLargeFrameAfterIdleDoesNotTimeOut: with heart-beats off, a frame larger
// than the write buffer after an idle period longer than the write timeout goes out.
func TestFirstLargeFrameAfterIdleDoesNotTimeOut(t *testing.T) {
	var got atomic.Int64
	c := pipeConn(t, Options{WriteTimeout: 300 * time.Millisecond}, func(nc net.Conn, r *bufio.Reader) {
		countFrames(r, 64<<10, 0, &got)
	})
	ctx := context.Background()
	if err := c.Write(ctx, bigSend(10)); err != nil {
		t.Fatal(err)
	}
	waitCount(t, c, &got, 1)
	// The idle period is the condition under test: longer than the write timeout.
	time.Sleep(600 * time.Millisecond)
	if err := c.Write(ctx, bigSend(1<<20)); err != nil {
		t.Fatal(err)
	}
	waitCount(t, c, &got, 2)
}

func waitCount(t *testing.T, c *Conn, got *atomic.Int64, n int64) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for got.Load() < n {
		select {
		case <-c.Done():
			t.Fatalf("connection failed with %d of %d frames through: %v", got.Load(), n, c.Err())
		case <-deadline:
			t.Fatalf("only %d of %d frames arrived", got.Load(), n)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// TestWriteToStalledPeerTimesOut: the per-write deadline still catches a peer that
// stops reading.
func TestWriteToStalledPeerTimesOut(t *testing.T) {
	c := pipeConn(t, Options{WriteTimeout: 100 * time.Millisecond}, func(net.Conn, *bufio.Reader) {})
	if err := c.Write(context.Background(), bigSend(1<<20)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.Done():
		var ne net.Error
		if !errors.As(c.Err(), &ne) || !ne.Timeout() {
			t.Fatalf("err = %v, want a write timeout", c.Err())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("write to a peer that reads nothing never timed out")
	}
}

// floodBroker answers SUBSCRIBE with n MESSAGE frames and then a RECEIPT for the
// SUBSCRIBE (so the receipt is behind the whole flood).
func floodBroker(n int) func(nc net.Conn, r *bufio.Reader) {
	return func(nc net.Conn, r *bufio.Reader) {
		fr := frame.NewReader(r)
		w := bufio.NewWriter(nc)
		enc := encoder{w: w, escape: true}
		for {
			f, err := fr.Read()
			if err != nil {
				return
			}
			if f == nil || f.Command != frame.SUBSCRIBE {
				continue
			}
			id := f.Header.Get(frame.Id)
			for i := 0; i < n; i++ {
				enc.writeFrame(frame.New(frame.MESSAGE, frame.Subscription, id, frame.MessageId, strconv.Itoa(i)))
			}
			enc.writeFrame(frame.New(frame.RECEIPT, frame.ReceiptId, f.Header.Get(frame.Receipt)))
			if w.Flush() != nil {
				return
			}
		}
	}
}

// TestAutoAckFloodIsBounded: an advisory flood on an auto-ack subscription while
// nobody takes Deliveries holds at most AutoAckQueue frames in the inbox; once the
// consumer reads, every frame arrives in order and the receipt behind them too.
func TestAutoAckFloodIsBounded(t *testing.T) {
	const n, limit = 20000, 100
	c := pipeConn(t, Options{AutoAckQueue: limit, DeliveryQueue: 10}, floodBroker(n))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	receipt := make(chan error, 1)
	if err := c.WriteReceipt(ctx, frame.New(frame.SUBSCRIBE, frame.Id, "adv", frame.Destination, "/topic/ActiveMQ.Advisory.Consumer.>"),
		func(err error) { receipt <- err }); err != nil {
		t.Fatal(err)
	}
	// The reader fills the quota and stops.
	for {
		queued := c.inbox.autoQueued()
		if queued > limit {
			t.Fatalf("inbox holds %d frames, bound is %d", queued, limit)
		}
		if queued == limit {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("inbox never filled: %d", queued)
		case <-time.After(time.Millisecond):
		}
	}
	for i := 0; i < n; i++ {
		select {
		case f := <-c.Deliveries():
			if got := f.Header.Get(frame.MessageId); got != strconv.Itoa(i) {
				t.Fatalf("delivery %d has message-id %s", i, got)
			}
		case <-ctx.Done():
			t.Fatalf("only %d of %d delivered", i, n)
		}
		if i%1000 == 0 {
			queued := c.inbox.autoQueued()
			if queued > limit {
				t.Fatalf("inbox holds %d frames, bound is %d", queued, limit)
			}
		}
	}
	select {
	case err := <-receipt:
		if err != nil {
			t.Fatal(err)
		}
	case <-ctx.Done():
		t.Fatal("receipt behind the flood never arrived")
	}
}

// TestAutoAckStallFailsConnection: a consumer that never takes its Deliveries while
// the broker floods an auto-ack subscription ends the connection instead of hanging.
func TestAutoAckStallFailsConnection(t *testing.T) {
	c := pipeConn(t, Options{AutoAckQueue: 10, DeliveryQueue: 1, StallTimeout: 200 * time.Millisecond}, floodBroker(1000))
	if err := c.Write(context.Background(), frame.New(frame.SUBSCRIBE, frame.Id, "adv", frame.Destination, "/topic/x", frame.Ack, "auto")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.Done():
		if !errors.Is(c.Err(), ErrInboxStalled) {
			t.Fatalf("err = %v, want ErrInboxStalled", c.Err())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("stalled consumer never ended the connection")
	}
}

// TestClientAckFramesNeverStopTheReader: frames of a client-ack subscription are
// bounded by the broker's prefetch, not by AutoAckQueue.
func TestClientAckFramesNeverStopTheReader(t *testing.T) {
	const n = 500
	c := pipeConn(t, Options{AutoAckQueue: 10, DeliveryQueue: 1, StallTimeout: 100 * time.Millisecond}, floodBroker(n))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Request(ctx, frame.New(frame.SUBSCRIBE, frame.Id, "d", frame.Destination, "/queue/q", frame.Ack, "client")); err != nil {
		t.Fatalf("receipt behind %d client-ack frames: %v", n, err)
	}
	for i := 0; i < n; i++ {
		select {
		case <-c.Deliveries():
		case <-ctx.Done():
			t.Fatalf("only %d of %d delivered", i, n)
		}
	}
}

func TestDecoderBoundsHeaderCountAndBytes(t *testing.T) {
	tiny := "MESSAGE\n" + strings.Repeat("a:\n", 5000) + "\n\x00"
	tests := []struct {
		name    string
		in      string
		headers int
		bytes   int
		ok      bool
	}{
		{"many tiny headers", tiny, 1000, 1 << 20, false},
		{"header bytes above bound", "MESSAGE\nk:" + strings.Repeat("x", 3000) + "\n\n\x00", 1000, 2048, false},
		{"within bounds", "MESSAGE\n" + strings.Repeat("a:\n", 1000) + "\n\x00", 1000, 1 << 20, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dec := decoder{r: bufio.NewReaderSize(strings.NewReader(tt.in), 64), maxFrame: 64 << 20,
				maxHeaders: tt.headers, maxHeaderBytes: tt.bytes}
			f, err := dec.readFrame()
			if tt.ok {
				if err != nil || f.Header.Len() != 1000 {
					t.Fatalf("err = %v", err)
				}
				return
			}
			if !errors.Is(err, ErrFrameTooLarge) {
				t.Fatalf("err = %v, want ErrFrameTooLarge", err)
			}
		})
	}
}
