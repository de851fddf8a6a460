package openwire

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/brokernet/brokernet/advisory"
	"github.com/brokernet/brokernet/destination"
	"github.com/brokernet/brokernet/internal/mailbox"
	"github.com/brokernet/brokernet/transport"
)

// readLoop reads frames until the connection ends. It never blocks on the
// consumer of Events (the queue is unbounded; the broker's prefetch bounds
// deliveries) nor on the writer (writeFromReader), so responses keep flowing
// while the bridge is busy.
func (c *Conn) readLoop(br *bufio.Reader) {
	var buf []byte
	var deadline time.Time
	for {
		if c.inactivity > 0 {
			// The broker's InactivityMonitor first checks after its initial
			// delay (at most the duration, see initialDelay), then every
			// third of the duration, writing a KeepAliveInfo when it has
			// written nothing since the last check: it is never silent for
			// more than 4/3 of the duration, so twice the duration is
			// silence for sure. With the default 5 s a half-open connection
			// is noticed within 10 s, from its first second on. Moving the
			// deadline costs more than reading a small frame, so it moves at
			// most every eighth of that.
			timeout := 2 * c.inactivity
			if now := time.Now(); deadline.Sub(now) < timeout-timeout/8 {
				deadline = now.Add(timeout)
				c.nc.SetReadDeadline(deadline)
			}
		}
		p, err := readFrame(br, buf, c.uri.MaxFrameSize)
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = errors.New("broker closed the connection")
			}
			c.fail(fmt.Errorf("reading from %s: %w", c.uri, err))
			break
		}
		if cap(p) <= 1<<20 {
			buf = p // reuse small buffers; decoded values are copies
		}
		cmd, err := decodeCommandAs(p, c.traces, c.tight, c.names)
		if err != nil {
			var unknown errUnknownCommand
			if !errors.As(err, &unknown) {
				c.log.Warn().Err(err).Msg("skipping malformed frame")
			}
			continue
		}
		c.handle(cmd)
	}
	// Release response waiters: the connection is gone.
	c.mu.Lock()
	waiters := c.waiters
	c.waiters = nil
	c.mu.Unlock()
	for _, w := range waiters {
		w(nil)
	}
}

func (c *Conn) handle(cmd dataStructure) {
	switch x := cmd.(type) {
	case *response, *exceptionResponse, *dataResponse, *integerResponse:
		id, _ := correlation(x.(command))
		c.mu.Lock()
		w := c.waiters[id]
		delete(c.waiters, id)
		c.mu.Unlock()
		if w != nil {
			w(x.(command))
		}
	case *messageDispatch:
		c.dispatch(x)
	case *keepAliveInfo:
		// The broker's keep-alive; it confirms nothing.
		if x.ResponseRequired {
			c.writeFromReader(&keepAliveInfo{})
		}
	case *connectionError:
		// The broker refused a command that asked for no response and
		// ends the connection.
		c.fail(fmt.Errorf("%s: %w: %w", c.uri, transport.ErrRefused, &BrokerError{Exception: x.Exception}))
	case *shutdownInfo:
		c.fail(fmt.Errorf("%s: broker shut down the connection", c.uri))
	case *brokerSubscriptionInfo:
		select {
		case c.subInfo <- x:
		default: // one answer per asking connection; more are not asked for
		}
	case *brokerInfo, *wireFormatInfo:
		// Sent again on some reconnections; the identity learnt at connect stays.
	default:
		// ConsumerControl, ConnectionControl, ProducerAck…: nothing to do.
	}
}

