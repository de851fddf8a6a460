package bridge

import (
	"strconv"
	"testing"

	"github.com/go-stomp/stomp/v3/frame"
)

// BenchmarkForwardFrame measures turning one received MESSAGE into its SEND, the
// bridge's per-message work besides the codec.
func BenchmarkForwardFrame(b *testing.B) {
	m := frame.New(frame.MESSAGE,
		"content-length", "1024", "expires", "0", "destination", "/queue/bench",
		"subscription", "bn-d1", "priority", "4", "message-id", "ID:vm-34201-1796035819859-4:10:-1:1:3",
		"persistent", "true", "timestamp", "1796035828134", "ack", "ID:vm-34201-1796035819859-4:10:-1:1:3",
		"bench-seq", "12345", "bench-ts", "1796035828134000000")
	m.Body = make([]byte, 1024)
	b.ReportAllocs()
	for b.Loop() {
		forwardFrame(m, "broker-A", "bn-tx-1", nil)
	}
}

// BenchmarkForwardFrameManyHeaders: a message with the decoder's maximum of 1000
// headers must cost time linear in that count, not quadratic.
func BenchmarkForwardFrameManyHeaders(b *testing.B) {
	kv := []string{"destination", "/queue/bench"}
	for i := 0; i < 999; i++ {
		kv = append(kv, "h"+strconv.Itoa(i), "v")
	}
	m := frame.New(frame.MESSAGE, kv...)
	b.ReportAllocs()
	for b.Loop() {
		forwardFrame(m, "broker-A", "bn-tx-1", nil)
	}
}
