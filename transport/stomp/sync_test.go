package stomp

import (
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
// releases one ACK per subscription, the last carrying the receipt that
// confirms the held Syncs (see BrokerConn.Sync for why). To ActiveMQ a Sync
// after ACKs of non-persistent messages is a receipt on the last ACK.
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
	ctx, c := b.dial(t, "?heartBeat=0", Options{}, 10*time.Second)
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
	// ActiveMQ, nothing persistent acknowledged: the receipt rides on the ACK.
	ack1 := next()
	if ack1.cmd != frame.ACK || ack1.id != "a1" || ack1.receipt == "" {
		t.Fatalf("first ACK with the Sync's receipt: %+v", ack1)
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
	sendReceipt(ack1.receipt)
	if s := next(); s.cmd != frame.ACK || s.id != "a3" || s.receipt != "" {
		t.Fatalf("first released frame: %+v, want ACK a3 without receipt", s)
	}
	ack2 := next()
	if ack2.cmd != frame.ACK || ack2.id != "b2" || ack2.receipt == "" || ack2.receipt == ack1.receipt {
		t.Fatalf("second released frame: %+v, want ACK b2 with the held Syncs' receipt", ack2)
	}
	sendReceipt(ack2.receipt)
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

	// An ACK covering a persistent message gets no receipt (ActiveMQ would
	// sync each removal to disk): the Sync is an empty transaction, its
	// receipt on the ABORT, which ActiveMQ sends once the removals before it
	// are on disk (syncPair).
	if err := bc.Settle(ctx, "a", []transport.Ref{ackRef{id: "a4", persistent: 1}}, transport.Accepted); err != nil {
		t.Fatal(err)
	}
	tok4 := sync()
	if s := next(); s.cmd != frame.ACK || s.id != "a4" || s.receipt != "" {
		t.Fatalf("ACK of a persistent message: %+v", s)
	}
	if begin := next(); begin.cmd != frame.BEGIN || begin.receipt != "" {
		t.Fatalf("Sync after a persistent ACK: %+v, want BEGIN without a receipt", begin)
	}
	abort := next()
	if abort.cmd != frame.ABORT || abort.receipt == "" {
		t.Fatalf("after BEGIN: %+v, want ABORT with the Sync's receipt", abort)
	}
	sendReceipt(abort.receipt)
	select {
	case ev := <-bc.Events():
		if ev.Kind != transport.Confirmed || ev.Token != tok4 {
			t.Fatalf("unexpected event %+v", ev)
		}
	case <-ctx.Done():
		t.Fatal("the persistent ACK's Sync never confirmed")
	}
	// The next ACK of the same subscription covers no new persistent message.
	settle("a", "a5")
	sync()
	if s := next(); s.cmd != frame.ACK || s.id != "a5" || s.receipt == "" {
		t.Fatalf("ACK after idle: %+v", s)
	}
}

// TestHeldAckGoesBeforeUnsubscribe: an ACK held behind a Sync is written
// before its subscription's UNSUBSCRIBE, which would make the broker refuse it.
func TestHeldAckGoesBeforeUnsubscribe(t *testing.T) {
	frames := make(chan string, 100)
	b := newFakeBroker(t, "", func(f *frame.Frame, w *brokerWriter) {
		frames <- f.Command + " " + f.Header.Get(frame.Id)
	})
	ctx, c := b.dial(t, "?heartBeat=0", Options{}, 10*time.Second)
	bc := NewBrokerConn(c)
	bc.Settle(ctx, "a", []transport.Ref{ackRef{id: "a1"}}, transport.Accepted)
	bc.Sync(ctx)
	bc.Settle(ctx, "a", []transport.Ref{ackRef{id: "a2"}}, transport.Accepted)
	if err := bc.Unsubscribe(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	var got []string
	for len(got) < 3 {
		select {
		case s := <-frames:
			got = append(got, s)
		case <-ctx.Done():
			t.Fatalf("frames: %q", got)
		}
	}
	want := []string{"ACK a1", "ACK a2", "UNSUBSCRIBE a"} // a1 carries the Sync's receipt
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
	ctx, c := b.dial(t, "?heartBeat=0", Options{}, 20*time.Second)
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
