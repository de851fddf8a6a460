package amqp

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/Azure/go-amqp"

	"github.com/brokernet/brokernet/destination"
	"github.com/brokernet/brokernet/rabbitmq"
	"github.com/brokernet/brokernet/rabbitmq/mgmt"
	"github.com/brokernet/brokernet/transport"
)

// Topic subscriptions on RabbitMQ 3.10 share one queue per connection, named
// by brokernet and bound through the management API, because the address a
// topic source would naturally use leaks and duplicates:
//
//   - For a source "/exchange/amq.topic/KEY" (or "/topic/KEY") RabbitMQ 3.10
//     declares a server-named queue (amq.gen-…) with exclusive=false and
//     auto_delete=false written into the attach handling
//     (rabbit_amqp1_0_outgoing_link:ensure_source passes {exclusive, false},
//     {auto_delete, false} to rabbit_routing_util:ensure_endpoint, whatever the
//     terminus says; read from the 3.10.8 beams' debug info, and measured): the
//     queue outlives the link and the connection, stays bound and fills. No
//     address form or attach property changes that ("/queue/NAME" gets the same
//     flags; dynamic sources are refused), and only a consumer on it, not its
//     binding, tells whose it is.
//   - Each such subscription gets a queue of its own, so a message that
//     matches two of them (prices.eu and prices.*) arrives twice, and a
//     message published over AMQP 1.0 without message-id cannot be told from
//     its copy.
//
// So every topic subscription of a connection attaches to "/queue/Q" for the
// connection's queue Q (RabbitMQ declares it: non-durable, as the terminus is
// not durable), and the connection binds Q to amq.topic once per routing key in
// use; a message is put in Q once however many bindings match (as the STOMP
// transport's RabbitMQ flavour does with its "x-queue-name"). The key's binding
// goes when its last subscription does, and Q when the connection's last topic
// subscription does, or when the connection ends. Q's name starts with
// rabbitmq.BridgeQueuePrefix, so demand sources never count it as demand, and
// reads "bn_amqp.<random>.topics": a later connection deletes such queues that
// have no consumer, left by a run that could not (a crash, a lost management
// API), asking the queue to refuse if it is in use.
//
// Each subscription on Q has a link of its own and RabbitMQ hands Q's messages
// round-robin to them, not by key: a delivery's topic is read from the message
// (properties "to", which brokernet and JMS clients write; else the routing
// key, which RabbitMQ puts in "subject" for messages that carry no AMQP 1.0
// properties section), never from the link it came on. Only a message
// published over AMQP 1.0 with a properties section and neither "to" nor a
// subject that is a bound key has no known topic: it is taken as on the
// receiving subscription's topic (right when the connection has one topic
// subscription).

const (
	topicQueuePrefix = "bn_amqp."
	topicQueueSuffix = ".topics"
)

// mgmtTimeout bounds one management API request of the topic queue.
const mgmtTimeout = 10 * time.Second

// topicQueue is a connection's shared topic queue and its bindings.
type topicQueue struct {
	mgmt  *mgmt.Client
	vhost string
	name  string

	// mu serialises attaching, binding and unbinding, so that the queue is
	// never deleted under an attach and a key never unbound under a new
	// subscription to it. Lock order: mu before Conn.mu.
	mu   sync.Mutex
	keys map[string]int // routing key -> subscriptions using it (guarded by mu)
	subs int            // topic subscriptions attached or attaching (guarded by mu)
	used bool           // a subscription attached once: the queue may exist (guarded by mu)
	// patterns are the topics bound, for reading a delivery's topic (guarded by pmu).
	pmu      sync.Mutex
	patterns map[string]destination.Pattern

	dropOnce sync.Once
	dropped  chan struct{} // closed when drop has finished
	dropErr  error         // set before dropped is closed
}

// newTopicQueue returns the topic queue of a connection to u, or an error
// when u's management URL cannot be used.
func newTopicQueue(u URI) (*topicQueue, error) {
	base := u.Management
	if base == "" {
		base = mgmt.DefaultURL(u.Host)
	}
	mc, err := mgmt.New(base, u.User, u.Password, nil)
	if err != nil {
		return nil, err
	}
	vhost := u.VHost
	if vhost == "" {
		vhost = "/"
	}
	return &topicQueue{
		mgmt: mc, vhost: vhost,
		name:     topicQueuePrefix + randomHex(8) + topicQueueSuffix,
		keys:     map[string]int{},
		patterns: map[string]destination.Pattern{},
		dropped:  make(chan struct{}),
	}, nil
}

// address is the AMQP 1.0 source of the queue; RabbitMQ declares it at attach.
func (t *topicQueue) address() string { return "/queue/" + t.name }

// bind adds a subscription to key, binding the queue on the key's first one.
// The caller holds mu and has attached a link to the queue.
func (t *topicQueue) bind(ctx context.Context, topic destination.Destination, key string) error {
	if t.keys[key] == 0 {
		bctx, cancel := context.WithTimeout(ctx, mgmtTimeout)
		defer cancel()
		if err := t.mgmt.Bind(bctx, t.vhost, rabbitmq.TopicExchange, t.name, key); err != nil {
			return fmt.Errorf("binding the topic queue %s to %s with %q: %w", t.name, rabbitmq.TopicExchange, key, err)
		}
		p, err := destination.ParsePattern("topic://" + topic.Name)
		if err == nil {
			t.pmu.Lock()
			t.patterns[key] = p
			t.pmu.Unlock()
		}
	}
	t.keys[key]++
	return nil
}

