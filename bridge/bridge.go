// Package bridge moves messages for one peer: a DemandForwardingBridge that watches
// consumer advisories on a remote broker, keeps matching demand subscriptions on the
// local broker and forwards what they receive, acknowledging locally only after the
// remote broker confirmed.
package bridge

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/brokernet/brokernet/demand"
	"github.com/brokernet/brokernet/destination"
	"github.com/brokernet/brokernet/internal/backoff"
	"github.com/brokernet/brokernet/transport"
)

// Config configures one direction of forwarding, LOCAL → REMOTE.
//
// A zero field means its default (see defaults), and a negative interval
// that can be turned off (CommitDelay, StuckInterval) means off. The typed
// configuration tree (config.NetworkConnector) means the same by its fields,
// so netconnector passes them on as they are.
type Config struct {
	// Name identifies the bridge in logs, for example "a->b".
	Name string
	// Local is the broker where demand subscriptions are made and messages are taken.
	Local transport.Endpoint
	// Remote is the broker whose consumers create demand and which receives messages.
	Remote transport.Endpoint
	// LocalFailover and RemoteFailover are further URIs of the same logical broker
	// (a master/slave pair): each connection attempt dials Local (Remote) and then
	// these in order, and uses the first that answers, so the bridge never talks to
	// two of them at once.
	LocalFailover, RemoteFailover []transport.Endpoint
	// LocalID and RemoteID override the broker ids learnt from the brokers.
	LocalID, RemoteID string
	// ExpectLocalID and ExpectRemoteID, when set, are the ids discovery
	// advertised for the brokers: a broker reporting another id is refused
	// (ErrWrongBroker), so a gossip member cannot pass one broker off as another.
	ExpectLocalID, ExpectRemoteID string
	// Demand holds the demand rules (conduit, TTLs, priorities, filters, prefetch).
	// Its LocalID and RemoteID are filled in by the bridge.
	Demand demand.Options
	// Window is the most messages forwarded but not yet confirmed by the remote broker.
	Window int
	// DestinationWindow is the most of the window one destination may hold
	// when the remote broker confirms messages one by one (ActiveMQ): what a
	// destination the remote blocks can take from the others. Default Window/4.
	DestinationWindow int
	// BlockedAfter is how long a destination's oldest message may wait for
	// the remote broker's confirmation before the destination is reported
	// blocked. Default 5s.
	BlockedAfter time.Duration
	// Batched sends in batches (one transaction per batch) even to a remote
	// broker that can confirm messages one by one: fewer confirmations, but
	// a destination the remote broker blocks stops every other (isolate.go).
	Batched bool
	// MaxBatch is the most messages in one remote transaction. Default Window/2.
	MaxBatch int
	// MaxCommits is the most transaction commits awaiting their receipt. Default 2:
	// while one commit is being stored the next batch fills, so batches grow with load.
	MaxCommits int
	// CommitDelay is how long an idle batch whose messages the remote broker
	// already holds — non-persistent ones, or any to a broker whose Commit is
	// not a transaction — waits for company before it is committed. Its
	// messages go out at once (transport.Flusher); only their confirmation,
	// and so the local acknowledgement, waits. At moderate rates one
	// confirmation and one acknowledgement then cover several messages instead
	// of one each: fewer frames for both brokers and fewer wake-ups for the
	// bridge, at no cost in latency and with no more in flight than Window.
	// Default DefaultCommitDelay; negative commits every idle batch at once.
	CommitDelay time.Duration
	// ReplayDelay is how long a queue must have had no local consumer, while a
	// remote broker has demand for it, before the messages that came from there are
	// replayed back (Demand.ReplayWhenNoConsumers; ActiveMQ's replayDelay).
	ReplayDelay time.Duration
	// RateLimits cap the messages and bytes forwarded per second, for every
	// destination or those matching a pattern (rate.go).
	RateLimits []RateLimit
	// ReplayCooldown is how long a replayed message must stay on the local
	// broker before it is replayed again (hop.MovedAtHeader, the clock of
	// the bridge that replayed it). Default DefaultReplayCooldown; negative
	// (config.Off) means none.
	ReplayCooldown time.Duration
	// ReplayRateLimit caps replayed messages per second (0: no limit), like
	// ActiveMQ's rateLimit on the conditional network bridge filter.
	ReplayRateLimit int
	// DeadLetterQueue is where a message the remote broker rejects (or refuses
	// MaxRefusals times) goes on the local broker. Default queue ActiveMQ.DLQ.
	DeadLetterQueue destination.Destination
	// MaxRefusals is how often the remote broker may refuse one message (end the
	// connection with an error while it was in flight) before it is dead-lettered.
	// Default 3.
	MaxRefusals int
	// StableAfter is how long a session must stay up before the reconnect back-off
	// starts again from its initial delay. Default backoff.DefaultStableAfter (10 s):
	// a broker that accepts the bridge and drops it soon after is redialled with
	// growing delays, not at the initial delay forever.
	StableAfter time.Duration
	// DrainTimeout bounds how long shutdown waits for in-flight messages. Default 30 s.
	DrainTimeout time.Duration
	// DurableOfflineTimeout is how long durable demand is kept for a remote
	// durable subscription whose subscribers are all offline; then it is
	// destroyed with the messages it kept (ActiveMQ's
	// offlineDurableSubscriberTimeout, for the bridge's own durable
	// subscriptions). 0, the default, keeps it until the remote durable
	// subscription is seen destroyed. A remote that lists its durable
	// subscriptions (transport.DurableLister: OpenWire, or STOMP with
	// ?openwirePort=) shows one destroyed while the bridge was away; otherwise
	// it cannot be told from one whose subscriber is offline (see
	// durables.go), and its demand keeps accumulating.
	DurableOfflineTimeout time.Duration
	// Renames make local destinations other ones on the remote broker
	// (rename.go); the include and exclude rules apply to local names.
	Renames []destination.Rename
	// StuckInterval is how often stuck messages are counted on the local
	// broker (stuck.go): a message is reported stuck once it waited that long.
	// Default DefaultStuckInterval; negative (config.Off) turns the
	// measurement off.
	StuckInterval time.Duration
	// Log receives one line per state change.
	Log zerolog.Logger
}

