package discovery

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	stdlog "log"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/rs/zerolog"

	"github.com/brokernet/brokernet/internal/backoff"
	"github.com/brokernet/brokernet/internal/mailbox"
	"github.com/brokernet/brokernet/transport/endpoint"
)

// DefaultGossipPort is memberlist's default port, used when BindAddr is empty.
const DefaultGossipPort = 7946

// gossipLabel prefixes every gossip packet and stream (memberlist Config.Label),
// so a brokernet member never merges with another memberlist cluster (serf,
// Consul) that happens to be reachable on the same ports.
const gossipLabel = "brokernet"

// leaveTimeout bounds the graceful leave on shutdown: memberlist's Leave waits
// for the leave broadcast to go out.
const leaveTimeout = 2 * time.Second

// GossipConfig configures a gossip agent. Only Local.URI is required.
type GossipConfig struct {
	// NodeName names this member; it must be unique in the cluster. The default
	// is hostname-port, or hostname-<random> when the port is chosen by the kernel.
	NodeName string
	// BindAddr is the IP:port gossip listens on, UDP and TCP alike (memberlist
	// uses one port for both). Port 0 picks a free port; the default is
	// 0.0.0.0:7946.
	BindAddr string
	// Advertise is the IP[:port] other members reach this one at, when it differs
	// from BindAddr (NAT, containers). The port defaults to the bound port. When
	// empty, memberlist advertises the bound IP, or for 0.0.0.0 the first private IP.
	Advertise string
	// Join lists the seeds (host:port; a port-less host uses the bound port).
	// The agent joins all of them at once, which makes a new member known to
	// everyone quickly, and retries in the background with back-off until at
	// least one answers, since a seed may start later. Afterwards it keeps
	// re-joining, at the longest back-off, any seed that is not a live member, so
	// that two groups which formed while a seed was down merge once it is up.
	Join []string
	// SecretKey, when set, encrypts all gossip with AES-GCM; it must be 16, 24 or
	// 32 bytes and the same on every member. Anyone holding it is a fully trusted
	// member (memberlist SECURITY.md). Without it, BindAddr must be loopback
	// unless Insecure is set (CheckGossipExposure).
	SecretKey []byte
	// Insecure allows unencrypted gossip on a non-loopback address: anyone who
	// can reach the port may join and advertise brokers. A warning is logged.
	Insecure bool
	// AllowedBrokers, when not empty, are the only brokers members may advertise
	// (host names, IPs, CIDR networks); others are skipped and logged.
	AllowedBrokers AllowList
	// Local is what this member advertises to the others.
	Local LocalBroker
	// Timings tunes failure detection; zero fields keep memberlist's
	// DefaultLANConfig values.
	Timings GossipTimings
	// Log receives the agent's and memberlist's messages.
	Log zerolog.Logger
}

// LocalBroker is the broker a member advertises: the others bridge to it. It is
// gossiped as node metadata, which memberlist limits to MetaMaxSize bytes once
// encoded.
type LocalBroker struct {
	// URI is the broker URI others should dial. Credentials, the client id and
	// TLS file options are dropped before it is gossiped (every member reads the
	// metadata, and without SecretKey so does the network): peers log in with
	// their own configured credentials.
	URI string
	// BrokerID is the broker's id, if known.
	BrokerID string
	// BrokerName is the broker's name, if known.
	BrokerName string
	// Protocol is how to talk to the broker: "" or the URI's protocol
	// ("stomp", "amqp", "openwire"); the URI's scheme decides.
	Protocol string
}

// GossipTimings tunes memberlist's failure detector. A crashed member is declared
// dead after about ProbeInterval + SuspicionMult × max(1, log10(N)) ×
// ProbeInterval; a member that leaves gracefully is gone within a few
// GossipIntervals. Join retries start at ProbeInterval and back off to 30 ×
// ProbeInterval.
type GossipTimings struct {
	// ProbeInterval is how often each member probes a random other (LAN: 1 s).
	ProbeInterval time.Duration
	// ProbeTimeout is how long a probe waits for its ack (LAN: 500 ms).
	ProbeTimeout time.Duration
	// GossipInterval is how often broadcasts are gossiped (LAN: 200 ms).
	GossipInterval time.Duration
	// PushPullInterval is how often members exchange their full state, which
	// repairs lost broadcasts (LAN: 30 s).
	PushPullInterval time.Duration
	// SuspicionMult scales how long a suspect member has to refute (LAN: 4).
	SuspicionMult int
}

