package stomp

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/go-stomp/stomp/v3/frame"

	"github.com/brokernet/brokernet/advisory"
	"github.com/brokernet/brokernet/destination"
	"github.com/brokernet/brokernet/rabbitmq"
	"github.com/brokernet/brokernet/transport"
)

// Subscription ids of the advisory subscriptions a BrokerConn makes.
const (
	advisorySubQueue = "bn-adv-queue"
	advisorySubTopic = "bn-adv-topic"
	destSubQueue     = "bn-dest-queue"
	destSubTopic     = "bn-dest-topic"
	identitySub      = "bn-identity"
)

type subInfo struct {
	// persistent counts the persistent messages delivered (ackRef.persistent).
	persistent  uint64
	individual  bool
	advisory    bool
	destAdvisor bool // destination advisories
	browser     bool // a queue browser (Browse)
}

// RabbitMQ shows the bridge's own consumers in its events; brokernet's naming
// convention (advisory.BridgeTagPrefix for subscription ids, which every
// subscription id here already starts with, and rabbitmq.BridgeQueuePrefix for
// the queues it declares) keeps them from being taken for demand.

// Subscribe sends SUBSCRIBE and waits for the broker's receipt, so that the
// subscription is in place when it returns. headers are extra key, value pairs.
func (c *Conn) Subscribe(ctx context.Context, id, destination, ack string, headers ...string) error {
	f := frame.New(frame.SUBSCRIBE, frame.Id, id, frame.Destination, destination, frame.Ack, ack)
	for i := 0; i+1 < len(headers); i += 2 {
		f.Header.Add(headers[i], headers[i+1])
	}
	if err := c.Request(ctx, f); err != nil {
		return fmt.Errorf("subscribing to %s: %w", destination, err)
	}
	return nil
}

// Unsubscribe sends UNSUBSCRIBE and waits for the receipt. The broker returns the
// subscription's unacknowledged messages to their destination.
func (c *Conn) Unsubscribe(ctx context.Context, id string) error {
	if err := c.Request(ctx, frame.New(frame.UNSUBSCRIBE, frame.Id, id)); err != nil {
		return fmt.Errorf("unsubscribing %s: %w", id, err)
	}
	return nil
}

// Subscribe sends SUBSCRIBE with a receipt that arrives as Confirmed. A refused
// SUBSCRIBE comes back as an ERROR frame, which ends the connection (STOMP has
// no per-request refusal).
func (b *BrokerConn) Subscribe(ctx context.Context, sub transport.Subscription) (transport.Token, error) {
	ack := "client"
	if sub.Ack == transport.Individual {
		ack = "client-individual"
	}
	dest := sub.Destination.StompPath()
	if b.c.Flavour() == RabbitMQ {
		var err error
		if dest, err = rabbitmq.Address(sub.Destination, rabbitmq.STOMP); err != nil {
			return 0, fmt.Errorf("subscribing on %s: %w", b.c.URI(), err)
		}
	}
	f := frame.New(frame.SUBSCRIBE,
		frame.Id, sub.ID,
		frame.Destination, dest,
		frame.Ack, ack)
	switch b.c.Flavour() {
	case RabbitMQ:
		f.Header.Add("prefetch-count", strconv.Itoa(sub.Prefetch))
		if sub.Priority != 0 {
			// Ignored by RabbitMQ 3.10's STOMP plugin (verified-here.md); newer
			// versions honour it.
			f.Header.Add("x-priority", strconv.Itoa(sub.Priority))
		}
		if sub.Destination.Kind == destination.Topic {
			// The queue RabbitMQ binds to amq.topic for this subscription: named,
			// so that its binding events show it as the bridge's own. All
			// non-durable topic subscriptions of a connection share one queue,
			// bound once per routing key: RabbitMQ puts a message in a queue once
			// however many of its bindings match (prices.eu and prices.*), and
			// its delivery ids differ per copy, so copies in separate queues
			// could not be told apart.
			q := rabbitmq.BridgeQueuePrefix + sanitizeQueue(b.c.Session()) + ".topics"
			if sub.DurableName != "" {
				q = rabbitmq.BridgeQueuePrefix + sanitizeQueue(sub.DurableName)
				f.Header.Add("durable", "true")
				f.Header.Add("auto-delete", "false")
			}
			f.Header.Add("x-queue-name", q)
		}
	default:
		f.Header.Add("activemq.prefetchSize", strconv.Itoa(sub.Prefetch))
		f.Header.Add("activemq.priority", strconv.Itoa(sub.Priority))
		if sub.DurableName != "" {
			f.Header.Add("activemq.subscriptionName", sub.DurableName)
		}
		// ActiveMQ sets these ConsumerInfo properties from activemq.* headers
		// (ProtocolConverter, IntrospectionSupport; activemq-network.md §6.3).
		if sub.Exclusive {
			f.Header.Add("activemq.exclusive", "true")
		}
		if sub.Retroactive {
			f.Header.Add("activemq.retroactive", "true")
		}
	}
	if sub.Selector != "" {
		if !b.Info().Selectors {
			return 0, fmt.Errorf("subscribing to %s: %s has no selectors: %w", sub.Destination, b.c.Server(), transport.ErrUnsupported)
		}
		f.Header.Add("selector", sub.Selector)
	}
	b.mu.Lock()
	b.subs[sub.ID] = subInfo{individual: sub.Ack == transport.Individual}
	b.mu.Unlock()
	return b.streamReceipt(ctx, f)
}

