package bridge

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/brokernet/brokernet/destination"
	"github.com/brokernet/brokernet/transport"
)

// Full queues: a RabbitMQ queue with a length limit and x-overflow
// reject-publish refuses what overflows, and RabbitMQ 3.10 answers the
// refusal by ending the publishing connection (its STOMP reader has no
// handler for the publisher nack, nor has its AMQP 1.0 session), so every
// destination the bridge carries is interrupted and what was in flight is
// sent again. Measured before this was contained: the connection ended about
// twice a second over STOMP, every ~3 s over AMQP 1.0, for as long as the
// queue stayed full.
//
// When a session with a remote broker that can tell (transport.QueueLimiter)
// ends with messages in flight, the bridge reads the limits of the queues
// they were sent to; each queue that refuses what overflows is remembered,
// with the room it has left (its limit less what it holds and less what the
// bridge sent it lately: the broker's statistics lag by up to 5 s). From
// then on its deliveries wait in the rate limits' queues (rate.go), unsettled
// on the local broker, while the room is spent; the session reads the room
// again every fullRecheck. The other destinations flow, the connection
// stays up, and nothing is lost. A full queue is reported: log, /status
// (Blocked, with the reason), /readyz and brokernet_blocked_destinations.
// Topics are never limited here: amq.topic routes a message to any number of
// queues.

// fullRecheck is how often a limited queue's room is read again.
const fullRecheck = 2 * time.Second

// statsLag is how many rechecks back what the bridge sent may still be
// missing from RabbitMQ's statistics (collected every 5 s by default).
const statsLag = 4

// forgetAfter is how many reads in a row (a minute's) must find a limited
// queue at most half full before the bridge forgets it and sends to it
// freely again: the room estimate counts what was sent within the
// statistics' lag, so a queue with a small limit gets at most its limit per
// ~8 s while remembered, even with a fast consumer. Should it fill up again,
// the next refusal finds it. (After 5 reads, 10 s, a consumer slower than
// the bridge refilled a 50-message queue while it drained: three more
// connection ends over AMQP 1.0 in TestFullQueueIsContained.)
const forgetAfter = 30

// maxFullQueues bounds the limited queues a bridge remembers.
const maxFullQueues = 1024

// fullQueue is one limited queue of the remote broker.
type fullQueue struct {
	dest  destination.Destination // on the remote broker
	limit transport.QueueRoom     // as last read
	// msgs and bytes are the room left to spend (bytes only with a byte limit).
	msgs, bytes int
	// sent counts what was sent to it per recheck period, the current first.
	sent, sentBytes [statsLag]int
	// since is when it was found without room; zero while it has room.
	since   time.Time
	waiting int // deliveries waiting for room, as the session last counted
	next    time.Time
	// roomy counts the reads in a row that found it at most half full.
	roomy int
}

// fullQueues are a bridge's limited remote queues. Sessions come and go; the
// limits stay.
type fullQueues struct {
	n  atomic.Int32 // len(m), read on every delivery without the lock
	mu sync.Mutex
	m  map[string]*fullQueue // by remote destination
}

func (f *fullQueues) any() bool { return f.n.Load() > 0 }

// admit says how long a message of size bytes for queue d must wait: at
// least other (what else holds it back, the rate limits), longer while d's
// room is spent (until its next read, at least fullRecheck/4). When it need
// not wait, the message's room is spent: one lock per delivery.
func (f *fullQueues) admit(d destination.Destination, size int, now time.Time, other time.Duration) time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	q := f.m[d.String()]
	if q != nil && (q.msgs <= 0 || q.limit.MaxBytes > 0 && q.bytes < size) {
		other = max(other, q.next.Sub(now), fullRecheck/4)
	}
	if other > 0 {
		return other
	}
	if q != nil {
		q.msgs--
		q.bytes -= size
		q.sent[0]++
		q.sentBytes[0] += size
	}
	return 0
}