// member is a remote member the agent reported as a peer.
type member struct {
	peer Peer
	meta []byte
}

// GossipAgent discovers peers with hashicorp/memberlist: every member gossips
// its LocalBroker as node metadata, and every other member becomes a Peer keyed
// by member name. It implements Agent.
type GossipAgent struct {
	// Lock order: lifeMu before mu.

	name     string
	bindHost string
	bindPort int
	advHost  string
	advPort  int
	seeds    []string
	key      []byte
	meta     []byte
	insecure bool
	allowed  AllowList
	timings  GossipTimings
	log      zerolog.Logger

	started atomic.Bool
	ready   chan struct{}
	kill    chan struct{} // closed by crash
	kills   sync.Once
	queue   nodeQueue
	left    atomic.Bool // Leave was called; stops the join loop
	// joinFailures counts join attempts no seed answered (for tests).
	joinFailures atomic.Int64

	lifeMu sync.Mutex // guards ml and shut: memberlist's Leave panics after Shutdown
	ml     *memberlist.Memberlist
	shut   bool

	mu      sync.Mutex // guards members, addrs and localAddr
	members map[string]member
	// addrs are the live members' addresses by name, as the EventDelegate
	// copied them under memberlist's lock (joinLoop): the *Node values
	// memberlist.Members returns are updated by memberlist meanwhile, and
	// reading them raced with its aliveNode (go test -race, in CI).
	addrs     map[string]string
	localAddr string
}

var _ Agent = (*GossipAgent)(nil)

