package stomp

import (
	"context"
	"testing"
	"time"

	"github.com/go-stomp/stomp/v3/frame"

	"github.com/brokernet/brokernet/destination"
	"github.com/brokernet/brokernet/transport"
)

// TestCommitReceiptOnLastSend: to ActiveMQ, a batch of non-persistent
// messages is confirmed by a receipt on its last SEND, not by an empty
// transaction; a persistent message in the batch brings the transaction back,
// written after the held SEND; Flush writes a held SEND without a receipt.
func TestCommitReceiptOnLastSend(t *testing.T) {
	type seen struct{ cmd, tx, receipt, body string }
	frames := make(chan seen, 100)
	b := newFakeBroker(t, "", func(f *frame.Frame, w *brokerWriter) {
		frames <- seen{f.Command, f.Header.Get(frame.Transaction), f.Header.Get(frame.Receipt), string(f.Body)}
		if r := f.Header.Get(frame.Receipt); r != "" {
			w.send(frame.New(frame.RECEIPT, frame.ReceiptId, r))
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Dial(ctx, b.uri(t, "?heartBeat=0"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Abort()
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

	send("f", false)
	if err := bc.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	expect("flushed", seen{cmd: frame.SEND, body: "f"})
	commit()
	expect("commit after a flush",
		seen{cmd: frame.BEGIN, tx: "t"}, seen{cmd: frame.COMMIT, tx: "t", receipt: "r"})
}
