// Package netsim simulates a network of brokers joined by brokernet bridges on
// a seeded clock, driving the real demand rules and advisory parser, to count
// what demand costs in networks too large to run.
//
// Nothing is re-implemented: each simulated bridge owns a demand.Table and a
// demand.Expander and does with a consumer advisory what bridge.session does
// with one (onAdvisory, onLocalAdvisory, apply): remote advisories go through
// the Expander to Table.Apply, local ones (watched only when suppression is on,
// as the session does) to Table.ApplyLocal unless they are about the bridge's
// own subscriptions, and the Changes become consumers on the simulated local
// broker. A simulated broker publishes an advisory for every consumer that
// opens or closes, rendered as ActiveMQ renders it and parsed by
// advisory.ParseActiveMQ (see advisory.go), to every bridge watching it.
//
// What is simulated is the control plane only: which demand subscriptions
// exist, how many advisories it takes, and how long (in advisory delays) until
// nothing changes any more. No message moves. Each advisory reaches each
// watching bridge after Config.Delay plus a uniform random Config.Jitter, in
// publication order per (broker, bridge) pair, as one STOMP subscription
// delivers in order; a bridge handles an advisory in no time.
package netsim

import (
	"container/heap"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/brokernet/brokernet/advisory"
	"github.com/brokernet/brokernet/demand"
	"github.com/brokernet/brokernet/destination"
	"github.com/brokernet/brokernet/hop"
)

// DefaultMaxDeliveries bounds the advisories one Measure may deliver, so that
// a configuration whose demand explodes (a mesh with a high TTL and no
// suppression) ends with ErrBudget instead of exhausting the machine.
const DefaultMaxDeliveries = 20_000_000

// ErrBudget is returned (wrapped) when a measurement delivered more than
// Config.MaxDeliveries advisories; the Sim is unusable afterwards.
var ErrBudget = errors.New("advisory budget exceeded")

// Config describes a simulated network.
type Config struct {
	// Brokers is the number of brokers, N.
	Brokers int
	// Topology is the shape of the links between them.
	Topology Topology
	// Degree is the number of neighbours of every broker in a Random topology.
	Degree int
	// NetworkTTL sets the bridges' consumer and message TTLs (networkTTL);
	// -1 is unlimited.
	NetworkTTL int
	// Suppress sets suppressDuplicateQueueSubscriptions and
	// suppressDuplicateTopicSubscriptions; with it the bridges watch their
	// local broker's advisories too.
	Suppress bool
	// Conduit sets conduitSubscriptions.
	Conduit bool
	// DecreasePriority sets decreaseNetworkConsumerPriority.
	DecreasePriority bool
	// Kind is the kind of the destinations consumers use (queue or topic).
	Kind destination.Kind
	// Delay is the fixed part of an advisory's way from the broker that
	// publishes it to a bridge that acts on it.
	Delay time.Duration
	// Jitter is the upper bound of the uniform random part added to Delay.
	Jitter time.Duration
	// Seed makes topology, delays and workload reproducible.
	Seed uint64
	// MaxDeliveries bounds the advisories one measurement may deliver; 0 is
	// DefaultMaxDeliveries.
	MaxDeliveries int64
}

// DefaultConfig returns a ring of 10 brokers with brokernet's defaults
// (networkTTL 1, conduit, decreased priority, topic suppression applied to
// both kinds) on topics, with advisories taking 2–5 ms.
func DefaultConfig() Config {
	return Config{
		Brokers: 10, Topology: Ring, Degree: 3, NetworkTTL: 1,
		Suppress: true, Conduit: true, DecreasePriority: true,
		Kind: destination.Topic, Delay: 2 * time.Millisecond, Jitter: 3 * time.Millisecond,
		Seed: 1,
	}
}

// String names the configuration in one line for reports and errors.
func (c Config) String() string {
	topo := string(c.Topology)
	if c.Topology == Random {
		topo += "-" + strconv.Itoa(c.Degree)
	}
	return fmt.Sprintf("%s N=%d ttl=%d suppress=%t conduit=%t", topo, c.Brokers, c.NetworkTTL, c.Suppress, c.Conduit)
}

// Counters are the totals of a simulation.
type Counters struct {
	// Published counts the advisories the brokers published.
	Published int64
	// Delivered counts the advisories the bridges received, on their remote
	// and local advisory subscriptions, including those they ignored.
	Delivered int64
	// Subscribes and Unsubscribes count the demand subscriptions the bridges
	// created and removed.
	Subscribes, Unsubscribes int64
}

