package admin

import (
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/brokernet/brokernet/bridge"
	"github.com/brokernet/brokernet/metrics"
)

// Status is the /status document. `brokernet status` and the topology page
// read it; field names are stable.
type Status struct {
	Version string    `json:"version"`
	Started time.Time `json:"started"`
	// Ready and Reasons are what /readyz answers.
	Ready   bool     `json:"ready"`
	Reasons []Reason `json:"reasons"`
	// Nodes are the brokers this process knows: the local ends of its bridges
	// and the peers they lead to.
	Nodes   []Node         `json:"nodes"`
	Bridges []BridgeStatus `json:"bridges"`
	// Stuck lists the queues holding messages that a consumer on another
	// broker waits for but no bridge can forward there and no local consumer
	// took (bridge/stuck.go). StuckMeasured is true when every bridge measured
	// them: only then does an empty list mean "none" (bridges that are down,
	// or whose local broker is reached over AMQP 1.0, cannot).
	Stuck         []Stuck `json:"stuck"`
	StuckMeasured bool    `json:"stuck_measured"`
}

// Reason says why one bridge is not ready.
type Reason struct {
	Bridge    string    `json:"bridge"`
	Connector string    `json:"connector"`
	Peer      string    `json:"peer"`
	Since     time.Time `json:"since"`
	// Error is why its last session ended ("" while it has not connected
	// yet), or, for a bridge that is up, why it cannot see the remote
	// broker's demand or what holds its messages.
	Error string `json:"error"`
	// Up is set for a bridge that is up but cannot see the remote broker's
	// demand (bridge.Bridge.DemandBlind): it forwards nothing new; or, with
	// Held, whose remote broker confirms nothing (bridge.Bridge.RemoteHold)
	// or refuses one destination's messages (a full queue, its name first).
	Up   bool `json:"up,omitempty"`
	Held bool `json:"held,omitempty"`
	// Destination names the destination refused, for a held one.
	Destination string `json:"destination,omitempty"`
}

// Node is one broker.
type Node struct {
	// Addr is host:port of its STOMP listener (the node's identity here).
	Addr string `json:"addr"`
	// BrokerID is the broker's id as the bridges learnt it ("" until then).
	BrokerID string `json:"broker_id,omitempty"`
	// Role is "local" for the broker this process runs next to (the one its
	// bridges start from) and "peer" for the brokers it bridges to.
	Role string `json:"role"`
	// Peer is the discovery key (a gossip member name, a URI) when a peer.
	Peer string `json:"peer,omitempty"`
	// Connector is the network connector that found it.
	Connector string `json:"connector,omitempty"`
}

// BridgeStatus is one bridge. The fields up to Sessions are those of earlier
// versions of /status.
type BridgeStatus struct {
	Connector     string    `json:"connector"`
	Peer          string    `json:"peer"`
	Bridge        string    `json:"bridge"`
	Up            bool      `json:"up"`
	Forwarded     int64     `json:"forwarded"`
	DemandSubs    int64     `json:"demand_subscriptions"`
	Advisories    int64     `json:"advisories"`
	BadAdvisories int64     `json:"bad_advisories"`
	Sessions      int64     `json:"sessions"`
	Local         string    `json:"local"`
	Remote        string    `json:"remote"`
	LocalID       string    `json:"local_id"`
	RemoteID      string    `json:"remote_id"`
	Since         time.Time `json:"since"`
	LastError     string    `json:"last_error,omitempty"`
	// DemandBlind says why a bridge that is up cannot see the remote
	// broker's demand ("" while it can).
	DemandBlind    string  `json:"demand_blind,omitempty"`
	Rate           float64 `json:"forwarded_per_second"`
	ForwardedBytes int64   `json:"forwarded_bytes"`
	InFlight       int64   `json:"in_flight"`
	Window         int     `json:"window"`
	PendingSubs    int64   `json:"pending_demand_subscriptions"`
	Duplicates     int64   `json:"duplicates_suppressed"`
	DeadLettered   int64   `json:"dead_lettered"`
	Stuck          int64   `json:"stuck"`
	StuckMeasured  bool    `json:"stuck_measured"`
	Held           int64   `json:"held"`
	// Blocked are the destinations whose messages the remote broker holds
	// back without confirming them (a full queue under producer flow
	// control); the others keep flowing.
	Blocked []bridge.BlockedInfo `json:"blocked"`
	// RemoteHold is the remote broker confirming nothing of what the bridge
	// sent (a RabbitMQ memory or disk alarm), with its alarms; absent while
	// it confirms.
	RemoteHold *bridge.RemoteHold  `json:"remote_hold,omitempty"`
	Reconnects int64               `json:"reconnects"`
	Demand     []bridge.DemandInfo `json:"demand"`
}

