// Package metrics defines brokernet's Prometheus series: per-bridge counters,
// gauges and histograms read from bridge.Stats at scrape time, plus the Go
// runtime and process collectors.
package metrics

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/brokernet/brokernet/bridge"
)

// Bridge is a running bridge with the labels it is reported under.
type Bridge struct {
	// Connector names the network connector ("bridge" for `brokernet bridge`,
	// "sidecar" for `brokernet sidecar`).
	Connector string
	// Peer is the discovered peer's key (a redacted URI, "masterslave" or a
	// gossip member name).
	Peer string
	// Reverse marks the peer → local direction of a duplex pair (not a label;
	// the topology page draws the broker it starts from as a peer).
	Reverse bool
	*bridge.Bridge
}

// Source lists the bridges running now. Bridges come and go with discovery
// and reloads, so series are read at scrape time instead of registered per
// bridge: a bridge that stopped leaves no stale series behind.
type Source func() []Bridge

var labels = []string{"connector", "peer", "bridge"}

func desc(name, help string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, labels, nil)
}

// The series. Names that existed before the move to client_golang are kept.
var (
	upDesc            = desc("brokernet_bridge_up", "1 while both ends of the bridge are connected and demand is being tracked.")
	forwardedDesc     = desc("brokernet_forwarded_messages_total", "Messages confirmed by the remote broker and acknowledged on the local broker.")
	bytesDesc         = desc("brokernet_forwarded_bytes_total", "Body bytes of the messages the remote broker confirmed.")
	duplicatesDesc    = desc("brokernet_duplicates_suppressed_total", "Topic message copies not forwarded because another route of the same bridge forwarded the message.")
	deadLetteredDesc  = desc("brokernet_dead_lettered_total", "Messages moved to the local broker's dead-letter queue after the remote broker refused them.")
	advisoriesDesc    = desc("brokernet_advisories_total", "Remote consumer advisories applied.")
	badAdvisoriesDesc = desc("brokernet_bad_advisories_total", "Malformed consumer advisories skipped (remote and local).")
	sessionsDesc      = desc("brokernet_sessions_total", "Sessions in which both ends connected and the bridge came up.")
	reconnectsDesc    = desc("brokernet_reconnects_total", "Sessions or connection attempts that ended in an error; each is followed by a reconnect after back-off.")
	demandDesc        = desc("brokernet_demand_subscriptions", "Demand subscriptions the local broker confirmed.")
	pendingDesc       = desc("brokernet_pending_demand_subscriptions", "Demand subscriptions sent to the local broker and not yet confirmed.")
	inFlightDesc      = desc("brokernet_in_flight_messages", "Messages forwarded and not yet acknowledged on the local broker (the window in use).")
	windowDesc        = desc("brokernet_window_messages", "The most messages the bridge keeps in flight (--window).")
	heldDesc          = desc("brokernet_held_messages", "Messages held back on a local broker without selectors (RabbitMQ) because they already visited the remote broker or spent their hops.")
	blockedDesc       = desc("brokernet_blocked_destinations", "Destinations whose messages the remote broker holds back without confirming them (a full queue under producer flow control); the others keep flowing.")
	remoteHeldDesc    = desc("brokernet_remote_held", "1 while the remote broker has confirmed nothing the bridge sent for blockedAfter (a RabbitMQ memory or disk alarm blocks every publisher), 0 otherwise.")
	rateLimitedDesc   = desc("brokernet_rate_limited_messages", "Deliveries waiting on the bridge for a rate limit (rateLimit, byteRateLimit, destinationRateLimits, replayRateLimit), unacknowledged on the local broker.")
	stuckDesc         = desc("brokernet_stuck_messages", "Queue messages on the local broker that a remote consumer waits for, that the bridge cannot forward (visited the remote broker or out of hops) and that no local consumer took.")
	latencyDesc       = desc("brokernet_forward_latency_seconds", "Time from a message's delivery by the local broker to the remote broker's confirmation of its transaction.")
	movesDesc         = desc("brokernet_message_moves", "For each message replayed (replayWhenNoConsumers), how often it has been replayed with this time (BrokernetMoves; capped by maxReplays).")
	batchDesc         = desc("brokernet_commit_batch_messages", "Messages per remote transaction confirmed by the remote broker.")
)

// collector turns the Source's bridges into series at each scrape.
type collector struct{ src Source }

var _ prometheus.Collector = collector{}

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{upDesc, forwardedDesc, bytesDesc, duplicatesDesc, deadLetteredDesc,
		advisoriesDesc, badAdvisoriesDesc, sessionsDesc, reconnectsDesc, demandDesc, pendingDesc,
		inFlightDesc, windowDesc, heldDesc, blockedDesc, remoteHeldDesc, rateLimitedDesc, stuckDesc, latencyDesc, batchDesc, movesDesc} {
		ch <- d
	}
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	seen := make(map[[3]string]bool)
	for _, b := range c.src() {
		lv := [3]string{b.Connector, b.Peer, b.Name()}
		if seen[lv] {
			// Two bridges under one label set would make the scrape fail;
			// bridge names are unique per connector and peer, so this is a
			// bridge being replaced during a reload.
			continue
		}
		seen[lv] = true
		st := b.Stats()
		up := 0.0
		if b.Up() {
			up = 1
		}
		gauge := func(d *prometheus.Desc, v float64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, lv[:]...)
		}
		counter := func(d *prometheus.Desc, v int64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), lv[:]...)
		}
		gauge(upDesc, up)
		counter(forwardedDesc, st.Forwarded.Load())
		counter(bytesDesc, st.ForwardedBytes.Load())
		counter(duplicatesDesc, st.Duplicates.Load())
		counter(deadLetteredDesc, st.DeadLettered.Load())
		counter(advisoriesDesc, st.Advisories.Load())
		counter(badAdvisoriesDesc, st.BadAdvisories.Load())
		counter(sessionsDesc, st.Sessions.Load())
		counter(reconnectsDesc, st.SessionFailure.Load())
		gauge(demandDesc, float64(st.DemandSubs.Load()))
		gauge(pendingDesc, float64(st.PendingSubs.Load()))
		gauge(inFlightDesc, float64(st.InFlight.Load()))
		gauge(windowDesc, float64(b.Window()))
		gauge(heldDesc, float64(st.Held.Load()))
		gauge(stuckDesc, float64(st.Stuck.Load()))
		gauge(blockedDesc, float64(st.BlockedDestinations.Load()))
		gauge(remoteHeldDesc, float64(st.RemoteHeld.Load()))
		gauge(rateLimitedDesc, float64(st.RateLimited.Load()))
		for d, h := range map[*prometheus.Desc]*bridge.Histogram{latencyDesc: st.ForwardLatency, batchDesc: st.CommitBatch, movesDesc: st.Moves} {
			if h == nil {
				continue
			}
			buckets, count, sum := h.Snapshot()
			ch <- prometheus.MustNewConstHistogram(d, count, sum, buckets, lv[:]...)
		}
	}
}

// NewRegistry returns a registry holding the bridge series of src, the Go
// runtime and process collectors, and brokernet_build_info.
func NewRegistry(src Source, version string) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collector{src: src},
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "brokernet_build_info",
			Help:        "Always 1; the version label is the running build.",
			ConstLabels: prometheus.Labels{"version": version},
		}, func() float64 { return 1 }),
	)
	return reg
}

// Handler serves reg in the Prometheus exposition formats.
func Handler(reg *prometheus.Registry) http.Handler {
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
}
