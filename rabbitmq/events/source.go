// Package events reads a RabbitMQ broker's demand: it turns the events of
// the rabbitmq_event_exchange plugin's exchange amq.rabbitmq.event
// (peer-systems.md §1c), with snapshots from the management API
// (rabbitmq/mgmt), into advisory demand events. Its Source is the
// transport.DemandSource of a RabbitMQ broker, whatever protocol carries the
// messages: the events are read over STOMP, because on 3.10 their messages
// carry their data over AMQP 1.0 in no field at all, over STOMP as string
// headers (booleans and tables are dropped; verified-here.md). The STOMP
// connection is the caller's (Config.Dial; transport/stomp gives it), so that
// this package sits below package transport and the transports that offer it.
//
//   - consumer.created / consumer.deleted (headers queue, vhost, consumer_tag,
//     channel = the channel's pid, prefetch_count) give queue demand;
//   - binding.created / binding.deleted with source_name amq.topic give topic
//     demand: a RabbitMQ topic subscriber is a queue bound to amq.topic, and
//     its binding key (with "#" read as ActiveMQ's ">") names the topic;
//   - channel.closed (header pid) ends the consumers of that channel, because
//     since 3.12.5 an abrupt close emits no consumer.deleted;
//     connection.closed triggers an early resynchronisation.
//
// The exchange publishes only while it has a binding, and at most once, so
// Source binds first, then takes a snapshot through the management API
// and reconciles. Consumers in /api/consumers come from the statistics
// collector, which lags the broker by up to collect_statistics_interval (5 s
// by default; about 1 s measured), while bindings in /api/bindings are read
// from the broker's tables. A consumer therefore has two possible identities:
// a channel pid (events) and a channel name (snapshot). Source counts
// snapshot-only consumers per (queue, consumer tag) and corrects that count
// from later snapshots, for each (queue, tag) that had no event during the
// statistics window before the snapshot, where the snapshot is known exact.
package events

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path"
	"sort"
	"strconv"
	"time"

	"github.com/go-stomp/stomp/v3/frame"
	"github.com/rs/zerolog"

	"github.com/brokernet/brokernet/advisory"
	"github.com/brokernet/brokernet/destination"
	"github.com/brokernet/brokernet/internal/backoff"
	"github.com/brokernet/brokernet/rabbitmq"
	"github.com/brokernet/brokernet/rabbitmq/mgmt"
)

// EventExchange is the plugin's exchange.
const EventExchange = "amq.rabbitmq.event"

// rabbitEventKeys are the routing keys Source binds, in order.
var rabbitEventKeys = []string{"consumer.*", "binding.*", "channel.closed", "connection.closed"}

// Feed is a STOMP connection to the broker as Source reads the event
// exchange from it (transport/stomp's Conn, behind Config.Dial).
type Feed interface {
	// Subscribe binds dest ("/exchange/amq.rabbitmq.event/KEY") as
	// subscription id with the given ack mode, and waits for the broker to
	// accept it. A missing exchange gives an error wrapping ErrNoExchange.
	Subscribe(ctx context.Context, id, dest, ack string) error
	// Deliveries are the MESSAGE frames received, in order; it is closed
	// when the connection ends.
	Deliveries() <-chan *frame.Frame
	// Done is closed when the connection has ended; Err then says why.
	Done() <-chan struct{}
	Err() error
	// Abort ends the connection at once.
	Abort()
}

// ErrNoExchange is what a Feed's Subscribe wraps when the broker has no
// exchange amq.rabbitmq.event in the vhost (the plugin is not enabled, or
// its event_exchange.vhost is another).
var ErrNoExchange = errors.New("no such exchange")

// NoExchange marks err, a Subscribe the broker refused for want of the
// exchange, as ErrNoExchange; its message stays err's.
func NoExchange(err error) error { return noExchange{err} }

type noExchange struct{ error }

func (e noExchange) Unwrap() []error { return []error{e.error, ErrNoExchange} }