// Defaults used when a Config field is zero.
const (
	DefaultWindow   = 500
	DefaultPrefetch = 1000
	// DefaultCommitDelay: at 2,000 msg/s about ten messages share a
	// confirmation; far below the time a consumer notices.
	DefaultCommitDelay = 5 * time.Millisecond
)

func (c *Config) defaults() {
	if c.Window <= 0 {
		c.Window = DefaultWindow
	}
	if c.MaxBatch <= 0 {
		c.MaxBatch = max(1, c.Window/2)
	}
	if c.DestinationWindow <= 0 {
		c.DestinationWindow = max(1, c.Window/4)
	}
	if c.BlockedAfter <= 0 {
		c.BlockedAfter = 5 * time.Second
	}
	if c.MaxCommits <= 0 {
		c.MaxCommits = 2
	}
	if c.CommitDelay == 0 {
		c.CommitDelay = DefaultCommitDelay
	}
	if c.DeadLetterQueue.Name == "" {
		c.DeadLetterQueue = destination.Destination{Kind: destination.Queue, Name: "ActiveMQ.DLQ"}
	}
	if c.MaxRefusals <= 0 {
		c.MaxRefusals = 3
	}
	if c.DrainTimeout <= 0 {
		c.DrainTimeout = 30 * time.Second
	}
	if c.Demand.Prefetch <= 0 {
		c.Demand.Prefetch = DefaultPrefetch
	}
	if c.StuckInterval == 0 {
		c.StuckInterval = DefaultStuckInterval
	}
	if c.ReplayCooldown == 0 {
		c.ReplayCooldown = DefaultReplayCooldown
	}
	if c.Name == "" {
		c.Name = c.Local.Addr() + "->" + c.Remote.Addr()
	}
}