// Unsubscribe sends UNSUBSCRIBE; the broker takes back what was not acknowledged.
func (b *BrokerConn) Unsubscribe(ctx context.Context, id string) error {
	b.mu.Lock()
	delete(b.subs, id)
	b.mu.Unlock()
	b.smu.Lock()
	delete(b.acked, id)
	b.smu.Unlock()
	// An ACK held for it (see Sync) goes first: after the UNSUBSCRIBE the
	// broker would refuse it.
	if a, ok := b.takeHeld(id); ok {
		if err := b.write(ctx, a.frame(frame.ACK)); err != nil {
			return err
		}
	}
	return b.write(ctx, frame.New(frame.UNSUBSCRIBE, frame.Id, id))
}

// browserHeader asks ActiveMQ for a queue browser on SUBSCRIBE; on a MESSAGE
// its value "end" marks the end of the browse (ActiveMQ's STOMP
// ProtocolConverter and StompSubscription, since 5.6).
const browserHeader = "browser"

// Browse opens an ActiveMQ queue browser: SUBSCRIBE with browser:true, ack
// auto (a browser takes nothing, so there is nothing to settle).
func (b *BrokerConn) Browse(ctx context.Context, id string, queue destination.Destination, selector string, max int) error {
	if b.c.Flavour() != ActiveMQ {
		return fmt.Errorf("browsing %s on %s: %w", queue, b.c.Server(), transport.ErrUnsupported)
	}
	if queue.Kind != destination.Queue {
		return fmt.Errorf("browsing %s: only queues can be browsed", queue)
	}
	f := frame.New(frame.SUBSCRIBE, frame.Id, id, frame.Destination, queue.StompPath(),
		frame.Ack, "auto", browserHeader, "true", "activemq.prefetchSize", strconv.Itoa(max))
	if selector != "" {
		f.Header.Add("selector", selector)
	}
	b.mu.Lock()
	b.subs[id] = subInfo{browser: true}
	b.mu.Unlock()
	return b.write(ctx, f)
}

// DestroyDurable removes a durable subscription (ActiveMQ: UNSUBSCRIBE carrying
// activemq.subscriptionName, on a connection with the subscription's client-id).
func (b *BrokerConn) DestroyDurable(ctx context.Context, sub transport.Subscription) error {
	f := frame.New(frame.UNSUBSCRIBE, frame.Id, sub.ID)
	switch b.c.Flavour() {
	case RabbitMQ:
		// RabbitMQ deletes a durable subscription's queue on an UNSUBSCRIBE
		// with the subscription's durable headers.
		f.Header.Add("durable", "true")
		f.Header.Add("persistent", "true")
		f.Header.Add("x-queue-name", rabbitmq.BridgeQueuePrefix+sanitizeQueue(sub.DurableName))
	default:
		f.Header.Add("activemq.subscriptionName", sub.DurableName)
	}
	return b.write(ctx, f)
}

// WatchConsumers subscribes to ActiveMQ's consumer advisories as JSON (which
// needs XStream and Jettison on the broker's classpath).
func (b *BrokerConn) WatchConsumers(ctx context.Context) error {
	return b.watchAdvisories(ctx, "consumer advisories", []string{advisorySubQueue, advisorySubTopic},
		advisory.Topics(), subInfo{advisory: true})
}

var _ transport.DestinationWatcher = (*BrokerConn)(nil)

var _ transport.QueueBrowser = (*BrokerConn)(nil)

// WatchDestinations subscribes to ActiveMQ's queue and topic destination
// advisories, which the broker replays for every existing destination first.
func (b *BrokerConn) WatchDestinations(ctx context.Context) error {
	return b.watchAdvisories(ctx, "destination advisories", []string{destSubQueue, destSubTopic},
		advisory.DestinationTopics(), subInfo{destAdvisor: true})
}

// watchAdvisories subscribes, on ActiveMQ, subscription ids[i] to the
// advisory topic topics[i] as JSON, ack auto; the converter reads their
// messages as info says (event). what names them in the error of another broker.
func (b *BrokerConn) watchAdvisories(ctx context.Context, what string, ids, topics []string, info subInfo) error {
	if b.c.Flavour() != ActiveMQ {
		return fmt.Errorf("%s from %s: %w", what, b.c.Server(), transport.ErrUnsupported)
	}
	for i, id := range ids {
		b.mu.Lock()
		b.subs[id] = info
		b.mu.Unlock()
		if err := b.write(ctx, frame.New(frame.SUBSCRIBE, frame.Id, id,
			frame.Destination, topics[i], frame.Ack, "auto",
			advisory.TransformationHeader, advisory.TransformationJSON)); err != nil {
			return err
		}
	}
	return nil
}

// BrokerConn does not watch ActiveMQ's temporary destination advisories
// (transport.TempWatcher): with a STOMP subscription to
// ActiveMQ.Advisory.TempQueue on a broker, ActiveMQ 5.17.2 closed a JMS
// requester's OpenWire connection there in 3 runs of 3, failing to marshal a
// message to it (NullPointerException in MessageMarshaller.tightMarshal2);
// without that subscription, never. Temporary destinations are bridged over
// OpenWire only (bridge/temp.go).

// OwnConsumer reports whether consumerID belongs to this connection: ActiveMQ's
// consumer ids start with the connection id it sent as the CONNECTED session.
func (b *BrokerConn) OwnConsumer(consumerID string) bool {
	s := b.c.Session()
	return s != "" && len(consumerID) > len(s) && strings.HasPrefix(consumerID, s) && consumerID[len(s)] == ':'
}

// sanitizeQueue keeps queue names to characters every broker accepts.
func sanitizeQueue(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '-', r == '_':
			return r
		}
		return '_'
	}, s)
}