// Config configures a Source.
type Config struct {
	// Broker names the broker in logs and errors: a URI without credentials.
	Broker string
	// Host is the broker's host, where the management API is by default.
	Host string
	// VHost is the vhost watched. Default "/".
	VHost string
	// Login and Passcode log in to the management API.
	Login, Passcode string
	// Management is the management API URL; "" is http://Host:15672.
	Management string
	// Reconnect is the back-off between sessions (a broker URI's
	// transport.Reconnect); zero is the default (1 s doubling to 30 s).
	Reconnect backoff.Policy
	// Dial opens a STOMP connection to the broker, logged in to vhost (the
	// EventVHost). It fails with an error wrapping mgmt.ErrSetup when the
	// broker is not RabbitMQ. Required.
	Dial func(ctx context.Context, vhost string) (Feed, error)
	// EventVHost is the vhost that holds amq.rabbitmq.event (the broker's
	// event_exchange.vhost), which carries the events of every vhost.
	// Default "/". The event connection logs in there; events and
	// snapshots are filtered to VHost.
	EventVHost string
	// StatsInterval is the broker's collect_statistics_interval, how stale a
	// consumer snapshot can be. Default 5 s, RabbitMQ's default.
	StatsInterval time.Duration
	// ResyncInterval is how often a full snapshot is reconciled with the
	// events (events are at-most-once). Default 30 s; negative disables.
	ResyncInterval time.Duration
	// HTTPClient calls the management API; nil gives a 10 s timeout.
	HTTPClient *http.Client
}

// Source turns a RabbitMQ broker's events into demand Events. Create it
// with NewSource and call Run once.
type Source struct {
	cfg  Config
	log  zerolog.Logger
	mgmt *mgmt.Client
}

// maxUnreachable is how many sessions in a row may find STOMP up and the
// management API refusing connections before Run gives up with ErrSetup
// (about 10 s with the default back-off).
const maxUnreachable = 6

// statsMargin is added to StatsInterval: collection takes time too.
const statsMargin = time.Second

// NewSource checks cfg and returns a source; it does not connect.
func NewSource(cfg Config, log zerolog.Logger) (*Source, error) {
	if cfg.Host == "" {
		return nil, errors.New("RabbitMQ demand source: no host")
	}
	if cfg.Dial == nil {
		return nil, errors.New("RabbitMQ demand source: no STOMP dialer")
	}
	if cfg.VHost == "" {
		cfg.VHost = "/"
	}
	if cfg.EventVHost == "" {
		cfg.EventVHost = "/"
	}
	if cfg.StatsInterval <= 0 {
		cfg.StatsInterval = 5 * time.Second
	}
	if cfg.ResyncInterval == 0 {
		cfg.ResyncInterval = 30 * time.Second
	}
	if cfg.Management == "" {
		cfg.Management = mgmt.DefaultURL(cfg.Host)
	}
	if cfg.Reconnect.Initial <= 0 {
		cfg.Reconnect = backoff.Default()
	}
	m, err := mgmt.New(cfg.Management, cfg.Login, cfg.Passcode, cfg.HTTPClient)
	if err != nil {
		return nil, err
	}
	return &Source{cfg: cfg, log: log.With().Str("demand", "rabbitmq").Str("broker", cfg.Broker).Logger(), mgmt: m}, nil
}

