package bridge

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/brokernet/brokernet/advisory"
	"github.com/brokernet/brokernet/demand"
	"github.com/brokernet/brokernet/destination"
	"github.com/brokernet/brokernet/internal/testkit/stomptest"
	"github.com/brokernet/brokernet/transport"
	"github.com/brokernet/brokernet/transport/transporttest"
)

// fakeBroker is an in-memory broker behind the transport seam, for fast tests of
// the session's logic: queues with dispatch to subscriptions, settlement and
// redelivery of what a closed connection left unsettled; batches committed on
// request; consumer advisories the test announces. Each hook lets a test decide
// what the broker does, and when it confirms.
type fakeBroker struct {
	name string

	mu       sync.Mutex
	queues   map[string][]*fakeMsg // queued, not dispatched
	conns    []*fakeConn
	received []*transport.Message // committed sends, in order
	// consumers are announced to every WatchConsumers, replayed like ActiveMQ.
	consumers []advisory.Event
	seq       int

	// holdCommits keeps commit confirmations until release is called.
	holdCommits bool
	held        []func()
	// outcome decides each committed message's fate (nil: accepted).
	outcome func(m *transport.Message) transport.Outcome
	// refuse makes the broker end the connection with ErrRefused on a Send.
	refuse func(m *transport.Message) bool
	dialed chan *fakeConn
	// noSelectors makes the broker one without selectors (RabbitMQ).
	noSelectors bool
	// deliveries counts dispatches per message id.
	deliveries map[string]int
	// persistent makes the messages put persistent.
	persistent bool
	// sent counts Sends, commits the Commits of at least one message.
	sent, commits int
	// eachConfirm makes the broker confirm messages one by one
	// (transport.EachConfirmer), like ActiveMQ; blockedQueue is a queue whose
	// sends it holds unconfirmed until unblock (a full queue under producer
	// flow control), blockedSends those sends.
	eachConfirm  bool
	blockedQueue string
	blockedSends []func()
	// loopback makes the broker put committed messages on their queues, as
	// a real one does, for the conformance suite (a bridge test keeps them
	// in received only, so that what it forwards does not come back).
	loopback bool
	// queueRoom answers QueueRoom (transport.QueueLimiter); nil: an error.
	queueRoom func(ctx context.Context, d destination.Destination) (transport.QueueRoom, error)
}

type fakeMsg struct {
	id          string
	msg         *transport.Message
	redelivered bool
}

func newFakeBroker(name string) *fakeBroker {
	return &fakeBroker{name: name, queues: make(map[string][]*fakeMsg), dialed: make(chan *fakeConn, 100), deliveries: make(map[string]int)}
}

var _ transport.Endpoint = (*fakeBroker)(nil)

func (b *fakeBroker) String() string { return "fake://" + b.name }
func (b *fakeBroker) Addr() string   { return b.name + ":0" }
func (b *fakeBroker) Backoff() transport.Reconnect {
	return transport.Reconnect{Initial: time.Millisecond, Max: 5 * time.Millisecond, Multiplier: 2}
}

func (b *fakeBroker) Dial(ctx context.Context, opts transport.DialOptions) (transport.Conn, error) {
	c := &fakeConn{b: b, events: make(chan transport.Event, 1<<16), done: make(chan struct{}), subs: make(map[string]*fakeSub)}
	b.mu.Lock()
	b.conns = append(b.conns, c)
	b.mu.Unlock()
	b.dialed <- c
	return c, nil
}

// enqueue puts a copy of a sent message on its queue, with an id of the
// broker's (the fake keeps no sender's id: Info.KeepsID is nil). Caller
// holds b.mu.
func (b *fakeBroker) enqueue(m *transport.Message) {
	b.seq++
	id := fmt.Sprintf("ID:%s-%d", b.name, b.seq)
	cp := *m
	cp.ID, cp.Redelivered = id, false
	b.queues[m.Destination.Name] = append(b.queues[m.Destination.Name], &fakeMsg{id: id, msg: &cp})
}