func (c Counters) sub(o Counters) Counters {
	return Counters{c.Published - o.Published, c.Delivered - o.Delivered, c.Subscribes - o.Subscribes, c.Unsubscribes - o.Unsubscribes}
}

// Phase is what one measured step cost, from its start until no advisory was
// left in flight.
type Phase struct {
	Counters
	// Rounds is the largest number of advisory hops between the step's own
	// consumer events and a subscription change they caused: 1 when only the
	// neighbours reacted.
	Rounds int
	// Converged is the simulated time from the step's start to its last
	// subscription change (0 when nothing changed).
	Converged time.Duration
	// Quiet is the simulated time from the step's start to the last advisory
	// delivered.
	Quiet time.Duration
	// Subs is the number of demand subscriptions network-wide at the end.
	Subs int
	// PeakSubs is the largest number of demand subscriptions during the step.
	PeakSubs int
	// MeanSubs is the time-weighted mean of demand subscriptions from the
	// step's start to its last event.
	MeanSubs float64
}

// Sim is a simulated network. It is not safe for concurrent use.
type Sim struct {
	cfg     Config
	delay   *rand.Rand // advisory delays
	work    *rand.Rand // workload choices (Rand)
	now     time.Duration
	seq     uint64
	queue   eventQueue
	edges   []Edge
	brokers []*broker
	bridges []*bridge
	subs    int
	total   Counters
	err     error

	// The current measurement.
	start      time.Duration
	base       Counters
	lastChange time.Duration
	lastEvent  time.Duration
	rounds     int
	peak       int
	area       float64 // ∫ subs dt in ns since start
	areaAt     time.Duration
	budget     int64
}

// broker is a simulated broker: its consumers and who watches its advisories.
type broker struct {
	id          string
	consumers   map[string]*consumer
	count       map[destination.Destination]int
	remoteOf    []*bridge // bridges whose remote broker this is
	localOf     []*bridge // bridges whose local broker this is and that watch it
	advisorySeq uint64
	clientSeq   int64
}

// consumer is one consumer on a simulated broker: an application's (owner nil)
// or a bridge's demand subscription.
type consumer struct {
	conn     string
	session  int64
	value    int64
	dest     destination.Destination
	selector string
	priority int
	prefetch int
	owner    *bridge
}

func (c *consumer) id() string {
	return c.conn + ":" + strconv.FormatInt(c.session, 10) + ":" + strconv.FormatInt(c.value, 10)
}

// bridge is one direction of a link: demand seen on remote becomes
// subscriptions on local.
type bridge struct {
	local, remote *broker
	table         *demand.Table
	expander      *demand.Expander
	conn          string // connection id of its subscriptions on local
	watchLocal    bool
	// Advisories of one broker reach one bridge in order.
	remoteReady, localReady time.Duration
	live                    map[string]*consumer // by demand.Subscription.ID
}

// New builds the network of cfg with every bridge started and no consumer.
func New(cfg Config) (*Sim, error) {
	if cfg.Kind != destination.Queue && cfg.Kind != destination.Topic {
		return nil, fmt.Errorf("destination kind %v: want queue or topic", cfg.Kind)
	}
	if cfg.NetworkTTL < -1 {
		return nil, fmt.Errorf("network TTL %d is below -1", cfg.NetworkTTL)
	}
	if cfg.Delay < 0 || cfg.Jitter < 0 {
		return nil, fmt.Errorf("delay %v and jitter %v must not be negative", cfg.Delay, cfg.Jitter)
	}
	if cfg.MaxDeliveries <= 0 {
		cfg.MaxDeliveries = DefaultMaxDeliveries
	}
	edges, err := Edges(cfg.Topology, cfg.Brokers, cfg.Degree, rand.New(rand.NewPCG(cfg.Seed, 3)))
	if err != nil {
		return nil, err
	}
	s := &Sim{
		cfg:   cfg,
		delay: rand.New(rand.NewPCG(cfg.Seed, 1)),
		work:  rand.New(rand.NewPCG(cfg.Seed, 2)),
		edges: edges,
	}
	width := len(strconv.Itoa(cfg.Brokers - 1))
	for i := range cfg.Brokers {
		s.brokers = append(s.brokers, &broker{
			id:        fmt.Sprintf("B%0*d", width, i),
			consumers: make(map[string]*consumer),
			count:     make(map[destination.Destination]int),
		})
	}
	for _, e := range edges {
		for _, lr := range [][2]int{{e.A, e.B}, {e.B, e.A}} {
			if err := s.addBridge(s.brokers[lr[0]], s.brokers[lr[1]]); err != nil {
				return nil, err
			}
		}
	}
	s.begin()
	return s, nil
}