// ErrLoopback means both ends of a bridge are the same broker.
var ErrLoopback = errors.New("local and remote broker have the same id")

// ErrWrongBroker means a broker reported another id than discovery advertised.
var ErrWrongBroker = errors.New("broker is not the one advertised")

// Stats are running totals of one bridge, safe to read at any time.
type Stats struct {
	Forwarded      atomic.Int64 // messages confirmed by the remote broker and acknowledged locally
	ForwardedBytes atomic.Int64 // body bytes of the messages the remote broker confirmed
	Duplicates     atomic.Int64 // topic copies not forwarded because another route of this bridge did
	DeadLettered   atomic.Int64 // messages moved to the local dead-letter queue
	Advisories     atomic.Int64 // remote consumer advisories applied (counted after their changes were written)
	BadAdvisories  atomic.Int64 // malformed advisories skipped
	DemandSubs     atomic.Int64 // demand subscriptions the local broker confirmed
	PendingSubs    atomic.Int64 // demand subscriptions sent, not yet confirmed
	InFlight       atomic.Int64 // messages in the window: forwarded, not yet acknowledged locally
	Stuck          atomic.Int64 // messages known to wait where no consumer will take them
	Held           atomic.Int64 // messages held on a broker without selectors because they must stay there
	// BlockedDestinations is how many destinations the remote broker holds
	// back now without confirming their messages (isolate.go).
	BlockedDestinations atomic.Int64
	// RemoteHeld is 1 while the remote broker confirms nothing the bridge sent
	// in batches (remotehold.go), 0 otherwise.
	RemoteHeld atomic.Int64
	// RateLimited is how many deliveries wait for the rate limits now
	// (rate.go).
	RateLimited    atomic.Int64
	Sessions       atomic.Int64 // successful connections of both ends
	SessionFailure atomic.Int64 // sessions (or connection attempts) ended by an error; each is followed by a reconnect
	// TempDestinations is how many temporary destinations of the remote
	// broker are mirrored on the local one now (temp.go).
	TempDestinations atomic.Int64

	// ForwardLatency is the time from a message's delivery by the local broker
	// to the remote broker's confirmation of its transaction, in seconds.
	ForwardLatency *Histogram
	// CommitBatch is the number of messages per confirmed remote transaction.
	CommitBatch *Histogram
	// Moves is, for each message replayed, how often it has been replayed
	// with this time (hop.MovesHeader).
	Moves *Histogram
	// DurablesDestroyed counts durable demand subscriptions destroyed on the
	// local broker, with what they kept.
	DurablesDestroyed atomic.Int64
}

// Bridge forwards messages from its local to its remote broker on demand.
type Bridge struct {
	cfg     Config
	renames renames
	log     zerolog.Logger
	stats   Stats

	// refusals counts, per message id, the sessions the remote broker ended
	// while the message was in flight.
	refusals refusals

	// onRetry, when set (tests), sees each reconnect's attempt number (0-based)
	// and how long the ended session had been up.
	onRetry func(attempt int, upFor time.Duration)

	mu          sync.Mutex
	up          bool
	upCh        chan struct{} // closed while up; replaced when down
	upSince     time.Time     // when the bridge last came up
	since       time.Time     // when up last changed
	lastErr     string        // why the last session ended, "" if none did
	demandBlind string        // why the remote broker's demand is not visible, "" if it is (DemandBlind)
	ids         [2]string     // local and remote broker ids, once learnt

	demand demandView
	stuck  stuckView

	// full are the remote broker's queues that refuse what overflows them
	// (fullqueue.go).
	full fullQueues

	blockedMu sync.Mutex
	blocked   []BlockedInfo // the current session's (isolate.go)
	// remoteHold is the remote broker holding everything, nil if it does not
	// (remotehold.go).
	remoteHold *RemoteHold

	// drains counts the sessions that began draining (tests wait for it).
	drains atomic.Int64
}

