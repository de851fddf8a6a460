package discovery

import (
	"context"
	"fmt"
	"slices"

	"github.com/brokernet/brokernet/transport"
)

// MasterSlaveKey is the Key of the single peer a masterslave agent reports.
const MasterSlaveKey = "masterslave"

// fixedAgent reports a fixed list of peers once and then waits for the end.
type fixedAgent struct {
	peers []Peer
}

var _ Agent = (*fixedAgent)(nil)

// NewStatic returns an agent that reports one PeerAdded per URI when it starts,
// keyed by the URI with its passcode redacted (a URI listed twice gets "#2"
// appended). It never removes a peer: as with ActiveMQ's static: discovery, each
// bridge reconnects to its broker on its own and the agent does not probe.
func NewStatic(uris []transport.URI) Agent {
	a := &fixedAgent{}
	seen := make(map[string]int)
	for _, u := range uris {
		key := u.String()
		seen[key]++
		if n := seen[key]; n > 1 {
			key = fmt.Sprintf("%s#%d", key, n)
		}
		a.peers = append(a.peers, Peer{Key: key, URIs: []transport.URI{u}})
	}
	return a
}

// NewMasterSlave returns an agent that reports exactly one peer, keyed
// MasterSlaveKey, holding all URIs in order: one logical broker of which one
// member (the master) answers at a time. The bridge dials them in order and fails
// over, as ActiveMQ's masterslave: discovery does; the agent never reports two
// peers.
func NewMasterSlave(uris []transport.URI) Agent {
	return &fixedAgent{peers: []Peer{{Key: MasterSlaveKey, URIs: slices.Clone(uris)}}}
}

// Run sends the peers, then waits for ctx to end and returns nil.
func (a *fixedAgent) Run(ctx context.Context, out chan<- Event) error {
	for _, p := range a.peers {
		if ctx.Err() != nil {
			return nil
		}
		p.URIs = slices.Clone(p.URIs)
		select {
		case out <- Event{Kind: PeerAdded, Peer: p}:
		case <-ctx.Done():
			return nil
		}
	}
	<-ctx.Done()
	return nil
}
