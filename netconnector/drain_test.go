package netconnector

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/brokernet/brokernet/bridge"
	"github.com/brokernet/brokernet/config"
	"github.com/brokernet/brokernet/discovery"
	"github.com/brokernet/brokernet/transport/stomp"
)

// scriptedAgent reports the events a test feeds it.
type scriptedAgent struct{ in chan discovery.Event }

func (a *scriptedAgent) Run(ctx context.Context, out chan<- discovery.Event) error {
	for {
		select {
		case ev := <-a.in:
			select {
			case out <- ev:
			case <-ctx.Done():
				return nil
			}
		case <-ctx.Done():
			return nil
		}
	}
}

func testPeer(t *testing.T, port int) discovery.Peer {
	u, err := stomp.ParseURI(fmt.Sprintf("stomp://127.0.0.1:%d", port))
	if err != nil {
		t.Fatal(err)
	}
	return discovery.Peer{Key: u.String(), URIs: []stomp.URI{u}}
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestSlowDrainDoesNotBlockDiscovery: while one removed peer's bridge drains (here
// until the test releases it), other peers are still added, and the same peer added
// again starts only after its old bridge finished draining. No broker: the bridges'
// Run is replaced by a fake that drains on demand.
func TestSlowDrainDoesNotBlockDiscovery(t *testing.T) {
	agent := &scriptedAgent{in: make(chan discovery.Event)}
	local, err := stomp.ParseURI("stomp://127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	nc := config.DefaultConnector()
	nc.Name = "drain-test"
	c, err := New(nc, config.Broker{Name: "local", ID: "L", URI: discovery.Spec{Kind: discovery.Static, URIs: []stomp.URI{local}}}, agent, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	p1, p2, p3 := testPeer(t, 2), testPeer(t, 3), testPeer(t, 4)
	release := make(chan struct{})
	var mu sync.Mutex
	runs := map[string]int{} // bridge runs started, by peer address
	c.runBridge = func(b *bridge.Bridge, ctx context.Context) error {
		mu.Lock()
		runs[b.Name()[strings.LastIndex(b.Name(), ">")+1:]]++
		mu.Unlock()
		<-ctx.Done()
		if strings.HasSuffix(b.Name(), p1.URIs[0].Addr()) {
			<-release // p1's drain takes as long as the test wants
		}
		return nil
	}
	runsOf := func(p discovery.Peer) int {
		mu.Lock()
		defer mu.Unlock()
		return runs[p.URIs[0].Addr()]
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); c.Run(ctx) }()
	released := false
	defer func() {
		if !released {
			close(release)
		}
		cancel()
		<-done
	}()
	send := func(kind discovery.EventKind, p discovery.Peer) {
		select {
		case agent.in <- discovery.Event{Kind: kind, Peer: p}:
		case <-time.After(10 * time.Second):
			t.Fatalf("connector stopped taking discovery events (%v %s)", kind, p.Key)
		}
	}
	send(discovery.PeerAdded, p1)
	send(discovery.PeerAdded, p2)
	waitUntil(t, "p1 and p2 run", func() bool { return runsOf(p1) == 1 && runsOf(p2) == 1 })

	send(discovery.PeerRemoved, p1) // its drain now hangs until release
	send(discovery.PeerAdded, p3)
	waitUntil(t, "p3 runs while p1 drains", func() bool { return runsOf(p3) == 1 })
	if n := c.Draining(); n != 1 {
		t.Fatalf("%d peers draining, want 1 (p1)", n)
	}

	send(discovery.PeerAdded, p1) // back again: must wait for its old drain
	waitUntil(t, "p1 listed again", func() bool { return len(c.Bridges(p1.Key)) == 1 })
	if n := runsOf(p1); n != 1 {
		t.Fatalf("p1's new bridge started while the old one drained (%d runs)", n)
	}
	close(release)
	released = true
	waitUntil(t, "p1's new bridge runs after the drain", func() bool { return runsOf(p1) == 2 })
	waitUntil(t, "no drain left", func() bool { return c.Draining() == 0 })
}

// TestStopWaitsForEarlierDrains: Run returns only after every drain finished,
// including those of peers removed before shutdown.
func TestStopWaitsForEarlierDrains(t *testing.T) {
	agent := &scriptedAgent{in: make(chan discovery.Event)}
	local, _ := stomp.ParseURI("stomp://127.0.0.1:1")
	c, err := New(config.DefaultConnector(), config.Broker{Name: "local", ID: "L", URI: discovery.Spec{Kind: discovery.Static, URIs: []stomp.URI{local}}}, agent, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	c.runBridge = func(b *bridge.Bridge, ctx context.Context) error {
		started <- struct{}{}
		<-ctx.Done()
		<-release
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); c.Run(ctx) }()
	p := testPeer(t, 2)
	agent.in <- discovery.Event{Kind: discovery.PeerAdded, Peer: p}
	<-started
	agent.in <- discovery.Event{Kind: discovery.PeerRemoved, Peer: p}
	waitUntil(t, "p draining", func() bool { return c.Draining() == 1 })
	cancel()
	select {
	case <-done:
		t.Fatal("Run returned while a removed peer was still draining")
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run never returned after the drain ended")
	}
}

// TestReloadFailureIsNotReportedAsRestart: a changed connector whose new settings
// cannot be built was stopped and is not running again; Apply must say so.
func TestReloadFailureIsNotReportedAsRestart(t *testing.T) {
	local, _ := stomp.ParseURI("stomp://127.0.0.1:1")
	peer, _ := stomp.ParseURI("stomp://127.0.0.1:2")
	broker := config.Broker{Name: "local", ID: "L", URI: discovery.Spec{Kind: discovery.Static, URIs: []stomp.URI{local}}}
	nc := config.DefaultConnector()
	nc.Name, nc.Broker = "one", "local"
	nc.URI = discovery.Spec{Kind: discovery.Static, URIs: []stomp.URI{peer}}
	ctx, cancel := context.WithCancel(context.Background())
	fed := NewFederation(ctx, zerolog.Nop())
	defer func() { cancel(); fed.Wait() }()

	started, restarted, stopped, err := fed.Apply(&config.Config{Brokers: []config.Broker{broker}, Connectors: []config.NetworkConnector{nc}})
	if err != nil || len(started) != 1 || len(restarted)+len(stopped) != 0 {
		t.Fatalf("first apply: started %v restarted %v stopped %v err %v", started, restarted, stopped, err)
	}
	bad := nc
	bad.URI = discovery.Spec{Kind: discovery.Gossip} // gossip without its settings: New fails
	started, restarted, stopped, err = fed.Apply(&config.Config{Brokers: []config.Broker{broker}, Connectors: []config.NetworkConnector{bad}})
	if err == nil {
		t.Fatal("apply of an unbuildable connector succeeded")
	}
	if len(restarted) != 0 || len(started) != 0 || len(stopped) != 1 || stopped[0] != "one" {
		t.Fatalf("started %v restarted %v stopped %v; want only stopped [one]", started, restarted, stopped)
	}
	if _, ok := fed.Connectors()["one"]; ok {
		t.Fatal("connector one is listed as running")
	}
}
