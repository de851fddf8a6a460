package bridge

import (
	"context"
	"time"

	"github.com/brokernet/brokernet/destination"
	"github.com/brokernet/brokernet/internal/mailbox"
	"github.com/brokernet/brokernet/transport"
)

// Rate limits (and the replay cool-down, replay.go): after an outage the
// local broker holds a backlog, and a bridge taking it at full speed floods
// the remote broker and the link. Each
// RateLimit is a token bucket holding a second's worth; a delivery takes one
// token of each bucket whose rule matches it (a message of its message
// buckets, its body's length of its byte buckets) before it joins the
// window, and waits, unsettled on the local broker, while one of them is
// empty. Replays (Config.ReplayRateLimit) are one more rule. Deliveries wait
// in their subscription's queue, in order (a cumulative settlement must
// never cover a delivery still waiting), and the queues take turns, so that
// a connector-wide limit is shared fairly. The subscriptions' prefetch
// bounds what waits; the rest of the backlog stays on the local broker.

// RateLimit caps what a bridge forwards per second for the destinations
// Pattern matches (every destination when nil), taken together: Messages
// messages and Bytes bytes of message bodies; 0 is no cap on that count. A
// message larger than a second's worth of bytes still goes, alone, and the
// bucket stays empty for as long as it would have taken.
type RateLimit struct {
	Pattern  *destination.Pattern
	Messages int
	Bytes    int
}

// bucket is a token bucket filling at rate tokens a second up to rate.
type bucket struct {
	rate   float64
	tokens float64
	last   time.Time
}

func newBucket(rate int, now time.Time) *bucket {
	return &bucket{rate: float64(rate), tokens: float64(rate), last: now}
}

// wait is how long until n tokens may be taken (0: now). A take larger than
// the bucket waits for a full bucket only.
func (b *bucket) wait(now time.Time, n int) time.Duration {
	if d := now.Sub(b.last); d > 0 {
		b.tokens = min(b.rate, b.tokens+b.rate*d.Seconds())
		b.last = now
	}
	need := min(float64(n), b.rate)
	if b.tokens >= need {
		return 0
	}
	return time.Duration((need - b.tokens) / b.rate * float64(time.Second))
}

// take takes n tokens, which wait allowed; the bucket may go below empty.
func (b *bucket) take(n int) { b.tokens -= float64(n) }

// rateRule is one RateLimit's buckets.
type rateRule struct {
	pattern *destination.Pattern // nil: every destination
	replay  bool                 // matches replay subscriptions' deliveries instead of a pattern
	msgs    *bucket
	bytes   *bucket
}

func (r *rateRule) matches(ds *demandSub, d destination.Destination) bool {
	if r.replay {
		return ds.sub.Replay
	}
	return r.pattern == nil || r.pattern.Match(d)
}

// shaper holds a session's rate limits and the deliveries waiting for them.
type shaper struct {
	rules []*rateRule
	// cooldown is how long a replayed message waits after its last replay
	// before a replay subscription forwards it again (replay.go).
	cooldown time.Duration
	// full are the remote broker's limited queues (fullqueue.go), which
	// renames names.
	full    *fullQueues
	renames renames
	// matched holds the rules that match the delivery admit looks at.
	matched []*rateRule
	// waiting are the subscriptions with deliveries waiting, in turn order.
	waiting []*demandSub
	count   int // deliveries waiting
	// due is signalled when the earliest bucket a waiting delivery needs has
	// filled; armed says its timer runs.
	due   mailbox.Mailbox[struct{}]
	armed bool
	timer *time.Timer
}

func newShaper(cfg *Config, full *fullQueues, rn renames, now time.Time) *shaper {
	sh := &shaper{full: full, renames: rn}
	if cfg.ReplayCooldown > 0 && cfg.Demand.ReplayWhenNoConsumers {
		sh.cooldown = cfg.ReplayCooldown
	}
	add := func(l RateLimit, replay bool) {
		r := &rateRule{pattern: l.Pattern, replay: replay}
		if l.Messages > 0 {
			r.msgs = newBucket(l.Messages, now)
		}
		if l.Bytes > 0 {
			r.bytes = newBucket(l.Bytes, now)
		}
		sh.rules = append(sh.rules, r)
	}
	for _, l := range cfg.RateLimits {
		if l.Messages > 0 || l.Bytes > 0 {
			add(l, false)
		}
	}
	if cfg.ReplayRateLimit > 0 {
		add(RateLimit{Messages: cfg.ReplayRateLimit}, true)
	}
	return sh
}

// on reports whether any limit applies, or deliveries wait.
func (sh *shaper) on() bool {
	return sh != nil && (len(sh.rules) > 0 || sh.cooldown > 0 || sh.count > 0 || sh.full.any())
}