// take decides the fate of a sent message (outcome) and keeps it if
// accepted. Caller holds b.mu.
func (b *fakeBroker) take(m *transport.Message) transport.Outcome {
	o := transport.Accepted
	if b.outcome != nil {
		o = b.outcome(m)
	}
	if o == transport.Accepted {
		b.received = append(b.received, m)
		if b.loopback && m.Destination.Kind == destination.Queue {
			b.enqueue(m)
		}
	}
	return o
}

// put enqueues n messages on queue q, with bodies "q-i".
func (b *fakeBroker) put(q string, n int) { b.putWith(q, n) }

// putWith enqueues n messages on queue q with properties props (name, value pairs).
func (b *fakeBroker) putWith(q string, n int, props ...string) {
	b.mu.Lock()
	for i := 0; i < n; i++ {
		b.seq++
		id := fmt.Sprintf("ID:%s-%d", b.name, b.seq)
		m := &transport.Message{ID: id, Destination: destination.Destination{Kind: destination.Queue, Name: q},
			Priority: 4, Body: fmt.Appendf(nil, "%s-%d", q, i), Persistent: b.persistent}
		for j := 0; j+1 < len(props); j += 2 {
			m.Props = append(m.Props, transport.Property{Name: props[j], Value: props[j+1]})
		}
		b.queues[q] = append(b.queues[q], &fakeMsg{id: id, msg: m})
	}
	b.mu.Unlock()
	b.dispatch()
}

// dispatch hands queued messages to the subscriptions of live connections,
// round-robin, up to each one's prefetch.
func (b *fakeBroker) dispatch() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for q, msgs := range b.queues {
		for len(msgs) > 0 {
			var target *fakeSub
			var tc *fakeConn
			for _, c := range b.conns {
				if c.closed() {
					continue
				}
				for _, s := range c.sortedSubs() {
					if s.sub.Destination.Name == q && len(s.unsettled) < s.sub.Prefetch && (target == nil || len(s.unsettled) < len(target.unsettled)) {
						target, tc = s, c
					}
				}
			}
			if target == nil {
				break
			}
			m := msgs[0]
			msgs = msgs[1:]
			target.unsettled = append(target.unsettled, m)
			b.deliveries[m.id]++
			out := *m.msg
			out.Redelivered = m.redelivered
			tc.events <- transport.Event{Kind: transport.Delivery, Sub: target.sub.ID, Msg: &out, Ref: m.id}
		}
		b.queues[q] = msgs
	}
}

// queued counts messages of q not yet settled (queued or dispatched).
func (b *fakeBroker) queued(q string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := len(b.queues[q])
	for _, c := range b.conns {
		for _, s := range c.subs {
			if s.sub.Destination.Name == q {
				n += len(s.unsettled)
			}
		}
	}
	return n
}

func (b *fakeBroker) receivedBodies() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, m := range b.received {
		out = append(out, string(m.Body))
	}
	return out
}

// release confirms the commits held so far.
func (b *fakeBroker) release() {
	b.mu.Lock()
	held := b.held
	b.held = nil
	b.mu.Unlock()
	for _, f := range held {
		f()
	}
}

// counts returns how many messages were sent and batches committed.
func (b *fakeBroker) counts() (sent, commits int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.sent, b.commits
}

func (b *fakeBroker) heldCommits() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.held)
}

type fakeSub struct {
	sub       transport.Subscription
	unsettled []*fakeMsg
}

// fakeConn is one connection to a fakeBroker.
type fakeConn struct {
	b      *fakeBroker
	events chan transport.Event
	done   chan struct{}
	once   sync.Once
	err    error

	tok   uint64
	subs  map[string]*fakeSub // guarded by b.mu
	batch []*transport.Message
}

var _ transport.Conn = (*fakeConn)(nil)

