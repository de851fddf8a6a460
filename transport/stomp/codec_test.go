package stomp

import (
	"bufio"
	"bytes"
	"errors"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-stomp/stomp/v3/frame"
)

func TestCodecRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		f    *frame.Frame
	}{
		{"text body without content-length", &frame.Frame{Command: frame.MESSAGE, Header: frame.NewHeader("destination", "/queue/a", "x", "1"), Body: []byte("hello")}},
		{"binary body with NUL and content-length", &frame.Frame{Command: frame.MESSAGE, Header: frame.NewHeader("content-length", "5"), Body: []byte{1, 0, 2, 0, 3}}},
		{"escaped header values", &frame.Frame{Command: frame.MESSAGE, Header: frame.NewHeader("k:ey", "a:b\nc\\d\re"), Body: nil}},
		{"repeated headers keep order", &frame.Frame{Command: frame.MESSAGE, Header: frame.NewHeader("h", "first", "h", "second")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			w := bufio.NewWriter(&buf)
			enc := encoder{w: w, escape: true}
			if err := enc.writeFrame(tt.f); err != nil {
				t.Fatal(err)
			}
			w.Flush()
			dec := decoder{r: bufio.NewReaderSize(&buf, 16), maxFrame: 1 << 20, unescape: true}
			got, err := dec.readFrame()
			if err != nil {
				t.Fatal(err)
			}
			if got.Command != tt.f.Command || !bytes.Equal(got.Body, tt.f.Body) {
				t.Fatalf("got %s %q, want %s %q", got.Command, got.Body, tt.f.Command, tt.f.Body)
			}
			if got.Header.Len() != tt.f.Header.Len() {
				t.Fatalf("got %d headers, want %d", got.Header.Len(), tt.f.Header.Len())
			}
			for i := 0; i < got.Header.Len(); i++ {
				gk, gv := got.Header.GetAt(i)
				wk, wv := tt.f.Header.GetAt(i)
				if gk != wk || gv != wv {
					t.Errorf("header %d = %q:%q, want %q:%q", i, gk, gv, wk, wv)
				}
			}
		})
	}
}

func TestDecoderHeartBeatsAndCRLF(t *testing.T) {
	in := "\n\r\nMESSAGE\r\nk:v\r\n\r\nbody\x00"
	dec := decoder{r: bufio.NewReader(strings.NewReader(in)), maxFrame: 1024}
	for i := 0; i < 2; i++ {
		if _, err := dec.readFrame(); err != errHeartBeat {
			t.Fatalf("read %d: err = %v, want heart-beat", i, err)
		}
	}
	f, err := dec.readFrame()
	if err != nil {
		t.Fatal(err)
	}
	if f.Header.Get("k") != "v" || string(f.Body) != "body" {
		t.Fatalf("got %v %q", f.Header, f.Body)
	}
}

func TestDecoderLimits(t *testing.T) {
	tests := []struct {
		name, in string
	}{
		{"content-length above limit", "MESSAGE\ncontent-length:100000\n\n"},
		{"body above limit", "MESSAGE\n\n" + strings.Repeat("x", 2000) + "\x00"},
		{"header above limit", "MESSAGE\nk:" + strings.Repeat("x", 2000) + "\n\n\x00"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dec := decoder{r: bufio.NewReaderSize(strings.NewReader(tt.in), 16), maxFrame: 1024}
			if _, err := dec.readFrame(); !errors.Is(err, ErrFrameTooLarge) {
				t.Fatalf("err = %v, want ErrFrameTooLarge", err)
			}
		})
	}
}

func TestDecoderRejectsMalformed(t *testing.T) {
	for _, in := range []string{
		"BOGUS\n\n\x00",
		"MESSAGE\nno-colon\n\n\x00",
		"MESSAGE\ncontent-length:x\n\n\x00",
		"MESSAGE\ncontent-length:2\n\nabc\x00",
		"MESSAGE\nk:bad\\qescape\n\n\x00",
	} {
		dec := decoder{r: bufio.NewReader(strings.NewReader(in)), maxFrame: 1024, unescape: true}
		if _, err := dec.readFrame(); err == nil || err == errHeartBeat {
			t.Errorf("%q: err = %v, want a parse error", in, err)
		}
	}
}