// NewGossip validates cfg and returns an agent; it binds nothing until Run.
// All problems are reported together. Metadata that memberlist would panic on is
// an error here.
func NewGossip(cfg GossipConfig) (*GossipAgent, error) {
	a := &GossipAgent{
		name:     cfg.NodeName,
		seeds:    slices.Clone(cfg.Join),
		key:      slices.Clone(cfg.SecretKey),
		insecure: cfg.Insecure,
		allowed:  cfg.AllowedBrokers,
		timings:  cfg.Timings,
		ready:    make(chan struct{}),
		kill:     make(chan struct{}),
		members:  make(map[string]member),
		addrs:    make(map[string]string),
	}
	var errs []error
	problem := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("gossip: "+format, args...))
	}

	bind := cfg.BindAddr
	if bind == "" {
		bind = net.JoinHostPort("0.0.0.0", strconv.Itoa(DefaultGossipPort))
	}
	host, port, err := splitIPPort(bind, true)
	if err != nil {
		problem("bind address %q: %v", bind, err)
	}
	if host == "" {
		host = "0.0.0.0"
	}
	a.bindHost, a.bindPort = host, port

	if cfg.Advertise != "" {
		host, port, err := splitIPPort(cfg.Advertise, false)
		if err != nil {
			problem("advertise address %q: %v", cfg.Advertise, err)
		} else if host == "" {
			problem("advertise address %q: missing IP", cfg.Advertise)
		}
		if port == 0 {
			port = a.bindPort // memberlist replaces it with the bound port when that is 0
		}
		a.advHost, a.advPort = host, port
	}

	for i, s := range a.seeds {
		if strings.TrimSpace(s) == "" {
			problem("join address %d is empty", i+1)
		}
	}

	switch len(a.key) {
	case 0, 16, 24, 32:
	default:
		problem("secret key is %d bytes; want 16, 24 or 32 (AES-128, -192 or -256)", len(a.key))
	}
	if err == nil {
		if err := CheckGossipExposure(net.JoinHostPort(a.bindHost, strconv.Itoa(a.bindPort)), a.key, a.insecure); err != nil {
			errs = append(errs, fmt.Errorf("gossip: %w", err))
		}
	}

	t := cfg.Timings
	if t.ProbeInterval < 0 || t.ProbeTimeout < 0 || t.GossipInterval < 0 || t.PushPullInterval < 0 || t.SuspicionMult < 0 {
		problem("timings must not be negative")
	}
	if t.ProbeInterval > 0 && t.ProbeTimeout > 0 && t.ProbeTimeout >= t.ProbeInterval {
		problem("probe timeout %s must be below probe interval %s", t.ProbeTimeout, t.ProbeInterval)
	}

	local := cfg.Local
	if local.URI == "" {
		problem("local broker URI is empty; members advertise the broker others should bridge to")
	} else if u, err := endpoint.Parse(local.URI); err != nil {
		problem("local broker: %v", err)
	} else if local.Protocol != "" && local.Protocol != u.Protocol() {
		problem("local broker protocol %q does not match its URI %s (%s)", local.Protocol, u, u.Protocol())
	}
	if a.meta, err = encodeMeta(local); err != nil {
		errs = append(errs, fmt.Errorf("gossip: %w", err))
	}

	if a.name == "" {
		hostname, err := os.Hostname()
		if err != nil || hostname == "" {
			hostname = "brokernet"
		}
		if a.bindPort != 0 {
			a.name = fmt.Sprintf("%s-%d", hostname, a.bindPort)
		} else {
			var b [4]byte
			_, _ = rand.Read(b[:])
			a.name = hostname + "-" + hex.EncodeToString(b[:])
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	a.log = cfg.Log.With().Str("component", "discovery").Str("member", a.name).Logger()
	return a, nil
}

// splitIPPort splits "IP:port" (or "IP" when the port is optional); the IP may be
// empty. memberlist binds and advertises IPs only, not host names.
func splitIPPort(s string, needPort bool) (string, int, error) {
	host, p, err := net.SplitHostPort(s)
	if err != nil {
		if needPort {
			return "", 0, errors.New("want IP:port (port 0 picks a free port)")
		}
		host, p = strings.Trim(s, "[]"), ""
	}
	if host != "" && net.ParseIP(host) == nil {
		return "", 0, fmt.Errorf("%q is not an IP address", host)
	}
	port := 0
	if p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 || n > 65535 {
			return "", 0, fmt.Errorf("bad port %q", p)
		}
		port = n
	}
	return host, port, nil
}

// Name is this member's node name.
func (a *GossipAgent) Name() string { return a.name }

// Ready is closed once Run has bound its port and started gossiping; from then on
// LocalAddr is known. It is never closed when Run fails to start.
func (a *GossipAgent) Ready() <-chan struct{} { return a.ready }

// LocalAddr is the IP:port other members reach this one at (the bound address,
// or the advertised one when Advertise is set or the bind IP is 0.0.0.0): what
// another member puts in Join. It is "" until Ready is closed.
func (a *GossipAgent) LocalAddr() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.localAddr
}

// Members returns the peers currently known, sorted by Key, excluding this
// member. It is safe to call at any time and returns a copy; it is empty before
// Run starts and after it returns.
func (a *GossipAgent) Members() []Peer {
	a.mu.Lock()
	peers := make([]Peer, 0, len(a.members))
	for _, m := range a.members {
		p := m.peer
		p.URIs = slices.Clone(p.URIs)
		peers = append(peers, p)
	}
	a.mu.Unlock()
	slices.SortFunc(peers, func(x, y Peer) int { return strings.Compare(x.Key, y.Key) })
	return peers
}

// ErrNotRunning is returned by Leave before Run has started gossiping.
var ErrNotRunning = errors.New("gossip agent is not running")

// Leave leaves the cluster gracefully, waiting at most timeout for the leave to
// be gossiped, so the others stop their bridges to this member at once instead of
// after failure detection. Run does this itself when its context ends; call Leave
// earlier to be dropped before draining. The agent keeps running (and reporting)
// until its context ends, but a member that left cannot join again: start a new
// agent. Leave is idempotent and returns nil once Run has returned.
func (a *GossipAgent) Leave(timeout time.Duration) error {
	a.lifeMu.Lock()
	defer a.lifeMu.Unlock()
	if a.ml == nil {
		return ErrNotRunning
	}
	if a.shut || a.left.Swap(true) {
		return nil
	}
	if err := a.ml.Leave(timeout); err != nil {
		return fmt.Errorf("leaving gossip: %w", err)
	}
	return nil
}

