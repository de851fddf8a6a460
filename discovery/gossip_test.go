package discovery

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/rs/zerolog"

	"github.com/brokernet/brokernet/transport/stomp"
)

func TestMain(m *testing.M) {
	zerolog.TimeFieldFormat = time.RFC3339Nano // the console writer then shows milliseconds
	os.Exit(m.Run())
}

// fastTimings detect a crashed member in well under a second on loopback
// (go-libraries.md §3.7).
func fastTimings() GossipTimings {
	return GossipTimings{
		ProbeInterval:    100 * time.Millisecond,
		ProbeTimeout:     50 * time.Millisecond,
		GossipInterval:   20 * time.Millisecond,
		PushPullInterval: time.Second,
		SuspicionMult:    2,
	}
}

// waitFor polls cond until it holds or timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// testLog sends zerolog output to t.Log while the test runs, and to buf, and
// drops whatever memberlist's goroutines log after the test ended.
type testLog struct {
	mu   sync.Mutex
	t    *testing.T
	done bool
	buf  bytes.Buffer
}

func newTestLog(t *testing.T) *testLog {
	l := &testLog{t: t}
	t.Cleanup(func() {
		l.mu.Lock()
		l.done = true
		l.mu.Unlock()
	})
	return l
}

func (l *testLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done {
		return len(p), nil
	}
	l.buf.Write(p)
	if testing.Verbose() || os.Getenv("DISCOVERY_TEST_LOG") != "" {
		l.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

func (l *testLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func (l *testLog) logger() zerolog.Logger {
	lvl := zerolog.InfoLevel
	if os.Getenv("DISCOVERY_TEST_LOG") == "debug" {
		lvl = zerolog.DebugLevel
	}
	return zerolog.New(zerolog.ConsoleWriter{Out: l, NoColor: true, TimeFormat: "15:04:05.000"}).Level(lvl).With().Timestamp().Logger()
}

// brokerURI is the broker URI test member name advertises.
func brokerURI(name string) string {
	return "stomp://127.0.0.1:" + strconv.Itoa(61000+int(name[0]))
}

// testMember runs one gossip agent and records what it reports.
type testMember struct {
	t      *testing.T
	name   string
	agent  *GossipAgent
	log    *testLog
	cancel context.CancelFunc
	done   chan error

	mu        sync.Mutex
	peers     map[string]Peer
	events    []Event
	removedAt map[string]time.Time
	stopped   bool
}

type memberOption func(*GossipConfig)

func withBind(addr string) memberOption { return func(c *GossipConfig) { c.BindAddr = addr } }
func withKey(k []byte) memberOption     { return func(c *GossipConfig) { c.SecretKey = k } }
func withTimings(tm GossipTimings) memberOption {
	return func(c *GossipConfig) { c.Timings = tm }
}
func withLocal(b LocalBroker) memberOption { return func(c *GossipConfig) { c.Local = b } }

// startMember starts an agent named name on 127.0.0.1 and waits until it is ready.
func startMember(t *testing.T, name string, join []string, opts ...memberOption) *testMember {
	t.Helper()
	m := newMember(t, name, join, opts...)
	select {
	case <-m.agent.Ready():
	case err := <-m.done:
		t.Fatalf("member %s: Run = %v", name, err)
	case <-time.After(5 * time.Second):
		t.Fatalf("member %s not ready", name)
	}
	return m
}

func newMember(t *testing.T, name string, join []string, opts ...memberOption) *testMember {
	t.Helper()
	l := newTestLog(t)
	cfg := GossipConfig{
		NodeName: name,
		BindAddr: "127.0.0.1:0",
		Join:     join,
		Local:    LocalBroker{URI: brokerURI(name), BrokerID: "ID:" + name, BrokerName: "broker-" + name},
		Timings:  fastTimings(),
		Log:      l.logger(),
	}
	for _, o := range opts {
		o(&cfg)
	}
	agent, err := NewGossip(cfg)
	if err != nil {
		t.Fatalf("NewGossip(%s): %v", name, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &testMember{t: t, name: name, agent: agent, log: l, cancel: cancel, done: make(chan error, 1),
		peers: make(map[string]Peer), removedAt: make(map[string]time.Time)}
	out := make(chan Event)
	runReturned := make(chan struct{})
	collectorDone := make(chan struct{})
	go func() {
		defer close(collectorDone)
		for {
			select {
			case ev := <-out:
				m.record(ev)
			case <-runReturned:
				return
			}
		}
	}()
	go func() {
		err := agent.Run(ctx, out)
		close(runReturned)
		<-collectorDone
		m.done <- err
	}()
	t.Cleanup(m.stop)
	return m
}

func (m *testMember) record(ev Event) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.events = append(m.events, ev)
	switch ev.Kind {
	case PeerAdded:
		if _, dup := m.peers[ev.Peer.Key]; dup {
			m.t.Errorf("member %s: PeerAdded %s twice without PeerRemoved", m.name, ev.Peer.Key)
		}
		m.peers[ev.Peer.Key] = ev.Peer
	case PeerRemoved:
		if _, ok := m.peers[ev.Peer.Key]; !ok {
			m.t.Errorf("member %s: PeerRemoved %s which was not added", m.name, ev.Peer.Key)
		}
		delete(m.peers, ev.Peer.Key)
		m.removedAt[ev.Peer.Key] = time.Now()
	}
}

// stop cancels the agent (graceful leave) and checks that Run returned nil.
func (m *testMember) stop() {
	m.finish(m.cancel)
}

// crash stops the agent without leaving.
func (m *testMember) crash() {
	m.finish(m.agent.crash)
}

func (m *testMember) finish(how func()) {
	m.t.Helper()
	m.mu.Lock()
	if m.stopped {
		m.mu.Unlock()
		return
	}
	m.stopped = true
	m.mu.Unlock()
	how()
	m.cancel()
	select {
	case err := <-m.done:
		if err != nil {
			m.t.Errorf("member %s: Run = %v, want nil", m.name, err)
		}
	case <-time.After(10 * time.Second):
		m.t.Errorf("member %s: Run did not return", m.name)
	}
}

// keys are the peers m currently has, sorted.
func (m *testMember) keys() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var ks []string
	for k := range m.peers {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// sees reports whether m has exactly the named peers.
func (m *testMember) sees(names ...string) bool {
	names = slices.Clone(names)
	slices.Sort(names)
	return slices.Equal(m.keys(), names)
}

func (m *testMember) addr() string { return m.agent.LocalAddr() }

func (m *testMember) eventsCopy() []Event {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.events)
}

// checkPeers checks that m's peers carry what each member advertises.
func (m *testMember) checkPeers() {
	m.t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	for name, p := range m.peers {
		if len(p.URIs) != 1 {
			m.t.Errorf("member %s: peer %s has URIs %v", m.name, name, p.URIs)
			continue
		}
		// The same broker address (transport.URI): a URI learnt from a peer
		// is parsed by transport/endpoint, which wires what a hand-parsed
		// one lacks (a STOMP URI's OpenWire lister).
		want := mustURIs(m.t, brokerURI(name))[0]
		if p.URIs[0].WithSecrets() != want.WithSecrets() {
			m.t.Errorf("member %s: peer %s URI = %+v, want %+v", m.name, name, p.URIs[0], want)
		}
		if p.BrokerID != "ID:"+name || p.BrokerName != "broker-"+name {
			m.t.Errorf("member %s: peer %s ids = %q %q", m.name, name, p.BrokerID, p.BrokerName)
		}
	}
}

// others lists the names of ms except skip.
func others(ms []*testMember, skip *testMember) []string {
	var ns []string
	for _, m := range ms {
		if m != skip {
			ns = append(ns, m.name)
		}
	}
	return ns
}

func waitConverged(t *testing.T, timeout time.Duration, ms ...*testMember) {
	t.Helper()
	waitFor(t, timeout, "members to see each other", func() bool {
		for _, m := range ms {
			if !m.sees(others(ms, m)...) {
				return false
			}
		}
		return true
	})
	for _, m := range ms {
		m.checkPeers()
	}
}

// steadyTimings are for tests that assert no member is ever removed: with
// fastTimings a probe answered 50 ms late (a loaded CI machine) gets a live
// member declared dead after 200 ms of suspicion. Joining and spreading a new
// member do not depend on probing.
func steadyTimings() GossipTimings {
	tm := fastTimings()
	tm.ProbeInterval, tm.ProbeTimeout, tm.SuspicionMult = time.Second, 500*time.Millisecond, 4
	return tm
}

func TestGossipMembersDiscoverEachOther(t *testing.T) {
	steady := withTimings(steadyTimings())
	a := startMember(t, "a", nil, steady)
	b := startMember(t, "b", []string{a.addr()}, steady)
	c := startMember(t, "c", []string{a.addr(), b.addr()}, steady)
	start := time.Now()
	waitConverged(t, 5*time.Second, a, b, c)
	t.Logf("3 members converged in %s", time.Since(start).Round(time.Millisecond))

	for _, m := range []*testMember{a, b, c} {
		ps := m.agent.Members()
		if len(ps) != 2 || ps[0].Key != others([]*testMember{a, b, c}, m)[0] {
			t.Errorf("member %s: Members() = %+v", m.name, ps)
		}
	}

	t.Run("a member joining later is added everywhere", func(t *testing.T) {
		d := startMember(t, "d", []string{a.addr(), b.addr(), c.addr()}, steady)
		start := time.Now()
		waitConverged(t, 5*time.Second, a, b, c, d)
		t.Logf("4th member seen by all in %s", time.Since(start).Round(time.Millisecond))
		for _, m := range []*testMember{a, b, c} {
			for _, ev := range m.eventsCopy() {
				if ev.Kind != PeerAdded {
					t.Errorf("member %s: unexpected %s %s", m.name, ev.Kind, ev.Peer.Key)
				}
			}
		}
	})
}

func TestGossipCrashedMemberIsRemoved(t *testing.T) {
	a := startMember(t, "a", nil)
	b := startMember(t, "b", []string{a.addr()})
	c := startMember(t, "c", []string{a.addr(), b.addr()})
	waitConverged(t, 5*time.Second, a, b, c)

	start := time.Now()
	c.crash()
	waitFor(t, 5*time.Second, "a and b to drop the crashed member", func() bool {
		return a.sees("b") && b.sees("a")
	})
	for _, m := range []*testMember{a, b} {
		m.mu.Lock()
		t.Logf("member %s saw the crash of c after %s", m.name, m.removedAt["c"].Sub(start).Round(time.Millisecond))
		m.mu.Unlock()
		evs := m.eventsCopy()
		last := evs[len(evs)-1]
		if last.Kind != PeerRemoved || last.Peer.Key != "c" || last.Peer.URIs[0].Addr() != mustURIs(t, brokerURI("c"))[0].Addr() {
			t.Errorf("member %s: last event = %s %+v", m.name, last.Kind, last.Peer)
		}
	}
}

func TestGossipLeavingMemberIsRemovedFast(t *testing.T) {
	// LAN timings: failure detection would take at least SuspicionMult (4) ×
	// ProbeInterval (1 s), so removal within 2.5 s can only come from the leave.
	lan := withTimings(GossipTimings{})
	a := startMember(t, "a", nil, lan)
	b := startMember(t, "b", []string{a.addr()}, lan)
	c := startMember(t, "c", []string{a.addr(), b.addr()}, lan)
	waitConverged(t, 5*time.Second, a, b, c)

	start := time.Now()
	c.stop()
	t.Logf("c's Run returned after %s", time.Since(start).Round(time.Millisecond))
	waitFor(t, 2500*time.Millisecond, "a and b to drop the member that left", func() bool {
		return a.sees("b") && b.sees("a")
	})
	for _, m := range []*testMember{a, b} {
		m.mu.Lock()
		t.Logf("member %s saw c leave after %s", m.name, m.removedAt["c"].Sub(start).Round(time.Millisecond))
		m.mu.Unlock()
	}
}

func TestGossipLeaveBeforeShutdown(t *testing.T) {
	a := startMember(t, "a", nil)
	b := startMember(t, "b", []string{a.addr()})
	waitConverged(t, 5*time.Second, a, b)
	if err := b.agent.Leave(time.Second); err != nil {
		t.Fatalf("Leave: %v", err)
	}
	waitFor(t, 2*time.Second, "a to drop b", func() bool { return a.sees() })
	if err := b.agent.Leave(time.Second); err != nil {
		t.Errorf("second Leave: %v", err)
	}
	b.stop()
	if err := b.agent.Leave(time.Second); err != nil {
		t.Errorf("Leave after Run returned: %v", err)
	}
	if n := len(b.agent.Members()); n != 0 {
		t.Errorf("Members() after Run returned has %d peers", n)
	}
}

func TestGossipLeaveBeforeRunIsAnError(t *testing.T) {
	agent, err := NewGossip(GossipConfig{BindAddr: "127.0.0.1:0", Local: LocalBroker{URI: "stomp://h:1"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := agent.Leave(time.Second); !errors.Is(err, ErrNotRunning) {
		t.Errorf("Leave = %v, want ErrNotRunning", err)
	}
	if agent.LocalAddr() != "" || len(agent.Members()) != 0 {
		t.Error("an agent that never ran reports an address or members")
	}
}

// freePort returns a port free for both TCP and UDP on 127.0.0.1 (gossip uses
// both); a later bind may still lose a race, which the kernel makes unlikely.
func freePort(t *testing.T) int {
	t.Helper()
	for range 20 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		u, err := net.ListenPacket("udp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		l.Close()
		if err == nil {
			u.Close()
			return port
		}
	}
	t.Fatal("no free port")
	return 0
}

func TestGossipJoinsASeedThatStartsLater(t *testing.T) {
	seed := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))
	b := startMember(t, "b", []string{seed})
	c := startMember(t, "c", []string{seed})
	waitFor(t, 5*time.Second, "b and c to fail joining", func() bool {
		return b.agent.joinFailures.Load() > 0 && c.agent.joinFailures.Load() > 0
	})
	a := startMember(t, "a", nil, withBind(seed))
	start := time.Now()
	waitConverged(t, 10*time.Second, a, b, c)
	t.Logf("converged %s after the seed started", time.Since(start).Round(time.Millisecond))
}

func TestGossipGroupsMergeWhenABootstrapSeedStartsLast(t *testing.T) {
	// b and c list the seed a and each other; they join each other first, then
	// a starts with no seeds of its own. Only the re-join of seeds that are not
	// members brings a in.
	seed := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))
	cAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))
	b := startMember(t, "b", []string{seed, cAddr})
	c := startMember(t, "c", []string{seed, b.addr()}, withBind(cAddr))
	waitConverged(t, 5*time.Second, b, c)
	a := startMember(t, "a", nil, withBind(seed))
	start := time.Now()
	waitConverged(t, 10*time.Second, a, b, c)
	t.Logf("merged %s after the seed started", time.Since(start).Round(time.Millisecond))
}

func TestGossipEncrypted(t *testing.T) {
	key := []byte("0123456789abcdef")
	a := startMember(t, "a", nil, withKey(key))
	b := startMember(t, "b", []string{a.addr()}, withKey(key))
	waitConverged(t, 5*time.Second, a, b)

	c := startMember(t, "c", []string{a.addr()}, withKey([]byte("fedcba9876543210")))
	waitFor(t, 5*time.Second, "c to fail joining with the wrong key", func() bool {
		return c.agent.joinFailures.Load() >= 2
	})
	if len(c.keys()) != 0 || !a.sees("b") {
		t.Errorf("a member with the wrong key got in: c sees %v, a sees %v", c.keys(), a.keys())
	}
}

func TestGossipMetadataAtTheLimitWorks(t *testing.T) {
	// Pad the vhost so the encoded metadata is exactly MetaMaxSize bytes.
	local := LocalBroker{URI: brokerURI("b"), BrokerID: "ID:b", BrokerName: "broker-b", Protocol: ProtocolSTOMP}
	base, err := encodeMeta(local)
	if err != nil {
		t.Fatal(err)
	}
	local.URI += "?vhost=" + strings.Repeat("v", MetaMaxSize-len(base)-len("?vhost="))
	if meta, err := encodeMeta(local); err != nil || len(meta) != MetaMaxSize {
		t.Fatalf("meta is %d bytes, err %v", len(meta), err)
	}
	a := startMember(t, "a", nil)
	b := startMember(t, "b", []string{a.addr()}, withLocal(local))
	waitFor(t, 5*time.Second, "a to see b", func() bool { return a.sees("b") && b.sees("a") })
	if got := a.agent.Members()[0].URIs[0].(stomp.URI).VHost; len(got) != MetaMaxSize-len(base)-len("?vhost=") {
		t.Errorf("vhost is %d bytes", len(got))
	}

	local.URI += "v"
	_, err = NewGossip(GossipConfig{BindAddr: "127.0.0.1:0", Local: local})
	if !errors.Is(err, ErrMetaTooLarge) || !strings.Contains(err.Error(), fmt.Sprintf("advertised broker metadata is %d bytes, limit 512", MetaMaxSize+1)) {
		t.Errorf("NewGossip with %d bytes of metadata: %v", MetaMaxSize+1, err)
	}
}

func TestGossipRunFailsWhenThePortIsTaken(t *testing.T) {
	a := startMember(t, "a", nil)
	b := newMember(t, "b", nil, withBind(a.addr()))
	select {
	case err := <-b.done:
		if err == nil || !strings.Contains(err.Error(), "starting gossip on "+a.addr()) {
			t.Errorf("Run = %v", err)
		}
		b.mu.Lock()
		b.stopped = true
		b.mu.Unlock()
	case <-b.agent.Ready():
		t.Fatal("Ready closed although the port is taken")
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not fail")
	}
	select {
	case <-b.agent.Ready():
		t.Error("Ready closed after Run failed")
	default:
	}
}

func TestGossipRunTwiceIsAnError(t *testing.T) {
	a := startMember(t, "a", nil)
	if err := a.agent.Run(context.Background(), make(chan Event)); err == nil {
		t.Error("second Run succeeded")
	}
}

func TestGossipRunNeverBlocksOnOutOnceCtxEnds(t *testing.T) {
	a := startMember(t, "a", nil)
	l := newTestLog(t)
	agent, err := NewGossip(GossipConfig{NodeName: "b", BindAddr: "127.0.0.1:0", Join: []string{a.addr()},
		Local: LocalBroker{URI: brokerURI("b")}, Timings: fastTimings(), Log: l.logger()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- agent.Run(ctx, make(chan Event)) }() // nobody reads
	waitFor(t, 5*time.Second, "a to see b", func() bool { return a.sees("b") })
	waitFor(t, 5*time.Second, "b's memberlist to know a", func() bool {
		agent.lifeMu.Lock()
		defer agent.lifeMu.Unlock()
		return agent.ml != nil && agent.ml.NumMembers() == 2
	})
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run blocked on an unread channel after ctx ended")
	}
	waitFor(t, 2*time.Second, "a to see b leave", func() bool { return a.sees() })
}

// rawNode is a bare memberlist member with whatever metadata a test wants, to
// play a misbehaving or foreign member.
type rawNode struct {
	mu   sync.Mutex
	meta []byte
	ml   *memberlist.Memberlist
}

func (r *rawNode) NodeMeta(limit int) []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.meta)
}
func (r *rawNode) NotifyMsg([]byte)                           {}
func (r *rawNode) GetBroadcasts(overhead, limit int) [][]byte { return nil }
func (r *rawNode) LocalState(join bool) []byte                { return nil }
func (r *rawNode) MergeRemoteState(buf []byte, join bool)     {}

