package bridge

import (
	"context"
	"time"

	"golang.org/x/time/rate"

	"github.com/brokernet/brokernet/internal/mailbox"
	"github.com/brokernet/brokernet/transport"
)

// replayState holds the timing of replay subscriptions (ReplayWhenNoConsumers):
// each waits ReplayDelay before it is made, and its messages are forwarded at most
// ReplayRateLimit per second.
type replayState struct {
	// due carries replay subscriptions whose delay has passed; "" is the rate
	// limiter's timer.
	due *mailbox.Mailbox[string]
	// timers are the delays running, by subscription id; a fired one is removed,
	// so they never accumulate over a session's life.
	timers map[string]*time.Timer
	// queue holds replay deliveries waiting for the rate limit, in order.
	queue     []transport.Event
	limiter   *rate.Limiter
	limitWait bool // the rate limiter's timer is armed
}

func newReplayState() replayState {
	return replayState{due: &mailbox.Mailbox[string]{}, timers: make(map[string]*time.Timer)}
}

// after makes subscription id due after d.
func (r *replayState) after(d time.Duration, id string) {
	if t, ok := r.timers[id]; ok {
		t.Stop()
	}
	r.timers[id] = time.AfterFunc(d, func() { r.due.Push(id) })
}

func (r *replayState) stop() {
	for _, t := range r.timers {
		t.Stop()
	}
	clear(r.timers)
}

// onReplayDue makes the replay subscriptions whose delay passed, if the table
// still wants them, and forwards rate-limited replays.
func (s *session) onReplayDue(ctx context.Context) error {
	for _, id := range s.replay.due.Take() {
		if id == "" {
			s.replay.limitWait = false
			if err := s.drainReplays(ctx); err != nil {
				return err
			}
			continue
		}
		delete(s.replay.timers, id)
		if sub, ok := s.table.Lookup(id); ok && sub.Replay {
			if err := s.subscribe(ctx, sub); err != nil {
				return err
			}
		}
	}
	return nil
}

// drainReplays forwards queued replay messages as the rate limit allows and
// schedules the next attempt for the rest.
func (s *session) drainReplays(ctx context.Context) error {
	r := &s.replay
	if r.limiter == nil {
		n := s.cfg.ReplayRateLimit
		r.limiter = rate.NewLimiter(rate.Limit(n), n)
	}
	for len(r.queue) > 0 {
		now := time.Now()
		if !r.limiter.AllowN(now, 1) {
			if !r.limitWait {
				res := r.limiter.ReserveN(now, 1)
				wait := res.DelayFrom(now)
				res.CancelAt(now)
				r.limitWait = true
				time.AfterFunc(wait, func() { r.due.Push("") })
			}
			return nil
		}
		ev := r.queue[0]
		r.queue[0] = transport.Event{}
		r.queue = r.queue[1:]
		ds, ok := s.subs[ev.Sub]
		if !ok || ds.removing {
			continue
		}
		if err := s.forward(ctx, ds, ev); err != nil {
			return err
		}
	}
	r.queue = nil
	return nil
}