// crash stops the agent as a crash would: no leave, so the others must detect
// the failure. For tests.
func (a *GossipAgent) crash() { a.kills.Do(func() { close(a.kill) }) }

// Run starts gossiping, joins the seeds in the background and reports peers on
// out until ctx is done; then it leaves gracefully (at most 2 s), shuts memberlist
// down and returns nil. It returns an error only if it cannot start, for example
// when the port is taken; Run may be called once.
func (a *GossipAgent) Run(ctx context.Context, out chan<- Event) error {
	if !a.started.CompareAndSwap(false, true) {
		return errors.New("gossip agent: Run called twice")
	}
	if ctx.Err() != nil {
		return nil
	}
	conf := a.memberlistConfig()
	ml, err := memberlist.Create(conf)
	if err != nil {
		return fmt.Errorf("starting gossip on %s: %w", net.JoinHostPort(a.bindHost, strconv.Itoa(a.bindPort)), err)
	}
	a.lifeMu.Lock()
	a.ml = ml
	a.lifeMu.Unlock()
	local := ml.LocalNode().Address()
	a.mu.Lock()
	a.localAddr = local
	a.mu.Unlock()
	a.log.Info().Str("addr", local).Int("seeds", len(a.seeds)).Bool("encrypted", len(a.key) > 0).Msg("gossip started")
	if len(a.key) == 0 && !isLoopbackHost(a.bindHost) {
		a.log.Warn().Msg("gossip is unencrypted on a non-loopback address (insecure): anyone who reaches it can join and advertise brokers")
	}
	close(a.ready)

	joinCtx, cancelJoin := context.WithCancel(ctx)
	joinDone := make(chan struct{})
	go func() {
		defer close(joinDone)
		a.joinLoop(joinCtx, ml, conf.BindPort, local)
	}()
	stop := func(leave bool) error {
		cancelJoin()
		a.shutdown(ml, leave)
		// A Join in flight ends within memberlist's TCP timeout; do not hold
		// the caller's shutdown hostage to an unreachable seed.
		select {
		case <-joinDone:
		case <-time.After(leaveTimeout):
		}
		a.mu.Lock()
		clear(a.members)
		clear(a.addrs)
		a.mu.Unlock()
		return nil
	}

	for {
		select {
		case <-ctx.Done():
			return stop(true)
		case <-a.kill:
			return stop(false)
		case <-a.queue.Signal():
		}
		for _, c := range a.queue.take() {
			for _, ev := range a.apply(c) {
				select {
				case out <- ev:
				case <-ctx.Done():
					return stop(true)
				case <-a.kill:
					return stop(false)
				}
			}
		}
	}
}

// shutdown leaves (unless crashing or already left) and shuts memberlist down.
func (a *GossipAgent) shutdown(ml *memberlist.Memberlist, leave bool) {
	a.lifeMu.Lock()
	defer a.lifeMu.Unlock()
	if leave && !a.left.Swap(true) {
		if err := ml.Leave(leaveTimeout); err != nil {
			a.log.Warn().Err(err).Msg("leaving gossip")
		}
	}
	a.shut = true
	if err := ml.Shutdown(); err != nil {
		a.log.Warn().Err(err).Msg("shutting gossip down")
	}
	a.log.Info().Bool("left", leave).Msg("gossip stopped")
}