// FuzzDecoderDifferential decodes the same bytes with brokernet's decoder and
// with go-stomp's frame reader, an independent implementation: whatever brokernet
// accepts, go-stomp reads identically. brokernet may refuse more, each for a
// reason written down here: frames a client must never receive (SEND, …), frames
// above its size limits, and undefined escape sequences (STOMP 1.2: "MUST be
// treated as a fatal protocol error"; go-stomp passes them through).
func FuzzDecoderDifferential(f *testing.F) {
	f.Add([]byte("MESSAGE\nk:v\ncontent-length:3\n\nabc\x00"))
	f.Add([]byte("RECEIPT\nreceipt-id:1\n\n\x00\n"))
	f.Add([]byte("MESSAGE\r\nk\\c:a\\nb\\\\\r\nk:second\r\n\r\nbody\x00"))
	f.Add([]byte("ERROR\nmessage:bad\\q\n\n\x00"))
	f.Add([]byte("\n\nCONNECTED\nversion:1.2\nheart-beat:0,0\n\n\x00"))
	f.Add([]byte("MESSAGE\ncontent-length:+5\n\nabcde\x00"))
	f.Add([]byte("SEND\ndestination:/queue/a\n\nx\x00"))
	f.Fuzz(func(t *testing.T, in []byte) {
		// go-stomp allocates whatever content-length announces (brokernet's reason
		// to have its own decoder): keep it from allocating gigabytes here.
		for _, m := range contentLengthRE.FindAllSubmatch(in, -1) {
			if n, err := strconv.Atoi(string(m[1])); err != nil || n > len(in) {
				return
			}
		}
		ours := decoder{r: bufio.NewReaderSize(bytes.NewReader(in), 16), maxFrame: 1 << 20,
			maxHeaders: 1000, maxHeaderBytes: 64 << 10, unescape: true}
		theirs := frame.NewReader(bytes.NewReader(in))
		for i := 0; i < 4; i++ {
			f1, err1 := ours.readFrame()
			f2, err2 := theirs.Read()
			if err1 == errHeartBeat {
				if err2 != nil || f2 != nil {
					t.Fatalf("frame %d: brokernet read a heart-beat, go-stomp %v %v", i, f2, err2)
				}
				continue
			}
			if err1 != nil {
				if err2 != nil {
					return // both refuse
				}
				switch {
				case f2 == nil:
					t.Fatalf("frame %d: brokernet: %v; go-stomp read a heart-beat", i, err1)
				case errors.Is(err1, ErrFrameTooLarge),
					strings.Contains(err1.Error(), "escape"),
					strings.Contains(err1.Error(), "unexpected stomp command") && !isServerCommand(f2.Command):
				default:
					t.Fatalf("frame %d: brokernet refused what go-stomp read as %s %v: %v", i, f2.Command, f2.Header, err1)
				}
				return // the streams part here
			}
			if err2 != nil || f2 == nil {
				t.Fatalf("frame %d: brokernet read %s %v %q; go-stomp: %v", i, f1.Command, f1.Header, f1.Body, err2)
			}
			if f1.Command != f2.Command || !bytes.Equal(f1.Body, f2.Body) {
				t.Fatalf("frame %d: brokernet %s %q, go-stomp %s %q", i, f1.Command, f1.Body, f2.Command, f2.Body)
			}
			if f1.Command == frame.CONNECTED {
				continue // CONNECTED headers are not escaped (STOMP 1.2); go-stomp unescapes them anyway
			}
			if !sameHeaders(f1.Header, f2.Header) {
				t.Fatalf("frame %d: headers differ: brokernet %v, go-stomp %v", i, f1.Header, f2.Header)
			}
		}
	})
}

var contentLengthRE = regexp.MustCompile(`content-length:([0-9]+)`)

func isServerCommand(c string) bool {
	return c == frame.CONNECTED || c == frame.MESSAGE || c == frame.RECEIPT || c == frame.ERROR
}

func sameHeaders(a, b *frame.Header) bool {
	if a.Len() != b.Len() {
		return false
	}
	for i := 0; i < a.Len(); i++ {
		k1, v1 := a.GetAt(i)
		k2, v2 := b.GetAt(i)
		if k1 != k2 || v1 != v2 {
			return false
		}
	}
	return true
}

