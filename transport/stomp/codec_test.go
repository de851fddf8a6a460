package stomp

import (
	"bufio"
	"bytes"
	"errors"
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

func FuzzDecoder(f *testing.F) {
	f.Add([]byte("MESSAGE\nk:v\ncontent-length:3\n\nabc\x00"))
	f.Add([]byte("RECEIPT\nreceipt-id:1\n\n\x00\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		dec := decoder{r: bufio.NewReaderSize(bytes.NewReader(in), 16), maxFrame: 4096, unescape: true}
		for i := 0; i < 10; i++ {
			if _, err := dec.readFrame(); err != nil && err != errHeartBeat {
				return
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