// update records what a queue takes, read now; sentNow is what was in flight
// to it (on a session's end). It reports the queue's state for the log:
// whether it is limited and whether it has room.
func (f *fullQueues) update(d destination.Destination, r transport.QueueRoom, sentNow int, now time.Time) (q fullQueue, known, hadRoom bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	k := d.String()
	cur := f.m[k]
	if !r.Limited {
		if cur != nil {
			delete(f.m, k)
			f.n.Store(int32(len(f.m)))
		}
		return fullQueue{}, false, false
	}
	if cur == nil {
		if len(f.m) >= maxFullQueues {
			return fullQueue{}, false, false
		}
		if f.m == nil {
			f.m = make(map[string]*fullQueue)
		}
		cur = &fullQueue{dest: d}
		f.m[k] = cur
		f.n.Store(int32(len(f.m)))
	} else {
		hadRoom = cur.since.IsZero()
		copy(cur.sent[1:], cur.sent[:statsLag-1])
		copy(cur.sentBytes[1:], cur.sentBytes[:statsLag-1])
		cur.sent[0], cur.sentBytes[0] = 0, 0
	}
	if (r.MaxMessages == 0 || r.Messages <= r.MaxMessages/2) && (r.MaxBytes == 0 || r.Bytes <= r.MaxBytes/2) && sentNow == 0 {
		cur.roomy++
	} else {
		cur.roomy = 0
	}
	if cur.roomy >= forgetAfter {
		delete(f.m, k)
		f.n.Store(int32(len(f.m)))
		return fullQueue{}, false, hadRoom
	}
	cur.sent[0] += sentNow
	var lagMsgs, lagBytes int
	for i := range statsLag {
		lagMsgs += cur.sent[i]
		lagBytes += cur.sentBytes[i]
	}
	cur.limit, cur.next = r, now.Add(fullRecheck)
	cur.msgs = 1 << 30
	if r.MaxMessages > 0 {
		cur.msgs = r.MaxMessages - r.Messages - lagMsgs
	}
	cur.bytes = 0
	if r.MaxBytes > 0 {
		cur.bytes = r.MaxBytes - r.Bytes - lagBytes
	}
	full := cur.msgs <= 0 || (r.MaxBytes > 0 && cur.bytes <= 0)
	switch {
	case full && cur.since.IsZero():
		cur.since = now
	case !full:
		cur.since = time.Time{}
	}
	return *cur, true, hadRoom
}

// due lists the queues whose room is to be read again.
func (f *fullQueues) due(now time.Time) []destination.Destination {
	f.mu.Lock()
	defer f.mu.Unlock()
	var ds []destination.Destination
	for _, q := range f.m {
		if !now.Before(q.next) {
			ds = append(ds, q.dest)
		}
	}
	return ds
}

// postpone sets the next read of d after a failed one.
func (f *fullQueues) postpone(d destination.Destination, now time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if q := f.m[d.String()]; q != nil {
		q.next = now.Add(fullRecheck)
	}
}

// setWaiting records the deliveries waiting for each queue's room.
func (f *fullQueues) setWaiting(counts map[string]int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for k, q := range f.m {
		q.waiting = counts[k]
	}
}

// nFull counts the queues without room.
func (f *fullQueues) nFull() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, q := range f.m {
		if !q.since.IsZero() {
			n++
		}
	}
	return n
}

// blocked lists the queues without room, for Bridge.Blocked.
func (f *fullQueues) blocked() []BlockedInfo {
	f.mu.Lock()
	defer f.mu.Unlock()
	var list []BlockedInfo
	for _, q := range f.m {
		if q.since.IsZero() {
			continue
		}
		list = append(list, BlockedInfo{
			Destination: q.dest.String(), Since: q.since, Waiting: q.waiting,
			Reason: "the remote queue is full (" + q.limit.Policy + "): it refuses what is sent to it, so its messages wait on the local broker",
		})
	}
	slices.SortFunc(list, func(a, b BlockedInfo) int { return a.Since.Compare(b.Since) })
	return list
}

// inFlightQueues counts the session's messages in flight per remote queue:
// those whose confirmation was outstanding when the session ended.
func (s *session) inFlightQueues() map[string]inFlightQueue {
	out := make(map[string]inFlightQueue)
	s.eachInFlight(func(e *entry) {
		if e.out == nil || e.done || e.out.Destination.Kind != destination.Queue {
			return
		}
		k := e.out.Destination.String()
		q := out[k]
		q.dest = e.out.Destination
		q.n++
		out[k] = q
	})
	return out
}

type inFlightQueue struct {
	dest destination.Destination
	n    int
}

// maxQueueReads bounds the queues read after a session ended.
const maxQueueReads = 64

