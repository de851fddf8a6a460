package openwire

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/brokernet/brokernet/destination"
	"github.com/brokernet/brokernet/hop"
	"github.com/brokernet/brokernet/transport"
)

// Durable subscription sync: how a bridge learns, at connect, which durable
// topic subscriptions the remote broker still holds, online or offline. It is
// ActiveMQ's own mechanism for its networkConnector option syncDurableSubs
// (ActiveMQ 5.15+, OpenWire version 12): a connection that sends a BrokerInfo
// marked as a network connection, whose networkProperties set syncDurableSubs
// and list dynamicallyIncludedDestinations, is answered with a
// BrokerSubscriptionInfo holding the ConsumerInfo of every durable
// subscription on a matching topic (TransportConnection.processBrokerInfo,
// NetworkBridgeUtils.getBrokerSubscriptionInfo). Nothing else a client can
// read tells an offline durable subscription from a destroyed one: the
// consumer advisory replay lists online consumers only.

// typeBrokerSubscriptionInfo is CommandTypes.BROKER_SUBSCRIPTION_INFO.
const typeBrokerSubscriptionInfo = 92

// brokerSubscriptionInfo is BrokerSubscriptionInfo (its v12 marshaller:
// brokerId, brokerName, subscriptionInfos).
type brokerSubscriptionInfo struct {
	baseCommand
	BrokerID      *brokerID
	BrokerName    string
	Subscriptions []*consumerInfo
}

func (*brokerSubscriptionInfo) dsType() byte { return typeBrokerSubscriptionInfo }
func (x *brokerSubscriptionInfo) marshal(w *writer) {
	x.marshalBase(w)
	w.nested(x.BrokerID)
	w.str(x.BrokerName)
	writeArray(w, x.Subscriptions)
}
func (x *brokerSubscriptionInfo) unmarshal(r *reader) {
	x.unmarshalBase(r)
	x.BrokerID = nestedAs[*brokerID](r, "brokerId")
	x.BrokerName = r.str()
	x.Subscriptions = readArray[*consumerInfo](r, "subscriptionInfos")
}

var _ transport.DurableLister = URI{}

// ListsDurables is true: every OpenWire URI reaches an ActiveMQ that may
// answer (5.15+; an older one makes DurableSubscriptions fail).
func (URI) ListsDurables() bool { return true }

// durableSyncTimeout bounds the wait for the broker's answer; an ActiveMQ
// older than 5.15 never answers.
const durableSyncTimeout = 10 * time.Second

// DurableSubscriptions lists the durable subscriptions the ActiveMQ broker at
// u holds on topics matching include (ActiveMQ wildcards), online or offline,
// on a connection of its own (a network connection as the broker sees it, so
// not the bridge's; without the URI's client id, which the bridge's own
// connections use). It fails on a broker that does not answer (before 5.15).
func (u URI) DurableSubscriptions(ctx context.Context, broker string, include []destination.Destination) ([]transport.DurableSubscription, error) {
	var names []string
	for _, d := range include {
		if d.Kind != destination.Topic || d.Name == "" || strings.ContainsAny(d.Name, ",[]\\\r\n") {
			return nil, fmt.Errorf("durable subscription sync: cannot name %s to the broker", d)
		}
		names = append(names, "topic://"+d.Name)
	}
	if len(names) == 0 {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, durableSyncTimeout)
	defer cancel()
	own := u
	own.ClientID = ""
	c, err := Dial(ctx, own, zerolog.Nop())
	if err != nil {
		return nil, err
	}
	defer c.Abort()
	var rnd [6]byte
	rand.Read(rnd[:]) //nolint:errcheck // never fails
	// networkProperties is a java.util.Properties text; the list is read by
	// StringToListOfActiveMQDestinationConverter ("[a, b]").
	props := "syncDurableSubs=true\ndynamicallyIncludedDestinations=[" + strings.Join(names, ",") + "]\n"
	bi := &brokerInfo{
		BrokerID:          &brokerID{Value: "ID:brokernet-durable-sync-" + hex.EncodeToString(rnd[:])},
		BrokerName:        "brokernet",
		NetworkConnection: true,
		NetworkProperties: props,
	}
	if err := c.write(ctx, bi, nil); err != nil {
		return nil, fmt.Errorf("durable subscription sync with %s: %w", u, err)
	}
	select {
	case bsi := <-c.subInfo:
		// The broker is known by the BrokerInfo of its connect (ActiveMQ
		// leaves the BrokerSubscriptionInfo's own brokerId empty, measured).
		if got, _ := c.BrokerID(ctx); broker != "" && got != broker {
			return nil, fmt.Errorf("durable subscription sync with %s: answered by broker %q, not the bridge's remote %q", u, got, broker)
		}
		out := make([]transport.DurableSubscription, 0, len(bsi.Subscriptions))
		for _, ci := range bsi.Subscriptions {
			if ci == nil || ci.SubscriptionName == "" {
				continue
			}
			d, ok := toDestination(ci.Destination)
			if !ok {
				continue
			}
			out = append(out, transport.DurableSubscription{ClientID: ci.ClientID, Name: ci.SubscriptionName, Destination: d, Selector: strings.TrimPrefix(ci.Selector, hop.ConvertStringPrefix)})
		}
		return out, nil
	case <-c.done:
		return nil, fmt.Errorf("durable subscription sync with %s: %w", u, c.closedErr())
	case <-ctx.Done():
		return nil, fmt.Errorf("durable subscription sync with %s: no BrokerSubscriptionInfo (ActiveMQ before 5.15?): %w", u, ctx.Err())
	}
}