// Stuck is a queue holding messages no consumer will take.
type Stuck struct {
	// Broker is the broker holding them (host:port).
	Broker      string `json:"broker"`
	Destination string `json:"destination"`
	// Messages is the largest count any bridge from Broker measured (each
	// counts those it cannot forward to its own remote broker).
	Messages int64 `json:"messages"`
	// Demand names where consumers for it are (broker addresses).
	Demand []string `json:"demand"`
}

// Status builds the /status document now.
func (s *Server) Status() Status {
	bs := s.opts.Bridges()
	st := Status{
		Version: s.opts.Version,
		Started: s.started,
		Reasons: Reasons(bs),
		Bridges: make([]BridgeStatus, 0, len(bs)),
		Stuck:   []Stuck{},
	}
	st.Ready = len(st.Reasons) == 0
	st.StuckMeasured = true
	stuck := map[[2]string]*Stuck{}
	nodes := map[string]*Node{}
	addNode := func(n Node) {
		if old, ok := nodes[n.Addr]; ok {
			if n.Role == "local" {
				old.Role = "local"
			}
			if old.Peer == "" {
				old.Peer, old.Connector = n.Peer, n.Connector
			}
			if old.BrokerID == "" {
				old.BrokerID = n.BrokerID
			}
			return
		}
		nodes[n.Addr] = &n
	}
	for _, b := range bs {
		up, since, lastErr := b.State()
		x := b.Stats()
		demand := b.Demand()
		if demand == nil {
			demand = []bridge.DemandInfo{}
		}
		blocked := b.Blocked()
		if blocked == nil {
			blocked = []bridge.BlockedInfo{}
		}
		stuckList, measured := b.Stuck()
		st.StuckMeasured = st.StuckMeasured && measured
		// The bridge's local broker holds them, whichever way the topology
		// page draws it (Reverse).
		for _, x := range stuckList {
			k := [2]string{b.Local(), x.Destination}
			e := stuck[k]
			if e == nil {
				e = &Stuck{Broker: b.Local(), Destination: x.Destination}
				stuck[k] = e
			}
			e.Messages = max(e.Messages, x.Messages)
			e.Demand = append(e.Demand, b.Remote())
		}
		st.Bridges = append(st.Bridges, BridgeStatus{
			Connector: b.Connector, Peer: b.Peer, Bridge: b.Name(), Up: up,
			Forwarded: x.Forwarded.Load(), DemandSubs: x.DemandSubs.Load(),
			Advisories: x.Advisories.Load(), BadAdvisories: x.BadAdvisories.Load(),
			Sessions: x.Sessions.Load(),
			Local:    b.Local(), Remote: b.Remote(), Since: since, LastError: lastErr, DemandBlind: b.DemandBlind(),
			Rate:           s.rates.rate(b),
			ForwardedBytes: x.ForwardedBytes.Load(), InFlight: x.InFlight.Load(), Window: b.Window(),
			PendingSubs: x.PendingSubs.Load(), Duplicates: x.Duplicates.Load(),
			DeadLettered: x.DeadLettered.Load(), Stuck: x.Stuck.Load(), StuckMeasured: measured, Held: x.Held.Load(), Reconnects: x.SessionFailure.Load(),
			Demand: demand, Blocked: blocked, RemoteHold: b.RemoteHold(),
		})
		localID, remoteID := b.BrokerIDs()
		st.Bridges[len(st.Bridges)-1].LocalID = localID
		st.Bridges[len(st.Bridges)-1].RemoteID = remoteID
		if b.Reverse {
			addNode(Node{Addr: b.Local(), BrokerID: localID, Role: "peer", Peer: b.Peer, Connector: b.Connector})
			addNode(Node{Addr: b.Remote(), BrokerID: remoteID, Role: "local"})
		} else {
			addNode(Node{Addr: b.Local(), BrokerID: localID, Role: "local"})
			addNode(Node{Addr: b.Remote(), BrokerID: remoteID, Role: "peer", Peer: b.Peer, Connector: b.Connector})
		}
	}
	slices.SortFunc(st.Bridges, func(x, y BridgeStatus) int {
		return strings.Compare(x.Connector+"\x00"+x.Bridge, y.Connector+"\x00"+y.Bridge)
	})
	for _, e := range stuck {
		slices.Sort(e.Demand)
		st.Stuck = append(st.Stuck, *e)
	}
	slices.SortFunc(st.Stuck, func(x, y Stuck) int {
		return strings.Compare(x.Broker+"\x00"+x.Destination, y.Broker+"\x00"+y.Destination)
	})
	st.Nodes = make([]Node, 0, len(nodes))
	for _, n := range nodes {
		st.Nodes = append(st.Nodes, *n)
	}
	slices.SortFunc(st.Nodes, func(x, y Node) int {
		if x.Role != y.Role {
			return strings.Compare(x.Role, y.Role) // "local" before "peer"
		}
		return strings.Compare(x.Addr, y.Addr)
	})
	return st
}