// New checks cfg and returns a bridge ready to Run.
func New(cfg Config) (*Bridge, error) {
	cfg.defaults()
	if cfg.Window < 1 || cfg.MaxBatch < 1 {
		return nil, fmt.Errorf("bridge %s: window and batch must be positive", cfg.Name)
	}
	if cfg.DurableOfflineTimeout < 0 {
		return nil, fmt.Errorf("bridge %s: durable offline timeout %v is negative", cfg.Name, cfg.DurableOfflineTimeout)
	}
	if cfg.LocalID != "" && cfg.LocalID == cfg.RemoteID {
		return nil, fmt.Errorf("bridge %s: %w (%q)", cfg.Name, ErrLoopback, cfg.LocalID)
	}
	rn, err := newRenames(cfg.Renames)
	if err != nil {
		return nil, fmt.Errorf("bridge %s: %w", cfg.Name, err)
	}
	b := &Bridge{
		cfg:     cfg,
		renames: rn,
		log:     cfg.Log.With().Str("bridge", cfg.Name).Logger(),
		upCh:    make(chan struct{}),
		since:   time.Now(),
	}
	b.stats.ForwardLatency = NewHistogram(LatencyBuckets)
	b.stats.CommitBatch = NewHistogram(BatchBuckets)
	b.stats.Moves = NewHistogram(MovesBuckets)
	return b, nil
}

// Name is the bridge's configured name.
func (b *Bridge) Name() string { return b.cfg.Name }

// Stats returns the bridge's counters.
func (b *Bridge) Stats() *Stats { return &b.stats }

// Up reports whether both ends are connected and the advisories are subscribed.
func (b *Bridge) Up() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.up
}

// WaitUp blocks until the bridge is up or ctx ends.
func (b *Bridge) WaitUp(ctx context.Context) error {
	b.mu.Lock()
	ch := b.upCh
	b.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// State reports whether the bridge is up, since when it has been in that state,
// and why its last session ended ("" if none has).
func (b *Bridge) State() (up bool, since time.Time, lastErr string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.up, b.since, b.lastErr
}

// DemandBlind says why the bridge cannot see the remote broker's demand now
// ("" while it can): a remote whose demand comes from a source beside its
// connection (RabbitMQ's event exchange) before that source's first
// snapshot, or while it is lost. Such a bridge is up but forwards nothing
// new; /readyz counts it as not ready.
func (b *Bridge) DemandBlind() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.demandBlind
}

func (b *Bridge) setDemandBlind(why string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.demandBlind = why
}

// Window is the most messages the bridge keeps in flight.
func (b *Bridge) Window() int { return b.cfg.Window }

// Local and Remote are the configured broker addresses (host:port, no credentials).
func (b *Bridge) Local() string  { return b.cfg.Local.Addr() }
func (b *Bridge) Remote() string { return b.cfg.Remote.Addr() }

func (b *Bridge) setUp(up bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if up == b.up {
		return
	}
	b.up = up
	b.since = time.Now()
	if up {
		b.lastErr = ""
	}
	if up {
		b.upSince = time.Now()
		close(b.upCh)
	} else {
		b.upCh = make(chan struct{})
	}
}