// Run watches the broker until ctx ends (then it returns nil) or a setup
// problem that only the operator can fix is found (then it returns an error
// that errors.Is mgmt.ErrSetup and names the plugin or setting).
// Connection failures are logged and retried with Config.Reconnect's back-off.
//
// emit is called from Run's goroutine only, in order. Every (re)connection
// starts with an Event of Kind advisory.SnapshotStart, then a advisory.ConsumerAdded for every
// current consumer and topic subscription, then advisory.SnapshotDone: whatever the
// receiver knew from this source and was not re-added in between is gone.
// After it come advisory.ConsumerAdded / advisory.ConsumerRemoved as things change; a
// lost connection is an advisory.SourceLost before the next attempt. The IDs are
// stable for as long as the consumer lives; a Consumer's Destination is a
// Queue (a queue consumer) or a Topic (a binding on amq.topic).
func (s *Source) Run(ctx context.Context, emit func(advisory.Event)) error {
	unreachable := 0 // sessions in a row whose STOMP worked but management did not
	for attempt := 0; ; {
		up, err := s.session(ctx, emit)
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, mgmt.ErrUnreachable) {
			// A (re)starting node may open STOMP before management; a node
			// without the plugin never opens it.
			if unreachable++; unreachable >= maxUnreachable {
				err = fmt.Errorf("%w: %v", mgmt.ErrSetup, err)
			}
		} else {
			unreachable = 0
		}
		if errors.Is(err, mgmt.ErrSetup) {
			s.log.Error().Err(err).Msg("RabbitMQ demand source stopped")
			return err
		}
		if up {
			attempt = 0
		}
		emit(advisory.Event{Kind: advisory.SourceLost, ConsumerCount: -1, Err: err})
		s.log.Warn().Err(err).Dur("retry_in", s.cfg.Reconnect.Delay(attempt)).Msg("RabbitMQ demand source disconnected")
		if !s.cfg.Reconnect.Sleep(ctx, attempt) {
			return nil
		}
		attempt++
	}
}

// rabbitEvent is one parsed message of amq.rabbitmq.event.
type rabbitEvent struct {
	name     string // routing key, e.g. "consumer.created"
	vhost    string
	queue    string // consumer.*: the queue; binding.*: destination_name
	tag      string // consumer_tag
	channel  string // consumer.*: channel pid; channel.closed: pid
	prefetch int
	source   string // binding.*: source_name
	destKind string // binding.*: destination_kind
	key      string // binding.*: routing_key
}

func parseRabbitEvent(f *frame.Frame) (rabbitEvent, error) {
	h := f.Header
	ev := rabbitEvent{name: path.Base(h.Get(frame.Destination)), vhost: h.Get("vhost")}
	switch ev.name {
	case "consumer.created", "consumer.deleted":
		ev.queue, ev.tag, ev.channel = h.Get("queue"), h.Get("consumer_tag"), h.Get("channel")
		if ev.queue == "" || ev.channel == "" {
			return ev, fmt.Errorf("%s without queue or channel", ev.name)
		}
		if v := h.Get("prefetch_count"); v != "" {
			ev.prefetch, _ = strconv.Atoi(v)
		}
	case "binding.created", "binding.deleted":
		ev.source, ev.destKind = h.Get("source_name"), h.Get("destination_kind")
		ev.queue, ev.key = h.Get("destination_name"), h.Get("routing_key")
		if ev.queue == "" {
			return ev, fmt.Errorf("%s without destination_name", ev.name)
		}
	case "channel.closed", "connection.closed":
		ev.channel = h.Get("pid")
	default:
		return ev, fmt.Errorf("unexpected event %q", ev.name)
	}
	return ev, nil
}

