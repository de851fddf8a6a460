package demand

import (
	"errors"
	"fmt"
	"slices"

	"github.com/brokernet/brokernet/destination"
)

// Defaults of Options, after ActiveMQ's NetworkBridgeConfiguration
// (activemq-network.md §1.1 and §2.2).
const (
	// DefaultConsumerTTL lets demand travel one hop (networkTTL 1).
	DefaultConsumerTTL = 1
	// DefaultMessageTTL lets a message be forwarded once (networkTTL 1).
	DefaultMessageTTL = 1
	// DefaultPriorityBase is ActiveMQ's consumerPriorityBase.
	DefaultPriorityBase = -5
	// DefaultPrefetch is ActiveMQ's network prefetchSize.
	DefaultPrefetch = 1000
)

// Options configures a Table. Use DefaultOptions and set the broker ids:
// the zero Options is not the default (Conduit, DecreasePriority and
// SuppressTopics are false, the TTLs 0).
type Options struct {
	// LocalID is the id of the local broker, where the demand subscriptions
	// are created and from which messages are forwarded.
	LocalID string
	// RemoteID is the id of the remote broker, whose consumers create the
	// demand and to which messages are forwarded.
	RemoteID string
	// Conduit makes plain remote consumers of one destination share demand
	// subscriptions, reference-counted by consumer; durable and non-durable
	// consumers of a topic get separate ones. Unlike ActiveMQ's
	// ConduitBridge, which drops the selectors, selectors are kept: a queue's
	// shared subscription selects the OR of its consumers' selectors ("" as
	// soon as one consumer has none), re-issued as a replacement when that OR
	// changes, while a topic gets one subscription per distinct selector
	// (see the package documentation for why).
	// A plain non-durable consumer whose destination a static include
	// matches joins the static subscription instead, as in ActiveMQ.
	// Consumers that are themselves network or brokernet demand
	// subscriptions always get their own, as ActiveMQ's ConduitBridge does
	// not conduit "proxy proxy" consumers. Default true.
	Conduit bool
	// ConsumerTTL is how many hops demand may travel: a remote consumer whose
	// path already has ConsumerTTL entries is ignored. -1 is unlimited;
	// 0 ignores every consumer. Default 1.
	ConsumerTTL int
	// MessageTTL is how many hops a message may make; it becomes the maxHops
	// of each subscription's hop filter. -1 is unlimited. Default 1.
	MessageTTL int
	// DecreasePriority is ActiveMQ's decreaseNetworkConsumerPriority: demand
	// subscriptions get PriorityBase, lowered further by the path length,
	// instead of the remote consumer's priority, so that local consumers and
	// shorter routes are preferred. Default true (ActiveMQ 5.18's default;
	// 5.17's was false).
	DecreasePriority bool
	// PriorityBase is ActiveMQ's consumerPriorityBase. Default -5.
	PriorityBase int
	// Prefetch is the prefetch of each demand subscription; values <= 0 mean
	// DefaultPrefetch, as STOMP subscriptions cannot use 0. Default 1000.
	Prefetch int
	// Filter decides which destinations may be forwarded. Its Exclude list
	// wins over StaticInclude too (ActiveMQ AMQ-6331).
	Filter destination.Filter
	// StaticInclude is ActiveMQ's staticallyIncludedDestinations: each
	// pattern gets a demand subscription from Table.Start on, whether or not
	// a remote consumer wants it, subscribed to the pattern's destination as
	// written (wildcards included; a pattern without kind gives one queue
	// and one topic subscription). A wildcard pattern that a Filter.Exclude
	// pattern overlaps is narrowed instead: one subscription per permitted
	// local destination it matches, following Table.Destination, so that
	// excluded messages are never taken. A static include also lets remote
	// consumers of matching destinations through a non-empty Filter.Include,
	// as in ActiveMQ's isPermissableDestination.
	StaticInclude []destination.Pattern
	// DynamicOnly is ActiveMQ's dynamicOnly. When false (the default), the
	// durable demand subscription of remote durable topic subscribers that
	// all went offline stays on the local broker, inactive, so that it keeps
	// their messages until they return or their durable subscription is
	// destroyed; when true it is destroyed as soon as the last of them goes.
	DynamicOnly bool
	// BridgeTemp is ActiveMQ's bridgeTempDestinations: consumers of the
	// remote broker's temporary queues and topics create demand like any
	// other (request/reply across the network), permitted whatever the
	// Filter says, as ActiveMQ's isPermissableDestination decides them by
	// this option alone. The bridge mirrors the temporary destinations
	// themselves on the local broker and removes their demand when they go
	// (Table.TempGone). Default true.
	BridgeTemp bool
	// SuppressQueues is ActiveMQ's suppressDuplicateQueueSubscriptions: a
	// demand subscription for a network consumer on a queue is withheld
	// while another bridge on the local broker holds a better route to the
	// same origin (see Table.ApplyLocal). Default false.
	SuppressQueues bool
	// SuppressTopics is ActiveMQ's suppressDuplicateTopicSubscriptions, the
	// same for topics. Default true.
	SuppressTopics bool
	// ReplayWhenNoConsumers is the replayWhenNoConsumers of ActiveMQ's
	// ConditionalNetworkBridgeFilterFactory: while a queue has remote demand
	// but no plain consumer on the local broker, a replay subscription sends
	// back to the remote broker the messages that came from it and would
	// otherwise be stuck here (see Table.ApplyLocal). Default false.
	ReplayWhenNoConsumers bool
	// MaxReplays caps how often one message is replayed (hop.MovesHeader):
	// a message replayed that often stays where it is, however its
	// consumers move. 0: no cap, as ActiveMQ.
	MaxReplays int
	// ContentFilters limit what is forwarded to the messages their selectors
	// select, on the destinations their patterns overlap (ContentFilter):
	// every demand, static and replay subscription to such a destination
	// selects the AND of its consumers' selectors and theirs. A local broker
	// without selectors (RabbitMQ) serves no demand that has one.
	ContentFilters []ContentFilter
}

