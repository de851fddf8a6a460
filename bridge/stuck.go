package bridge

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/brokernet/brokernet/advisory"
	"github.com/brokernet/brokernet/destination"
	"github.com/brokernet/brokernet/hop"
	"github.com/brokernet/brokernet/transport"
)

// Stuck messages are queue messages on the local broker that a consumer on the
// remote broker waits for but this bridge cannot forward there: they already
// visited the remote broker or spent their hops, so the hop filter of the
// demand subscription withholds them (activemq-network.md §2.7, "stuck
// messages"), and nobody on the local broker took them either. Typically a
// consumer moved: its messages were forwarded A→B, it left B and reconnected to
// A, and without replay (ReplayWhenNoConsumers) they wait on B for ever.
//
// The bridge measures them two ways, depending on the local broker:
//
//   - a broker with selectors and queue browsers (ActiveMQ over STOMP or
//     OpenWire): every
//     StuckInterval a connection of its own browses each demanded queue with
//     the inverse of the hop filter (hop.WithheldSelector); a message
//     seen in two browses in a row waited a whole interval there, where the
//     demand cannot take it and no local consumer took it: it is stuck. A
//     browse reads at most maxStuckBrowse messages per queue, and ActiveMQ
//     pages at most maxBrowsePageSize (400 by default) from its store for a
//     browser, so large counts are lower bounds (630 non-persistent messages
//     were counted in full here over STOMP and OpenWire, bridge/stuck_test.go);
//   - a broker without selectors (RabbitMQ): the bridge sees such messages
//     itself (hold.go); a held message that came back after its release, so
//     that no local consumer took it meanwhile, is stuck.
//
// Otherwise (AMQP 1.0 local brokers) stuck messages are not measured, and
// Stuck reports that.

// StuckInfo is one queue of the local broker holding stuck messages.
type StuckInfo struct {
	// Destination is the queue ("queue://orders").
	Destination string `json:"destination"`
	// Messages is how many are stuck (a lower bound for large queues).
	Messages int64 `json:"messages"`
}

// DefaultStuckInterval is how often stuck messages are counted: a message is
// stuck once it waited that long. Each count browses every demanded queue,
// which makes a warm ActiveMQ recompile hot code it had compiled without the
// browser's paths: every 10 s that cost broker A 9–10 µs of JIT compilation
// per message at full speed and the STOMP path about 5 % of its throughput;
// every minute it was within the noise of no count at all (bench/RESULTS.md,
// 2026-12-04).
const DefaultStuckInterval = time.Minute

// maxStuckBrowse bounds the messages one browse reads.
const maxStuckBrowse = 1000

// stuckView is the last published stuck-message count of a bridge.
type stuckView struct {
	mu       sync.Mutex
	list     []StuckInfo
	measured bool
}

// publishStuck stores what was measured (measured false: nothing could be).
func (b *Bridge) publishStuck(list []StuckInfo, measured bool) {
	slices.SortFunc(list, func(x, y StuckInfo) int { return strings.Compare(x.Destination, y.Destination) })
	var total int64
	for _, s := range list {
		total += s.Messages
	}
	b.stuck.mu.Lock()
	b.stuck.list, b.stuck.measured = list, measured
	b.stuck.mu.Unlock()
	b.stats.Stuck.Store(total)
}

// Stuck returns the queues of the local broker holding messages that a remote
// consumer waits for and that neither this bridge nor a local consumer takes,
// and whether they are measured at all (false while the bridge is down, and
// for local brokers that offer no way to count them).
func (b *Bridge) Stuck() (list []StuckInfo, measured bool) {
	b.stuck.mu.Lock()
	defer b.stuck.mu.Unlock()
	return slices.Clone(b.stuck.list), b.stuck.measured
}

// stuckMeter browses the demanded queues of one session's local broker on a
// connection of its own, so that the session's connection and its one event
// stream never carry browse traffic.
type stuckMeter struct {
	b        *Bridge
	ep       transport.Endpoint
	selector string
	interval time.Duration
	log      zerolog.Logger

	conn    transport.Conn
	browser transport.QueueBrowser
	seen    map[string]map[string]bool // message ids of the last browse, by queue
	next    int                        // browse subscriptions made, for their ids
	failing bool                       // the last round could not measure (logged once)
}

// failed logs, once per streak of failed rounds, why nothing was measured.
func (m *stuckMeter) failed(err error, msg string) {
	if !m.failing {
		m.log.Warn().Err(err).Msg(msg + " (logged once until it works again)")
	}
	m.failing = true
}

// run measures until ctx ends.
func (m *stuckMeter) run(ctx context.Context) {
	defer m.closeConn()
	t := time.NewTicker(m.interval)
	defer t.Stop()
	// At once, so that the count is known from the start (nothing has waited
	// an interval yet, so it is 0).
	m.round(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			m.round(ctx)
		}
	}
}

