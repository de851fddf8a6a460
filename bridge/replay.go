package bridge

import (
	"context"
	"time"

	"github.com/brokernet/brokernet/internal/mailbox"
)

// replayState holds the timing of replay subscriptions (ReplayWhenNoConsumers):
// each waits ReplayDelay before it is made; its messages are forwarded at most
// ReplayRateLimit per second (a rule of the rate limits, rate.go).
type replayState struct {
	// due carries replay subscriptions whose delay has passed.
	due *mailbox.Mailbox[string]
	// timers are the delays running, by subscription id; a fired one is removed,
	// so they never accumulate over a session's life.
	timers map[string]*time.Timer
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
// still wants them.
func (s *session) onReplayDue(ctx context.Context) error {
	for _, id := range s.replay.due.Take() {
		delete(s.replay.timers, id)
		if sub, ok := s.table.Lookup(id); ok && sub.Replay {
			if err := s.subscribe(ctx, sub); err != nil {
				return err
			}
		}
	}
	return nil
}