// admit takes the tokens ev needs and reports true, or reports how long
// until they are there.
func (sh *shaper) admit(ds *demandSub, ev transport.Event, now time.Time) (ok bool, wait time.Duration) {
	d := ev.Msg.Destination
	if d.Name == "" {
		d = ds.sub.Destination
	}
	if sh.cooldown > 0 && ds.sub.Replay {
		if at, ok := movedAt(ev.Msg); ok {
			if w := at.Add(sh.cooldown).Sub(now); w > 0 {
				return false, w
			}
		}
	}
	size := len(ev.Msg.Body)
	sh.matched = sh.matched[:0]
	for _, r := range sh.rules {
		if !r.matches(ds, d) {
			continue
		}
		sh.matched = append(sh.matched, r)
		if r.msgs != nil {
			wait = max(wait, r.msgs.wait(now, 1))
		}
		if r.bytes != nil {
			wait = max(wait, r.bytes.wait(now, size))
		}
	}
	if d.Kind == destination.Queue && sh.full.any() {
		// Waits for the rules or the queue's room; takes the room if none.
		wait = sh.full.admit(sh.renames.remote(d), size, now, wait)
	}
	if wait > 0 {
		return false, wait
	}
	for _, r := range sh.matched {
		if r.msgs != nil {
			r.msgs.take(1)
		}
		if r.bytes != nil {
			r.bytes.take(size)
		}
	}
	return true, 0
}

// push queues ev behind ds's waiting deliveries.
func (sh *shaper) push(ds *demandSub, ev transport.Event) {
	if ds.shaped.len() == 0 {
		sh.waiting = append(sh.waiting, ds)
	}
	ds.shaped.push(ev)
	sh.count++
}

// minShapeWait batches releases: at 500 msg/s a wake-up lets about five
// messages go instead of one, for at most that much more latency.
const minShapeWait = 10 * time.Millisecond

// arm signals due after wait, unless a signal is already on its way.
func (sh *shaper) arm(wait time.Duration) {
	if sh.armed {
		return
	}
	sh.armed = true
	sh.timer = time.AfterFunc(max(wait, minShapeWait), func() { sh.due.Push(struct{}{}) })
}

// drop forgets every waiting delivery: the local broker redelivers them
// after the session, or takes them back with their subscription.
func (sh *shaper) drop() {
	for _, ds := range sh.waiting {
		ds.shaped = eventQueue{}
	}
	sh.waiting, sh.count = nil, 0
}

func (sh *shaper) stop() {
	if sh != nil && sh.timer != nil {
		sh.timer.Stop()
	}
}

// shape reports whether ev must wait for the rate limits, and queues it if
// so: behind its subscription's waiting deliveries, or for tokens.
func (s *session) shape(ev transport.Event) bool {
	if !s.shaper.on() {
		return false
	}
	ds, ok := s.subs[ev.Sub]
	if !ok || ds.removing {
		return false
	}
	if ds.shaped.len() == 0 {
		ok, wait := s.shaper.admit(ds, ev, time.Now())
		if ok {
			return false
		}
		s.shaper.arm(wait)
	}
	s.shaper.push(ds, ev)
	s.b.stats.RateLimited.Store(int64(s.shaper.count))
	return true
}

// onShapeDue lets waiting deliveries go as the buckets allow, one
// subscription's at a time in turn, and sets the timer for the rest.
func (s *session) onShapeDue(ctx context.Context) error {
	sh := s.shaper
	sh.due.Take()
	sh.armed = false
	if s.draining {
		return nil
	}
	var next time.Duration
	for moved := true; moved && sh.count > 0; {
		moved = false
		now := time.Now()
		// Those that waited in vain keep their turn ahead of those served.
		var unserved, served []*demandSub
		for i, ds := range sh.waiting {
			if cur, ok := s.subs[ds.sub.ID]; !ok || cur != ds || ds.removing {
				// Gone: the broker takes its deliveries back.
				sh.count -= ds.shaped.len()
				ds.shaped = eventQueue{}
				continue
			}
			ev := ds.shaped.front()
			ok, wait := sh.admit(ds, ev, now)
			if !ok {
				if next == 0 || wait < next {
					next = wait
				}
				unserved = append(unserved, ds)
				continue
			}
			ds.shaped.pop()
			sh.count--
			moved = true
			if ds.shaped.len() > 0 {
				served = append(served, ds)
			}
			if err := s.enqueue(ctx, ev); err != nil {
				sh.waiting = append(append(unserved, served...), sh.waiting[i+1:]...)
				return err
			}
		}
		sh.waiting = append(unserved, served...)
	}
	s.b.stats.RateLimited.Store(int64(sh.count))
	if sh.count > 0 {
		sh.arm(next)
	}
	return nil
}