func (r *rawNode) setMeta(t *testing.T, meta string) {
	t.Helper()
	r.mu.Lock()
	r.meta = []byte(meta)
	r.mu.Unlock()
	// UpdateNode waits for the broadcast to go out: 1 s was too short once at
	// load 12. It can also wait in vain: memberlist v0.7.0 drops the update
	// without a word when a refutation (this node was suspected; probes
	// time out after 50 ms here) took a newer incarnation number between
	// UpdateNode's choice of its own and its broadcast (aliveNode returns on
	// a.Incarnation < state.Incarnation for the local node, and the
	// refutation carries the old metadata). Seen once in CI. Another
	// UpdateNode takes a fresh number.
	var err error
	for range 3 {
		if err = r.ml.UpdateNode(5 * time.Second); err == nil {
			return
		}
		t.Logf("UpdateNode: %v; again", err)
	}
	t.Fatal(err)
}

func startRawNode(t *testing.T, name, meta, join string) *rawNode {
	t.Helper()
	r := &rawNode{meta: []byte(meta)}
	conf := memberlist.DefaultLANConfig()
	conf.Name = name
	conf.BindAddr = "127.0.0.1"
	conf.BindPort = 0
	conf.Label = gossipLabel
	conf.Delegate = r
	conf.LogOutput = io.Discard
	conf.ProbeInterval, conf.ProbeTimeout, conf.GossipInterval = 100*time.Millisecond, 50*time.Millisecond, 20*time.Millisecond
	conf.PushPullInterval, conf.SuspicionMult = time.Second, 2
	ml, err := memberlist.Create(conf)
	if err != nil {
		t.Fatal(err)
	}
	r.ml = ml
	t.Cleanup(func() { _ = ml.Shutdown() })
	if _, err := ml.Join([]string{join}); err != nil {
		t.Fatal(err)
	}
	return r
}

