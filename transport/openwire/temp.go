package openwire

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/brokernet/brokernet/destination"
	"github.com/brokernet/brokernet/transport"
)

// Temporary destinations of another broker, mirrored here (transport.TempMirror).
//
// ActiveMQ lets only the connection that owns a temporary queue consume it:
// TempQueue.addSubscription refuses a consumer whose ConsumerId's connection
// id is not the one in the queue's name ("Subscribing to a temporary queue
// created by another connection is not permitted"; the name of a JMS client's
// temporary destination is its connection id, ':', a sequence number, parsed
// back by ActiveMQTempDestination.setPhysicalName). ActiveMQ's own network
// bridge gets round it over vm:// by resetting the transient connection id of
// the destination object; over TCP only the name travels. An OpenWire
// transport may carry several connections, each with its own ConnectionInfo
// (TransportConnection keeps a map of connection states), so the bridge
// registers, beside its own, a connection whose id is the owner's: it creates
// the temporary destination (DestinationInfo, which also fires the broker's
// temporary destination advisory that a local JMS responder's connection
// needs before it may send there), and the demand subscriptions to it are its
// consumers. When the remote owner's destination goes, DropTemp removes it
// here, and the owner's connection once nothing of it is left; all of it goes
// with the transport when the bridge's connection ends.

// tempOwner is a connection registered for the owner of mirrored temporary
// destinations.
type tempOwner struct {
	conn  *connectionID
	sess  *sessionID
	dests map[destination.Destination]bool
	subs  int // subscriptions made as this owner and not yet unsubscribed
}

// tempOwnerID returns the connection id in a temporary destination's name,
// as ActiveMQTempDestination parses it: everything before the last ':'.
func tempOwnerID(name string) (string, error) {
	p := strings.LastIndexByte(name, ':')
	if p <= 0 {
		return "", fmt.Errorf("temporary destination %q names no connection id (ActiveMQ lets only its owner consume it)", name)
	}
	return name[:p], nil
}

// ownerFor returns the owner registered for d, or nil. Caller holds c.mu.
func (c *Conn) ownerFor(d destination.Destination) *tempOwner {
	id, err := tempOwnerID(d.Name)
	if err != nil {
		return nil
	}
	o := c.temps[id]
	if o == nil || !o.dests[d] {
		return nil
	}
	return o
}

var _ transport.TempMirror = (*Conn)(nil)

// MirrorTemp implements transport.TempMirror: a ConnectionInfo and SessionInfo
// for the owner the first time, then a DestinationInfo adding d with path as
// its brokerPath.
func (c *Conn) MirrorTemp(ctx context.Context, d destination.Destination, path []string) error {
	if !d.IsTemp() {
		return fmt.Errorf("mirroring %s: not a temporary destination", d)
	}
	id, err := tempOwnerID(d.Name)
	if err != nil {
		return fmt.Errorf("mirroring %s: %w", d, err)
	}
	if id == c.connID.Value {
		return fmt.Errorf("mirroring %s: owned by this connection", d)
	}
	c.mu.Lock()
	o := c.temps[id]
	known := o != nil && o.dests[d]
	c.mu.Unlock()
	if known {
		return nil
	}
	warn := func(what string) func(command) {
		return func(r command) {
			if err := respErr(r); err != nil && r != nil {
				c.log.Warn().Err(err).Str("destination", d.String()).Msg(what)
			}
		}
	}
	if o == nil {
		o = &tempOwner{
			conn:  &connectionID{Value: id},
			sess:  &sessionID{ConnectionID: id, Value: 1},
			dests: make(map[destination.Destination]bool),
		}
		c.tempSeq++
		ci := &connectionInfo{
			ConnectionID: o.conn,
			// Client ids are unique per broker: this one is the bridge's.
			ClientID: c.connID.Value + "-temp-" + strconv.FormatInt(c.tempSeq, 10),
			UserName: c.uri.User,
			Password: c.uri.Password,
		}
		if err := c.write(ctx, ci, warn("registering the owner of a mirrored temporary destination")); err != nil {
			return fmt.Errorf("mirroring %s: %w", d, err)
		}
		if err := c.write(ctx, &sessionInfo{SessionID: o.sess}, nil); err != nil {
			return fmt.Errorf("mirroring %s: %w", d, err)
		}
		c.mu.Lock()
		c.temps[id] = o
		c.mu.Unlock()
	}
	di := &destinationInfo{ConnectionID: o.conn, Destination: fromDestination(d), OperationType: destinationAdd}
	for _, b := range path {
		di.BrokerPath = append(di.BrokerPath, &brokerID{Value: b})
	}
	if err := c.write(ctx, di, warn("mirroring a temporary destination")); err != nil {
		return fmt.Errorf("mirroring %s: %w", d, err)
	}
	c.mu.Lock()
	o.dests[d] = true
	c.mu.Unlock()
	return nil
}