func (c *Conn) dispatch(md *messageDispatch) {
	if md.ConsumerID == nil {
		return
	}
	c.mu.Lock()
	sub := c.byValue[md.ConsumerID.Value]
	advisoryConsumer := c.advisor[md.ConsumerID.Value]
	c.mu.Unlock()
	if md.Message == nil {
		// The end of a browse (QueueBrowserSubscription's null message).
		if sub != nil && sub.browser && md.ConsumerID.ConnectionID == c.connID.Value {
			c.events.push(transport.Event{Kind: transport.BrowseDone, Sub: sub.id})
		}
		return
	}
	if sub == nil || md.ConsumerID.ConnectionID != sub.cid.ConnectionID {
		// A late dispatch to a closed consumer: the broker takes it back
		// when the RemoveInfo is processed.
		return
	}
	m := md.Message
	d := md.Destination
	if d == nil {
		d = m.Destination
	}
	if advisoryConsumer {
		// Acknowledge at once: advisories are events, not work, and an
		// unacknowledged topic subscription stops at its prefetch.
		c.writeFromReader(&messageAck{Destination: d, ConsumerID: md.ConsumerID, AckType: ackStandard,
			FirstID: m.MessageID, LastID: m.MessageID, MessageCount: 1})
		if di, ok := m.DataStructure.(*destinationInfo); ok {
			c.destinationAdvisory(m, di)
			return
		}
		ev, err := c.advisoryEvent(m)
		switch {
		case errors.Is(err, advisory.ErrNotConsumerAdvisory):
		case err != nil:
			c.events.push(transport.Event{Kind: transport.BadConsumer, Err: err})
		default:
			c.events.push(transport.Event{Kind: transport.Consumer, Consumer: ev})
		}
		return
	}
	if sub.browser {
		// A copy, counted by its id: nothing to read, nothing to settle.
		c.events.push(transport.Event{Kind: transport.Delivery, Sub: sub.id, Msg: &transport.Message{ID: m.MessageID.String()}})
		return
	}
	tm, err := toMessage(m, md.RedeliveryCounter, c.names)
	if err != nil {
		// The message cannot be read, but it is the broker's: poison-ack it
		// so it goes to the DLQ instead of blocking the prefetch window.
		c.log.Warn().Err(err).Str("id", m.MessageID.String()).Msg("undecodable message sent to the DLQ")
		c.writeFromReader(&messageAck{Destination: d, ConsumerID: md.ConsumerID, AckType: ackPoison,
			FirstID: m.MessageID, LastID: m.MessageID, MessageCount: 1, PoisonCause: "java.io.IOException: " + err.Error()})
		return
	}
	sub.mu.Lock()
	sub.seq++
	r := ref{sub: sub, seq: sub.seq, id: m.MessageID}
	sub.unacked = append(sub.unacked, delivered{seq: sub.seq, id: m.MessageID, dest: d, persistent: m.Persistent})
	sub.mu.Unlock()
	c.events.push(transport.Event{Kind: transport.Delivery, Sub: sub.id, Msg: tm, Ref: r})
}

// Properties of ActiveMQ advisory messages (AdvisorySupport).
const (
	propOriginBrokerID   = "originBrokerId"
	propOriginBrokerName = "originBrokerName"
	propConsumerCount    = "consumerCount"
)

// advisoryEvent turns an advisory message's data structure into the same
// advisory.Event the STOMP/JSON path builds (advisory.ParseActiveMQ).
func (c *Conn) advisoryEvent(m *message) (advisory.Event, error) {
	ev := advisory.Event{ConsumerCount: -1}
	props, err := decodeProps(m.Props, nil)
	if err != nil {
		return ev, fmt.Errorf("advisory %s: %w", m.MessageID, err)
	}
	for _, p := range props {
		switch p.Name {
		case propOriginBrokerID:
			ev.OriginBrokerID, _ = p.Value.(string)
		case propOriginBrokerName:
			ev.OriginBrokerName, _ = p.Value.(string)
		case propConsumerCount:
			if n, ok := p.Value.(int32); ok && n >= 0 {
				ev.ConsumerCount = int(n)
			}
		}
	}
	// The broker stamps its advisories with its own id; a message a client
	// sent to an advisory topic lacks it (or names another broker).
	if ev.OriginBrokerID != c.brokerID {
		return ev, fmt.Errorf("advisory %s: originBrokerId %q is not the broker's %q", m.MessageID, ev.OriginBrokerID, c.brokerID)
	}
	switch x := m.DataStructure.(type) {
	case *consumerInfo:
		cons, err := consumerOf(x)
		if err != nil {
			return ev, fmt.Errorf("advisory %s: %w", m.MessageID, err)
		}
		ev.Kind, ev.Consumer = advisory.ConsumerAdded, cons
	case *removeInfo:
		id, ok := x.ObjectID.(*consumerID)
		if !ok {
			return ev, fmt.Errorf("%w: RemoveInfo of %T", advisory.ErrNotConsumerAdvisory, x.ObjectID)
		}
		ev.Kind, ev.Consumer = advisory.ConsumerRemoved, advisory.Consumer{ID: id.String()}
	case *removeSubscriptionInfo:
		if x.SubscriptionName == "" {
			return ev, fmt.Errorf("advisory %s: RemoveSubscriptionInfo without subscription name", m.MessageID)
		}
		cons := advisory.Consumer{SubscriptionName: x.SubscriptionName, ClientID: x.ClientID}
		if d, ok := toDestination(m.Destination); ok {
			if name, ok := strings.CutPrefix(d.Name, "ActiveMQ.Advisory.Consumer.Topic."); ok {
				cons.Destination = destination.Destination{Kind: destination.Topic, Name: name}
			}
		}
		ev.Kind, ev.Consumer = advisory.DurableRemoved, cons
	case nil:
		return ev, fmt.Errorf("advisory %s: no data structure", m.MessageID)
	default:
		return ev, fmt.Errorf("%w: %T", advisory.ErrNotConsumerAdvisory, x)
	}
	return ev, nil
}

