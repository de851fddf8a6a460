package openwire

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/brokernet/brokernet/destination"
	"github.com/brokernet/brokernet/transport"
)

// TestCommitResponseOnLastMessage: a batch of non-persistent messages is
// confirmed by a response to its last message, not by an empty transaction
// (which a persistent ActiveMQ fsyncs); a persistent message in the batch
// brings the transaction back, after the held message; Flush writes the held
// message asking for nothing, and the next Commit then pings (an empty
// ConnectionControl asking for a response), answered with a Response. A
// KeepAliveInfo of the broker's own confirms nothing.
func TestCommitResponseOnLastMessage(t *testing.T) {
	type seen struct {
		what string // "msg N" (producer sequence), "begin", "commit", "rollback" or "ping"
		resp bool   // it asked for a response
	}
	cmds := make(chan seen, 100)
	gate := make(chan struct{}) // the answer to the first ping waits for it
	pings := 0
	c := dialFake(t, func(nc net.Conn, br *bufio.Reader) {
		readCommands(br, func(cmd command) {
			s := seen{resp: cmd.base().ResponseRequired}
			id := cmd.base().CommandID
			r := encodeFrame(&response{CorrelationID: id})
			switch x := cmd.(type) {
			case *message:
				s.what = fmt.Sprintf("msg %d", x.MessageID.ProducerSeq)
			case *transactionInfo:
				s.what = map[byte]string{txBegin: "begin", txCommitOnePhase: "commit", txRollback: "rollback"}[x.Type]
			case *connectionControl:
				s.what = "ping"
				if pings++; pings == 1 {
					// The Response comes after a KeepAliveInfo of the
					// broker's own with the same command id, which must
					// confirm nothing.
					cmds <- s
					go func() {
						<-gate
						nc.Write(encodeFrame(&keepAliveInfo{baseCommand{CommandID: id}}))
						time.Sleep(50 * time.Millisecond)
						nc.Write(r)
					}()
					return
				}
			default:
				if s.resp {
					nc.Write(r)
				}
				return
			}
			cmds <- s
			if s.resp {
				nc.Write(r)
			}
		})
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	q := destination.Destination{Kind: destination.Queue, Name: "q"}
	send := func(persistent bool) {
		t.Helper()
		if err := c.Send(ctx, &transport.Message{Destination: q, Body: []byte("x"), Persistent: persistent, Priority: -1}); err != nil {
			t.Fatal(err)
		}
	}
	confirmed := func(tok transport.Token) {
		t.Helper()
		for {
			select {
			case ev := <-c.Events():
				if ev.Token == tok {
					if ev.Kind != transport.Confirmed {
						t.Fatalf("commit: %+v", ev)
					}
					return
				}
			case <-ctx.Done():
				t.Fatal("commit never confirmed")
			}
		}
	}
	commit := func() transport.Token {
		t.Helper()
		tok, err := c.Commit(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	flush := func() {
		t.Helper()
		if err := c.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	expect := func(what string, want ...seen) {
		t.Helper()
		expectCommands(t, ctx, cmds, what, want...)
	}

	send(false)
	send(false)
	send(false)
	confirmed(commit())
	expect("non-persistent batch", seen{"msg 1", false}, seen{"msg 2", false}, seen{"msg 3", true})

	send(false)
	send(true)
	confirmed(commit())
	expect("mixed batch", seen{"msg 4", false}, seen{"begin", false}, seen{"msg 5", false}, seen{"commit", true})

	// Flushed: the Commit pings; the Response confirms it, the broker's
	// KeepAliveInfo before it does not.
	send(false)
	flush()
	expect("flushed", seen{"msg 6", false})
	tok := commit()
	expect("commit after a flush", seen{"ping", true})
	select {
	case ev := <-c.Events():
		t.Fatalf("event %+v before the ping's answer", ev)
	case <-time.After(100 * time.Millisecond):
	}
	close(gate)
	select {
	case ev := <-c.Events():
		t.Fatalf("event %+v after the broker's own KeepAliveInfo, before the ping's", ev)
	case <-time.After(30 * time.Millisecond):
	}
	confirmed(tok)

	// Flushed twice: still one ping.
	send(false)
	flush()
	send(false)
	flush()
	confirmed(commit())
	expect("two flushes, a Commit", seen{"msg 7", false}, seen{"msg 8", false}, seen{"ping", true})

	// A message after the flushed one: the response rides on it as usual.
	send(false)
	flush()
	send(false)
	confirmed(commit())
	expect("a message after a flush", seen{"msg 9", false}, seen{"msg 10", true})
}

// TestSyncRidesOnNonPersistentAck: a Sync after acks of non-persistent
// messages asks for its response on the last ack, not with an empty
// transaction (which a persistent ActiveMQ fsyncs); after an ack that covers
// a persistent message it is the empty transaction.
func TestSyncRidesOnNonPersistentAck(t *testing.T) {
	type seen struct {
		what string // "ack N" (last producer sequence), "begin", "rollback"
		resp bool
	}
	cmds := make(chan seen, 100)
	c := dialFake(t, func(nc net.Conn, br *bufio.Reader) {
		readCommands(br, func(cmd command) {
			s := seen{resp: cmd.base().ResponseRequired}
			if s.resp {
				nc.Write(encodeFrame(&response{CorrelationID: cmd.base().CommandID}))
			}
			switch x := cmd.(type) {
			case *messageAck:
				s.what = fmt.Sprintf("ack %d", x.LastID.ProducerSeq)
			case *transactionInfo:
				s.what = map[byte]string{txBegin: "begin", txCommitOnePhase: "commit", txRollback: "rollback"}[x.Type]
			case *consumerInfo:
				// Three deliveries: non-persistent, non-persistent, persistent.
				for i, persistent := range []bool{false, false, true} {
					m, _ := fromMessage(&transport.Message{Destination: destination.Destination{Kind: destination.Queue, Name: "q"},
						Body: []byte("x"), Persistent: persistent, Priority: -1})
					m.MessageID = &messageID{ProducerID: &producerID{ConnectionID: "ID:p-1", SessionID: 1, Value: 1}, ProducerSeq: int64(i + 1)}
					nc.Write(encodeFrame(&messageDispatch{ConsumerID: x.ConsumerID, Destination: m.Destination, Message: m}))
				}
				return
			default:
				return
			}
			cmds <- s
		})
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	q := destination.Destination{Kind: destination.Queue, Name: "q"}
	if _, err := c.Subscribe(ctx, transport.Subscription{ID: "s", Destination: q, Prefetch: 10, Ack: transport.Cumulative}); err != nil {
		t.Fatal(err)
	}
	var refs []transport.Ref
	confirmed := map[transport.Token]bool{}
	await := func(tok transport.Token) {
		t.Helper()
		for !confirmed[tok] {
			select {
			case ev := <-c.Events():
				switch ev.Kind {
				case transport.Delivery:
					refs = append(refs, ev.Ref)
				case transport.Confirmed:
					confirmed[ev.Token] = true
				}
			case <-ctx.Done():
				t.Fatalf("token %d never confirmed (deliveries %d)", tok, len(refs))
			}
		}
	}
	for len(refs) < 3 {
		select {
		case ev := <-c.Events():
			if ev.Kind == transport.Delivery {
				refs = append(refs, ev.Ref)
			}
		case <-ctx.Done():
			t.Fatalf("%d of 3 deliveries", len(refs))
		}
	}
	expect := func(what string, want ...seen) {
		t.Helper()
		expectCommands(t, ctx, cmds, what, want...)
	}
	sync := func() {
		t.Helper()
		tok, err := c.Sync(ctx)
		if err != nil {
			t.Fatal(err)
		}
		await(tok)
	}
	settle := func(i int) {
		t.Helper()
		if err := c.Settle(ctx, "s", refs[:i+1], transport.Accepted); err != nil {
			t.Fatal(err)
		}
	}
	settle(0)
	expect("settled, held")
	sync()
	expect("sync after a non-persistent ack", seen{"ack 1", true})
	settle(1)
	settle(2)
	sync()
	expect("sync after an ack of a persistent message", seen{"ack 2", false}, seen{"ack 3", false}, seen{"begin", false}, seen{"rollback", true})
}

// expectCommands reads len(want) commands the fake broker saw from cmds and
// fails unless they are want, in order, with nothing more for 100 ms.
func expectCommands[T comparable](t *testing.T, ctx context.Context, cmds <-chan T, what string, want ...T) {
	t.Helper()
	for i, w := range want {
		select {
		case s := <-cmds:
			if s != w {
				t.Fatalf("%s: command %d is %+v, want %+v", what, i, s, w)
			}
		case <-ctx.Done():
			t.Fatalf("%s: command %d never came", what, i)
		}
	}
	select {
	case s := <-cmds:
		t.Fatalf("%s: extra command %+v", what, s)
	case <-time.After(100 * time.Millisecond):
	}
}

// readCommands calls handle with every command the fake broker reads, until
// the connection ends.
func readCommands(br *bufio.Reader, handle func(cmd command)) {
	for {
		p, err := readFrame(br, nil, 1<<20)
		if err != nil {
			return
		}
		ds, err := decodeCommand(p, false)
		if err != nil {
			continue
		}
		if cmd, ok := ds.(command); ok {
			handle(cmd)
		}
	}
}
