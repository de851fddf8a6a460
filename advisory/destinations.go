package advisory

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/go-stomp/stomp/v3/frame"

	"github.com/brokernet/brokernet/destination"
)

// DestinationTopics returns the STOMP destinations of ActiveMQ's destination
// advisories (AdvisorySupport.QUEUE_ADVISORY_TOPIC and TOPIC_ADVISORY_TOPIC):
// a DestinationInfo whenever a queue or topic is created or removed. Like the
// consumer advisories, they are replayed to a new subscriber for every existing
// destination (AdvisoryBroker.addConsumer), so a subscriber learns the whole set.
func DestinationTopics() []string {
	return []string{"/topic/ActiveMQ.Advisory.Queue", "/topic/ActiveMQ.Advisory.Topic"}
}

// DestinationEvent is one destination appearing on or leaving a broker.
type DestinationEvent struct {
	// Destination is the concrete queue or topic.
	Destination destination.Destination
	// Removed says the destination was removed; otherwise it was added.
	Removed bool
	// Path is the DestinationInfo's brokerPath: the brokers a bridge that
	// mirrored this (temporary) destination here brought it from. A bridge
	// never mirrors back a destination whose path holds its local broker.
	Path []string
}

// DestinationInfo.operationType values (activemq-client DestinationInfo).
const (
	destinationAdd    = 0
	destinationRemove = 1
)

// ParseDestinationInfo parses a destination advisory received over STOMP with
// TransformationJSON. Like ParseActiveMQ it refuses messages the broker did not
// generate (ErrForged) and never panics; temporary destinations are returned
// too (callers that bridge no temporary destinations skip them).
func ParseDestinationInfo(h *frame.Header, body []byte) (DestinationEvent, error) {
	if h != nil {
		if err := CheckBrokerGenerated(h.Get("message-id")); err != nil {
			return DestinationEvent{}, err
		}
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return DestinationEvent{}, errors.New("parsing destination advisory: empty body")
	}
	var root map[string]json.RawMessage
	if err := json.Unmarshal(body, &root); err != nil {
		return DestinationEvent{}, fmt.Errorf("parsing destination advisory: %w", err)
	}
	raw, ok := root["DestinationInfo"]
	if len(root) != 1 || !ok {
		return DestinationEvent{}, errors.New("parsing destination advisory: want one DestinationInfo root element")
	}
	obj, err := object(raw, "DestinationInfo")
	if err != nil {
		return DestinationEvent{}, fmt.Errorf("parsing destination advisory: %w", err)
	}
	d, err := parseDestination(obj["destination"])
	if err != nil {
		return DestinationEvent{}, fmt.Errorf("parsing destination advisory: %w", err)
	}
	f := fields{obj: obj}
	op := f.int("operationType")
	if f.err != nil {
		return DestinationEvent{}, fmt.Errorf("parsing destination advisory: %w", f.err)
	}
	path, err := brokerIDs(obj["brokerPath"], "brokerPath", 0)
	if err != nil {
		return DestinationEvent{}, fmt.Errorf("parsing destination advisory: %w", err)
	}
	switch op {
	case destinationAdd:
		return DestinationEvent{Destination: d, Path: path}, nil
	case destinationRemove:
		return DestinationEvent{Destination: d, Removed: true, Path: path}, nil
	}
	return DestinationEvent{}, fmt.Errorf("parsing destination advisory: unknown operationType %d", op)
}