// DestinationInfo.operationType values.
const (
	destinationAdd    = 0
	destinationRemove = 1
)

// DropTemp implements transport.TempMirror: a DestinationInfo removing d
// (ActiveMQ's TempQueueRegion removes a temporary destination that still has
// subscriptions, as a network bridge's may), then the owner's connection if
// it has nothing left.
func (c *Conn) DropTemp(ctx context.Context, d destination.Destination) error {
	id, err := tempOwnerID(d.Name)
	if err != nil {
		return nil
	}
	c.mu.Lock()
	o := c.temps[id]
	known := o != nil && o.dests[d]
	if known {
		delete(o.dests, d)
	}
	c.mu.Unlock()
	if !known {
		return nil
	}
	di := &destinationInfo{ConnectionID: o.conn, Destination: fromDestination(d), OperationType: destinationRemove}
	if err := c.write(ctx, di, func(r command) {
		if err := respErr(r); err != nil && r != nil {
			c.log.Debug().Err(err).Str("destination", d.String()).Msg("removing a mirrored temporary destination")
		}
	}); err != nil {
		return fmt.Errorf("removing mirrored %s: %w", d, err)
	}
	return c.releaseOwner(ctx, o)
}

// releaseOwner removes o's connection once it has neither destinations nor
// subscriptions.
func (c *Conn) releaseOwner(ctx context.Context, o *tempOwner) error {
	c.mu.Lock()
	idle := len(o.dests) == 0 && o.subs == 0 && c.temps[o.conn.Value] == o
	if idle {
		delete(c.temps, o.conn.Value)
	}
	c.mu.Unlock()
	if !idle {
		return nil
	}
	if err := c.write(ctx, &removeInfo{ObjectID: o.conn, LastDeliveredSequenceID: -1}, func(r command) {
		if err := respErr(r); err != nil && r != nil {
			c.log.Debug().Err(err).Str("connection", o.conn.Value).Msg("removing the owner of mirrored temporary destinations")
		}
	}); err != nil && !errors.Is(err, transport.ErrClosed) {
		return fmt.Errorf("removing the owner %s: %w", o.conn.Value, err)
	}
	return nil
}

var _ transport.TempWatcher = (*Conn)(nil)

// tempAdvisoryTopics are ActiveMQ's temporary destination advisory topics
// (AdvisorySupport.TEMP_QUEUE_ADVISORY_TOPIC, TEMP_TOPIC_ADVISORY_TOPIC).
var tempAdvisoryTopics = []string{"ActiveMQ.Advisory.TempQueue", "ActiveMQ.Advisory.TempTopic"}

// destinationAdvisoryTopics are ActiveMQ's queue and topic destination
// advisories (not the temporary ones).
var destinationAdvisoryTopics = []string{"ActiveMQ.Advisory.Queue", "ActiveMQ.Advisory.Topic"}

var _ transport.DestinationWatcher = (*Conn)(nil)

// WatchDestinations implements transport.DestinationWatcher: consumers of
// the queue and topic destination advisory topics, to which ActiveMQ replays
// a DestinationInfo for every existing destination. A bridge narrows wildcard
// demand with them (demand.Expander); without them an OpenWire bridge gave no
// subscription to a wildcard that its include/exclude rules had to narrow.
func (c *Conn) WatchDestinations(ctx context.Context) error {
	return c.watchAdvisories(ctx, destinationAdvisoryTopics, "watching destinations")
}

// WatchTempDestinations implements transport.TempWatcher: consumers of the
// two temporary destination advisory topics, to which ActiveMQ replays a
// DestinationInfo for every existing temporary destination.
func (c *Conn) WatchTempDestinations(ctx context.Context) error {
	return c.watchAdvisories(ctx, tempAdvisoryTopics, "watching temporary destinations")
}
