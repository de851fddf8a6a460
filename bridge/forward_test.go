package bridge

import (
	"strconv"
	"strings"
	"testing"

	"github.com/go-stomp/stomp/v3/frame"

	"github.com/brokernet/brokernet/hop"
	"github.com/brokernet/brokernet/transport"
	"github.com/brokernet/brokernet/transport/stomp"
)

// forwardFrame is the STOMP→STOMP path of one message: MESSAGE received locally,
// mapped to a transport.Message, stamped by outgoing, mapped to the SEND.
func forwardFrame(m *frame.Frame, localID, tx string, forIDs []string) *frame.Frame {
	return stomp.SendFrame(outgoing(stomp.MessageOf(m), localID, "R", forIDs), tx)
}

func TestForwardFrame(t *testing.T) {
	m := frame.New(frame.MESSAGE,
		"content-length", "5", "destination", "/topic/t", "subscription", "bn-d1",
		"message-id", "ID:1", "ack", "ID:1", "redelivered", "true",
		"persistent", "true", "priority", "7", "x-app", "first", "x-app", "second",
		"BrokernetPath", "|A|", "BrokernetHops", "1", "BrokernetFor", "|B|",
		"expires", "1796035828134", "correlation-id", "c-1", "reply-to", "/queue/r",
		"type", "T", "content-type", "text/x", "timestamp", "1796035828000")
	m.Body = []byte("hello")
	out := forwardFrame(m, "B", "tx-9", []string{"C", "D"})
	if out.Command != frame.SEND || string(out.Body) != "hello" {
		t.Fatalf("got %s %q", out.Command, out.Body)
	}
	want := map[string]string{
		"destination":    "/topic/t",
		"transaction":    "tx-9",
		"BrokernetPath":  "|A|B|",
		"BrokernetHops":  "2",
		"BrokernetFor":   "|C|D|",
		"content-length": "5",
		"persistent":     "true",
		"priority":       "7",
		"x-app":          "first",
		"expires":        "1796035828134",
		"timestamp":      "1796035828000",
		"correlation-id": "c-1",
		"reply-to":       "/queue/r",
		"type":           "T",
		"content-type":   "text/x",
	}
	got := map[string]string{}
	for i := 0; i < out.Header.Len(); i++ {
		k, v := out.Header.GetAt(i)
		if _, dup := got[k]; dup {
			t.Errorf("header %s sent twice", k)
		}
		got[k] = v
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("header %s = %q, want %q", k, got[k], v)
		}
	}
	for _, k := range []string{"subscription", "message-id", "ack", "redelivered"} {
		if _, ok := got[k]; ok {
			t.Errorf("delivery header %s was forwarded", k)
		}
	}

	text := frame.New(frame.MESSAGE, "destination", "/queue/q")
	text.Body = []byte("t")
	out = forwardFrame(text, "A", "tx", nil)
	if _, ok := out.Header.Contains("content-length"); ok {
		t.Error("a text message (no content-length) gained one")
	}
	if _, ok := out.Header.Contains("BrokernetFor"); ok {
		t.Error("a queue message got a BrokernetFor header")
	}
	if got := out.Header.Get("BrokernetPath"); got != "|A|" {
		t.Errorf("first hop path = %q, want |A|", got)
	}
	if _, ok := out.Header.Contains("priority"); ok {
		t.Error("a message without priority gained one")
	}
}

func TestForwardFrameManyHeadersKeepsFirst(t *testing.T) {
	kv := []string{"destination", "/queue/q"}
	for i := 0; i < 40; i++ {
		kv = append(kv, "h", string(rune('a'+i%26)))
	}
	out := forwardFrame(frame.New(frame.MESSAGE, kv...), "A", "", nil)
	n := 0
	for i := 0; i < out.Header.Len(); i++ {
		if k, _ := out.Header.GetAt(i); k == "h" {
			n++
		}
	}
	if n != 1 || out.Header.Get("h") != "a" {
		t.Fatalf("repeated header sent %d times, first %q; want once, %q", n, out.Header.Get("h"), "a")
	}
}

// TestForwardFrameManyHeaders: with a thousand headers (the decoder's bound), half
// of them repeats, the first of each wins and each is sent once.
func TestForwardFrameManyHeaders(t *testing.T) {
	kv := []string{"destination", "/queue/q"}
	for i := 0; i < 500; i++ {
		kv = append(kv, "h"+strconv.Itoa(i), "first")
	}
	for i := 0; i < 500; i++ {
		kv = append(kv, "h"+strconv.Itoa(i), "second")
	}
	out := forwardFrame(frame.New(frame.MESSAGE, kv...), "A", "tx", nil)
	seen := map[string]bool{}
	for i := 0; i < out.Header.Len(); i++ {
		k, v := out.Header.GetAt(i)
		if seen[k] {
			t.Fatalf("header %s sent twice", k)
		}
		seen[k] = true
		if strings.HasPrefix(k, "h") && v != "first" {
			t.Fatalf("header %s = %q, want the first value", k, v)
		}
	}
	if len(seen) != 500+4 { // h0..h499, destination, transaction, path, hops
		t.Fatalf("%d distinct headers, want 504", len(seen))
	}
}

// TestOutgoingKeepsTheMessageID: a forwarded message keeps its id, except
// toward a broker it was on before, which gets an id derived from it and the
// hop count (identity.go).
func TestOutgoingKeepsTheMessageID(t *testing.T) {
	const id = "ID:vm-34201-1796035819859-4:10:-1:1:3"
	for _, c := range []struct {
		name, path, hops, remote, want string
	}{
		{"a first hop keeps the id", "", "", "B", id},
		{"a later hop keeps the id", "|A|", "1", "C", id},
		{"back to a broker in the path: a new producer id", "|A|B|", "2", "A", "ID:vm-34201-1796035819859-4:10-bnr3:-1:1:3"},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := &transport.Message{ID: id, Redelivered: true}
			if c.path != "" {
				m.Props = []transport.Property{{Name: hop.PathHeader, Value: c.path}, {Name: hop.HopsHeader, Value: c.hops}}
			}
			out := outgoing(m, "Z", c.remote, nil)
			if out.ID != c.want {
				t.Errorf("id = %q, want %q", out.ID, c.want)
			}
			if out.Redelivered {
				t.Error("the redelivered flag travelled")
			}
		})
	}
}

func TestRevisitID(t *testing.T) {
	for _, c := range []struct {
		id   string
		hop  int
		want string
	}{
		{"ID:vm-1-2-3:4:-1:1:5", 2, "ID:vm-1-2-3:4-bnr2:-1:1:5"},
		{"ID:vm-1-2-3:4-bnr2:-1:1:5", 4, "ID:vm-1-2-3:4-bnr2-bnr4:-1:1:5"},
		{"order-17", 1, "order-17-bnr1"},
		{"T_1@@session-x@@1", 3, "T_1@@session-x@@1-bnr3"},
		{":1:2:3", 1, ":1:2:3-bnr1"},
	} {
		if got := revisitID(c.id, c.hop); got != c.want {
			t.Errorf("revisitID(%q, %d) = %q, want %q", c.id, c.hop, got, c.want)
		}
	}
}