func TestGossipSkipsMembersWithBadMetadata(t *testing.T) {
	a := startMember(t, "a", nil)
	startRawNode(t, "garbage", `{"u":"stomp://user:hunter2@h:1", not json`, a.addr())
	startRawNode(t, "bad-uri", `{"u":"http://user:hunter2@h:1"}`, a.addr())
	startRawNode(t, "amqp", `{"u":"tcp://h:5672","p":"amqp"}`, a.addr())
	startRawNode(t, "binary", "\xff\x00\x01", a.addr())
	waitFor(t, 5*time.Second, "a's memberlist to know the bad members", func() bool {
		a.agent.lifeMu.Lock()
		defer a.agent.lifeMu.Unlock()
		return a.agent.ml.NumMembers() == 5
	})
	// Events are handled in order, so once good is seen the bad ones were handled.
	good := startRawNode(t, "good", `{"u":"stomp://h:1","id":"ID:good"}`, a.addr())
	waitFor(t, 5*time.Second, "a to see good", func() bool { return len(a.keys()) > 0 })
	if !a.sees("good") {
		t.Fatalf("a sees %v, want only good", a.keys())
	}
	logs := a.log.String()
	for _, name := range []string{"garbage", "bad-uri", "amqp", "binary"} {
		if !strings.Contains(logs, "peer="+name) {
			t.Errorf("skipping %s was not logged", name)
		}
	}
	if strings.Contains(logs, "hunter2") {
		t.Error("a passcode from bad metadata was logged")
	}

	t.Run("changed metadata replaces the peer", func(t *testing.T) {
		good.setMeta(t, `{"u":"stomp://h:2","id":"ID:good"}`)
		waitFor(t, 20*time.Second, "a to report the new URI", func() bool {
			a.mu.Lock()
			defer a.mu.Unlock()
			p, ok := a.peers["good"]
			return ok && portOf(p.URIs[0]) == 2
		})
		if ps := a.agent.Members(); len(ps) != 1 || portOf(ps[0].URIs[0]) != 2 {
			t.Errorf("Members() = %+v", ps)
		}
		evs := a.eventsCopy()
		n := len(evs)
		if n != 3 || evs[1].Kind != PeerRemoved || portOf(evs[1].Peer.URIs[0]) != 1 || evs[2].Kind != PeerAdded || portOf(evs[2].Peer.URIs[0]) != 2 {
			t.Errorf("events = %+v", evs)
		}
	})
	t.Run("metadata turning bad removes the peer", func(t *testing.T) {
		good.setMeta(t, `{"u":""}`)
		waitFor(t, 20*time.Second, "a to drop good", func() bool { return a.sees() })
	})
	t.Run("metadata turning good again adds the peer", func(t *testing.T) {
		good.setMeta(t, `{"u":"stomp://h:3"}`)
		waitFor(t, 20*time.Second, "a to see good again", func() bool { return a.sees("good") })
	})
}