func (c *fakeConn) sortedSubs() []*fakeSub {
	ids := make([]string, 0, len(c.subs))
	for id := range c.subs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	out := make([]*fakeSub, len(ids))
	for i, id := range ids {
		out[i] = c.subs[id]
	}
	return out
}

func (c *fakeConn) closed() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

func (c *fakeConn) next() transport.Token { c.tok++; return transport.Token(c.tok) }

// confirm sends a confirmation unless the connection has ended; under b.mu,
// which fail holds to close the events.
func (c *fakeConn) confirm(tok transport.Token, outs []transport.SendOutcome) {
	c.b.mu.Lock()
	defer c.b.mu.Unlock()
	if c.closed() {
		return
	}
	c.events <- transport.Event{Kind: transport.Confirmed, Token: tok, Outcomes: outs}
}

// fail ends the connection: unsettled messages go back to their queues.
func (c *fakeConn) fail(err error) {
	c.once.Do(func() {
		c.b.mu.Lock()
		c.err = err
		close(c.done)
		for _, s := range c.subs {
			for i := len(s.unsettled) - 1; i >= 0; i-- {
				m := s.unsettled[i]
				m.redelivered = true
				q := s.sub.Destination.Name
				c.b.queues[q] = append([]*fakeMsg{m}, c.b.queues[q]...)
			}
			s.unsettled = nil
		}
		c.subs = map[string]*fakeSub{}
		close(c.events)
		c.b.mu.Unlock()
		c.b.dispatch()
	})
}

func (c *fakeConn) Info() transport.Info {
	return transport.Info{Protocol: "fake", Server: "fake", Selectors: !c.b.noSelectors, Transactions: true}
}
func (c *fakeConn) Events() <-chan transport.Event { return c.events }
func (c *fakeConn) Done() <-chan struct{}          { return c.done }
func (c *fakeConn) Err() error {
	if c.closed() {
		return c.err
	}
	return nil
}
func (c *fakeConn) BrokerID(context.Context) (string, error) { return c.b.name, nil }

func (c *fakeConn) Subscribe(ctx context.Context, sub transport.Subscription) (transport.Token, error) {
	if c.closed() {
		return 0, c.err
	}
	if sub.Selector != "" && c.b.noSelectors {
		return 0, fmt.Errorf("subscribing %s: the fake broker has no selectors: %w", sub.ID, transport.ErrUnsupported)
	}
	tok := c.next()
	c.b.mu.Lock()
	c.subs[sub.ID] = &fakeSub{sub: sub}
	c.b.mu.Unlock()
	c.confirm(tok, nil)
	c.b.dispatch()
	return tok, nil
}

func (c *fakeConn) Unsubscribe(ctx context.Context, id string) error {
	if c.closed() {
		return c.err
	}
	c.b.mu.Lock()
	if s, ok := c.subs[id]; ok {
		q := s.sub.Destination.Name
		for i := len(s.unsettled) - 1; i >= 0; i-- {
			s.unsettled[i].redelivered = true
			c.b.queues[q] = append([]*fakeMsg{s.unsettled[i]}, c.b.queues[q]...)
		}
		delete(c.subs, id)
	}
	c.b.mu.Unlock()
	c.b.dispatch()
	return nil
}

func (c *fakeConn) QueueRoom(ctx context.Context, d destination.Destination) (transport.QueueRoom, error) {
	if c.b.queueRoom == nil {
		return transport.QueueRoom{}, errors.New("fake broker: no management API")
	}
	return c.b.queueRoom(ctx, d)
}

func (c *fakeConn) DestroyDurable(context.Context, transport.Subscription) error { return nil }

func (c *fakeConn) WatchConsumers(ctx context.Context) error {
	c.b.mu.Lock()
	defer c.b.mu.Unlock()
	if c.closed() {
		return c.err
	}
	for _, ev := range c.b.consumers {
		c.events <- transport.Event{Kind: transport.Consumer, Consumer: ev}
	}
	return nil
}

