package bridge

import (
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/brokernet/brokernet/hop"
	"github.com/brokernet/brokernet/transport"
)

// This file holds what the bridge publishes for operators (metrics, /status):
// lock-free histograms the session records into, what it records per confirmed
// batch, and the snapshot of the demand subscriptions. The session owns the data; it only ever stores copies
// here, so readers never touch session state.

// Histogram is a fixed-bucket histogram safe for one writer and any number of
// concurrent readers, so the session can record without taking a lock.
type Histogram struct {
	bounds []float64       // upper bounds, ascending; +Inf is implicit
	counts []atomic.Uint64 // per bucket (not cumulative), len(bounds)+1
	sum    atomic.Uint64   // float64 bits
	count  atomic.Uint64
}

// NewHistogram returns a histogram with the given ascending upper bounds.
func NewHistogram(bounds []float64) *Histogram {
	return &Histogram{bounds: slices.Clone(bounds), counts: make([]atomic.Uint64, len(bounds)+1)}
}

// Observe records one value.
func (h *Histogram) Observe(v float64) {
	i, _ := slices.BinarySearch(h.bounds, v)
	h.counts[i].Add(1)
	for {
		old := h.sum.Load()
		if h.sum.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+v)) {
			break
		}
	}
	h.count.Add(1)
}

// Snapshot returns the bucket upper bounds with their cumulative counts (the
// Prometheus form), the number of observations and their sum. Under concurrent
// writes the three may disagree by the observations in progress.
func (h *Histogram) Snapshot() (buckets map[float64]uint64, count uint64, sum float64) {
	buckets = make(map[float64]uint64, len(h.bounds))
	var cum uint64
	for i, b := range h.bounds {
		cum += h.counts[i].Load()
		buckets[b] = cum
	}
	return buckets, h.count.Load(), math.Float64frombits(h.sum.Load())
}

// LatencyBuckets are the bounds of Stats.ForwardLatency, in seconds: 100 µs to
// about 26 s, doubling (bench/RESULTS.md measured p50 from 0.1 ms to tens of ms).
var LatencyBuckets = func() []float64 {
	b := make([]float64, 19)
	for i := range b {
		b[i] = 0.0001 * math.Pow(2, float64(i))
	}
	return b
}()

// BatchBuckets are the bounds of Stats.CommitBatch, in messages per transaction.
var BatchBuckets = []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024}

// observeCommitted records a batch the remote broker answered: its size, and
// for each message it accepted the time since the message was taken from the
// local broker and its body bytes.
func (s *session) observeCommitted(tx *txn, ev transport.Event) {
	st := &s.b.stats
	st.CommitBatch.Observe(float64(len(tx.entries)))
	now := time.Now()
	var bytes int64
	for i, e := range tx.entries {
		if ev.Outcomes != nil && i < len(ev.Outcomes) && ev.Outcomes[i].Outcome != transport.Accepted {
			continue
		}
		st.ForwardLatency.Observe(now.Sub(e.taken).Seconds())
		if e.out != nil {
			bytes += int64(len(e.out.Body))
		}
	}
	st.ForwardedBytes.Add(bytes)
}

// DemandInfo describes one demand subscription on the local broker, for /status.
type DemandInfo struct {
	// ID is the STOMP subscription id.
	ID string `json:"id"`
	// Destination is the demanded queue or topic ("queue://orders").
	Destination string `json:"destination"`
	// Consumers are the remote consumer ids served (none for static, replay
	// and offline durable subscriptions).
	Consumers []string `json:"consumers"`
	// Priority is the consumer priority the subscription was made with.
	Priority int `json:"priority"`
	// Path lists the brokers the demand came through, the consumer's first.
	Path []string `json:"path"`
	// Origin names what the demand is for, the same on every route to it:
	// the original consumer's id, or a name for a group of consumers (a
	// conduit subscription, "static") (hop.Tag.Origin).
	Origin string `json:"origin,omitempty"`
	// Selector is what the subscription selects beyond the hop clauses: the
	// remote consumers' own selectors and any content filter ("" for none).
	Selector string `json:"selector,omitempty"`
	// Durable is the durable subscription name, if durable.
	Durable string `json:"durable,omitempty"`
	Static  bool   `json:"static,omitempty"`
	Replay  bool   `json:"replay,omitempty"`
	// Active is true once the local broker confirmed the SUBSCRIBE.
	Active bool `json:"active"`
}

// demandView is the last published copy of a session's demand subscriptions.
type demandView struct {
	mu   sync.Mutex
	subs []DemandInfo
}

// publishDemand stores a copy of subs for Bridge.Demand. Called by the session
// goroutine whenever its subscriptions change.
func (b *Bridge) publishDemand(subs map[string]*demandSub) {
	out := make([]DemandInfo, 0, len(subs))
	for _, ds := range subs {
		d := DemandInfo{
			ID:          ds.sub.ID,
			Destination: ds.sub.Destination.String(),
			Consumers:   slices.Clone(ds.sub.Consumers),
			Priority:    ds.sub.Priority,
			Selector:    ds.sub.UserSelector,
			Durable:     ds.sub.DurableName,
			Static:      ds.sub.Static,
			Replay:      ds.sub.Replay,
			Active:      ds.active,
		}
		if _, tag, ok := hop.ParseSelector(ds.sub.Selector); ok {
			d.Path = slices.Clone(tag.Path)
			d.Origin = tag.Origin
		}
		out = append(out, d)
	}
	slices.SortFunc(out, func(x, y DemandInfo) int {
		if x.Destination != y.Destination {
			if x.Destination < y.Destination {
				return -1
			}
			return 1
		}
		if x.ID < y.ID {
			return -1
		}
		if x.ID > y.ID {
			return 1
		}
		return 0
	})
	b.demand.mu.Lock()
	b.demand.subs = out
	b.demand.mu.Unlock()
}

// Demand returns the bridge's demand subscriptions as last published by its
// session, sorted by destination; empty while the bridge is down.
func (b *Bridge) Demand() []DemandInfo {
	b.demand.mu.Lock()
	defer b.demand.mu.Unlock()
	return slices.Clone(b.demand.subs)
}