func TestNewGossipValidates(t *testing.T) {
	ok := LocalBroker{URI: "stomp://h:1"}
	tests := []struct {
		name string
		cfg  GossipConfig
		want []string
	}{
		{"a host name as bind address", GossipConfig{BindAddr: "localhost:0", Local: ok}, []string{`"localhost" is not an IP address`}},
		{"a bind address without port", GossipConfig{BindAddr: "127.0.0.1", Local: ok}, []string{"want IP:port"}},
		{"a bad port", GossipConfig{BindAddr: "127.0.0.1:70000", Local: ok}, []string{`bad port "70000"`}},
		{"a bad advertise address", GossipConfig{BindAddr: "127.0.0.1:0", Advertise: "example.com:1", Local: ok}, []string{"advertise address"}},
		{"a short key", GossipConfig{BindAddr: "127.0.0.1:0", SecretKey: []byte("short"), Local: ok}, []string{"secret key is 5 bytes"}},
		{"no local URI", GossipConfig{BindAddr: "127.0.0.1:0"}, []string{"local broker URI is empty"}},
		{"a bad local URI", GossipConfig{BindAddr: "127.0.0.1:0", Local: LocalBroker{URI: "stomp://u:hunter2@h:x"}}, []string{"local broker"}},
		{"another protocol", GossipConfig{BindAddr: "127.0.0.1:0", Local: LocalBroker{URI: "stomp://h:1", Protocol: "amqp"}}, []string{`protocol "amqp"`}},
		{"probe timeout above interval", GossipConfig{BindAddr: "127.0.0.1:0", Local: ok, Timings: GossipTimings{ProbeInterval: time.Second, ProbeTimeout: 2 * time.Second}}, []string{"probe timeout"}},
		{"an empty seed", GossipConfig{BindAddr: "127.0.0.1:0", Local: ok, Join: []string{"1.2.3.4:1", " "}}, []string{"join address 2 is empty"}},
		{"every problem at once", GossipConfig{BindAddr: "x", SecretKey: []byte("k")}, []string{"bind address", "secret key", "local broker URI"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewGossip(tt.cfg)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("err = %q, want it to contain %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("err shows the passcode: %q", err)
			}
		})
	}
}