func (c *fakeConn) OwnConsumer(string) bool { return false }

func (c *fakeConn) Send(ctx context.Context, m *transport.Message) error {
	if c.closed() {
		return c.err
	}
	if c.b.refuse != nil && c.b.refuse(m) {
		c.fail(fmt.Errorf("fake broker error: %w", transport.ErrRefused))
		return nil
	}
	c.batch = append(c.batch, m)
	c.b.mu.Lock()
	c.b.sent++
	c.b.mu.Unlock()
	return nil
}

func (c *fakeConn) ConfirmsEach() bool { return c.b.eachConfirm }

func (c *fakeConn) SendConfirmed(ctx context.Context, m *transport.Message) (transport.Token, error) {
	if c.closed() {
		return 0, c.err
	}
	tok := c.next()
	if c.b.refuse != nil && c.b.refuse(m) {
		c.fail(fmt.Errorf("fake broker error: %w", transport.ErrRefused))
		return tok, nil
	}
	done := func() {
		c.b.mu.Lock()
		o := c.b.take(m)
		closed := c.closed()
		if !closed {
			if o == transport.Accepted {
				c.events <- transport.Event{Kind: transport.Confirmed, Token: tok}
			} else {
				c.events <- transport.Event{Kind: transport.Refused, Token: tok, Err: errors.New("fake broker refuses it")}
			}
		}
		c.b.mu.Unlock()
	}
	c.b.mu.Lock()
	c.b.sent++
	block := c.b.blockedQueue != "" && m.Destination.Name == c.b.blockedQueue
	if block {
		c.b.blockedSends = append(c.b.blockedSends, done)
	}
	c.b.mu.Unlock()
	if !block {
		done()
		c.b.dispatch()
	}
	return tok, nil
}

// unblock confirms the sends held for the blocked queue, in order, and stops
// holding. The queue stays blocked until none is held: a send the bridge
// makes on a confirmation is held behind the older ones, not received
// before them.
func (b *fakeBroker) unblock() {
	for {
		b.mu.Lock()
		held := b.blockedSends
		b.blockedSends = nil
		if len(held) == 0 {
			b.blockedQueue = ""
			b.mu.Unlock()
			return
		}
		b.mu.Unlock()
		for _, f := range held {
			f()
		}
	}
}

// blockedCount is how many sends the blocked queue holds.
func (b *fakeBroker) blockedCount() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.blockedSends)
}

func (c *fakeConn) Commit(ctx context.Context) (transport.Token, error) {
	if c.closed() {
		return 0, c.err
	}
	tok := c.next()
	batch := c.batch
	c.batch = nil
	if len(batch) > 0 {
		c.b.mu.Lock()
		c.b.commits++
		c.b.mu.Unlock()
	}
	done := func() {
		var outs []transport.SendOutcome
		c.b.mu.Lock()
		for _, m := range batch {
			outs = append(outs, transport.SendOutcome{Outcome: c.b.take(m)})
		}
		c.b.mu.Unlock()
		if !slices.ContainsFunc(outs, func(o transport.SendOutcome) bool { return o.Outcome != transport.Accepted }) {
			outs = nil
		}
		c.confirm(tok, outs)
		c.b.dispatch()
	}
	c.b.mu.Lock()
	hold := c.b.holdCommits
	if hold {
		c.b.held = append(c.b.held, done)
	}
	c.b.mu.Unlock()
	if !hold {
		done()
	}
	return tok, nil
}