// release ends a subscription to key (bound, or with bound false one whose
// attach failed before binding): the key's binding goes with its last
// subscription, and the queue with the connection's last topic subscription.
// The caller holds mu, and the subscription's session has ended.
func (t *topicQueue) release(ctx context.Context, key string, bound bool) error {
	t.subs--
	var err error
	if bound {
		t.keys[key]--
		if t.keys[key] <= 0 {
			delete(t.keys, key)
			t.pmu.Lock()
			delete(t.patterns, key)
			t.pmu.Unlock()
			if t.subs > 0 {
				uctx, cancel := context.WithTimeout(ctx, mgmtTimeout)
				err = t.mgmt.Unbind(uctx, t.vhost, rabbitmq.TopicExchange, t.name, key)
				cancel()
			}
		}
	}
	if t.subs == 0 {
		dctx, cancel := context.WithTimeout(ctx, mgmtTimeout)
		// Not if-unused: our own sessions on it have ended; a consumer left
		// would be a link of ours the broker has not finished detaching.
		_, derr := t.mgmt.DeleteQueue(dctx, t.vhost, t.name, false)
		cancel()
		clear(t.keys)
		if derr != nil {
			err = errors.Join(err, fmt.Errorf("deleting the topic queue %s: %w", t.name, derr))
		}
	}
	return err
}

// topicOf returns the topic a delivery on the queue was published on, from its
// "to" or its routing key (see the comment above), or ok false.
func (t *topicQueue) topicOf(to, subject string) (destination.Destination, bool) {
	if d, ok := fromAddress(to); ok && d.Kind == destination.Topic {
		return d, true
	}
	if to != "" || subject == "" {
		return destination.Destination{}, false
	}
	name, err := rabbitmq.TopicFromKey(subject)
	if err != nil {
		return destination.Destination{}, false
	}
	d := destination.Destination{Kind: destination.Topic, Name: name}
	t.pmu.Lock()
	defer t.pmu.Unlock()
	for _, p := range t.patterns {
		if p.Match(d) {
			return d, true
		}
	}
	return destination.Destination{}, false
}

// route sets the topic of m, a delivery on the queue, when the message tells
// it (fromAMQP took the receiving subscription's); a routing key read from
// subject is no JMS type.
func (t *topicQueue) route(m *transport.Message, in *amqp.Message) {
	var to, subject string
	if p := in.Properties; p != nil {
		if p.To != nil {
			to = *p.To
		}
		if p.Subject != nil {
			subject = *p.Subject
		}
	}
	d, ok := t.topicOf(to, subject)
	if !ok {
		return
	}
	m.Destination = d
	if to == "" && m.Type == subject {
		m.Type = ""
	}
}

// drop deletes the queue once the connection has ended (the broker drops the
// bindings with it); later calls wait for the first. Best effort: a queue it
// could not delete is swept by a later connection.
func (t *topicQueue) drop() {
	t.dropOnce.Do(func() {
		go func() {
			defer close(t.dropped)
			ctx, cancel := context.WithTimeout(context.Background(), mgmtTimeout)
			defer cancel()
			t.mu.Lock()
			defer t.mu.Unlock()
			if !t.used {
				return
			}
			if _, err := t.mgmt.DeleteQueue(ctx, t.vhost, t.name, false); err != nil {
				t.dropErr = fmt.Errorf("deleting the topic queue %s: %w", t.name, err)
			}
		}()
	})
}

// sweep deletes the topic queues that earlier connections left: names
// "bn_amqp.<…>.topics" other than this connection's, deleted only if unused
// (the queue itself refuses when it has a consumer, so a live connection's
// queue stays). It returns the names it deleted.
func (t *topicQueue) sweep(ctx context.Context) ([]string, error) {
	qs, err := t.mgmt.Queues(ctx, t.vhost, topicQueuePrefix)
	if err != nil {
		return nil, fmt.Errorf("listing queues to sweep left topic queues: %w", err)
	}
	var deleted []string
	var errs []error
	for _, q := range qs {
		// Not filtered by the statistics' consumer count: it lags (a crashed
		// run's queue still shows its consumer for seconds).
		if !isTopicQueue(q.Name) || q.Name == t.name {
			continue
		}
		ok, err := t.mgmt.DeleteQueue(ctx, t.vhost, q.Name, true)
		switch {
		case errors.Is(err, mgmt.ErrInUse):
		case err != nil:
			errs = append(errs, err)
		case ok:
			deleted = append(deleted, q.Name)
		}
	}
	return deleted, errors.Join(errs...)
}

// isTopicQueue reports whether name is a topic queue of transport/amqp.
func isTopicQueue(name string) bool {
	return strings.HasPrefix(name, topicQueuePrefix) && strings.HasSuffix(name, topicQueueSuffix) &&
		len(name) > len(topicQueuePrefix)+len(topicQueueSuffix)
}

// sweepTopicQueues deletes, in the background, the unused topic queues that
// earlier connections left (topics.go). Best effort: without the management
// API nothing is swept.
func (c *Conn) sweepTopicQueues() {
	ctx, cancel := context.WithTimeout(context.Background(), 3*mgmtTimeout)
	defer cancel()
	_, _ = c.topics.sweep(ctx)
}