func TestNewGossipDefaults(t *testing.T) {
	a, err := NewGossip(GossipConfig{Local: LocalBroker{URI: "stomp://h:1"}, Insecure: true})
	if err != nil {
		t.Fatal(err)
	}
	if a.bindHost != "0.0.0.0" || a.bindPort != DefaultGossipPort || !strings.HasSuffix(a.Name(), "-7946") {
		t.Errorf("bind %s:%d name %s", a.bindHost, a.bindPort, a.Name())
	}
	b, _ := NewGossip(GossipConfig{BindAddr: "127.0.0.1:0", Local: LocalBroker{URI: "stomp://h:1"}})
	c, _ := NewGossip(GossipConfig{BindAddr: "127.0.0.1:0", Local: LocalBroker{URI: "stomp://h:1"}})
	if b.Name() == c.Name() {
		t.Errorf("two agents on kernel-chosen ports got the same name %s", b.Name())
	}
	d, err := NewGossip(GossipConfig{BindAddr: "127.0.0.1:7000", Advertise: "10.0.0.1", Local: LocalBroker{URI: "stomp://h:1"}})
	if err != nil || d.advHost != "10.0.0.1" || d.advPort != 7000 {
		t.Errorf("advertise %s:%d, err %v", d.advHost, d.advPort, err)
	}
}