// session runs one connection: bind, snapshot, reconcile, follow events.
// up reports whether the initial snapshot was delivered.
func (s *Source) session(ctx context.Context, emit func(advisory.Event)) (up bool, err error) {
	conn, err := s.cfg.Dial(ctx, s.cfg.EventVHost)
	if err != nil {
		return false, err
	}
	defer conn.Abort()
	// Bind first: events are published only while bound.
	for i, key := range rabbitEventKeys {
		id := advisory.BridgeTagPrefix + "events-" + strconv.Itoa(i)
		if err := conn.Subscribe(ctx, id, "/exchange/"+EventExchange+"/"+key, "auto"); err != nil {
			if errors.Is(err, ErrNoExchange) {
				return false, fmt.Errorf("%w: RabbitMQ at %s has no exchange %s in vhost %q: enable the rabbitmq_event_exchange "+
					"plugin (rabbitmq-plugins enable rabbitmq_event_exchange), or name its event_exchange.vhost: %v",
					mgmt.ErrSetup, s.cfg.Broker, EventExchange, s.cfg.EventVHost, err)
			}
			return false, err
		}
	}
	m := newRabbitModel(s.cfg.VHost, s.cfg.StatsInterval+statsMargin, s.log)
	snapStart := time.Now()
	snap, err := s.snapshot(ctx)
	if err != nil {
		return false, err
	}
	m.brokerID = snap.brokerID
	m.initial(snap)
	// Events that arrived while the snapshot was taken: after it, as far as
	// the statistics lag lets us know (see the file comment).
	for _, f := range drain(conn) {
		m.applyFrame(f)
	}
	emit(advisory.Event{Kind: advisory.SnapshotStart, OriginBrokerID: m.brokerID, ConsumerCount: -1})
	m.flush(emit)
	emit(advisory.Event{Kind: advisory.SnapshotDone, OriginBrokerID: m.brokerID, ConsumerCount: -1})
	s.log.Info().Str("broker_id", m.brokerID).Int("demand", len(m.emitted)).Dur("took", time.Since(snapStart)).Msg("RabbitMQ demand snapshot")

	// First exact resynchronisation once the statistics cover the bind.
	resync := time.NewTimer(m.window)
	defer resync.Stop()
	next := time.Now().Add(m.window)
	for {
		select {
		case <-ctx.Done():
			return true, ctx.Err()
		case <-conn.Done():
			return true, conn.Err()
		case f, ok := <-conn.Deliveries():
			if !ok {
				return true, conn.Err()
			}
			if m.applyFrame(f) && time.Until(next) > m.window {
				// A close that may hide consumers we cannot attribute.
				next = time.Now().Add(m.window)
				resync.Reset(m.window)
			}
			m.flush(emit)
		case <-resync.C:
			start := time.Now()
			snap, err := s.snapshot(ctx)
			var retry time.Time
			if err != nil {
				s.log.Warn().Err(err).Msg("RabbitMQ demand resynchronisation failed")
			} else {
				for _, f := range drain(conn) {
					m.applyFrame(f)
				}
				retry = m.reconcile(snap, start)
				m.flush(emit)
			}
			wait := 24 * time.Hour
			if s.cfg.ResyncInterval > 0 {
				wait = s.cfg.ResyncInterval
			}
			if !retry.IsZero() {
				// At most one extra snapshot per statistics window.
				wait = min(wait, max(time.Until(retry), m.window))
			}
			next = time.Now().Add(wait)
			resync.Reset(wait)
		}
	}
}

// drain returns the deliveries already received, without waiting.
func drain(conn Feed) []*frame.Frame {
	var out []*frame.Frame
	for {
		select {
		case f, ok := <-conn.Deliveries():
			if !ok {
				return out
			}
			out = append(out, f)
		default:
			return out
		}
	}
}

type rabbitSnapshot struct {
	brokerID  string
	consumers []mgmt.Consumer
	bindings  []mgmt.Binding
}

func (s *Source) snapshot(ctx context.Context) (rabbitSnapshot, error) {
	var snap rabbitSnapshot
	o, err := s.mgmt.Overview(ctx)
	if err != nil {
		return snap, err
	}
	if o.DisableStats {
		return snap, fmt.Errorf("%w: management statistics are disabled on the RabbitMQ node %s: brokernet needs "+
			"/api/consumers for its consumer snapshot; unset management.disable_stats and "+
			"management_agent.disable_metrics_collector", mgmt.ErrSetup, o.Node)
	}
	if snap.brokerID, err = o.BrokerID(); err != nil {
		return snap, err
	}
	if snap.consumers, err = s.mgmt.Consumers(ctx, s.cfg.VHost); err != nil {
		return snap, err
	}
	if snap.bindings, err = s.mgmt.Bindings(ctx, s.cfg.VHost); err != nil {
		return snap, err
	}
	return snap, nil
}

// ---- the model -------------------------------------------------------------

