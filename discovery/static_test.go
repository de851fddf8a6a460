package discovery

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/brokernet/brokernet/transport"
	"github.com/brokernet/brokernet/transport/stomp"
)

func mustURIs(t *testing.T, ss ...string) []transport.URI {
	t.Helper()
	var us []transport.URI
	for _, s := range ss {
		u, err := stomp.ParseURI(s)
		if err != nil {
			t.Fatal(err)
		}
		us = append(us, u)
	}
	return us
}

// runFixed runs agent, collects the events it sends before it goes quiet, stops
// it and checks that Run returned nil.
func runFixed(t *testing.T, agent Agent, want int) []Event {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out := make(chan Event)
	done := make(chan error, 1)
	go func() { done <- agent.Run(ctx, out) }()
	var evs []Event
	timeout := time.After(5 * time.Second)
	for len(evs) < want {
		select {
		case ev := <-out:
			evs = append(evs, ev)
		case err := <-done:
			t.Fatalf("Run returned %v before ctx ended", err)
		case <-timeout:
			t.Fatalf("got %d events, want %d", len(evs), want)
		}
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run = %v, want nil", err)
		}
	case ev := <-out:
		t.Fatalf("unexpected extra event %+v", ev)
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after ctx ended")
	}
	return evs
}

func TestStaticReportsEachURIOnce(t *testing.T) {
	uris := mustURIs(t, "stomp://a:1", "stomp://u:secret@b:2", "stomp://a:1")
	evs := runFixed(t, NewStatic(uris), 3)
	wantKeys := []string{"stomp://a:1", "stomp://u:***@b:2", "stomp://a:1#2"}
	for i, ev := range evs {
		if ev.Kind != PeerAdded {
			t.Errorf("event %d kind = %s, want added", i, ev.Kind)
		}
		if ev.Peer.Key != wantKeys[i] {
			t.Errorf("event %d key = %q, want %q", i, ev.Peer.Key, wantKeys[i])
		}
		if len(ev.Peer.URIs) != 1 || ev.Peer.URIs[0] != uris[i] {
			t.Errorf("event %d URIs = %v, want [%v]", i, ev.Peer.URIs, uris[i])
		}
	}
	if func() bool { _, p := credentialsOf(evs[1].Peer.URIs[0]); return p != "secret" }() {
		t.Error("the peer URI lost its passcode; the bridge needs it to log in")
	}
}

func TestMasterSlaveReportsOnePeerWithAllURIsInOrder(t *testing.T) {
	uris := mustURIs(t, "stomp://m:1", "stomp://s:2", "stomp://t:3")
	evs := runFixed(t, NewMasterSlave(uris), 1)
	p := evs[0].Peer
	if evs[0].Kind != PeerAdded || p.Key != MasterSlaveKey {
		t.Fatalf("event = %s %q, want added %q", evs[0].Kind, p.Key, MasterSlaveKey)
	}
	if len(p.URIs) != 3 {
		t.Fatalf("URIs = %v, want 3", p.URIs)
	}
	for i := range uris {
		if p.URIs[i] != uris[i] {
			t.Errorf("URI %d = %v, want %v", i, p.URIs[i], uris[i])
		}
	}
}

func TestFixedAgentNeverBlocksOnOutOnceCtxEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- NewStatic(mustURIs(t, "stomp://a:1", "stomp://b:1")).Run(ctx, make(chan Event)) }()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run blocked on an unread channel after ctx ended")
	}
}

func TestNewPicksTheAgentBySpec(t *testing.T) {
	t.Run("a static spec gives one peer per URI", func(t *testing.T) {
		spec, _ := ParseURI("static:(stomp://a:1,stomp://b:2)")
		a, err := New(spec, nil, zerolog.Nop())
		if err != nil {
			t.Fatal(err)
		}
		if evs := runFixed(t, a, 2); evs[1].Peer.URIs[0].Hostname() != "b" {
			t.Errorf("second peer = %+v", evs[1].Peer)
		}
	})
	t.Run("a masterslave spec gives one peer", func(t *testing.T) {
		spec, _ := ParseURI("masterslave:(stomp://a:1,stomp://b:2)")
		a, err := New(spec, nil, zerolog.Nop())
		if err != nil {
			t.Fatal(err)
		}
		if evs := runFixed(t, a, 1); len(evs[0].Peer.URIs) != 2 {
			t.Errorf("peer = %+v", evs[0].Peer)
		}
	})
	t.Run("a gossip spec gives a gossip agent", func(t *testing.T) {
		a, err := New(Spec{Kind: Gossip}, &GossipConfig{BindAddr: "127.0.0.1:0", Local: LocalBroker{URI: "stomp://127.0.0.1:61613"}}, zerolog.Nop())
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := a.(*GossipAgent); !ok {
			t.Errorf("agent is %T", a)
		}
	})
	t.Run("a gossip spec without settings is an error", func(t *testing.T) {
		if _, err := New(Spec{Kind: Gossip}, nil, zerolog.Nop()); err == nil {
			t.Error("no error")
		}
	})
	t.Run("a static spec without URIs is an error", func(t *testing.T) {
		if _, err := New(Spec{Kind: Static}, nil, zerolog.Nop()); !errors.Is(err, ErrNoURIs) {
			t.Errorf("err = %v, want ErrNoURIs", err)
		}
	})
	t.Run("an unknown kind is an error", func(t *testing.T) {
		if _, err := New(Spec{}, nil, zerolog.Nop()); err == nil {
			t.Error("no error")
		}
	})
}
