package destination

import (
	"math/rand/v2"
	"strings"
	"testing"
)

func TestOverlapsAndCovers(t *testing.T) {
	tests := []struct {
		p, q             string
		overlaps, covers bool
	}{
		{"queue://>", "queue://secret.>", true, true},
		{"queue://secret.>", "queue://>", true, false},
		{"queue://secret.>", "queue://public.>", false, false},
		{"queue://secret.*", "queue://*.x", true, false},
		{"queue://a.*", "queue://a.b", true, true},
		{"queue://a.b", "queue://a.*", true, false},
		{"queue://a.*", "queue://a.b.c", false, false},
		{"queue://a.>", "queue://a", true, true},
		{"queue://a", "queue://a.>", true, false},
		{"queue://>", "topic://>", false, false},
		{">", "topic://a.b", true, true},
		{"topic://a.b", ">", true, false},
		{">", "temp-queue://x", false, false},
		{"queue://*.*", "queue://a.>", true, false},
		{"queue://a.>", "queue://a.*.c", true, true},
		{"queue://*.b.>", "queue://a.*.c", true, false},
		{"queue://*.b.>", "queue://a.c.*", false, false},
	}
	for _, tt := range tests {
		p, q := mustPattern(t, tt.p), mustPattern(t, tt.q)
		if got := p.Overlaps(q); got != tt.overlaps {
			t.Errorf("%s overlaps %s = %v, want %v", tt.p, tt.q, got, tt.overlaps)
		}
		if got := q.Overlaps(p); got != tt.overlaps {
			t.Errorf("%s overlaps %s = %v, want %v (symmetry)", tt.q, tt.p, got, tt.overlaps)
		}
		if got := p.Covers(q); got != tt.covers {
			t.Errorf("%s covers %s = %v, want %v", tt.p, tt.q, got, tt.covers)
		}
	}
}

func TestFilterAllowsAll(t *testing.T) {
	f, err := ParseFilter([]string{"queue://app.>"}, []string{"queue://app.secret.>"})
	if err != nil {
		t.Fatal(err)
	}
	for s, want := range map[string]bool{
		"queue://app.orders.>": true,
		"queue://app.>":        false, // overlaps the exclusion
		"queue://>":            false,
		"queue://app.*":        false, // app.secret: app.secret.> matches it too (">" takes zero words)
		"queue://app.orders":   true,
		"topic://app.>":        false,
		"queue://other.>":      false,
	} {
		if got := f.AllowsAll(mustPattern(t, s)); got != want {
			t.Errorf("AllowsAll(%s) = %v, want %v", s, got, want)
		}
	}
}

// TestOverlapsAgreesWithMatch checks Overlaps and Covers against Match on random
// patterns and names over a small alphabet: a name both match means overlap; a
// name q matches and p does not means no cover.
func TestOverlapsAgreesWithMatch(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	words := []string{"a", "b", "*", ">"}
	randPattern := func() Pattern {
		n := 1 + r.IntN(3)
		var w []string
		for i := 0; i < n; i++ {
			x := words[r.IntN(len(words))]
			if x == ">" && i != n-1 {
				x = "a"
			}
			w = append(w, x)
		}
		return Pattern{kind: Queue, words: w}
	}
	var names []string
	var gen func(prefix string, depth int)
	gen = func(prefix string, depth int) {
		if depth == 0 {
			return
		}
		for _, w := range []string{"a", "b", "c"} {
			n := w
			if prefix != "" {
				n = prefix + "." + w
			}
			names = append(names, n)
			gen(n, depth-1)
		}
	}
	gen("", 5)
	for i := 0; i < 2000; i++ {
		p, q := randPattern(), randPattern()
		both, qNotP := false, false
		for _, n := range names {
			d := Destination{Kind: Queue, Name: n}
			if p.Match(d) && q.Match(d) {
				both = true
			}
			if q.Match(d) && !p.Match(d) {
				qNotP = true
			}
		}
		if both && !p.Overlaps(q) {
			t.Fatalf("%s and %s both match a name, Overlaps = false", p, q)
		}
		if qNotP && p.Covers(q) {
			t.Fatalf("%s covers %s, but a name matches only %s", p, q, q)
		}
		// Names are at most 5 words: deeper patterns are out of reach.
		if !both && p.Overlaps(q) && len(p.words) < 5 && len(q.words) < 5 {
			t.Fatalf("%s overlaps %s but no name of the alphabet matches both (%s)", p, q, strings.Join(names[:3], ","))
		}
	}
}