// Run forwards until ctx is cancelled, reconnecting with back-off after failures.
// On cancellation it drains: no new deliveries are taken, in-flight messages are
// confirmed and acknowledged, and Run returns nil. It returns an error only for
// conditions a reconnect cannot cure (ErrLoopback).
func (b *Bridge) Run(ctx context.Context) error {
	retry := backoff.Retry{StableAfter: b.cfg.StableAfter}
	for {
		s := newSession(b)
		err := s.run(ctx)
		upFor := b.upFor()
		b.setUp(false)
		b.stats.InFlight.Store(0)
		b.stats.RateLimited.Store(0)
		b.setDemandBlind("")
		b.publishDemand(nil)
		b.publishStuck(nil, false)
		if ctx.Err() != nil {
			if err != nil && !errors.Is(err, context.Canceled) {
				b.log.Warn().Err(err).Msg("bridge stopped during drain")
			}
			b.log.Info().Msg("bridge stopped")
			return nil
		}
		b.recordFailure(err)
		if errors.Is(err, ErrLoopback) || errors.Is(err, ErrWrongBroker) {
			b.log.Error().Err(err).Msg("bridge refuses to start")
			return err
		}
		b.stats.SessionFailure.Add(1)
		fullQueue, fullKnown := b.awaitFullQueues(ctx, s)
		if errors.Is(err, transport.ErrRefused) && !s.localFailed && fullKnown && !fullQueue {
			b.refusals.add(s.suspects(), err)
		}
		attempt := retry.Ended(upFor)
		if b.onRetry != nil {
			b.onRetry(attempt, upFor)
		}
		delay, side := b.cfg.Remote.Backoff(), "remote"
		if s.localFailed {
			delay, side = b.cfg.Local.Backoff(), "local"
		}
		// One line per attempt, never more: while a broker is down this is the
		// only line, at the back-off's pace (field names in docs/operating.md, "Logs").
		wait := delay.Delay(attempt)
		b.log.Warn().Err(err).Str("side", side).Int("attempt", attempt+1).Dur("up_for", upFor).
			Str("retry_in", wait.Round(time.Millisecond).String()).Msg("bridge down, reconnecting")
		if !sleep(ctx, wait) {
			b.log.Info().Msg("bridge stopped")
			return nil
		}
	}
}

// BrokerIDs returns the local and remote broker ids the bridge learnt (or was
// configured with); both "" until its first session got that far.
func (b *Bridge) BrokerIDs() (local, remote string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.ids[0], b.ids[1]
}

func (b *Bridge) setIDs(local, remote string) {
	b.mu.Lock()
	b.ids = [2]string{local, remote}
	b.mu.Unlock()
}

// recordFailure remembers why the last session ended, for /readyz and /status.
func (b *Bridge) recordFailure(err error) {
	if err == nil {
		return
	}
	b.mu.Lock()
	b.lastErr = err.Error()
	b.mu.Unlock()
}

// sleep waits d or until ctx is done, reporting whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// checkIDs refuses brokers whose ids differ from what discovery advertised.
func checkIDs(cfg *Config, localID, remoteID string) error {
	if cfg.ExpectRemoteID != "" && remoteID != cfg.ExpectRemoteID {
		return fmt.Errorf("remote %w: it reports broker id %q, discovery advertised %q", ErrWrongBroker, remoteID, cfg.ExpectRemoteID)
	}
	if cfg.ExpectLocalID != "" && localID != cfg.ExpectLocalID {
		return fmt.Errorf("local %w: it reports broker id %q, discovery advertised %q", ErrWrongBroker, localID, cfg.ExpectLocalID)
	}
	return nil
}

// upFor is how long the bridge has been up (zero while down).
func (b *Bridge) upFor() time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.up {
		return 0
	}
	return time.Since(b.upSince)
}

// refusals counts, per message id, how often the remote broker ended a session
// while the message was in flight with a refusal. It is bounded: at most
// maxSuspects ids are remembered. Only Run's goroutine (and the session it runs)
// uses it.
type refusals struct {
	counts map[string]int
	last   string // the latest refusal's error, for the dead-letter reason
}

const maxSuspects = 1 << 14

func (r *refusals) add(ids []string, err error) {
	r.last = err.Error()
	if r.counts == nil {
		r.counts = make(map[string]int)
	}
	for _, id := range ids {
		if _, ok := r.counts[id]; !ok && len(r.counts) >= maxSuspects {
			continue
		}
		r.counts[id]++
	}
}

func (r *refusals) count(id string) int {
	return r.counts[id]
}

func (r *refusals) forget(id string) {
	if len(r.counts) > 0 {
		delete(r.counts, id)
	}
}