// findFullQueues reads, after session s ended on the remote side, the limits
// of the queues its messages in flight were sent to. It reports whether one
// of them refuses what overflows: the likely reason the remote broker ended
// the connection (then no message in flight is a suspect, bridge.go).
func (b *Bridge) findFullQueues(ctx context.Context, s *session) bool {
	if s.remote == nil {
		return false
	}
	ql, ok := s.remote.conn.(transport.QueueLimiter)
	if !ok {
		return false
	}
	inFlight := s.inFlightQueues()
	if len(inFlight) == 0 || len(inFlight) > maxQueueReads {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	found := false
	for _, x := range inFlight {
		r, err := ql.QueueRoom(ctx, x.dest)
		if err != nil {
			b.log.Debug().Err(err).Str("destination", x.dest.String()).Msg("could not read the remote queue's limits")
			continue
		}
		q, known, _ := b.full.update(x.dest, r, x.n, time.Now())
		if !known {
			continue
		}
		found = true
		b.log.Warn().Str("destination", x.dest.String()).Str("limit", r.Policy).Int("messages", r.Messages).
			Int("room", max(q.msgs, 0)).Int("in_flight", x.n).
			Msg("the remote queue refuses what overflows it and the remote broker ended the connection (RabbitMQ reject-publish): its messages are sent only as it has room, and wait on the local broker meanwhile; other destinations flow")
	}
	if found {
		b.publishBlockedCount()
	}
	return found
}

// fullReadWait is how long the reconnect waits for the remote broker's queue
// limits after a session ended: a host whose management API has not answered
// by then is most likely cut off (a frozen path), and its read must not hold
// back the reconnect (it takes up to 10 s to give up).
const fullReadWait = 2 * time.Second

// awaitFullQueues runs findFullQueues for session s, which ended, and waits
// for it at most fullReadWait; known is false when it did not end by then
// (it goes on, and what it finds takes effect when it ends).
func (b *Bridge) awaitFullQueues(ctx context.Context, s *session) (found, known bool) {
	if s.localFailed {
		return false, true
	}
	done := make(chan bool, 1)
	go func() { done <- b.findFullQueues(ctx, s) }()
	t := time.NewTimer(fullReadWait)
	defer t.Stop()
	select {
	case found = <-done:
		return found, true
	case <-t.C:
		b.log.Debug().Dur("waited", fullReadWait).Msg("reconnecting before the remote queue limits were read")
	case <-ctx.Done():
	}
	return false, false
}

// watchFullQueues reads the room of the remote broker's limited queues every
// fullRecheck until ctx ends.
func (s *session) watchFullQueues(ctx context.Context) {
	ql, ok := s.remote.conn.(transport.QueueLimiter)
	if !ok {
		return
	}
	t := time.NewTicker(fullRecheck / 4)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !s.b.full.any() {
			continue
		}
		for _, d := range s.b.full.due(time.Now()) {
			rctx, cancel := context.WithTimeout(ctx, fullRecheck)
			r, err := ql.QueueRoom(rctx, d)
			cancel()
			if ctx.Err() != nil {
				return
			}
			now := time.Now()
			if err != nil {
				s.log.Debug().Err(err).Str("destination", d.String()).Msg("could not read the remote queue's limits")
				s.b.full.postpone(d, now)
				continue
			}
			q, known, hadRoom := s.b.full.update(d, r, 0, now)
			switch {
			case !known:
				s.log.Info().Str("destination", d.String()).Msg("the remote queue no longer refuses what overflows it, or has had room for a while: its messages flow freely")
			case hadRoom && !q.since.IsZero():
				s.log.Warn().Str("destination", d.String()).Str("limit", r.Policy).Int("messages", r.Messages).
					Msg("the remote queue is full: its messages wait on the local broker until it has room")
			case !hadRoom && q.since.IsZero():
				s.log.Info().Str("destination", d.String()).Int("room", q.msgs).Msg("the remote queue has room again")
			}
			s.b.publishBlockedCount()
		}
	}
}

// countFullWaiting counts, for /status, the deliveries waiting in the rate
// limits' queues for a limited queue's room.
func (s *session) countFullWaiting() {
	if !s.b.full.any() {
		return
	}
	counts := make(map[string]int)
	for _, ds := range s.shaper.waiting {
		for _, ev := range ds.shaped.items[ds.shaped.head:] {
			d := ev.Msg.Destination
			if d.Name == "" {
				d = ds.sub.Destination
			}
			counts[s.b.renames.remote(d).String()]++
		}
	}
	s.b.full.setWaiting(counts)
}
