package rabbitmq

import (
	"context"
	"fmt"
	"strings"

	"github.com/brokernet/brokernet/destination"
	"github.com/brokernet/brokernet/rabbitmq/mgmt"
	"github.com/brokernet/brokernet/transport"
)

// QueueRoom implements transport.QueueLimiter for a RabbitMQ connection in
// vhost, from the management API m: what queue d ("/queue/NAME", the queue
// NAME) takes before it refuses. Topics go to amq.topic and on to any number
// of queues: they are never Limited here.
func QueueRoom(ctx context.Context, m *mgmt.Client, vhost string, d destination.Destination) (transport.QueueRoom, error) {
	if d.Kind != destination.Queue || d.Name == "" {
		return transport.QueueRoom{}, nil
	}
	l, ok, err := m.QueueLimits(ctx, vhost, d.Name)
	if err != nil || !ok || !l.Refuses() {
		return transport.QueueRoom{}, err
	}
	var policy []string
	if l.MaxLength > 0 {
		policy = append(policy, fmt.Sprintf("max-length %d", l.MaxLength))
	}
	if l.MaxBytes > 0 {
		policy = append(policy, fmt.Sprintf("max-length-bytes %d", l.MaxBytes))
	}
	policy = append(policy, "overflow "+l.Overflow)
	return transport.QueueRoom{
		Limited: true, MaxMessages: l.MaxLength, MaxBytes: l.MaxBytes,
		Messages: l.Messages, Bytes: l.Bytes, Policy: strings.Join(policy, ", "),
	}, nil
}