// rabbitGroup is what both identities of a consumer share.
type rabbitGroup struct{ queue, tag string }

type rabbitLive struct {
	g        rabbitGroup
	channel  string
	prefetch int
}

type rabbitBinding struct{ queue, key string }

// rabbitModel is the source's view of the broker; only Run's goroutine uses it.
type rabbitModel struct {
	vhost    string
	window   time.Duration // StatsInterval + margin
	log      zerolog.Logger
	brokerID string

	live      map[string]*rabbitLive // channel + "\x00" + queue + "\x00" + tag
	byChannel map[string]map[string]bool
	pre       map[rabbitGroup]int // snapshot-only consumers
	preFetch  map[rabbitGroup]int
	touched   map[rabbitGroup]time.Time // last event per group

	binds        map[rabbitBinding]bool
	bindTouched  map[rabbitBinding]time.Time
	bridgeQueues map[string]bool // queues where a bridge consumer was seen

	emitted map[string]advisory.Consumer // what the receiver has been told
}

func newRabbitModel(vhost string, window time.Duration, log zerolog.Logger) *rabbitModel {
	return &rabbitModel{
		vhost: vhost, window: window, log: log,
		live: map[string]*rabbitLive{}, byChannel: map[string]map[string]bool{},
		pre: map[rabbitGroup]int{}, preFetch: map[rabbitGroup]int{}, touched: map[rabbitGroup]time.Time{},
		binds: map[rabbitBinding]bool{}, bindTouched: map[rabbitBinding]time.Time{},
		bridgeQueues: map[string]bool{}, emitted: map[string]advisory.Consumer{},
	}
}

func liveKey(channel string, g rabbitGroup) string {
	return channel + "\x00" + g.queue + "\x00" + g.tag
}

// initial loads the first snapshot of a session.
func (m *rabbitModel) initial(snap rabbitSnapshot) {
	for _, c := range snap.consumers {
		g := rabbitGroup{c.Queue.Name, c.ConsumerTag}
		m.pre[g]++
		m.preFetch[g] = c.PrefetchCount
		if rabbitmq.IsBridgeConsumerTag(c.ConsumerTag) {
			m.bridgeQueues[c.Queue.Name] = true
		}
	}
	for _, b := range snap.bindings {
		if b.Source == rabbitmq.TopicExchange && b.DestinationType == "queue" {
			m.binds[rabbitBinding{b.Destination, b.RoutingKey}] = true
		}
	}
}

// applyFrame applies one event message; malformed ones are logged and
// skipped. It reports whether the event was a close whose consumers could
// not all be attributed (worth an early resynchronisation).
func (m *rabbitModel) applyFrame(f *frame.Frame) (unattributed bool) {
	ev, err := parseRabbitEvent(f)
	if err != nil {
		m.log.Warn().Err(err).Str("destination", f.Header.Get(frame.Destination)).Msg("skipping malformed RabbitMQ event")
		return false
	}
	return m.apply(ev, time.Now())
}