// DefaultOptions returns the default options without broker ids.
func DefaultOptions() Options {
	return Options{
		Conduit:          true,
		ConsumerTTL:      DefaultConsumerTTL,
		MessageTTL:       DefaultMessageTTL,
		DecreasePriority: true,
		PriorityBase:     DefaultPriorityBase,
		Prefetch:         DefaultPrefetch,
		SuppressTopics:   true,
		BridgeTemp:       true,
	}
}

// Validate reports every problem of o: missing or equal broker ids, TTLs
// below -1, a PriorityBase outside ActiveMQ's priority range, and static
// includes that are empty or name temporary destinations (which are not
// bridged).
func (o Options) Validate() error {
	var errs []error
	if o.LocalID == "" {
		errs = append(errs, errors.New("LocalID is empty"))
	}
	if o.RemoteID == "" {
		errs = append(errs, errors.New("RemoteID is empty"))
	}
	if o.LocalID != "" && o.LocalID == o.RemoteID {
		errs = append(errs, fmt.Errorf("LocalID and RemoteID are both %q (a bridge to itself)", o.LocalID))
	}
	if o.ConsumerTTL < -1 {
		errs = append(errs, fmt.Errorf("ConsumerTTL %d is below -1", o.ConsumerTTL))
	}
	if o.MessageTTL < -1 {
		errs = append(errs, fmt.Errorf("MessageTTL %d is below -1", o.MessageTTL))
	}
	if o.PriorityBase < minPriority || o.PriorityBase > maxPriority {
		errs = append(errs, fmt.Errorf("PriorityBase %d is outside %d..%d", o.PriorityBase, minPriority, maxPriority))
	}
	for i, p := range o.StaticInclude {
		switch {
		case p.String() == "":
			errs = append(errs, fmt.Errorf("StaticInclude[%d] is empty", i))
		case p.Kind().IsTemp():
			errs = append(errs, fmt.Errorf("StaticInclude[%d] %q: temporary destinations are not bridged", i, p))
		}
	}
	for i, f := range o.ContentFilters {
		if f.Selector == "" {
			errs = append(errs, fmt.Errorf("ContentFilters[%d] has no selector", i))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("demand options: %w", errors.Join(errs...))
	}
	return nil
}

// normalized returns o with out-of-range values replaced (TTLs below -1
// become -1, a non-positive Prefetch becomes DefaultPrefetch) and its own
// copy of the filter's pattern lists.
func (o Options) normalized() Options {
	o.ConsumerTTL = max(o.ConsumerTTL, -1)
	o.MessageTTL = max(o.MessageTTL, -1)
	if o.Prefetch <= 0 {
		o.Prefetch = DefaultPrefetch
	}
	// The Table keeps its own pattern lists, so later edits of the caller's
	// slices cannot change its decisions.
	o.Filter.Include = slices.Clone(o.Filter.Include)
	o.Filter.Exclude = slices.Clone(o.Filter.Exclude)
	o.StaticInclude = slices.Clone(o.StaticInclude)
	o.ContentFilters = slices.Clone(o.ContentFilters)
	return o
}
