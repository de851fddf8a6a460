package openwire

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/brokernet/brokernet/destination"
	"github.com/brokernet/brokernet/hop"
	"github.com/brokernet/brokernet/transport"
)

// subscription is one open consumer.
type subscription struct {
	id      string
	cid     *consumerID
	dest    *dest
	ack     transport.AckMode
	browser bool       // a queue browser (Browse): deliveries are copies, never settled
	owner   *tempOwner // the owner it consumes a mirrored temporary destination as, or nil
	mu      sync.Mutex // guards the fields below
	closed  bool       // unsubscribed: its deliveries went back to the broker
	seq     uint64
	unacked []delivered // delivered, not yet settled, in delivery order
}

type delivered struct {
	seq        uint64
	id         *messageID
	dest       *dest
	persistent bool
}

// Subscribe implements transport.Conn with a ConsumerInfo.
func (c *Conn) Subscribe(ctx context.Context, s transport.Subscription) (transport.Token, error) {
	if s.ID == "" {
		return 0, errors.New("subscribe: empty subscription id")
	}
	c.mu.Lock()
	_, dup := c.subs[s.ID]
	c.mu.Unlock()
	if dup {
		return 0, fmt.Errorf("subscribe %q: subscription id in use", s.ID)
	}
	if !s.Destination.Kind.Valid() || s.Destination.Name == "" {
		return 0, fmt.Errorf("subscribe %q: invalid destination %q", s.ID, s.Destination)
	}
	if !fitsUTF(s.Selector) || !fitsUTF(s.DurableName) {
		return 0, fmt.Errorf("subscribe %q: selector or durable name longer than 65535 bytes", s.ID)
	}
	if s.DurableName != "" && c.uri.ClientID == "" {
		return 0, fmt.Errorf("subscribe %q: durable subscription %q needs the URI option clientId", s.ID, s.DurableName)
	}
	prefetch := s.Prefetch
	if prefetch <= 0 {
		prefetch = defaultPrefetch
	}
	prio := s.Priority
	prio = max(-128, min(127, prio))
	c.nextConsumer++
	sub := &subscription{
		id:   s.ID,
		cid:  &consumerID{ConnectionID: c.connID.Value, SessionID: c.sessID.Value, Value: c.nextConsumer},
		dest: fromDestination(s.Destination),
		ack:  s.Ack,
	}
	if s.Destination.IsTemp() {
		// A mirrored temporary destination is consumed as its owner (temp.go).
		c.mu.Lock()
		if o := c.ownerFor(s.Destination); o != nil {
			sub.cid.ConnectionID, sub.cid.SessionID = o.conn.Value, o.sess.Value
			sub.owner = o
			o.subs++
		}
		c.mu.Unlock()
	}
	ci := &consumerInfo{
		ConsumerID:    sub.cid,
		Destination:   sub.dest,
		PrefetchSize:  int32(prefetch),
		Selector:      convertStrings(s.Selector),
		Priority:      int8(prio),
		DispatchAsync: true,
		Exclusive:     s.Exclusive,
		Retroactive:   s.Retroactive,
	}
	if s.DurableName != "" {
		ci.SubscriptionName = s.DurableName
		ci.ClientID = c.clientID
	}
	c.mu.Lock()
	c.subs[s.ID] = sub
	c.byValue[sub.cid.Value] = sub
	c.mu.Unlock()
	tok := transport.Token(c.tokens.Add(1))
	refused := func() {
		c.dropSub(sub)
		if sub.owner != nil {
			c.mu.Lock()
			sub.owner.subs-- // the owner goes with its last destination (DropTemp)
			c.mu.Unlock()
		}
	}
	err := c.write(ctx, ci, c.confirm(tok, func(err error) {
		if err != nil {
			refused()
		}
	}))
	if err != nil {
		refused()
		return 0, fmt.Errorf("subscribe %q: %w", s.ID, err)
	}
	return tok, nil
}

