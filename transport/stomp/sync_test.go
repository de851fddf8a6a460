package stomp

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-stomp/stomp/v3/frame"

	"github.com/brokernet/brokernet/transport"
)

// TestOneSyncOnTheWire: while a Sync awaits its receipt, cumulative ACKs are
// merged per subscription and further Syncs are not written; the receipt
// releases one ACK per subscription and one BEGIN, whose receipt confirms the
// held Syncs (see BrokerConn.Sync for why).
func TestOneSyncOnTheWire(t *testing.T) {
	type seen struct {
		cmd, id, receipt string
	}
	frames := make(chan seen, 100)
	var bw atomic.Pointer[brokerWriter]
	b := newFakeBroker(t, "", func(f *frame.Frame, w *brokerWriter) {
		bw.Store(w)
		frames <- seen{f.Command, f.Header.Get(frame.Id), f.Header.Get(frame.Receipt)}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Dial(ctx, b.uri(t, "?heartBeat=0"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Abort()
	bc := NewBrokerConn(c)
	next := func() seen {
		t.Helper()
		select {
		case s := <-frames:
			return s
		case <-ctx.Done():
			t.Fatal("no frame written")
			return seen{}
		}
	}
	quiet := func(what string) {
		t.Helper()
		select {
		case s := <-frames:
			t.Fatalf("%s: %+v written", what, s)
		case <-time.After(300 * time.Millisecond):
		}
	}
	settle := func(sub, ack string) {
		t.Helper()
		if err := bc.Settle(ctx, sub, []transport.Ref{ackRef{id: ack}}, transport.Accepted); err != nil {
			t.Fatal(err)
		}
	}
	sync := func() transport.Token {
		t.Helper()
		tok, err := bc.Sync(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}

	settle("a", "a1")
	tok1 := sync()
	if s := next(); s.cmd != frame.ACK || s.id != "a1" {
		t.Fatalf("first ACK: %+v", s)
	}
	begin1 := next()
	if begin1.cmd != frame.BEGIN || begin1.receipt == "" {
		t.Fatalf("first Sync: %+v", begin1)
	}
	if s := next(); s.cmd != frame.ABORT {
		t.Fatalf("after BEGIN: %+v", s)
	}
	settle("a", "a2")
	settle("b", "b1")
	settle("a", "a3")
	tok2 := sync()
	settle("b", "b2")
	tok3 := sync()
	quiet("while the first Sync awaits its receipt")

	sendReceipt := func(id string) {
		bw.Load().send(frame.New(frame.RECEIPT, frame.ReceiptId, id))
	}
	sendReceipt(begin1.receipt)
	for i, want := range []seen{{cmd: frame.ACK, id: "a3"}, {cmd: frame.ACK, id: "b2"}} {
		if s := next(); s.cmd != want.cmd || s.id != want.id {
			t.Fatalf("released frame %d: %+v, want %+v", i, s, want)
		}
	}
	begin2 := next()
	if begin2.cmd != frame.BEGIN || begin2.receipt == "" || begin2.receipt == begin1.receipt {
		t.Fatalf("second Sync: %+v", begin2)
	}
	if s := next(); s.cmd != frame.ABORT {
		t.Fatalf("after BEGIN: %+v", s)
	}
	sendReceipt(begin2.receipt)
	want := map[transport.Token]bool{tok1: true, tok2: true, tok3: true}
	for len(want) > 0 {
		select {
		case ev := <-bc.Events():
			if ev.Kind != transport.Confirmed || !want[ev.Token] {
				t.Fatalf("unexpected event %+v", ev)
			}
			delete(want, ev.Token)
		case <-ctx.Done():
			t.Fatalf("tokens never confirmed: %v", want)
		}
	}
	quiet("after the last receipt")

	// Idle again: a Settle and a Sync go out at once.
	settle("a", "a4")
	sync()
	if s := next(); s.cmd != frame.ACK || s.id != "a4" {
		t.Fatalf("ACK after idle: %+v", s)
	}
	if s := next(); s.cmd != frame.BEGIN {
		t.Fatalf("Sync after idle: %+v", s)
	}
}

// TestHeldAckGoesBeforeUnsubscribe: an ACK held behind a Sync is written
// before its subscription's UNSUBSCRIBE, which would make the broker refuse it.
func TestHeldAckGoesBeforeUnsubscribe(t *testing.T) {
	frames := make(chan string, 100)
	b := newFakeBroker(t, "", func(f *frame.Frame, w *brokerWriter) {
		frames <- f.Command + " " + f.Header.Get(frame.Id)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Dial(ctx, b.uri(t, "?heartBeat=0"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Abort()
	bc := NewBrokerConn(c)
	bc.Settle(ctx, "a", []transport.Ref{ackRef{id: "a1"}}, transport.Accepted)
	bc.Sync(ctx)
	bc.Settle(ctx, "a", []transport.Ref{ackRef{id: "a2"}}, transport.Accepted)
	if err := bc.Unsubscribe(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	var got []string
	for len(got) < 5 {
		select {
		case s := <-frames:
			got = append(got, s)
		case <-ctx.Done():
			t.Fatalf("frames: %q", got)
		}
	}
	want := []string{"ACK a1", "BEGIN ", "ABORT ", "ACK a2", "UNSUBSCRIBE a"}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("frames %q, want %q", got, want)
		}
	}
}

// TestWriteNowGoesAheadOfLaterWrites: a frame given to WriteNow is on the wire
// before any frame Write queues after WriteNow returned, even while the writer
// is busy with a queue of earlier frames.
func TestWriteNowGoesAheadOfLaterWrites(t *testing.T) {
	got := make(chan string, 10000)
	b := newFakeBroker(t, "", func(f *frame.Frame, w *brokerWriter) {
		got <- f.Command + " " + f.Header.Get(frame.Id)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := Dial(ctx, b.uri(t, "?heartBeat=0"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Abort()
	const rounds = 500
	for i := 0; i < rounds; i++ {
		id := strconv.Itoa(i)
		for j := 0; j < 3; j++ {
			if err := c.Write(ctx, frame.New(frame.ACK, frame.Id, id)); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.WriteNow(frame.New(frame.NACK, frame.Id, id)); err != nil {
			t.Fatal(err)
		}
	}
	// Every NACK i must come before the ACKs of round i+1.
	nacked := -1
	for n := 0; n < 4*rounds; n++ {
		var s string
		select {
		case s = <-got:
		case <-ctx.Done():
			t.Fatalf("%d of %d frames arrived", n, 4*rounds)
		}
		cmd, id, _ := strings.Cut(s, " ")
		i, _ := strconv.Atoi(id)
		switch cmd {
		case frame.NACK:
			if i != nacked+1 {
				t.Fatalf("NACK %d after NACK %d", i, nacked)
			}
			nacked = i
		case frame.ACK:
			if i > nacked+1 {
				t.Fatalf("ACK of round %d before the NACK of round %d", i, i-1)
			}
		}
	}
}