// round browses every demanded queue once and publishes the count.
func (m *stuckMeter) round(ctx context.Context) {
	queues := demandedQueues(m.b.Demand())
	if len(queues) == 0 {
		m.seen = nil
		m.closeConn()
		m.b.publishStuck(nil, true)
		return
	}
	if m.conn == nil {
		dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		c, err := m.ep.Dial(dctx, transport.DialOptions{})
		cancel()
		if err != nil {
			m.failed(err, "stuck messages: cannot connect to the local broker")
			m.b.publishStuck(nil, false)
			return
		}
		br, ok := c.(transport.QueueBrowser)
		if !ok {
			c.Abort()
			m.b.publishStuck(nil, false)
			return
		}
		m.conn, m.browser = c, br
	}
	seen := make(map[string]map[string]bool, len(queues))
	var out []StuckInfo
	for _, q := range queues {
		ids, err := m.browse(ctx, q)
		if err != nil {
			if ctx.Err() == nil {
				m.failed(fmt.Errorf("%s: %w", q, err), "stuck messages: browse failed")
			}
			m.closeConn()
			m.seen = nil
			m.b.publishStuck(nil, false)
			return
		}
		key := q.String()
		seen[key] = ids
		var n int64
		for id := range ids {
			if m.seen[key][id] {
				n++
			}
		}
		if n > 0 {
			out = append(out, StuckInfo{Destination: key, Messages: n})
		}
	}
	m.seen = seen
	if m.failing {
		m.log.Info().Msg("stuck messages: measured again")
		m.failing = false
	}
	m.b.publishStuck(out, true)
}

// browse returns the ids of the messages of q the demand cannot take.
func (m *stuckMeter) browse(ctx context.Context, q destination.Destination) (map[string]bool, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	m.next++
	id := fmt.Sprintf("%sstuck-%d", advisory.BridgeTagPrefix, m.next)
	if err := m.browser.Browse(ctx, id, q, m.selector, maxStuckBrowse); err != nil {
		return nil, err
	}
	defer m.conn.Unsubscribe(context.WithoutCancel(ctx), id) //nolint:errcheck // a failed connection is redialled next round
	ids := make(map[string]bool)
	for {
		select {
		case ev, ok := <-m.conn.Events():
			if !ok {
				return nil, m.conn.Err()
			}
			if ev.Sub != id {
				continue // late deliveries of an earlier browse
			}
			switch ev.Kind {
			case transport.Delivery:
				ids[ev.Msg.ID] = true
				if len(ids) >= maxStuckBrowse {
					return ids, nil
				}
			case transport.BrowseDone:
				return ids, nil
			}
		case <-ctx.Done():
			return nil, fmt.Errorf("browsing %s: %w", q, ctx.Err())
		}
	}
}

func (m *stuckMeter) closeConn() {
	if m.conn != nil {
		m.conn.Abort()
		m.conn, m.browser = nil, nil
	}
}

// demandedQueues are the concrete queues with demand from the remote broker
// (replay subscriptions are not demand; wildcards cannot be browsed).
func demandedQueues(demand []DemandInfo) []destination.Destination {
	var out []destination.Destination
	for _, d := range demand {
		if d.Replay {
			continue
		}
		q, err := destination.Parse(d.Destination)
		if err != nil || q.Kind != destination.Queue || strings.ContainsAny(q.Name, "*>") {
			continue
		}
		if !slices.Contains(out, q) {
			out = append(out, q)
		}
	}
	return out
}

// heldStuck publishes, for a local broker without selectors, the held queue
// messages that came back after a release (hold.go): no local consumer took
// them while they were on their queue.
func (s *session) heldStuck() {
	if s.cfg.StuckInterval < 0 {
		return
	}
	by := map[string]int64{}
	for _, h := range s.held {
		if h.again {
			by[h.ds.sub.Destination.String()]++
		}
	}
	out := make([]StuckInfo, 0, len(by))
	for d, n := range by {
		out = append(out, StuckInfo{Destination: d, Messages: n})
	}
	s.b.publishStuck(out, true)
}

// measureStuck starts counting stuck messages, in the way the local broker
// allows (see above). The session calls the returned stop when it ends; stop
// returns once nothing of the measurement runs any more.
func (s *session) measureStuck(ctx context.Context, lc transport.Conn, lep transport.Endpoint) (stop func()) {
	stop = func() {}
	li := lc.Info()
	_, browses := lc.(transport.QueueBrowser)
	switch {
	case s.cfg.StuckInterval < 0:
		s.b.publishStuck(nil, false)
	case !li.Selectors:
		s.heldStuck()
	case browses && li.Flavour == transport.ActiveMQ:
		m := &stuckMeter{
			b:        s.b,
			ep:       lep,
			selector: hop.WithheldSelector(s.remoteID, s.cfg.Demand.MessageTTL),
			interval: s.cfg.StuckInterval,
			log:      s.log,
		}
		ctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			m.run(ctx)
		}()
		stop = func() {
			cancel()
			<-done
		}
	default:
		s.b.publishStuck(nil, false)
	}
	return stop
}