// destinationAdvisory turns a temporary destination advisory (a
// DestinationInfo) into a DestinationChanged event, as the STOMP path's
// advisory.ParseDestinationInfo does.
func (c *Conn) destinationAdvisory(m *message, di *destinationInfo) {
	props, err := decodeProps(m.Props, nil)
	origin := ""
	for _, p := range props {
		if p.Name == propOriginBrokerID {
			origin, _ = p.Value.(string)
		}
	}
	if err == nil && origin != c.brokerID {
		err = fmt.Errorf("originBrokerId %q is not the broker's %q", origin, c.brokerID)
	}
	d, ok := toDestination(di.Destination)
	if err == nil && !ok {
		err = errors.New("DestinationInfo without destination")
	}
	if err == nil && di.OperationType != destinationAdd && di.OperationType != destinationRemove {
		err = fmt.Errorf("unknown operationType %d", di.OperationType)
	}
	if err != nil {
		c.events.push(transport.Event{Kind: transport.BadConsumer, Err: fmt.Errorf("destination advisory %s: %w", m.MessageID, err)})
		return
	}
	ev := advisory.DestinationEvent{Destination: d, Removed: di.OperationType == destinationRemove}
	for _, b := range di.BrokerPath {
		if b != nil {
			ev.Path = append(ev.Path, b.Value)
		}
	}
	c.events.push(transport.Event{Kind: transport.DestinationChanged, Destination: ev})
}

// consumerOf maps a ConsumerInfo as the JSON path does (advisory.Consumer.SetRoute
// reads the selector, brokerPath and NetworkBridgeFilter for both).
func consumerOf(x *consumerInfo) (advisory.Consumer, error) {
	if x.ConsumerID == nil || x.ConsumerID.ConnectionID == "" {
		return advisory.Consumer{}, errors.New("ConsumerInfo without consumerId")
	}
	d, ok := toDestination(x.Destination)
	if !ok {
		return advisory.Consumer{}, errors.New("ConsumerInfo without destination")
	}
	c := advisory.Consumer{
		ID:               x.ConsumerID.String(),
		Destination:      d,
		Priority:         int(x.Priority),
		Prefetch:         int(x.PrefetchSize),
		Browser:          x.Browser,
		Exclusive:        x.Exclusive,
		NoLocal:          x.NoLocal,
		Retroactive:      x.Retroactive,
		SubscriptionName: x.SubscriptionName,
		ClientID:         x.ClientID,
	}
	var brokerPath []string
	for _, b := range x.BrokerPath {
		if b != nil {
			brokerPath = append(brokerPath, b.Value)
		}
	}
	filterBroker := ""
	filter, isFilter := x.AdditionalPredicate.(*networkBridgeFilter)
	if isFilter && filter != nil && filter.NetworkBrokerID != nil {
		filterBroker = filter.NetworkBrokerID.Value
	}
	c.SetRoute(x.Selector, brokerPath, isFilter, filterBroker)
	return c, nil
}

// queue is the unbounded, ordered event queue between the reader and Events
// (the broker's prefetch bounds the deliveries, the caller's requests the
// confirmations).
type queue struct {
	mailbox.Mailbox[transport.Event]
	out chan transport.Event
}

func newQueue() *queue { return &queue{out: make(chan transport.Event, 256)} }

func (q *queue) push(ev transport.Event) { q.Push(ev) }

// pump moves events to out in order. When done closes it hands over what
// is queued (confirmations the broker sent before the end) and closes out.
func (q *queue) pump(done <-chan struct{}) {
	defer close(q.out)
	for {
		items := q.Take()
		for _, ev := range items {
			select {
			case q.out <- ev:
			case <-done:
				// Still hand over what is left, unless nobody reads.
				select {
				case q.out <- ev:
				case <-time.After(time.Second):
					return
				}
			}
		}
		if len(items) > 0 {
			q.Recycle(items)
			continue
		}
		select {
		case <-q.Signal():
		case <-done:
			if q.Len() == 0 {
				return
			}
		}
	}
}
