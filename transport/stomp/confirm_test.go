package stomp

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/go-stomp/stomp/v3/frame"

	"github.com/brokernet/brokernet/destination"
	"github.com/brokernet/brokernet/transport"
)

// TestRabbitMQBatchConfirmedByEverySendReceipt plays RabbitMQ 3.10's STOMP
// plugin: frames other than SEND are receipted at once, SEND receipts only when
// the test releases them (publisher confirms), in any order. A batch must be
// confirmed only after every one of its SENDs was, never by a COMMIT.
func TestRabbitMQBatchConfirmedByEverySendReceipt(t *testing.T) {
	var (
		mu    sync.Mutex
		held  []string // SEND receipts not yet given
		bad   []string // what the broker should never have seen
		sends int
		w     *brokerWriter
	)
	b := newFakeBroker(t, "", func(f *frame.Frame, bw *brokerWriter) {
		mu.Lock()
		defer mu.Unlock()
		w = bw
		id, hasReceipt := f.Header.Contains(frame.Receipt)
		switch f.Command {
		case frame.SEND:
			sends++
			if _, tx := f.Header.Contains(frame.Transaction); tx {
				bad = append(bad, "SEND in a transaction")
			}
			if !hasReceipt {
				bad = append(bad, "SEND without a receipt")
				return
			}
			held = append(held, id)
			return
		case frame.COMMIT:
			bad = append(bad, "COMMIT")
		}
		if hasReceipt {
			bw.send(frame.New(frame.RECEIPT, frame.ReceiptId, id))
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Dial(ctx, b.uri(t, "?flavor=rabbitmq"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	bc := NewBrokerConn(c)
	defer bc.Abort()
	if bc.Info().Transactions {
		t.Error("Info().Transactions is true for RabbitMQ")
	}
	confirmed := func(wait time.Duration) (transport.Token, bool) {
		select {
		case ev := <-bc.Events():
			if ev.Kind != transport.Confirmed {
				t.Fatalf("event %v, want a confirmation", ev.Kind)
			}
			return ev.Token, true
		case <-time.After(wait):
			return 0, false
		}
	}
	release := func(ids []string) {
		mu.Lock()
		defer mu.Unlock()
		for _, id := range ids {
			w.send(frame.New(frame.RECEIPT, frame.ReceiptId, id))
		}
	}

	// An empty batch is confirmed by its marker alone.
	empty, err := bc.Commit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if tok, ok := confirmed(5 * time.Second); !ok || tok != empty {
		t.Fatalf("empty batch: confirmation %d (%v), want %d", tok, ok, empty)
	}

	// A batch of 5: its SEND receipts come back last first.
	q := destination.Destination{Kind: destination.Queue, Name: "q"}
	for i := 0; i < 5; i++ {
		if err := bc.Send(ctx, &transport.Message{Destination: q, Persistent: true, Body: []byte("x"), Priority: -1}); err != nil {
			t.Fatal(err)
		}
	}
	tok, err := bc.Commit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	waitHeld := func(n int) []string {
		deadline := time.Now().Add(5 * time.Second)
		for {
			mu.Lock()
			got := append([]string(nil), held...)
			mu.Unlock()
			if len(got) >= n {
				return got
			}
			if time.Now().After(deadline) {
				t.Fatalf("broker holds %d SEND receipts, want %d", len(got), n)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	ids := waitHeld(5)
	if got, ok := confirmed(200 * time.Millisecond); ok {
		t.Fatalf("batch confirmed (%d) before any of its SENDs", got)
	}
	release([]string{ids[4], ids[3], ids[2], ids[0]})
	if got, ok := confirmed(200 * time.Millisecond); ok {
		t.Fatalf("batch confirmed (%d) with one SEND unconfirmed", got)
	}
	release(ids[1:2])
	if got, ok := confirmed(5 * time.Second); !ok || got != tok {
		t.Fatalf("confirmation %d (%v), want %d", got, ok, tok)
	}

	// A SEND confirmed before its batch is committed still counts.
	if err := bc.Send(ctx, &transport.Message{Destination: q, Body: []byte("y"), Priority: -1}); err != nil {
		t.Fatal(err)
	}
	ids = waitHeld(6)
	release(ids[5:])
	if got, ok := confirmed(200 * time.Millisecond); ok {
		t.Fatalf("confirmation %d before the batch was committed", got)
	}
	tok, err = bc.Commit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := confirmed(5 * time.Second); !ok || got != tok {
		t.Fatalf("confirmation %d (%v), want %d", got, ok, tok)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(bad) > 0 || sends != 6 {
		t.Fatalf("broker saw %d SENDs and %v", sends, bad)
	}
}