func (c *fakeConn) Settle(ctx context.Context, sub string, refs []transport.Ref, outcome transport.Outcome) error {
	c.b.mu.Lock()
	defer c.b.mu.Unlock()
	if c.closed() {
		return c.err
	}
	s, ok := c.subs[sub]
	if !ok {
		return fmt.Errorf("settling on unknown subscription %s", sub)
	}
	if outcome == transport.Released {
		q := s.sub.Destination.Name
		for _, r := range refs {
			i := slices.IndexFunc(s.unsettled, func(m *fakeMsg) bool { return m.id == r.(string) })
			if i < 0 {
				return fmt.Errorf("releasing %v: not dispatched to %s", r, sub)
			}
			m := s.unsettled[i]
			s.unsettled = slices.Delete(s.unsettled, i, i+1)
			m.redelivered = true
			c.b.queues[q] = append(c.b.queues[q], m)
		}
		go c.b.dispatch()
		return nil
	}
	if outcome != transport.Accepted {
		return fmt.Errorf("fake broker: rejecting deliveries is not modelled")
	}
	// Cumulative unless individual: everything up to the last ref.
	for _, r := range refs {
		i := slices.IndexFunc(s.unsettled, func(m *fakeMsg) bool { return m.id == r.(string) })
		if i < 0 {
			return fmt.Errorf("settling %v: not dispatched to %s", r, sub)
		}
		if s.sub.Ack == transport.Cumulative && r == refs[len(refs)-1] {
			s.unsettled = s.unsettled[i+1:]
		} else if s.sub.Ack == transport.Individual {
			s.unsettled = slices.Delete(s.unsettled, i, i+1)
		}
	}
	go c.b.dispatch()
	return nil
}

func (c *fakeConn) Sync(ctx context.Context) (transport.Token, error) {
	if c.closed() {
		return 0, c.err
	}
	tok := c.next()
	c.confirm(tok, nil)
	return tok, nil
}

func (c *fakeConn) Close(ctx context.Context) error { c.fail(transport.ErrClosed); return nil }
func (c *fakeConn) Abort()                          { c.fail(transport.ErrClosed) }

// queueConsumer is a remote consumer advisory for queue q.
func queueConsumer(id, q string) advisory.Event {
	return advisory.Event{Kind: advisory.ConsumerAdded, ConsumerCount: -1, Consumer: advisory.Consumer{
		ID: id, Destination: destination.Destination{Kind: destination.Queue, Name: q}}}
}

// startFake runs a bridge from local to remote with cfg's tunables until the
// test ends, and returns it once up.
func startFake(t *testing.T, local, remote *fakeBroker, cfg Config) (*Bridge, context.CancelFunc, <-chan error) {
	t.Helper()
	cfg.Local, cfg.Remote = local, remote
	cfg.LocalID, cfg.RemoteID = local.name, remote.name
	cfg.Log = stomptest.Logger(t)
	if cfg.Demand.Prefetch == 0 {
		cfg.Demand = demand.DefaultOptions()
	}
	b, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	finished := make(chan struct{})
	go func() { done <- b.Run(ctx); close(finished) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-finished:
		case <-time.After(10 * time.Second):
			t.Error("bridge did not stop")
		}
	})
	wctx, wcancel := context.WithTimeout(ctx, 5*time.Second)
	defer wcancel()
	if err := b.WaitUp(wctx); err != nil {
		t.Fatalf("bridge not up: %v", err)
	}
	return b, cancel, done
}

// waitFor polls cond until it holds, failing the test with what at the deadline.
var waitFor = transporttest.WaitFor

// tempBroker is a fakeBroker whose connections report temporary
// destinations and mirror them (transport.TempWatcher, TempMirror), as
// ActiveMQ over OpenWire does; the test announces the advisories.
type tempBroker struct {
	*fakeBroker
	mu    sync.Mutex
	conns []*tempConn
	calls []string // "mirror D PATH", "drop D", "subscribe D", "unsubscribe D", in order
}

type tempConn struct {
	*fakeConn
	tb *tempBroker
}

func (b *tempBroker) Dial(ctx context.Context, opts transport.DialOptions) (transport.Conn, error) {
	c, err := b.fakeBroker.Dial(ctx, opts)
	if err != nil {
		return nil, err
	}
	tc := &tempConn{fakeConn: c.(*fakeConn), tb: b}
	b.mu.Lock()
	b.conns = append(b.conns, tc)
	b.mu.Unlock()
	return tc, nil
}