// addBridge starts the bridge local <- remote. It has nothing to replay: the
// brokers have no consumers yet.
func (s *Sim) addBridge(local, remote *broker) error {
	o := demand.DefaultOptions()
	o.LocalID, o.RemoteID = local.id, remote.id
	o.ConsumerTTL, o.MessageTTL = s.cfg.NetworkTTL, s.cfg.NetworkTTL
	o.Conduit = s.cfg.Conduit
	o.DecreasePriority = s.cfg.DecreasePriority
	o.SuppressQueues, o.SuppressTopics = s.cfg.Suppress, s.cfg.Suppress
	if err := o.Validate(); err != nil {
		return fmt.Errorf("bridge %s <- %s: %w", local.id, remote.id, err)
	}
	b := &bridge{
		local: local, remote: remote,
		table: demand.New(o), expander: demand.NewExpander(o),
		conn: "ID:bn-" + local.id + "-" + remote.id + "-1:1",
		// As bridge.session: the local broker's advisories only when a rule needs them.
		watchLocal: o.SuppressQueues || o.SuppressTopics || o.ReplayWhenNoConsumers,
		live:       make(map[string]*consumer),
	}
	s.bridges = append(s.bridges, b)
	remote.remoteOf = append(remote.remoteOf, b)
	if b.watchLocal {
		local.localOf = append(local.localOf, b)
	}
	return s.apply(b, b.table.Start(), 0)
}

// Config returns the configuration the Sim was built with.
func (s *Sim) Config() Config { return s.cfg }

// Edges returns the network's links.
func (s *Sim) Edges() []Edge { return slices.Clone(s.edges) }

// Bridges returns the number of bridges (two per link).
func (s *Sim) Bridges() int { return len(s.bridges) }

// BrokerID returns the id of broker i ("B07").
func (s *Sim) BrokerID(i int) string { return s.brokers[i].id }

// Now returns the simulated time.
func (s *Sim) Now() time.Duration { return s.now }

// Subs returns the number of demand subscriptions network-wide.
func (s *Sim) Subs() int { return s.subs }

// Totals returns the counters since New.
func (s *Sim) Totals() Counters { return s.total }

// Dest returns the destination of the simulation's kind with the given name.
func (s *Sim) Dest(name string) destination.Destination {
	return destination.Destination{Kind: s.cfg.Kind, Name: name}
}

// AddConsumer opens a plain consumer (no selector) of dest on broker i now and
// returns its id, for RemoveConsumer.
func (s *Sim) AddConsumer(i int, dest string) string {
	b := s.brokers[i]
	b.clientSeq++
	c := &consumer{
		conn: "ID:client-" + b.id + "-" + strconv.FormatInt(b.clientSeq, 10), session: 1, value: 1,
		dest: s.Dest(dest), prefetch: 1000,
	}
	s.open(b, c, 0)
	return c.id()
}

// RemoveConsumer closes the consumer with the given id on broker i now. It
// reports whether there was one.
func (s *Sim) RemoveConsumer(i int, id string) bool {
	b := s.brokers[i]
	c, ok := b.consumers[id]
	if !ok || c.owner != nil {
		return false
	}
	s.close(b, c, 0)
	return true
}

// At runs fn at simulated time t (now if t is earlier), between advisory
// deliveries.
func (s *Sim) At(t time.Duration, fn func()) {
	s.push(&event{at: max(t, s.now), fn: fn})
}

// Measure runs do now and then the simulation until no event is left, and
// returns what happened from the call on.
func (s *Sim) Measure(do func()) (Phase, error) {
	s.begin()
	if do != nil {
		do()
	}
	if err := s.runUntil(-1); err != nil {
		return Phase{}, err
	}
	return s.phase(), nil
}

