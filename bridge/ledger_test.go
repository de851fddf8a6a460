package bridge

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/go-stomp/stomp/v3/frame"

	"github.com/brokernet/brokernet/demand"
	"github.com/brokernet/brokernet/internal/testkit/stomptest"
	"github.com/brokernet/brokernet/internal/testkit/testbroker"
)

// TestLedgerLoadSeesEveryRecord: a session reading the ledger finds the record
// an earlier session wrote, also when the read before it saw an empty ledger;
// and the ActiveMQ behaviour loadLedger relies on: a persistent marker sent to
// a queue is never dispatched before the persistent messages already in it.
// (A non-persistent marker was, in 2 of 10 plain STOMP reads after a read
// that saw only its marker, and the bridge then restored nothing:
// TestDurableDestroyedWhileBridgeDown's flake.)
func TestLedgerLoadSeesEveryRecord(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a broker")
	}
	a := testbroker.StartActiveMQ(t, testbroker.Options{Name: "A", ID: "A-ledger", Persistent: true})
	u := stomptest.URI(t, a.StompURI())
	b, err := New(Config{Local: u, Remote: u, Demand: demand.Options{Conduit: true}, Log: stomptest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	pub := stomptest.Dial(t, a.StompURI())
	for round := 0; round < 10; round++ {
		s := newSession(b)
		s.localID, s.remoteID = "A", fmt.Sprintf("R%d", round)
		ctx := context.Background()
		if rec, err := s.loadLedger(ctx); err != nil || rec != nil {
			t.Fatalf("round %d: an empty ledger read as %+v, %v", round, rec, err)
		}
		body, err := json.Marshal(ledgerRecord{Version: int64(round + 1)})
		if err != nil {
			t.Fatal(err)
		}
		f := frame.New(frame.SEND, frame.Destination, "/queue/"+ledgerQueue(durableClientID(s.localID, s.remoteID)).Name, "persistent", "true")
		f.Body = body
		if err := pub.Request(ctx, f); err != nil {
			t.Fatal(err)
		}
		rec, err := s.loadLedger(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if rec == nil || rec.Version != int64(round+1) {
			t.Fatalf("round %d: the ledger read as %+v, want version %d", round, rec, round+1)
		}

		// The same over plain STOMP, without the transaction loadLedger
		// sends its marker in (which often lets the records go first anyway).
		q := fmt.Sprintf("/queue/ledger.order.%d", round)
		if got := readToMarker(t, a.StompURI(), q); len(got) != 1 {
			t.Fatalf("round %d: an empty queue gave %v", round, got)
		}
		stomptest.SendN(t, a.StompURI(), q, 0, 2, true)
		if got := readToMarker(t, a.StompURI(), q); len(got) != 3 || got[0] != "0" || got[1] != "1" {
			t.Fatalf("round %d: read %v, want the two messages before the marker", round, got)
		}
	}
}

// readToMarker subscribes to q, sends a persistent marker to it and returns
// the seq headers of what arrived up to the marker ("marker"), acknowledging
// each.
func readToMarker(t *testing.T, uri, q string) []string {
	t.Helper()
	c := stomptest.Dial(t, uri)
	defer c.Abort()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := c.Write(ctx, frame.New(frame.SUBSCRIBE, frame.Id, "s", frame.Destination, q,
		frame.Ack, "client-individual", "activemq.prefetchSize", "1000")); err != nil {
		t.Fatal(err)
	}
	if err := c.Write(ctx, frame.New(frame.SEND, frame.Destination, q, "seq", "marker", "persistent", "true")); err != nil {
		t.Fatal(err)
	}
	var got []string
	for {
		select {
		case f, ok := <-c.Deliveries():
			if !ok {
				t.Fatalf("reading %s: %v", q, c.Err())
			}
			got = append(got, f.Header.Get("seq"))
			if err := c.Write(ctx, frame.New(frame.ACK, frame.Id, f.Header.Get(frame.Ack))); err != nil {
				t.Fatal(err)
			}
			if f.Header.Get("seq") == "marker" {
				if err := c.Close(ctx); err != nil {
					t.Fatal(err)
				}
				return got
			}
		case <-ctx.Done():
			t.Fatalf("reading %s: no marker after %v", q, got)
		}
	}
}
