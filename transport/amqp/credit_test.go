package amqp

import "testing"

func TestLinkCredit(t *testing.T) {
	type step struct {
		op   string // "recv" or "settle"
		n    int
		want uint32 // the grant after the step (for recv: after the last one)
	}
	for _, tc := range []struct {
		name   string
		window uint32
		steps  []step
	}{
		{"no grant while the link has credit", 10, []step{
			{"recv", 4, 0}, {"settle", 4, 0}, // 6 still outstanding
			{"recv", 6, 0},   // credit used up, but 4 is less than half
			{"settle", 1, 5}, // half the window
		}},
		{"at least half the window once the credit is used up", 10, []step{
			{"recv", 10, 0}, {"settle", 2, 0}, {"settle", 2, 0}, {"settle", 1, 5},
		}},
		{"everything settled is granted even below half", 10, []step{
			{"recv", 10, 0}, {"settle", 3, 0}, {"settle", 1, 0}, {"recv", 0, 0}, {"settle", 0, 0},
			{"settle", 6, 10},
		}},
		{"pending grant waits for the link's credit to run out", 10, []step{
			{"recv", 10, 0}, {"settle", 10, 10}, // granted: 10 outstanding again
			{"recv", 3, 0}, {"settle", 3, 0}, {"recv", 7, 0}, // 3 pending, 7 held
			{"settle", 7, 10},
		}},
		{"window of one", 1, []step{
			{"recv", 1, 0}, {"settle", 1, 1}, {"recv", 1, 0}, {"settle", 1, 1},
		}},
		{"below half, granted once nothing is held", 10, []step{
			{"recv", 10, 0}, {"settle", 10, 10}, {"recv", 10, 0}, {"settle", 2, 0}, {"settle", 2, 0},
			{"settle", 6, 10},
		}},
		{"over-delivery is added to the grant", 10, []step{
			{"recv", 13, 0}, // 3 beyond the credit: go-amqp's count is −3
			{"settle", 13, 16},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLinkCredit(tc.window)
			for i, s := range tc.steps {
				var got uint32
				switch s.op {
				case "recv":
					for range s.n {
						got = l.receive()
					}
				case "settle":
					got = l.settle(s.n)
				}
				if got != s.want {
					t.Fatalf("step %d (%s %d): grant %d, want %d (%+v)", i, s.op, s.n, got, s.want, *l)
				}
			}
		})
	}
}

// TestLinkCreditNeverStalls drives the accounting with every interleaving
// of a settler that settles in random-sized batches: whatever was received is
// eventually settled, so the link must always end up with credit again.
func TestLinkCreditNeverStalls(t *testing.T) {
	for window := uint32(1); window <= 12; window++ {
		for batch := 1; batch <= 5; batch++ {
			l := newLinkCredit(window)
			held := 0
			for round := 0; round < 200; round++ {
				// Receive what the credit allows.
				for l.issued-l.received > 0 {
					l.receive()
					held++
				}
				// Settle in batches until a grant comes; it must come before
				// everything held is settled.
				granted := false
				for held > 0 && !granted {
					n := min(batch, held)
					held -= n
					granted = l.settle(n) > 0
				}
				if !granted {
					t.Fatalf("window %d batch %d round %d: all settled and no credit granted (%+v)", window, batch, round, *l)
				}
				if out := l.issued - l.received; out <= 0 || out > int64(window) {
					t.Fatalf("window %d batch %d: outstanding credit %d after a grant (%+v)", window, batch, out, *l)
				}
			}
		}
	}
}