func (b *tempBroker) log(format string, args ...any) {
	b.mu.Lock()
	b.calls = append(b.calls, fmt.Sprintf(format, args...))
	b.mu.Unlock()
}

func (b *tempBroker) callLog() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.calls)
}

// conn returns the latest connection.
func (b *tempBroker) conn() *tempConn {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.conns[len(b.conns)-1]
}

func (c *tempConn) Info() transport.Info {
	i := c.fakeConn.Info()
	i.Flavour = transport.ActiveMQ
	return i
}
func (c *tempConn) WatchTempDestinations(context.Context) error { return nil }
func (c *tempConn) MirrorTemp(_ context.Context, d destination.Destination, path []string) error {
	c.tb.log("mirror %s %v", d, path)
	return nil
}
func (c *tempConn) DropTemp(_ context.Context, d destination.Destination) error {
	c.tb.log("drop %s", d)
	return nil
}
func (c *tempConn) Subscribe(ctx context.Context, sub transport.Subscription) (transport.Token, error) {
	if sub.Destination.IsTemp() {
		c.tb.log("subscribe %s", sub.Destination)
	}
	return c.fakeConn.Subscribe(ctx, sub)
}
func (c *tempConn) Unsubscribe(ctx context.Context, id string) error {
	c.b.mu.Lock()
	s := c.subs[id]
	c.b.mu.Unlock()
	if s != nil && s.sub.Destination.IsTemp() {
		c.tb.log("unsubscribe %s", s.sub.Destination)
	}
	return c.fakeConn.Unsubscribe(ctx, id)
}

var (
	_ transport.TempWatcher = (*tempConn)(nil)
	_ transport.TempMirror  = (*tempConn)(nil)
)

func startTempFake(t *testing.T, local, remote *tempBroker) *Bridge {
	t.Helper()
	b, err := New(Config{Local: local, Remote: remote, LocalID: local.name, RemoteID: remote.name,
		Demand: demand.DefaultOptions(), Log: stomptest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	finished := make(chan struct{})
	go func() { b.Run(ctx); close(finished) }()
	t.Cleanup(func() { cancel(); <-finished })
	wctx, wcancel := context.WithTimeout(ctx, 5*time.Second)
	defer wcancel()
	if err := b.WaitUp(wctx); err != nil {
		t.Fatalf("bridge not up: %v", err)
	}
	return b
}

func tempEvent(d destination.Destination, removed bool, path ...string) transport.Event {
	return transport.Event{Kind: transport.DestinationChanged, Destination: advisory.DestinationEvent{Destination: d, Removed: removed, Path: path}}
}

func consumerOf(id string, d destination.Destination) transport.Event {
	return transport.Event{Kind: transport.Consumer, Consumer: advisory.Event{Kind: advisory.ConsumerAdded, ConsumerCount: -1,
		Consumer: advisory.Consumer{ID: id, Destination: d}}}
}

// TestFakeHoldsTheConnContract runs the transport.Conn conformance suite
// against the fake, which the bridge's fast tests rely on behaving like a
// broker.
func TestFakeHoldsTheConnContract(t *testing.T) {
	for _, selectors := range []bool{true, false} {
		name := map[bool]string{true: "like ActiveMQ", false: "without selectors like RabbitMQ"}[selectors]
		t.Run(name, func(t *testing.T) {
			transporttest.Run(t, transporttest.Features{Protocol: "fake", Selectors: selectors, Transactions: true, ConfirmsEach: selectors},
				func(t *testing.T) transport.Endpoint {
					b := newFakeBroker("conformance")
					b.loopback, b.noSelectors, b.eachConfirm = true, !selectors, selectors
					return b
				})
		})
	}
}