// memberlistConfig builds memberlist's configuration from DefaultLANConfig.
func (a *GossipAgent) memberlistConfig() *memberlist.Config {
	conf := memberlist.DefaultLANConfig()
	conf.Name = a.name
	conf.BindAddr = a.bindHost
	conf.BindPort = a.bindPort
	if a.advHost != "" {
		conf.AdvertiseAddr = a.advHost
		conf.AdvertisePort = a.advPort
	}
	if len(a.key) > 0 {
		conf.SecretKey = slices.Clone(a.key)
	}
	conf.Label = gossipLabel
	conf.Delegate = metaDelegate{meta: a.meta}
	conf.Events = eventDelegate{q: &a.queue}
	conf.Logger = stdlog.New(memberlistLog{log: a.log.With().Str("lib", "memberlist").Logger()}, "", 0)
	t := a.timings
	if t.ProbeInterval > 0 {
		conf.ProbeInterval = t.ProbeInterval
	}
	if t.ProbeTimeout > 0 {
		conf.ProbeTimeout = t.ProbeTimeout
	}
	if t.GossipInterval > 0 {
		conf.GossipInterval = t.GossipInterval
	}
	if t.PushPullInterval > 0 {
		conf.PushPullInterval = t.PushPullInterval
	}
	if t.SuspicionMult > 0 {
		conf.SuspicionMult = t.SuspicionMult
	}
	return conf
}

// joinPolicy is the back-off between join attempts: from ProbeInterval to 30
// probe intervals (1 s to 30 s with LAN timings).
func (a *GossipAgent) joinPolicy() backoff.Policy {
	probe := a.timings.ProbeInterval
	if probe <= 0 {
		probe = memberlist.DefaultLANConfig().ProbeInterval
	}
	return backoff.Policy{Initial: probe, Max: 30 * probe, Multiplier: 2}
}

// joinLoop joins the seeds: all at once, retried with back-off until one answers,
// then every Max back-off for the seeds that are not live members. Joining a seed
// that is already a member is a cheap state exchange.
func (a *GossipAgent) joinLoop(ctx context.Context, ml *memberlist.Memberlist, bindPort int, self string) {
	var seeds []string
	for _, s := range a.seeds {
		s = strings.TrimSpace(s)
		if _, _, err := net.SplitHostPort(s); err != nil {
			s = net.JoinHostPort(strings.Trim(s, "[]"), strconv.Itoa(bindPort))
		}
		if s != self && !slices.Contains(seeds, s) {
			seeds = append(seeds, s)
		}
	}
	if len(seeds) == 0 {
		return
	}
	policy := a.joinPolicy()
	joined := false
	for attempt := 0; ; attempt++ {
		if ctx.Err() != nil || a.left.Load() {
			return
		}
		try := seeds
		if joined {
			live := a.liveAddrs()
			try = slices.DeleteFunc(slices.Clone(seeds), func(s string) bool { return live[s] })
		}
		if len(try) > 0 {
			n, err := ml.Join(try)
			switch {
			case n > 0 && !joined:
				joined = true
				a.log.Info().Int("answered", n).Int("seeds", len(try)).Int("members", ml.NumMembers()).Msg("joined gossip")
			case n > 0:
				a.log.Debug().Int("answered", n).Msg("re-joined seeds")
			case !joined:
				a.joinFailures.Add(1)
				ev := a.log.Debug()
				if attempt == 0 || policy.Delay(attempt) >= policy.Max {
					ev = a.log.Warn()
				}
				ev.Err(err).Strs("seeds", try).Msg("no gossip seed answered; retrying")
			default:
				a.log.Debug().Err(err).Strs("seeds", try).Msg("re-joining seeds")
			}
		}
		delay := policy.Max
		if !joined {
			delay = policy.Delay(attempt)
		}
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return
		}
	}
}

// liveAddrs returns the live members' addresses.
func (a *GossipAgent) liveAddrs() map[string]bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	live := make(map[string]bool, len(a.addrs))
	for _, addr := range a.addrs {
		live[addr] = true
	}
	return live
}

