package stomp

import (
	"bufio"
	"bytes"
	"io"
	"testing"

	"github.com/go-stomp/stomp/v3/frame"
)

func benchFrame() *frame.Frame {
	f := frame.New(frame.MESSAGE,
		"content-length", "1024", "expires", "0", "destination", "/queue/bench",
		"subscription", "bn-d1", "priority", "4", "message-id", "ID:vm-34201-1796035819859-4:10:-1:1:3",
		"persistent", "true", "timestamp", "1796035828134", "ack", "ID:vm-34201-1796035819859-4:10:-1:1:3")
	f.Body = make([]byte, 1024)
	return f
}

// BenchmarkEncode measures writing one 1 KiB MESSAGE-sized frame.
func BenchmarkEncode(b *testing.B) {
	f := benchFrame()
	enc := encoder{w: bufio.NewWriterSize(io.Discard, 64<<10), escape: true}
	b.ReportAllocs()
	for b.Loop() {
		enc.writeFrame(f)
	}
}

// BenchmarkDecode measures reading one 1 KiB MESSAGE.
func BenchmarkDecode(b *testing.B) {
	var buf bytes.Buffer
	w := bufio.NewWriter(&buf)
	(&encoder{w: w, escape: true}).writeFrame(benchFrame())
	w.Flush()
	raw := buf.Bytes()
	r := bytes.NewReader(raw)
	dec := decoder{r: bufio.NewReaderSize(r, 64<<10), maxFrame: 1 << 20, unescape: true}
	b.ReportAllocs()
	for b.Loop() {
		r.Reset(raw)
		dec.r.Reset(r)
		if _, err := dec.readFrame(); err != nil {
			b.Fatal(err)
		}
	}
}