func (c *Conn) dropSub(sub *subscription) {
	sub.mu.Lock()
	sub.closed = true
	sub.unacked = nil
	sub.mu.Unlock()
	c.mu.Lock()
	if c.subs[sub.id] == sub {
		delete(c.subs, sub.id)
	}
	if c.byValue[sub.cid.Value] == sub {
		delete(c.byValue, sub.cid.Value)
	}
	c.mu.Unlock()
}

// Unsubscribe implements transport.Conn with a RemoveInfo of the consumer.
// The broker redelivers its unsettled deliveries elsewhere.
func (c *Conn) Unsubscribe(ctx context.Context, id string) error {
	c.mu.Lock()
	sub := c.subs[id]
	c.mu.Unlock()
	if sub == nil {
		return fmt.Errorf("unsubscribe %q: no such subscription", id)
	}
	// Acks held for this consumer (see Sync) go before its removal.
	c.smu.Lock()
	var held []*messageAck
	if c.ackTail != nil {
		held = append(held, c.ackTail.a)
		c.ackTail = nil
	}
	for i := 0; i < len(c.heldAcks); i++ {
		if c.heldAcks[i].a.ConsumerID == sub.cid {
			held = append(held, c.heldAcks[i].a)
			c.heldAcks = append(c.heldAcks[:i], c.heldAcks[i+1:]...)
			i--
		}
	}
	c.smu.Unlock()
	for _, a := range held {
		if err := c.write(ctx, a, nil); err != nil {
			return fmt.Errorf("unsubscribe %q: %w", id, err)
		}
	}
	c.dropSub(sub)
	// lastDeliveredSequenceId -1 (RemoveInfo.LAST_DELIVERED_UNKNOWN): the
	// broker counts every unsettled delivery as delivered.
	o := sub.owner
	err := c.write(ctx, &removeInfo{ObjectID: sub.cid, LastDeliveredSequenceID: -1}, func(r command) {
		if err := respErr(r); err != nil && r != nil && o == nil {
			// (A mirrored temporary destination removed first took its
			// consumers with it: the broker no longer knows this one.)
			c.log.Warn().Err(err).Str("sub", id).Msg("removing consumer")
		}
	})
	if err != nil {
		return fmt.Errorf("unsubscribe %q: %w", id, err)
	}
	if o != nil {
		c.mu.Lock()
		o.subs--
		c.mu.Unlock()
		return c.releaseOwner(ctx, o)
	}
	return nil
}

var _ transport.QueueBrowser = (*Conn)(nil)

// Browse implements transport.QueueBrowser: a consumer with ConsumerInfo's
// browser flag. ActiveMQ dispatches copies of the queue's messages to it
// (QueueBrowserSubscription) and then a MessageDispatch without a message,
// the end of the browse.
func (c *Conn) Browse(ctx context.Context, id string, queue destination.Destination, selector string, max int) error {
	if queue.Kind != destination.Queue {
		return fmt.Errorf("browsing %s: only queues can be browsed", queue)
	}
	if !fitsUTF(selector) {
		return fmt.Errorf("browse %q: selector longer than 65535 bytes", id)
	}
	c.mu.Lock()
	_, dup := c.subs[id]
	c.mu.Unlock()
	if dup {
		return fmt.Errorf("browse %q: subscription id in use", id)
	}
	c.nextConsumer++
	sub := &subscription{
		id:      id,
		cid:     &consumerID{ConnectionID: c.connID.Value, SessionID: c.sessID.Value, Value: c.nextConsumer},
		dest:    fromDestination(queue),
		browser: true,
	}
	ci := &consumerInfo{
		ConsumerID:    sub.cid,
		Destination:   sub.dest,
		PrefetchSize:  int32(max + 1), // room for the end of the browse
		Selector:      convertStrings(selector),
		Browser:       true,
		DispatchAsync: true,
	}
	c.mu.Lock()
	c.subs[id] = sub
	c.byValue[sub.cid.Value] = sub
	c.mu.Unlock()
	if err := c.write(ctx, ci, func(r command) {
		if err := respErr(r); err != nil && r != nil {
			c.log.Warn().Err(err).Str("sub", id).Msg("browsing")
		}
	}); err != nil {
		c.dropSub(sub)
		return fmt.Errorf("browse %q: %w", id, err)
	}
	return nil
}