// apply records one membership change and returns the events it causes.
func (a *GossipAgent) apply(c nodeChange) []Event {
	if c.name == a.name {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if c.kind == changeLeave {
		delete(a.addrs, c.name)
	} else {
		a.addrs[c.name] = c.addr
	}
	old, had := a.members[c.name]
	var evs []Event
	switch c.kind {
	case changeJoin, changeUpdate:
		if had && bytes.Equal(old.meta, c.meta) {
			return nil
		}
		if had {
			delete(a.members, c.name)
			evs = append(evs, Event{Kind: PeerRemoved, Peer: old.peer})
		}
		p, err := decodeMeta(c.name, c.meta)
		if err != nil {
			a.log.Warn().Str("peer", c.name).Str("addr", c.addr).Err(err).Msg("skipping gossip member")
			return evs
		}
		if !a.allowed.Allows(p.URIs[0]) {
			a.log.Warn().Str("peer", c.name).Str("addr", c.addr).Stringer("uri", p.URIs[0]).Msg("skipping gossip member: its broker is not in allowedBrokers")
			return evs
		}
		a.members[c.name] = member{peer: p, meta: c.meta}
		evs = append(evs, Event{Kind: PeerAdded, Peer: p})
		msg := "peer joined"
		if had {
			msg = "peer updated"
		}
		a.log.Info().Str("peer", c.name).Str("addr", c.addr).Stringer("uri", p.URIs[0]).Str("broker_id", p.BrokerID).Msg(msg)
	case changeLeave:
		if !had {
			return nil
		}
		delete(a.members, c.name)
		evs = append(evs, Event{Kind: PeerRemoved, Peer: old.peer})
		// memberlist v0.7.0 never updates Node.State (its nodeState shadows it),
		// so a graceful leave and a failure look the same here.
		a.log.Info().Str("peer", c.name).Str("addr", c.addr).Msg("peer gone")
	}
	return evs
}

// changeKind is the EventDelegate callback a nodeChange comes from.
type changeKind int

const (
	changeJoin changeKind = iota + 1
	changeLeave
	changeUpdate
)

// nodeChange is a copy of what memberlist passed to an EventDelegate callback.
type nodeChange struct {
	kind changeKind
	name string
	addr string
	meta []byte
}

// nodeQueue is an unbounded queue from memberlist's callbacks to Run: push never
// blocks, so memberlist, which calls the EventDelegate while holding its node
// lock, is never held up by a slow consumer of events. The cluster's members
// bound it.
type nodeQueue struct {
	mailbox.Mailbox[nodeChange]
}

func (q *nodeQueue) push(c nodeChange) { q.Push(c) }

func (q *nodeQueue) take() []nodeChange { return q.Take() }

// eventDelegate copies memberlist's membership events into the queue. Its
// methods run under memberlist's node lock, so they must neither block nor call
// back into memberlist (Members and friends deadlock there: memberlist #23, #237).
type eventDelegate struct {
	q *nodeQueue
}

func (d eventDelegate) notify(kind changeKind, n *memberlist.Node) {
	d.q.push(nodeChange{kind: kind, name: n.Name, addr: n.Address(), meta: bytes.Clone(n.Meta)})
}

// NotifyJoin queues a member becoming alive.
func (d eventDelegate) NotifyJoin(n *memberlist.Node) { d.notify(changeJoin, n) }

// NotifyLeave queues a member that left or was declared dead.
func (d eventDelegate) NotifyLeave(n *memberlist.Node) { d.notify(changeLeave, n) }

// NotifyUpdate queues a member whose metadata changed.
func (d eventDelegate) NotifyUpdate(n *memberlist.Node) { d.notify(changeUpdate, n) }

// metaDelegate gives memberlist this member's metadata; brokernet sends no user
// messages or state over gossip.
type metaDelegate struct {
	meta []byte
}

// NodeMeta returns the encoded LocalBroker, which NewGossip checked against the
// limit (memberlist panics on more).
func (d metaDelegate) NodeMeta(limit int) []byte {
	if len(d.meta) > limit {
		return nil
	}
	return d.meta
}

// NotifyMsg ignores user messages.
func (metaDelegate) NotifyMsg([]byte) {}

// GetBroadcasts has nothing to broadcast.
func (metaDelegate) GetBroadcasts(overhead, limit int) [][]byte { return nil }

// LocalState has no state to exchange.
func (metaDelegate) LocalState(join bool) []byte { return nil }

// MergeRemoteState ignores remote state.
func (metaDelegate) MergeRemoteState(buf []byte, join bool) {}
