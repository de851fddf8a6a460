package bridge

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/brokernet/brokernet/advisory"
	"github.com/brokernet/brokernet/demand"
	"github.com/brokernet/brokernet/destination"
	"github.com/brokernet/brokernet/internal/stomptest"
	"github.com/brokernet/brokernet/transport"
)

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

// TestTempMirrorFollowsTheRemote: a remote temporary queue is mirrored on the
// local broker (with the remote broker in its path), its consumer makes
// demand there, and when it goes the demand goes first, then the mirror. A
// temporary destination whose path holds the local broker is never mirrored
// back.
func TestTempMirrorFollowsTheRemote(t *testing.T) {
	local, remote := &tempBroker{fakeBroker: newFakeBroker("L")}, &tempBroker{fakeBroker: newFakeBroker("R")}
	br := startTempFake(t, local, remote)
	rc := remote.conn()
	tq := destination.Destination{Kind: destination.TempQueue, Name: "ID:r-1:1:1"}
	back := destination.Destination{Kind: destination.TempQueue, Name: "ID:l-1:1:1"}

	rc.events <- tempEvent(back, false, "L")
	rc.events <- tempEvent(tq, false)
	rc.events <- consumerOf("ID:r-1:1:1:1", tq)
	waitFor(t, 5*time.Second, "the mirror and its demand", func() bool {
		return br.Stats().DemandSubs.Load() == 1 && br.Stats().TempDestinations.Load() == 1
	})
	rc.events <- tempEvent(tq, true)
	waitFor(t, 5*time.Second, "the mirror and its demand to go", func() bool {
		return br.Stats().DemandSubs.Load() == 0 && br.Stats().TempDestinations.Load() == 0
	})
	want := []string{"mirror temp-queue://ID:r-1:1:1 [R]", "subscribe temp-queue://ID:r-1:1:1",
		"unsubscribe temp-queue://ID:r-1:1:1", "drop temp-queue://ID:r-1:1:1"}
	if got := local.callLog(); !slices.Equal(got, want) {
		t.Fatalf("local broker saw\n%q\nwant\n%q", got, want)
	}
}

// TestRequestWaitsForItsReplyToDemand: a request whose reply-to is a
// temporary queue of the local broker is forwarded only once the remote
// broker shows a consumer of that queue (the mirror's demand), and requests
// without such a reply-to are not held behind nothing.
func TestRequestWaitsForItsReplyToDemand(t *testing.T) {
	local, remote := &tempBroker{fakeBroker: newFakeBroker("L")}, &tempBroker{fakeBroker: newFakeBroker("R")}
	br := startTempFake(t, local, remote)
	lc, rc := local.conn(), remote.conn()
	replyTo := destination.Destination{Kind: destination.TempQueue, Name: "ID:l-1:1:1"}
	lc.events <- tempEvent(replyTo, false)
	rc.events <- transport.Event{Kind: transport.Consumer, Consumer: queueConsumer("ID:r-2:1:1:1", "req")}
	waitFor(t, 5*time.Second, "demand for req", func() bool { return br.Stats().DemandSubs.Load() == 1 })

	local.putWith("req", 1)
	waitFor(t, 5*time.Second, "a request without reply-to to go", func() bool { return len(remote.receivedBodies()) == 1 })

	// The fake broker's own lock (tempBroker has one of its own).
	local.fakeBroker.mu.Lock()
	local.seq++
	local.queues["req"] = append(local.queues["req"], &fakeMsg{id: "ID:L-req", msg: &transport.Message{ID: "ID:L-req",
		Destination: destination.Destination{Kind: destination.Queue, Name: "req"}, Priority: 4,
		ReplyTo: "/remote-temp-queue/ID:l-1:1:1", Body: []byte("request")}})
	local.fakeBroker.mu.Unlock()
	local.dispatch()
	// An event behind the delivery on the same stream: once it is counted,
	// the delivery was handled.
	lc.events <- transport.Event{Kind: transport.BadConsumer, Err: fmt.Errorf("marker")}
	waitFor(t, 5*time.Second, "the local stream to be read", func() bool { return br.Stats().BadAdvisories.Load() == 1 })
	if sent, _ := remote.counts(); sent != 1 {
		t.Fatalf("the request was sent (%d sends) before its reply-to's demand", sent)
	}
	rc.events <- consumerOf("ID:R-bridge:1:1:1", replyTo)
	waitFor(t, 5*time.Second, "the request to go", func() bool { return len(remote.receivedBodies()) == 2 })
	if got := remote.receivedBodies()[1]; got != "request" {
		t.Fatalf("forwarded %q", got)
	}
}
