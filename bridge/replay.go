package bridge

import (
	"context"
	"strconv"
	"time"

	"github.com/brokernet/brokernet/hop"
	"github.com/brokernet/brokernet/internal/mailbox"
	"github.com/brokernet/brokernet/transport"
)

// No flip-flopping: a queue message replayed to where its consumer went may
// see that consumer move back, and be replayed again, without end while
// consumers keep moving. Every replay counts in the message
// (hop.MovesHeader) and stamps when it happened (hop.MovedAtHeader); replay
// subscriptions take only messages replayed fewer than MaxReplays times (a
// selector clause, demand.Options.MaxReplays), and a replayed message waits
// ReplayCooldown after its last replay before it goes again (in the rate
// limits' queues, rate.go). Stats.Moves is the distribution.

// DefaultReplayCooldown is Config.ReplayCooldown's default.
const DefaultReplayCooldown = 5 * time.Second

// MovesBuckets are the bounds of Stats.Moves, in replays.
var MovesBuckets = []float64{1, 2, 3, 4, 5, 6, 8, 10, 15, 20, 50}

// stampMove counts one more replay in out, sent now.
func (s *session) stampMove(out *transport.Message, now time.Time) {
	moves := 1
	props := out.Props[:0]
	for _, p := range out.Props {
		switch p.Name {
		case hop.MovesHeader:
			moves = propInt(p.Value) + 1
			continue
		case hop.MovedAtHeader:
			continue
		}
		props = append(props, p)
	}
	out.Props = append(props,
		transport.Property{Name: hop.MovesHeader, Value: strconv.Itoa(moves)},
		transport.Property{Name: hop.MovedAtHeader, Value: strconv.FormatInt(now.UnixMilli(), 10)})
	s.b.stats.Moves.Observe(float64(moves))
}

// movedAt is when m was last replayed; ok is false for a message never
// replayed (or with an unreadable stamp).
func movedAt(m *transport.Message) (at time.Time, ok bool) {
	v, _ := m.Prop(hop.MovedAtHeader)
	ms := propInt64(v)
	return time.UnixMilli(ms), ms > 0
}

// propInt64 reads an integer property sent as a string (STOMP) or a number
// (OpenWire, AMQP); 0 if it is neither.
func propInt64(v any) int64 {
	switch v := v.(type) {
	case string:
		n, _ := strconv.ParseInt(v, 10, 64)
		return n
	case int32:
		return int64(v)
	case int64:
		return v
	case int:
		return int64(v)
	}
	return 0
}

func propInt(v any) int { return int(propInt64(v)) }

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
