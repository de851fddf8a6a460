// Package discovery finds the remote brokers a node bridges to and reports them
// appearing and disappearing, the way ActiveMQ's DiscoveryNetworkConnector learns
// the services it starts one bridge for: a fixed list (static), one logical
// broker behind several URIs (masterslave), or peers found by gossip
// (hashicorp/memberlist).
package discovery

import (
	"context"
	"errors"
	"fmt"

	"github.com/rs/zerolog"

	"github.com/brokernet/brokernet/transport"
)

// Peer is one discovered remote broker to bridge to. The bridge for a peer dials
// URIs in order and uses the first that answers.
type Peer struct {
	// Key identifies the peer within its agent: the redacted URI for static
	// discovery, "masterslave" for masterslave, the member name for gossip. A
	// PeerRemoved event carries the Key of the PeerAdded it undoes.
	Key string
	// URIs are the broker URIs to dial, in order: masterslave gives all of its
	// URIs, static and gossip give one.
	URIs []transport.URI
	// BrokerID is the remote broker's id when discovery knows it (gossip
	// metadata), else "".
	BrokerID string
	// BrokerName is the remote broker's name when discovery knows it, else "".
	BrokerName string
}

// EventKind says whether a peer appeared or disappeared.
type EventKind int

// Event kinds.
const (
	// PeerAdded reports a new peer, or a peer whose details changed (after a
	// PeerRemoved for its old details).
	PeerAdded EventKind = iota + 1
	// PeerRemoved reports that a peer left, failed or changed its details.
	PeerRemoved
)

// String names the kind.
func (k EventKind) String() string {
	switch k {
	case PeerAdded:
		return "added"
	case PeerRemoved:
		return "removed"
	}
	return fmt.Sprintf("EventKind(%d)", int(k))
}

// Event is one change to the set of peers.
type Event struct {
	// Kind says whether Peer appeared or disappeared.
	Kind EventKind
	// Peer is the peer concerned; for PeerRemoved, as it was added.
	Peer Peer
}

// Agent reports peers appearing and disappearing.
//
// Run sends events on out until ctx is done, then returns nil; it returns an
// error only when it cannot start (for gossip, when it cannot bind). Run never
// blocks on out once ctx is done, so events still undelivered then are dropped;
// no PeerRemoved events are sent for the peers known at shutdown (the caller
// stops its bridges itself). An Agent runs once.
type Agent interface {
	Run(ctx context.Context, out chan<- Event) error
}

// ErrNoURIs is returned by New for a static or masterslave spec without URIs.
var ErrNoURIs = errors.New("no broker URIs")

// New returns the agent for spec: static and masterslave use spec.URIs; gossip
// uses gossip (which must not be nil) and ignores spec.URIs. log replaces
// gossip.Log for the gossip agent; the other agents log nothing.
func New(spec Spec, gossip *GossipConfig, log zerolog.Logger) (Agent, error) {
	switch spec.Kind {
	case Static:
		if len(spec.URIs) == 0 {
			return nil, fmt.Errorf("static discovery: %w", ErrNoURIs)
		}
		return NewStatic(spec.URIs), nil
	case MasterSlave:
		if len(spec.URIs) == 0 {
			return nil, fmt.Errorf("masterslave discovery: %w", ErrNoURIs)
		}
		return NewMasterSlave(spec.URIs), nil
	case Gossip:
		if gossip == nil {
			return nil, errors.New("gossip discovery: no gossip settings")
		}
		cfg := *gossip
		cfg.Log = log
		return NewGossip(cfg)
	}
	return nil, fmt.Errorf("discovery: unknown kind %s", spec.Kind)
}