func (m *rabbitModel) apply(ev rabbitEvent, now time.Time) (unattributed bool) {
	if ev.vhost != "" && ev.vhost != m.vhost {
		return false
	}
	switch ev.name {
	case "consumer.created":
		g := rabbitGroup{ev.queue, ev.tag}
		m.touched[g] = now
		if rabbitmq.IsBridgeConsumerTag(ev.tag) {
			m.bridgeQueues[ev.queue] = true
		}
		k := liveKey(ev.channel, g)
		if m.live[k] == nil {
			m.live[k] = &rabbitLive{g: g, channel: ev.channel, prefetch: ev.prefetch}
			if m.byChannel[ev.channel] == nil {
				m.byChannel[ev.channel] = map[string]bool{}
			}
			m.byChannel[ev.channel][k] = true
		}
	case "consumer.deleted":
		g := rabbitGroup{ev.queue, ev.tag}
		m.touched[g] = now
		k := liveKey(ev.channel, g)
		if m.live[k] != nil {
			m.dropLive(k)
		} else if m.pre[g] > 0 {
			m.pre[g]-- // a consumer from before the bind
		}
	case "channel.closed":
		keys := m.byChannel[ev.channel]
		for k := range keys {
			m.touched[m.live[k].g] = now
			m.dropLive(k)
		}
		// Without consumer.deleted (3.12.5+), a snapshot-only consumer of
		// this channel can only be found gone by a snapshot.
		return len(keys) == 0 && m.totalPre() > 0
	case "connection.closed":
		return m.totalPre() > 0
	case "binding.created", "binding.deleted":
		if ev.source != rabbitmq.TopicExchange || ev.destKind != "queue" {
			return false
		}
		b := rabbitBinding{ev.queue, ev.key}
		m.bindTouched[b] = now
		if ev.name == "binding.created" {
			m.binds[b] = true
		} else {
			delete(m.binds, b)
			m.forgetBridgeQueue(ev.queue)
		}
	}
	return false
}

func (m *rabbitModel) dropLive(k string) {
	l := m.live[k]
	delete(m.live, k)
	if ch := m.byChannel[l.channel]; ch != nil {
		delete(ch, k)
		if len(ch) == 0 {
			delete(m.byChannel, l.channel)
		}
	}
}

func (m *rabbitModel) totalPre() int {
	n := 0
	for _, v := range m.pre {
		n += v
	}
	return n
}

// forgetBridgeQueue drops the bridge mark of a queue with no binding left.
func (m *rabbitModel) forgetBridgeQueue(q string) {
	if !m.bridgeQueues[q] {
		return
	}
	for b := range m.binds {
		if b.queue == q {
			return
		}
	}
	delete(m.bridgeQueues, q)
}

// reconcile corrects the model from a later snapshot taken from start on.
// A group is corrected only if no event touched it since start minus the
// statistics window: then the snapshot shows its state exactly. retry is
// when the earliest group left alone that has snapshot-only consumers and
// disagrees with the snapshot can be corrected (zero if none): a consumer
// created while the first snapshot was taken is counted twice, by its event
// and by the snapshot, until a snapshot corrects it, which must not wait
// for the next ResyncInterval. (Without snapshot-only consumers the events
// are right and the snapshot merely lags.)
func (m *rabbitModel) reconcile(snap rabbitSnapshot, start time.Time) (retry time.Time) {
	cutoff := start.Add(-m.window)
	seen := map[rabbitGroup]int{}
	for _, c := range snap.consumers {
		g := rabbitGroup{c.Queue.Name, c.ConsumerTag}
		seen[g]++
		m.preFetch[g] = c.PrefetchCount
	}
	have := map[rabbitGroup][]string{}
	for k, l := range m.live {
		have[l.g] = append(have[l.g], k)
	}
	groups := map[rabbitGroup]bool{}
	for g := range seen {
		groups[g] = true
	}
	for g := range have {
		groups[g] = true
	}
	for g := range m.pre {
		groups[g] = true
	}
	for g := range groups {
		want, live := seen[g], have[g]
		got := len(live) + m.pre[g]
		if t := m.touched[g]; t.After(cutoff) {
			if at := t.Add(m.window + time.Millisecond); want != got && m.pre[g] > 0 && (retry.IsZero() || at.Before(retry)) {
				retry = at
			}
			continue
		}
		switch {
		case want > got:
			m.log.Debug().Str("queue", g.queue).Str("tag", g.tag).Int("missed", want-got).Msg("RabbitMQ snapshot shows consumers the events missed")
			m.pre[g] += want - got
		case want < got:
			extra := got - want
			cut := min(extra, m.pre[g])
			m.pre[g] -= cut
			extra -= cut
			sort.Strings(live)
			for _, k := range live[:extra] {
				m.dropLive(k) // its consumer.deleted never came
			}
		}
		if m.pre[g] == 0 {
			delete(m.pre, g)
		}
		if seen[g] == 0 && len(have[g]) == 0 {
			delete(m.touched, g)
		}
	}

	snapBinds := map[rabbitBinding]bool{}
	for _, b := range snap.bindings {
		if b.Source == rabbitmq.TopicExchange && b.DestinationType == "queue" {
			snapBinds[rabbitBinding{b.Destination, b.RoutingKey}] = true
		}
	}
	// Bindings are read without lag; only events racing the read are unsure.
	bcut := start.Add(-statsMargin)
	for b := range snapBinds {
		if !m.binds[b] && !m.bindTouched[b].After(bcut) {
			m.binds[b] = true
		}
	}
	for b := range m.binds {
		if !snapBinds[b] && !m.bindTouched[b].After(bcut) {
			delete(m.binds, b)
		}
	}
	for b, t := range m.bindTouched {
		if !t.After(bcut) {
			delete(m.bindTouched, b)
		}
	}
	return retry
}

