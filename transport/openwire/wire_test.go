package openwire

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"unicode/utf16"
	"unsafe"
)

// TestIsASCIIWordByWord checks the word-at-a-time test against the plain
// definition for every byte value at every position of inputs of 0..24 bytes.
func TestIsASCIIWordByWord(t *testing.T) {
	plain := func(p []byte) bool {
		for _, c := range p {
			if c == 0 || c >= 0x80 {
				return false
			}
		}
		return true
	}
	for n := 0; n <= 24; n++ {
		p := make([]byte, n)
		for i := range p {
			p[i] = 'a' + byte(i%26)
		}
		if !isASCII(p) || !isASCII(string(p)) {
			t.Fatalf("%q: not ASCII", p)
		}
		for i := range p {
			for v := 0; v < 256; v++ {
				old := p[i]
				p[i] = byte(v)
				if got, want := isASCII(p), plain(p); got != want {
					t.Fatalf("isASCII(%q) = %v, want %v", p, got, want)
				}
				if got, want := isASCII(string(p)), plain(p); got != want {
					t.Fatalf("isASCII(string %q) = %v, want %v", p, got, want)
				}
				p[i] = old
			}
		}
	}
}

// TestMessageIDString checks MessageId.toString's two forms, and ProducerId's.
func TestMessageIDString(t *testing.T) {
	for _, c := range []struct {
		id   *messageID
		want string
	}{
		{&messageID{ProducerID: &producerID{ConnectionID: "ID:h-1", SessionID: 2, Value: 3}, ProducerSeq: 123456789012}, "ID:h-1:2:3:123456789012"},
		{&messageID{ProducerID: &producerID{ConnectionID: "ID:h-1", SessionID: -1, Value: 0}, ProducerSeq: 1}, "ID:h-1:-1:0:1"},
		{&messageID{TextView: "ID:t-1:1:1:1"}, "ID:t-1:1:1:1"},
		{&messageID{TextView: "x"}, "ID:x"},
		{nil, ""},
	} {
		if got := c.id.String(); got != c.want {
			t.Errorf("String() = %q, want %q", got, c.want)
		}
	}
	if got := (&producerID{ConnectionID: "ID:h-1", SessionID: 2, Value: 3}).String(); got != "ID:h-1:2:3" {
		t.Errorf("producerID.String() = %q", got)
	}
}

// TestNamesIntern checks that names hands back one copy of a repeated ASCII
// name, decodes others as decodeMUTF8 does, and stays within maxNames.
func TestNamesIntern(t *testing.T) {
	ns := names{}
	a, b := ns.get([]byte("queue.orders")), ns.get([]byte("queue.orders"))
	if a != "queue.orders" || unsafe.StringData(a) != unsafe.StringData(b) {
		t.Fatalf("get twice = %q, %q: not one interned copy", a, b)
	}
	nonASCII := encodeMUTF8("crème")
	if got := ns.get(nonASCII); got != "crème" {
		t.Fatalf("get(%q) = %q", nonASCII, got)
	}
	for i := range 3 * maxNames {
		ns.get([]byte(fmt.Sprint("name-", i)))
	}
	if len(ns) > maxNames {
		t.Fatalf("%d names kept, more than %d", len(ns), maxNames)
	}
	var none names
	if got := none.get([]byte("q")); got != "q" {
		t.Fatalf("nil names get = %q", got)
	}
}

// TestShortUTF16 checks the count against Java's UTF-16 units at the limit.
func TestShortUTF16(t *testing.T) {
	const limit = math.MaxInt16 / 4
	for _, s := range []string{
		"", "abc", strings.Repeat("a", limit-1), strings.Repeat("a", limit),
		strings.Repeat("é", limit-1), strings.Repeat("é", limit),
		strings.Repeat("😀", limit/2), strings.Repeat("😀", limit/2-1) + "a", strings.Repeat("😀", limit/2+1),
		strings.Repeat("\xff", limit), strings.Repeat("\xff", limit-1),
	} {
		want := len(utf16.Encode([]rune(s))) < limit
		if got := shortUTF16(s); got != want {
			t.Errorf("shortUTF16(%d bytes) = %v, want %v", len(s), got, want)
		}
	}
}
