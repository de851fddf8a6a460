package destination

import (
	"strings"
	"testing"
)

func mustPattern(t testing.TB, s string) Pattern {
	t.Helper()
	p, err := ParsePattern(s)
	if err != nil {
		t.Fatalf("ParsePattern(%q): %v", s, err)
	}
	return p
}

func TestParsePatternErrors(t *testing.T) {
	tests := []struct {
		in, wantErr string
	}{
		{"", `pattern "": empty pattern`},
		{"a..b", "empty word 2"},
		{".a", "empty word 1"},
		{"a.", "empty word 2"},
		{".", "empty word 1"},
		{"a.>.b", `">" must be the last word`},
		{">.>", `">" must be the last word`},
		{"a.b*", `word "b*" mixes a wildcard`},
		{"a.>b", `word ">b" mixes a wildcard`},
		{"a.**", `word "**" mixes a wildcard`},
		{"queue://", `pattern "queue://": empty name`},
		{"queue://a..b", "empty word 2"},
		{"fifo://a", `unknown kind "fifo"`},
		{"/exchange/a", `unknown STOMP prefix`},
		{"queue://a,secret.>", `not a composite`},
		{"a,b", `write one pattern per member`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			_, err := ParsePattern(tt.in)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("ParsePattern(%q) error = %v, want it to contain %q", tt.in, err, tt.wantErr)
			}
		})
	}
}

func TestPatternString(t *testing.T) {
	tests := []struct{ in, want string }{
		{"orders.>", "orders.>"},
		{"queue://orders.>", "queue://orders.>"},
		{"/topic/prices.*", "topic://prices.*"},
		{"/remote-temp-queue/x", "temp-queue://x"},
		{">", ">"},
	}
	for _, tt := range tests {
		if got := mustPattern(t, tt.in).String(); got != tt.want {
			t.Errorf("ParsePattern(%q).String() = %q, want %q", tt.in, got, tt.want)
		}
	}
	if got := (Pattern{}).String(); got != "" {
		t.Errorf("zero Pattern String() = %q", got)
	}
}

func TestPatternMatch(t *testing.T) {
	q := func(n string) Destination { return Destination{Queue, n} }
	tp := func(n string) Destination { return Destination{Topic, n} }
	tq := func(n string) Destination { return Destination{TempQueue, n} }
	tt := func(n string) Destination { return Destination{TempTopic, n} }
	tests := []struct {
		pattern string
		d       Destination
		want    bool
	}{
		// Literal patterns.
		{"orders", q("orders"), true},
		{"orders", tp("orders"), true},
		{"orders", q("orders.eu"), false},
		{"orders.eu", q("orders"), false},
		{"orders", q("Orders"), false},
		// '*' is exactly one word.
		{"prices.*", tp("prices.eu"), true},
		{"prices.*", tp("prices"), false},
		{"prices.*", tp("prices.eu.de"), false},
		{"*.eu", tp("prices.eu"), true},
		{"*", q("a"), true},
		{"*", q("a.b"), false},
		{"a.*.c", q("a.b.c"), true},
		{"a.*.c", q("a.b.d"), false},
		// '>' is zero or more trailing words, as in ActiveMQ's PrefixDestinationFilter.
		{"orders.>", q("orders"), true},
		{"orders.>", q("orders.eu"), true},
		{"orders.>", q("orders.eu.paid"), true},
		{"orders.>", q("ordersx"), false},
		{"orders.>", q("order"), false},
		{"orders.>", q("x.orders.eu"), false},
		{">", q("anything.at.all"), true},
		{">", tp("x"), true},
		{"a.*.>", q("a"), false},
		{"a.*.>", q("a.b"), true},
		{"a.*.>", q("a.b.c.d"), true},
		// Empty words in destination names are words like any other.
		{"a.*.b", q("a..b"), true},
		{"a.>", q("a."), true},
		// Destination wildcards are literal words.
		{"orders.>", q("orders.>"), true},
		{"orders.eu", q("orders.*"), false},
		// Kinds.
		{"queue://orders.>", q("orders.eu"), true},
		{"queue://orders.>", tp("orders.eu"), false},
		{"topic://orders.>", tp("orders.eu"), true},
		{"topic://orders.>", q("orders.eu"), false},
		{"queue://>", tq("ID:x"), false},
		{">", tq("ID:x"), false},
		{">", tt("ID:x"), false},
		{"temp-queue://>", tq("ID:x"), true},
		{"temp-queue://>", tt("ID:x"), false},
		{"temp-topic://*", tt("ID:x"), true},
		{"/queue/orders", q("orders"), true},
		// Invalid destinations never match.
		{">", Destination{0, "x"}, false},
	}
	for _, tc := range tests {
		name := tc.pattern + " ~ " + tc.d.String()
		t.Run(name, func(t *testing.T) {
			if got := mustPattern(t, tc.pattern).Match(tc.d); got != tc.want {
				t.Errorf("Match = %v, want %v", got, tc.want)
			}
		})
	}
	if (Pattern{}).Match(q("x")) {
		t.Error("zero Pattern matched")
	}
}

