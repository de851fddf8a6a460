package metrics

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/brokernet/brokernet/bridge"
	"github.com/brokernet/brokernet/internal/testkit/stomptest"
)

func TestSeriesCarryBridgeStats(t *testing.T) {
	b, err := bridge.New(bridge.Config{
		Name:   "a->b",
		Local:  stomptest.URI(t, "stomp://127.0.0.1:1"),
		Remote: stomptest.URI(t, "stomp://127.0.0.1:2"),
		Window: 64,
	})
	if err != nil {
		t.Fatal(err)
	}
	st := b.Stats()
	st.Forwarded.Add(42)
	st.ForwardedBytes.Add(4200)
	st.Duplicates.Add(3)
	st.InFlight.Store(7)
	st.SessionFailure.Add(2)
	st.ForwardLatency.Observe(0.0003)
	st.ForwardLatency.Observe(0.05)
	st.CommitBatch.Observe(10)

	reg := NewRegistry(func() []Bridge { return []Bridge{{Connector: "nc", Peer: `p"1`, Bridge: b}} }, "v-test")
	srv := httptest.NewServer(Handler(reg))
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	out := string(body)
	lbl := `{bridge="a->b",connector="nc",peer="p\"1"}`
	for _, want := range []string{
		"brokernet_bridge_up" + lbl + " 0",
		"brokernet_forwarded_messages_total" + lbl + " 42",
		"brokernet_forwarded_bytes_total" + lbl + " 4200",
		"brokernet_duplicates_suppressed_total" + lbl + " 3",
		"brokernet_dead_lettered_total" + lbl + " 0",
		"brokernet_stuck_messages" + lbl + " 0",
		"brokernet_in_flight_messages" + lbl + " 7",
		"brokernet_window_messages" + lbl + " 64",
		"brokernet_reconnects_total" + lbl + " 2",
		"# TYPE brokernet_forward_latency_seconds histogram",
		`brokernet_forward_latency_seconds_bucket{bridge="a->b",connector="nc",peer="p\"1",le="0.0002"} 0`,
		`brokernet_forward_latency_seconds_bucket{bridge="a->b",connector="nc",peer="p\"1",le="0.0004"} 1`,
		`brokernet_forward_latency_seconds_bucket{bridge="a->b",connector="nc",peer="p\"1",le="+Inf"} 2`,
		"brokernet_forward_latency_seconds_count" + lbl + " 2",
		`brokernet_commit_batch_messages_bucket{bridge="a->b",connector="nc",peer="p\"1",le="16"} 1`,
		"# TYPE brokernet_forwarded_messages_total counter",
		`brokernet_build_info{version="v-test"} 1`,
		"go_goroutines ",
		"process_resident_memory_bytes ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	if t.Failed() {
		t.Log(out)
	}
}

func TestHistogramSnapshotIsCumulative(t *testing.T) {
	h := bridge.NewHistogram([]float64{1, 2, 4})
	for _, v := range []float64{0.5, 1, 1.5, 3, 9} {
		h.Observe(v)
	}
	buckets, count, sum := h.Snapshot()
	want := map[float64]uint64{1: 2, 2: 3, 4: 4}
	for b, n := range want {
		if buckets[b] != n {
			t.Errorf("bucket le=%g holds %d, want %d", b, buckets[b], n)
		}
	}
	if count != 5 || sum != 15 {
		t.Errorf("count %d sum %g, want 5 and 15", count, sum)
	}
}
