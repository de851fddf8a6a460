package netsim

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/go-stomp/stomp/v3/frame"

	"github.com/brokernet/brokernet/destination"
	"github.com/brokernet/brokernet/hop"
)

// A simulated broker publishes each consumer advisory the way ActiveMQ 5.17
// does over STOMP with transformation jms-advisory-json (activemq-network.md
// §6.1, verified-here.md): a ConsumerInfo or RemoveInfo rendered by XStream
// and Jettison, with originBrokerId, originBrokerName and consumerCount
// headers, and a message-id from the broker's advisory producer ("…:0:0:N").
// The bridges receive what advisory.ParseActiveMQ makes of it, so the tag a
// demand subscription carries in its selector (path, origin) reaches the next
// bridge only through the real parser.

// jsonConsumerID is ActiveMQ's ConsumerId as XStream renders it.
type jsonConsumerID struct {
	Class        string `json:"@class,omitempty"`
	ConnectionID string `json:"connectionId"`
	SessionID    int64  `json:"sessionId"`
	Value        int64  `json:"value"`
}

type jsonDestination struct {
	Class  string `json:"@class"`
	String string `json:"string"`
	Null   string `json:"null"`
}

type jsonConsumerInfo struct {
	CommandID        int             `json:"commandId"`
	ResponseRequired bool            `json:"responseRequired"`
	ConsumerID       jsonConsumerID  `json:"consumerId"`
	Destination      jsonDestination `json:"destination"`
	PrefetchSize     int             `json:"prefetchSize"`
	Browser          bool            `json:"browser"`
	DispatchAsync    bool            `json:"dispatchAsync"`
	Priority         int             `json:"priority"`
	Selector         string          `json:"selector,omitempty"`
}

type jsonRemoveInfo struct {
	CommandID        int            `json:"commandId"`
	ResponseRequired bool           `json:"responseRequired"`
	ObjectID         jsonConsumerID `json:"objectId"`
}

var destinationClass = map[destination.Kind]string{
	destination.Queue: "ActiveMQQueue", destination.Topic: "ActiveMQTopic",
	destination.TempQueue: "ActiveMQTempQueue", destination.TempTopic: "ActiveMQTempTopic",
}

// render returns the advisory message broker b publishes when consumer c
// opens (added) or closes, with the destination's consumer count after the
// event.
func (b *broker) render(c *consumer, added bool, count int) (*frame.Header, []byte, error) {
	b.advisorySeq++
	h := frame.NewHeader(
		"message-id", "ID:"+b.id+"-1:1:0:0:"+strconv.FormatUint(b.advisorySeq, 10),
		"originBrokerId", b.id,
		"originBrokerName", b.id,
		"consumerCount", strconv.Itoa(count),
	)
	id := jsonConsumerID{ConnectionID: c.conn, SessionID: c.session, Value: c.value}
	var body any
	if added {
		info := jsonConsumerInfo{
			CommandID: 3, ResponseRequired: true, ConsumerID: id,
			Destination:  jsonDestination{Class: destinationClass[c.dest.Kind], String: c.dest.Name},
			PrefetchSize: c.prefetch, DispatchAsync: true, Priority: c.priority,
		}
		if c.selector != "" {
			// ActiveMQ shows a selector that arrived over STOMP with this prefix.
			info.Selector = hop.ConvertStringPrefix + c.selector
		}
		body = map[string]any{"ConsumerInfo": info}
	} else {
		id.Class = "ConsumerId"
		body = map[string]any{"RemoveInfo": jsonRemoveInfo{ResponseRequired: true, ObjectID: id}}
	}
	raw, err := json.Marshal(body)
	if err != nil {
		return nil, nil, fmt.Errorf("rendering advisory of %s on %s: %w", c.id(), b.id, err)
	}
	return h, raw, nil
}