// MeasureUntil runs do now and then the simulation up to simulated time end,
// leaving later events pending, and returns what happened from the call on.
func (s *Sim) MeasureUntil(end time.Duration, do func()) (Phase, error) {
	s.begin()
	if do != nil {
		do()
	}
	if err := s.runUntil(end); err != nil {
		return Phase{}, err
	}
	s.lastEvent = max(s.lastEvent, end)
	return s.phase(), nil
}

func (s *Sim) begin() {
	s.start, s.base = s.now, s.total
	s.lastChange, s.lastEvent = s.now, s.now
	s.rounds, s.peak = 0, s.subs
	s.area, s.areaAt = 0, s.now
	s.budget = s.total.Delivered + s.cfg.MaxDeliveries
}

func (s *Sim) phase() Phase {
	s.accumulate(s.lastEvent)
	p := Phase{
		Counters:  s.total.sub(s.base),
		Rounds:    s.rounds,
		Converged: s.lastChange - s.start,
		Quiet:     s.lastEvent - s.start,
		Subs:      s.subs,
		PeakSubs:  s.peak,
		MeanSubs:  float64(s.subs),
	}
	if span := s.lastEvent - s.start; span > 0 {
		p.MeanSubs = s.area / float64(span)
	}
	return p
}

// accumulate adds the subscriptions held since areaAt to the time integral.
func (s *Sim) accumulate(t time.Duration) {
	if t > s.areaAt {
		s.area += float64(s.subs) * float64(t-s.areaAt)
		s.areaAt = t
	}
}

// runUntil handles events in time order until none is left or, with end ≥ 0,
// the next one is later than end.
func (s *Sim) runUntil(end time.Duration) error {
	for s.queue.Len() > 0 && s.err == nil {
		if end >= 0 && s.queue[0].at > end {
			s.now = max(s.now, end)
			return nil
		}
		ev := heap.Pop(&s.queue).(*event)
		s.now = ev.at
		if ev.fn != nil {
			ev.fn()
			continue
		}
		s.lastEvent = s.now
		s.total.Delivered++
		if s.total.Delivered > s.budget {
			s.err = fmt.Errorf("%s: %w: more than %d advisories delivered in one measurement", s.cfg, ErrBudget, s.cfg.MaxDeliveries)
			break
		}
		s.handle(ev)
	}
	if end >= 0 {
		s.now = max(s.now, end)
	}
	return s.err
}

// handle is what bridge.session does with one consumer advisory.
func (s *Sim) handle(ev *event) {
	b := ev.to
	var changes []demand.Change
	if ev.local {
		// bridge.session.onLocalAdvisory: our own subscriptions are
		// recognised by the connection id.
		if strings.HasPrefix(ev.adv.Consumer.ID, b.conn+":") {
			return
		}
		changes, _ = b.table.ApplyLocal(ev.adv)
	} else {
		for _, e := range b.expander.Consumer(ev.adv) {
			ch, _ := b.table.Apply(e)
			changes = append(changes, ch...)
		}
	}
	if err := s.apply(b, changes, ev.depth); err != nil && s.err == nil {
		s.err = err
	}
}

// apply makes the changes on b's local broker (bridge.session.apply).
func (s *Sim) apply(b *bridge, changes []demand.Change, depth int) error {
	for _, ch := range changes {
		switch ch.Kind {
		case demand.Subscribe:
			n, err := strconv.ParseInt(strings.TrimPrefix(ch.Sub.ID, "bn-d"), 10, 64)
			if err != nil {
				return fmt.Errorf("bridge %s: subscription id %q is not bn-dN", b.conn, ch.Sub.ID)
			}
			c := &consumer{
				conn: b.conn, session: -1, value: n, dest: ch.Sub.Destination, selector: ch.Sub.Selector,
				priority: ch.Sub.Priority, prefetch: ch.Sub.Prefetch, owner: b,
			}
			b.live[ch.Sub.ID] = c
			s.accumulate(s.now)
			s.subs++
			s.peak = max(s.peak, s.subs)
			s.total.Subscribes++
			s.open(b.local, c, depth)
		case demand.Unsubscribe:
			c, ok := b.live[ch.Sub.ID]
			if !ok {
				return fmt.Errorf("bridge %s: unsubscribe of %s, which it does not hold", b.conn, ch.Sub.ID)
			}
			delete(b.live, ch.Sub.ID)
			s.accumulate(s.now)
			s.subs--
			s.total.Unsubscribes++
			s.close(b.local, c, depth)
		default:
			return fmt.Errorf("bridge %s: change of kind %v", b.conn, ch.Kind)
		}
		s.lastChange = s.now
		s.rounds = max(s.rounds, depth)
	}
	return nil
}