// DestroyDurable implements transport.Conn with a RemoveSubscriptionInfo,
// waiting for the broker's answer.
func (c *Conn) DestroyDurable(ctx context.Context, s transport.Subscription) error {
	if s.DurableName == "" {
		return fmt.Errorf("destroy durable %q: no durable name", s.ID)
	}
	if c.uri.ClientID == "" {
		return fmt.Errorf("destroy durable %q: needs the URI option clientId", s.DurableName)
	}
	res := make(chan error, 1)
	err := c.write(ctx, &removeSubscriptionInfo{ConnectionID: c.connID, SubscriptionName: s.DurableName, ClientID: c.clientID},
		func(r command) { res <- respErr(r) })
	if err == nil {
		select {
		case err = <-res:
		case <-ctx.Done():
			err = ctx.Err()
		case <-c.done:
			err = c.closedErr()
		}
	}
	if err != nil {
		return fmt.Errorf("destroy durable %q: %w", s.DurableName, err)
	}
	return nil
}

// Advisory topics of consumers (AdvisorySupport.getConsumerAdvisoryTopic).
var advisoryTopics = []string{"ActiveMQ.Advisory.Consumer.Queue.>", "ActiveMQ.Advisory.Consumer.Topic.>"}

// WatchConsumers implements transport.Conn: consumers of the two consumer
// advisory wildcard topics. ActiveMQ replays a ConsumerInfo for every
// existing consumer to a new advisory subscriber.
func (c *Conn) WatchConsumers(ctx context.Context) error {
	return c.watchAdvisories(ctx, advisoryTopics, "watching consumers")
}

// watchAdvisories subscribes to advisory topics, whose messages the reader
// turns into events (advisoryEvent).
func (c *Conn) watchAdvisories(ctx context.Context, topics []string, what string) error {
	for _, t := range topics {
		c.nextConsumer++
		cid := &consumerID{ConnectionID: c.connID.Value, SessionID: c.sessID.Value, Value: c.nextConsumer}
		sub := &subscription{id: "\x00advisory:" + t, cid: cid, dest: &dest{Type: typeTopic, Name: t}}
		c.mu.Lock()
		c.advisor[cid.Value] = true
		c.byValue[cid.Value] = sub
		c.mu.Unlock()
		ci := &consumerInfo{ConsumerID: cid, Destination: sub.dest, PrefetchSize: defaultPrefetch, DispatchAsync: true}
		if err := c.write(ctx, ci, func(r command) {
			if err := respErr(r); err != nil && r != nil {
				c.events.push(transport.Event{Kind: transport.BadConsumer, Err: fmt.Errorf("subscribing to %s: %w", t, err)})
			}
		}); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
	}
	return nil
}

// OwnConsumer implements transport.Conn: consumer ids are
// "connectionId:sessionId:value", and this connection's id is unique.
func (c *Conn) OwnConsumer(id string) bool {
	if strings.HasPrefix(id, c.connID.Value+":") {
		return true
	}
	// Consumers of mirrored temporary destinations are made as their owner (temp.go).
	c.mu.Lock()
	defer c.mu.Unlock()
	for owner := range c.temps {
		if strings.HasPrefix(id, owner+":") {
			return true
		}
	}
	return false
}

// convertStrings makes selector compare string-valued properties with
// numbers the way a STOMP subscriber's selector does: ActiveMQ prefixes every
// selector that arrives over STOMP with "convert_string_expressions:"
// (SelectorParser), and messages sent over STOMP carry every header as a
// string. Without it, "BrokernetHops < 3" is false for a message a STOMP
// bridge forwarded (hops "1"), so a mixed STOMP/OpenWire network held back
// what its TTL allowed. Typed properties compare as before.
func convertStrings(selector string) string {
	if selector == "" || strings.HasPrefix(selector, hop.ConvertStringPrefix) {
		return selector
	}
	return hop.ConvertStringPrefix + selector
}
