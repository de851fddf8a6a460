package bridge

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/brokernet/brokernet/transport"
)

// A remote broker that confirms nothing: sent in batches (a RabbitMQ
// remote), every message of every destination waits on the same
// confirmations, so a broker that stops confirming holds the whole bridge.
// RabbitMQ does so over STOMP, saying nothing on the connection, while a
// memory or disk alarm is in force: it stops reading from every connection
// that publishes. (Its AMQP 1.0 plugin, 3.10.8, blocks nothing during an
// alarm: TestRemoteAlarmIsReported.)
// Once the oldest unconfirmed batch has waited Config.BlockedAfter the bridge
// reports the hold (log, Bridge.RemoteHold, Stats, /readyz) and, from a
// remote that can tell (transport.AlarmReporter), why; it reports again when
// confirmations flow. Nothing is lost meanwhile: what is not confirmed stays
// unsettled on the local broker. (Sent one by one, to ActiveMQ, each
// destination is reported on its own: isolate.go.)

// alarmRecheck is how often the alarms are read again while the remote holds.
const alarmRecheck = 5 * time.Second

// RemoteHold is a remote broker holding every message sent to it, for /status.
type RemoteHold struct {
	// Since is when the hold was found: the oldest unconfirmed batch had
	// waited BlockedAfter then.
	Since time.Time `json:"since"`
	// Unconfirmed are the messages forwarded and not yet confirmed.
	Unconfirmed int `json:"unconfirmed"`
	// Alarms are the broker's alarms in force, as it reports them ("memory
	// alarm on rabbit@host"); AlarmsErr why they could not be read.
	Alarms    []string `json:"alarms,omitempty"`
	AlarmsErr string   `json:"alarms_error,omitempty"`
}

// String says what holds the bridge, for logs and /readyz.
func (h *RemoteHold) String() string {
	s := "the remote broker has confirmed nothing since " + h.Since.UTC().Format(time.TimeOnly) + " (" + strconv.Itoa(h.Unconfirmed) + " messages wait, unsettled on the local broker)"
	switch {
	case len(h.Alarms) > 0:
		s += ": " + strings.Join(h.Alarms, ", ") + " (RabbitMQ blocks every publishing connection until it clears)"
	case h.AlarmsErr != "":
		s += "; its alarms could not be read: " + h.AlarmsErr
	}
	return s
}

// remoteHoldState is what the session's loop tells its hold watchdog, which
// must see a hold even while the loop itself waits: a send blocks while the
// broker grants no credit (AMQP 1.0) or reads nothing (TCP).
type remoteHoldState struct {
	// oldestCommit is when the oldest batch awaiting its confirmation was
	// committed, sendStart when a send to the remote broker under way began
	// (Unix nanoseconds; 0: none).
	oldestCommit atomic.Int64
	sendStart    atomic.Int64
}

// noteCommits records when the oldest batch awaiting confirmation went.
func (s *session) noteCommits() {
	var oldest int64
	for _, tx := range s.inCommit {
		if at := tx.committed.UnixNano(); oldest == 0 || at < oldest {
			oldest = at
		}
	}
	s.rh.oldestCommit.Store(oldest)
}

// watchRemoteHold reports, until ctx ends, a remote broker that confirmed no
// batch, or took no message, for BlockedAfter; it reads the broker's alarms
// while the hold lasts, and reports when the broker confirms again.
func (s *session) watchRemoteHold(ctx context.Context) {
	ar, canTell := s.remote.conn.(transport.AlarmReporter)
	t := time.NewTicker(min(time.Second, s.cfg.BlockedAfter/2))
	defer t.Stop()
	var (
		since, checked time.Time
		alarms         []string
		alarmsErr      string
	)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := time.Now()
		oldest := time.Duration(0)
		for _, at := range []int64{s.rh.oldestCommit.Load(), s.rh.sendStart.Load()} {
			if at != 0 {
				oldest = max(oldest, now.Sub(time.Unix(0, at)))
			}
		}
		held := oldest >= s.cfg.BlockedAfter
		switch {
		case held && since.IsZero():
			since, checked, alarms, alarmsErr = now, time.Time{}, nil, ""
			s.log.Warn().Int64("unconfirmed", s.b.stats.InFlight.Load()).Dur("oldest", oldest).
				Msg("the remote broker confirms nothing (a RabbitMQ memory or disk alarm?): messages wait unsettled on the local broker")
		case !held && !since.IsZero():
			s.log.Info().Dur("held_for", now.Sub(since)).Msg("the remote broker confirms messages again")
			since = time.Time{}
			s.b.setRemoteHold(nil)
			continue
		case !held:
			continue
		}
		if canTell && now.Sub(checked) >= alarmRecheck {
			checked = now
			actx, cancel := context.WithTimeout(ctx, alarmRecheck)
			got, err := ar.Alarms(actx)
			cancel()
			if ctx.Err() != nil {
				return
			}
			errText := ""
			if err != nil {
				errText = err.Error()
			}
			if !slices.Equal(got, alarms) || errText != alarmsErr {
				switch {
				case len(got) > 0:
					s.log.Warn().Strs("alarms", got).Msg("the remote broker blocks publishers: a resource alarm is in force")
				case err != nil:
					s.log.Warn().Err(err).Msg("the remote broker confirms nothing and its alarms could not be read")
				}
			}
			alarms, alarmsErr = got, errText
		}
		s.b.setRemoteHold(&RemoteHold{Since: since, Unconfirmed: int(s.b.stats.InFlight.Load()), Alarms: slices.Clone(alarms), AlarmsErr: alarmsErr})
	}
}

func (b *Bridge) setRemoteHold(h *RemoteHold) {
	b.blockedMu.Lock()
	b.remoteHold = h
	b.blockedMu.Unlock()
	var n int64
	if h != nil {
		n = 1
	}
	b.stats.RemoteHeld.Store(n)
}

// RemoteHold reports the remote broker holding every message of the bridge
// (nil: it confirms).
func (b *Bridge) RemoteHold() *RemoteHold {
	b.blockedMu.Lock()
	defer b.blockedMu.Unlock()
	if b.remoteHold == nil {
		return nil
	}
	h := *b.remoteHold
	h.Alarms = slices.Clone(h.Alarms)
	return &h
}
