package bench

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/brokernet/brokernet/internal/testkit/testbroker"
)

func TestRecorderCountsFirstArrivalsDuplicatesAndStrangers(t *testing.T) {
	var r Recorder
	r.Expect(Full, 3)
	ts := strconv.FormatInt(time.Now().Add(-time.Millisecond).UnixNano(), 10)
	now := time.Now()
	r.record("f", "0", ts, now)
	r.record("f", "2", ts, now)
	r.record("f", "2", ts, now) // duplicate
	r.record("f", "3", ts, now) // outside [0, 3)
	r.record("f", "x", ts, now) // unparsable
	r.record("s", "0", ts, now) // phase not expected
	r.record("", "0", ts, now)  // no phase tag
	got := r.Result(Full)
	if got.Distinct != 2 || got.Lost != 1 || got.Dups != 1 || got.Bad != 2 {
		t.Errorf("Result = %+v, want 2 distinct, 1 lost, 1 duplicate, 2 bad", got)
	}
	if f := r.Foreign(); f != 2 {
		t.Errorf("Foreign = %d, want 2", f)
	}
	if got.P50 < time.Millisecond || got.Max > time.Minute {
		t.Errorf("latencies %v..%v, want about 1 ms", got.P50, got.Max)
	}
}

// TestSendDeliversEveryMessageOnce runs the producer against a real broker in
// each of its shapes (streamed with a receipt every k and a partial last
// group, persistent transactions, paced) and checks that Send returns only
// after every message is confirmed and that each arrives exactly once.
func TestSendDeliversEveryMessageOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("needs an ActiveMQ broker")
	}
	if err := testbroker.Install(); err != nil {
		t.Fatal(err)
	}
	x := testbroker.StartActiveMQ(t, testbroker.Options{Persistent: true})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cons, err := Subscribe(ctx, x.StompURI(), dest, 5000)
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	prod, err := Dial(ctx, x.StompURI())
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Abort()
	cases := []struct {
		phase Phase
		opts  SendOptions
	}{
		{Warmup, SendOptions{N: 1050, ReceiptEvery: 100, InFlight: 300}},
		{Full, SendOptions{N: 250, Persistent: true, Batch: 100, InFlight: 200}},
		{Steady, SendOptions{N: 300, Rate: 1000, Persistent: true}},
		{Repeat, SendOptions{N: 300, Rate: 1000, ReceiptEvery: 7}},
	}
	for _, c := range cases {
		o := c.opts
		o.Dest, o.Phase, o.Body = dest, c.phase, Body(100)
		cons.Expect(c.phase, o.N)
		st, err := Send(ctx, prod, o)
		if err != nil {
			t.Fatalf("%s: Send: %v", c.phase, err)
		}
		if !st.End.After(st.Start) {
			t.Errorf("%s: SendStats %+v: End not after Start", c.phase, st)
		}
		if !cons.Wait(ctx, c.phase, 20*time.Second) {
			t.Errorf("%s: not every message arrived", c.phase)
		}
	}
	// Late duplicates would come right after the last phase; give them a
	// moment to show (the subscription would count them).
	time.Sleep(200 * time.Millisecond)
	for _, c := range cases {
		res := cons.Result(c.phase)
		if res.Distinct != c.opts.N || res.Dups != 0 || res.Bad != 0 {
			t.Errorf("%s: %+v, want %d distinct, no duplicates", c.phase, res, c.opts.N)
		}
	}
	if f := cons.Foreign(); f != 0 {
		t.Errorf("%d messages without a known phase", f)
	}
}