func TestFilterAllows(t *testing.T) {
	q := func(n string) Destination { return Destination{Queue, n} }
	tests := []struct {
		name             string
		include, exclude []string
		d                Destination
		want             bool
	}{
		{"empty filter allows everything", nil, nil, q("x"), true},
		{"empty filter allows temp destinations", nil, nil, Destination{TempQueue, "x"}, true},
		{"include matches", []string{"orders.>"}, nil, q("orders.eu"), true},
		{"include does not match", []string{"orders.>"}, nil, q("prices"), false},
		{"any include is enough", []string{"a", "b"}, nil, q("b"), true},
		{"exclude wins over include", []string{">"}, []string{"orders.secret.>"}, q("orders.secret.x"), false},
		{"exclude only", nil, []string{"ActiveMQ.>"}, q("ActiveMQ.DLQ"), false},
		{"exclude other kind", nil, []string{"topic://x"}, q("x"), true},
		{"a composite with an excluded member is not allowed", nil, []string{"secret.>"}, q("public.y,secret.x"), false},
		{"a composite whose members are all allowed is", nil, []string{"secret.>"}, q("public.y, public.z"), true},
		{"a composite member of another kind is matched as that kind", nil, []string{"topic://secret.>"}, q("a,topic://secret.x"), false},
		{"a composite with a member outside the includes is not allowed", []string{"app.>"}, nil, q("app.a,other"), false},
		{"a composite of nothing is not allowed", nil, nil, q(",,"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := ParseFilter(tt.include, tt.exclude)
			if err != nil {
				t.Fatal(err)
			}
			if got := f.Allows(tt.d); got != tt.want {
				t.Errorf("Allows(%v) = %v, want %v", tt.d, got, tt.want)
			}
		})
	}
	if _, err := ParseFilter([]string{"ok"}, []string{"a..b"}); err == nil {
		t.Error("ParseFilter accepted a bad exclude pattern")
	}
	if _, err := ParseFilter([]string{"a.>.b"}, nil); err == nil {
		t.Error("ParseFilter accepted a bad include pattern")
	}
}

func TestPatternText(t *testing.T) {
	var p Pattern
	if err := p.UnmarshalText([]byte("queue://a.*")); err != nil {
		t.Fatal(err)
	}
	b, _ := p.MarshalText()
	if string(b) != "queue://a.*" {
		t.Fatalf("MarshalText = %q", b)
	}
	if err := p.UnmarshalText([]byte("a..")); err == nil {
		t.Fatal("UnmarshalText accepted a bad pattern")
	}
	if p.Kind() != Queue {
		t.Fatalf("a failed UnmarshalText changed the pattern to %v", p)
	}
}

// refMatch is a straightforward transcription of ActiveMQ's
// PrefixDestinationFilter / WildcardDestinationFilter / SimpleDestinationFilter
// on split words, used as the oracle in FuzzPatternMatch.
func refMatch(pw, nw []string) bool {
	eq := func(p, n string) bool { return p == AnyWord || p == n }
	if pw[len(pw)-1] == AnyRest {
		prefix := pw[:len(pw)-1]
		if len(nw) < len(prefix) {
			return false
		}
		for i := range prefix {
			if !eq(prefix[i], nw[i]) {
				return false
			}
		}
		return true
	}
	if len(nw) != len(pw) {
		return false
	}
	for i := range pw {
		if !eq(pw[i], nw[i]) {
			return false
		}
	}
	return true
}

// FuzzPatternMatch checks that ParsePattern never panics, that accepted
// patterns round-trip through String, and that Match agrees with refMatch.
func FuzzPatternMatch(f *testing.F) {
	f.Add("orders.>", "orders")
	f.Add("a.*.>", "a.b.c")
	f.Add("queue://*", "x")
	f.Add("a..b", "a..b")
	f.Add(">", "")
	f.Fuzz(func(t *testing.T, pattern, name string) {
		p, err := ParsePattern(pattern)
		if err != nil {
			return
		}
		back, err := ParsePattern(p.String())
		if err != nil || back.String() != p.String() || back.kind != p.kind {
			t.Fatalf("round trip of %q via %q: %v, %v", pattern, p.String(), back, err)
		}
		kind := p.kind
		if kind == 0 {
			kind = Topic
		}
		d := Destination{Kind: kind, Name: name}
		want := refMatch(p.words, strings.Split(name, "."))
		if got := p.Match(d); got != want {
			t.Fatalf("ParsePattern(%q).Match(%v) = %v, reference says %v", pattern, d, got, want)
		}
	})
}