// demand computes the current demand set.
func (m *rabbitModel) demand() map[string]advisory.Consumer {
	out := map[string]advisory.Consumer{}
	prefix := "rabbitmq:" + m.vhost + ":"
	queueDemand := func(q, tag string) bool {
		return !rabbitmq.IsBridgeConsumerTag(tag) && !rabbitmq.IsBridgeQueue(q) && !rabbitmq.PrivateQueue(q)
	}
	for _, l := range m.live {
		if queueDemand(l.g.queue, l.g.tag) {
			id := prefix + "consumer:" + l.g.queue + "/" + l.g.tag + "@" + l.channel
			out[id] = advisory.Consumer{ID: id, Destination: destination.Destination{Kind: destination.Queue, Name: l.g.queue}, Prefetch: l.prefetch}
		}
	}
	for g, n := range m.pre {
		if !queueDemand(g.queue, g.tag) {
			continue
		}
		for i := 1; i <= n; i++ {
			id := prefix + "consumer:" + g.queue + "/" + g.tag + "#" + strconv.Itoa(i)
			out[id] = advisory.Consumer{ID: id, Destination: destination.Destination{Kind: destination.Queue, Name: g.queue}, Prefetch: m.preFetch[g]}
		}
	}
	for b := range m.binds {
		if rabbitmq.IsBridgeQueue(b.queue) || m.bridgeQueues[b.queue] {
			continue
		}
		name, err := rabbitmq.TopicFromKey(b.key)
		if err != nil || b.key == "" {
			m.log.Debug().Str("queue", b.queue).Str("key", b.key).Msg("ignoring amq.topic binding without an ActiveMQ topic counterpart")
			continue
		}
		id := prefix + "binding:" + b.queue + "/" + b.key
		out[id] = advisory.Consumer{ID: id, Destination: destination.Destination{Kind: destination.Topic, Name: name}}
	}
	return out
}

// flush emits the difference between the demand and what was emitted:
// removals first, then additions, each in ID order. A session's model starts
// empty, so its first flush emits every current consumer (the body of a
// snapshot). It recomputes the whole demand: O(consumers) per event.
func (m *rabbitModel) flush(emit func(advisory.Event)) {
	want := m.demand()
	var gone, added []string
	for id := range m.emitted {
		if _, ok := want[id]; !ok {
			gone = append(gone, id)
		}
	}
	for id := range want {
		if _, ok := m.emitted[id]; !ok {
			added = append(added, id)
		}
	}
	sort.Strings(gone)
	sort.Strings(added)
	for _, id := range gone {
		c := m.emitted[id]
		delete(m.emitted, id)
		emit(advisory.Event{Kind: advisory.ConsumerRemoved, Consumer: c, OriginBrokerID: m.brokerID, ConsumerCount: -1})
	}
	for _, id := range added {
		c := want[id]
		m.emitted[id] = c
		emit(advisory.Event{Kind: advisory.ConsumerAdded, Consumer: c, OriginBrokerID: m.brokerID, ConsumerCount: -1})
	}
}