// open adds c to b and publishes its ConsumerInfo.
func (s *Sim) open(b *broker, c *consumer, depth int) {
	b.consumers[c.id()] = c
	b.count[c.dest]++
	s.publish(b, c, true, depth)
}

// close removes c from b and publishes its RemoveInfo.
func (s *Sim) close(b *broker, c *consumer, depth int) {
	delete(b.consumers, c.id())
	if b.count[c.dest]--; b.count[c.dest] == 0 {
		delete(b.count, c.dest)
	}
	s.publish(b, c, false, depth)
}

// publish sends b's advisory about c to every bridge watching b. The message
// is rendered and parsed once: every subscriber receives the same bytes.
func (s *Sim) publish(b *broker, c *consumer, added bool, depth int) {
	h, body, err := b.render(c, added, b.count[c.dest])
	if err == nil {
		var adv advisory.Event
		adv, err = advisory.ParseActiveMQ(h, body)
		if err == nil {
			s.total.Published++
			for _, w := range b.remoteOf {
				s.deliver(w, false, adv, depth+1)
			}
			for _, w := range b.localOf {
				s.deliver(w, true, adv, depth+1)
			}
			return
		}
	}
	if s.err == nil {
		s.err = fmt.Errorf("broker %s: advisory for %s: %w", b.id, c.id(), err)
	}
}

// deliver schedules adv's arrival at bridge w, after the ones before it on
// the same subscription.
func (s *Sim) deliver(w *bridge, local bool, adv advisory.Event, depth int) {
	at := s.now + s.cfg.Delay
	if s.cfg.Jitter > 0 {
		at += time.Duration(s.delay.Int64N(int64(s.cfg.Jitter) + 1))
	}
	ready := &w.remoteReady
	if local {
		ready = &w.localReady
	}
	at = max(at, *ready)
	*ready = at
	s.push(&event{at: at, to: w, local: local, adv: adv, depth: depth})
}

func (s *Sim) push(e *event) {
	s.seq++
	e.seq = s.seq
	heap.Push(&s.queue, e)
}

// Route is one demand subscription as the network holds it: where, for what,
// and the path its demand came by. (Not its origin: without conduit that is
// the consumer's id, which depends on history.)
type Route struct {
	Broker      string
	Destination destination.Destination
	Path        string // hop.FormatPath of the demand's path, origin first
}

// Routes returns every demand subscription network-wide, sorted, without the
// ids that depend on history: two networks with the same Routes hold the same
// demand.
func (s *Sim) Routes() []Route {
	var out []Route
	for _, b := range s.bridges {
		for _, c := range b.live {
			_, tag, _ := hop.ParseSelector(c.selector)
			out = append(out, Route{Broker: b.local.id, Destination: c.dest, Path: hop.FormatPath(tag.Path)})
		}
	}
	slices.SortFunc(out, func(a, b Route) int {
		return strings.Compare(a.Broker+"\x00"+a.Destination.String()+"\x00"+a.Path,
			b.Broker+"\x00"+b.Destination.String()+"\x00"+b.Path)
	})
	return out
}

// PlainConsumers returns, per broker index, the destinations of its plain
// consumers (one entry per consumer), sorted.
func (s *Sim) PlainConsumers() [][]string {
	out := make([][]string, len(s.brokers))
	for i, b := range s.brokers {
		for _, c := range b.consumers {
			if c.owner == nil {
				out[i] = append(out[i], c.dest.Name)
			}
		}
		slices.Sort(out[i])
	}
	return out
}

// event is an advisory on its way to a bridge, or a scheduled action (fn).
type event struct {
	at    time.Duration
	seq   uint64
	to    *bridge
	local bool
	adv   advisory.Event
	depth int
	fn    func()
}

// eventQueue orders events by time, then by scheduling order.
type eventQueue []*event

func (q eventQueue) Len() int { return len(q) }
func (q eventQueue) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].seq < q[j].seq
}
func (q eventQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *eventQueue) Push(x any)   { *q = append(*q, x.(*event)) }
func (q *eventQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*q = old[:len(old)-1]
	return e
}