// FuzzCodecRoundTrip encodes a frame built from the fuzzer's values and decodes it
// again, with brokernet's decoder and with go-stomp's reader: both give back the
// same command, headers (escaped on the wire, repeats kept) and body.
func FuzzCodecRoundTrip(f *testing.F) {
	f.Add(uint8(0), "destination", "/queue/a", "k:x", "v\\n\r", []byte("hello"))
	f.Add(uint8(1), "receipt-id", "77", "", "", []byte{})
	f.Add(uint8(2), "message", "a\nb", "x", "", []byte{1, 0, 2})
	f.Fuzz(func(t *testing.T, cmd uint8, k1, v1, k2, v2 string, body []byte) {
		command := []string{frame.MESSAGE, frame.RECEIPT, frame.ERROR}[int(cmd)%3]
		h := frame.NewHeader()
		for _, kv := range [][2]string{{k1, v1}, {k2, v2}} {
			if kv[0] != "" && kv[0] != frame.ContentLength {
				h.Add(kv[0], kv[1])
			}
		}
		if bytes.IndexByte(body, 0) >= 0 {
			h.Add(frame.ContentLength, strconv.Itoa(len(body)))
		}
		in := &frame.Frame{Command: command, Header: h, Body: body}
		var buf bytes.Buffer
		w := bufio.NewWriter(&buf)
		if err := (&encoder{w: w, escape: true}).writeFrame(in); err != nil {
			t.Fatal(err)
		}
		w.Flush()
		wire := buf.Bytes()
		dec := decoder{r: bufio.NewReader(bytes.NewReader(wire)), maxFrame: 1 << 20, unescape: true}
		got, err := dec.readFrame()
		if err != nil {
			t.Fatalf("decoding %q: %v", wire, err)
		}
		theirs, err := frame.NewReader(bytes.NewReader(wire)).Read()
		if err != nil || theirs == nil {
			t.Fatalf("go-stomp decoding %q: %v", wire, err)
		}
		for _, out := range []*frame.Frame{got, theirs} {
			if out.Command != in.Command || !bytes.Equal(out.Body, in.Body) || !sameHeaders(out.Header, in.Header) {
				t.Fatalf("round trip of %s %v %q gave %s %v %q (wire %q)", in.Command, in.Header, in.Body, out.Command, out.Header, out.Body, wire)
			}
		}
	})
}

func TestParseURI(t *testing.T) {
	u, err := ParseURI("stomp://user:pw@example.com:61614?vhost=prod&initialReconnectDelay=250&maxReconnectDelay=5s&backOffMultiplier=1.5&heartBeat=0")
	if err != nil {
		t.Fatal(err)
	}
	if u.Host != "example.com" || u.Port != 61614 || u.Login != "user" || u.Passcode != "pw" || u.VHost != "prod" ||
		u.Reconnect.Initial != 250*time.Millisecond || u.Reconnect.Max != 5*time.Second || u.Reconnect.Multiplier != 1.5 || u.HeartBeat != 0 {
		t.Fatalf("parsed %+v", u)
	}
	if s := u.String(); strings.Contains(s, "pw") || !strings.Contains(s, "user:***@") {
		t.Fatalf("String() = %q, want the passcode redacted", s)
	}
	d, err := ParseURI("stomp+ssl://h")
	if err != nil || !d.TLS || d.Port != DefaultPort || d.VHost != "/" {
		t.Fatalf("defaults: %+v, %v", d, err)
	}
}

func TestParseURIErrors(t *testing.T) {
	tests := []struct{ in, want string }{
		{"http://h:1", `unsupported scheme "http"`},
		{"127.0.0.1:61613", "scheme"},
		{"stomp://", "missing host"},
		{"stomp://:", "missing or malformed host"},
		{"stomp://::", "missing or malformed host"},
		{"stomp://:61613", "missing or malformed host"},
		{"stomp://h:99999", "bad port"},
		{"stomp://h:1/x", "unexpected path"},
		{"stomp://h:1?bogus=1", `unknown option "bogus"`},
		{"stomp://h:1?backOffMultiplier=0.5", "backOffMultiplier"},
		{"stomp://h:1?initialReconnectDelay=-1", "initialReconnectDelay"},
		{"stomp://h:1?initialReconnectDelay=10s&maxReconnectDelay=1s", "below initialReconnectDelay"},
		{"stomp://h:1?ca=/x", "needs stomp+ssl"},
		{"stomp://u:topsecret@h:1?bogus=1", "u:***@"},
	}
	for _, tt := range tests {
		_, err := ParseURI(tt.in)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseURI(%q) = %v, want error containing %q", tt.in, err, tt.want)
		}
		if err != nil && strings.Contains(err.Error(), "topsecret") {
			t.Errorf("ParseURI(%q) leaks the passcode: %v", tt.in, err)
		}
	}
}

func TestWithSecretsRoundTrip(t *testing.T) {
	for _, in := range []string{
		"stomp://127.0.0.1:61613",
		"stomp+ssl://u:p%40ss@h:1?vhost=prod&initialReconnectDelay=250ms&backOffMultiplier=1.5&heartBeat=0",
	} {
		u, err := ParseURI(in)
		if err != nil {
			t.Fatal(err)
		}
		back, err := ParseURI(u.WithSecrets())
		if err != nil {
			t.Fatalf("%s: %v", u.WithSecrets(), err)
		}
		if back != u {
			t.Errorf("round trip of %q: got %+v, want %+v", in, back, u)
		}
	}
}
