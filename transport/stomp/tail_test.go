package stomp

import (
	"testing"
	"time"

	"github.com/go-stomp/stomp/v3/frame"

	"github.com/brokernet/brokernet/destination"
	"github.com/brokernet/brokernet/transport"
)

// TestCommitReceiptOnLastSend: to ActiveMQ, a batch of non-persistent
// messages is confirmed by a receipt on its last SEND, not by an empty
// transaction; a persistent message in the batch brings the transaction back,
// written after the held SEND; Flush writes a held SEND with a receipt, which
// confirms the next Commit if nothing was written since, whether it arrived
// before the Commit or after.
func TestCommitReceiptOnLastSend(t *testing.T) {
	type seen struct{ cmd, tx, receipt, body string }
	frames := make(chan seen, 100)
	gate := make(chan struct{}) // the receipt for body "g" waits for it
	b := newFakeBroker(t, "", func(f *frame.Frame, w *brokerWriter) {
		frames <- seen{f.Command, f.Header.Get(frame.Transaction), f.Header.Get(frame.Receipt), string(f.Body)}
		if r := f.Header.Get(frame.Receipt); r != "" {
			if string(f.Body) == "g" {
				go func() {
					<-gate
					w.send(frame.New(frame.RECEIPT, frame.ReceiptId, r))
				}()
				return
			}
			w.send(frame.New(frame.RECEIPT, frame.ReceiptId, r))
		}
	})
	ctx, c := b.dial(t, "?heartBeat=0", Options{}, 10*time.Second)
	bc := NewBrokerConn(c)
	q := destination.Destination{Kind: destination.Queue, Name: "q"}
	send := func(body string, persistent bool) {
		t.Helper()
		if err := bc.Send(ctx, &transport.Message{Destination: q, Body: []byte(body), Persistent: persistent}); err != nil {
			t.Fatal(err)
		}
	}
	commit := func() {
		t.Helper()
		tok, err := bc.Commit(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for {
			select {
			case ev := <-bc.Events():
				if ev.Token == tok && ev.Kind == transport.Confirmed {
					return
				}
			case <-ctx.Done():
				t.Fatal("commit never confirmed")
			}
		}
	}
	expect := func(what string, want ...seen) {
		t.Helper()
		for i, w := range want {
			select {
			case s := <-frames:
				if s.cmd != w.cmd || s.body != w.body || (s.tx != "") != (w.tx != "") || (s.receipt != "") != (w.receipt != "") {
					t.Fatalf("%s: frame %d is %+v, want %+v (tx, receipt: present or not)", what, i, s, w)
				}
			case <-ctx.Done():
				t.Fatalf("%s: frame %d never came", what, i)
			}
		}
		select {
		case s := <-frames:
			t.Fatalf("%s: extra frame %+v", what, s)
		case <-time.After(100 * time.Millisecond):
		}
	}

	send("a", false)
	send("b", false)
	send("c", false)
	commit()
	expect("non-persistent batch",
		seen{cmd: frame.SEND, body: "a"}, seen{cmd: frame.SEND, body: "b"}, seen{cmd: frame.SEND, body: "c", receipt: "r"})

	send("d", false)
	send("e", true)
	commit()
	expect("mixed batch",
		seen{cmd: frame.SEND, body: "d"}, seen{cmd: frame.BEGIN, tx: "t"}, seen{cmd: frame.SEND, body: "e", tx: "t"},
		seen{cmd: frame.COMMIT, tx: "t", receipt: "r"})

	flush := func() {
		t.Helper()
		if err := bc.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	send("f", false)
	flush()
	expect("flushed", seen{cmd: frame.SEND, body: "f", receipt: "r"})
	// The receipt arrived before the Commit: confirmed at once, nothing written.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		bc.smu.Lock()
		arrived := bc.early != nil && bc.early.arrived
		bc.smu.Unlock()
		if arrived {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the flushed SEND's receipt never arrived")
		}
	}
	commit()
	expect("commit after a flush whose receipt arrived")

	// The receipt arrives after the Commit: it confirms the Commit then.
	send("g", false)
	flush()
	expect("flushed, receipt held", seen{cmd: frame.SEND, body: "g", receipt: "r"})
	tok, err := bc.Commit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	expect("commit before the flushed SEND's receipt")
	select {
	case ev := <-bc.Events():
		t.Fatalf("event %+v before the receipt", ev)
	case <-time.After(100 * time.Millisecond):
	}
	close(gate)
	select {
	case ev := <-bc.Events():
		if ev.Kind != transport.Confirmed || ev.Token != tok {
			t.Fatalf("event %+v, want the Commit's confirmation (token %d)", ev, tok)
		}
	case <-ctx.Done():
		t.Fatal("commit never confirmed")
	}

	// A SEND after the flushed one: the receipt rides on it as usual.
	send("h", false)
	flush()
	send("i", false)
	commit()
	expect("a SEND after a flush", seen{cmd: frame.SEND, body: "h", receipt: "r"}, seen{cmd: frame.SEND, body: "i", receipt: "r"})

	// A persistent message after the flushed one: the transaction's COMMIT confirms.
	send("j", false)
	flush()
	send("k", true)
	commit()
	expect("a persistent SEND after a flush", seen{cmd: frame.SEND, body: "j", receipt: "r"},
		seen{cmd: frame.BEGIN, tx: "t"}, seen{cmd: frame.SEND, body: "k", tx: "t"}, seen{cmd: frame.COMMIT, tx: "t", receipt: "r"})
}