// Reasons lists the bridges that are down, or up but blind to the remote
// broker's demand or held by the remote broker, sorted by name.
func Reasons(bs []metrics.Bridge) []Reason {
	out := []Reason{}
	for _, b := range bs {
		up, since, lastErr := b.State()
		if up {
			if blind := b.DemandBlind(); blind != "" {
				out = append(out, Reason{Bridge: b.Name(), Connector: b.Connector, Peer: b.Peer, Since: since, Error: blind, Up: true})
			}
			if h := b.RemoteHold(); h != nil {
				out = append(out, Reason{Bridge: b.Name(), Connector: b.Connector, Peer: b.Peer, Since: h.Since, Error: h.String(), Up: true, Held: true})
			}
			for _, x := range b.Blocked() {
				// A remote queue that refuses what is sent to it (a full
				// RabbitMQ queue with reject-publish): its messages wait.
				if x.Reason != "" {
					out = append(out, Reason{Bridge: b.Name(), Connector: b.Connector, Peer: b.Peer, Since: x.Since,
						Error: x.Destination + ": " + x.Reason, Up: true, Held: true, Destination: x.Destination})
				}
			}
			continue
		}
		out = append(out, Reason{Bridge: b.Name(), Connector: b.Connector, Peer: b.Peer, Since: since, Error: lastErr})
	}
	slices.SortFunc(out, func(x, y Reason) int { return strings.Compare(x.Bridge, y.Bridge) })
	return out
}

// rates keeps a few seconds of forwarded-message counts per bridge, sampled
// once a second, so /status can report a rate without the client sampling.
type rates struct {
	mu      sync.Mutex
	samples map[*bridge.Bridge][]sample
}

type sample struct {
	at time.Time
	n  int64
}

// rateWindow is how many samples (seconds) a rate spans.
const rateWindow = 5

func newRates() *rates { return &rates{samples: map[*bridge.Bridge][]sample{}} }

func (r *rates) sample(now time.Time, bs []metrics.Bridge) {
	r.mu.Lock()
	defer r.mu.Unlock()
	live := make(map[*bridge.Bridge]bool, len(bs))
	for _, b := range bs {
		live[b.Bridge] = true
		s := append(r.samples[b.Bridge], sample{at: now, n: b.Stats().Forwarded.Load()})
		if len(s) > rateWindow+1 {
			s = s[len(s)-rateWindow-1:]
		}
		r.samples[b.Bridge] = s
	}
	for b := range r.samples {
		if !live[b] {
			delete(r.samples, b)
		}
	}
}

// rate is the bridge's forwarded messages per second over the last samples.
func (r *rates) rate(b metrics.Bridge) float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.samples[b.Bridge]
	if len(s) < 2 {
		return 0
	}
	first, last := s[0], s[len(s)-1]
	dt := last.at.Sub(first.at).Seconds()
	if dt <= 0 {
		return 0
	}
	return float64(last.n-first.n) / dt
}
