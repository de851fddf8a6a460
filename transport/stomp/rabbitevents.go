package stomp

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/rs/zerolog"

	"github.com/brokernet/brokernet/internal/backoff"
	"github.com/brokernet/brokernet/rabbitmq/events"
	"github.com/brokernet/brokernet/rabbitmq/mgmt"
	"github.com/brokernet/brokernet/transport"
)

// A RabbitMQ broker's STOMP connections carry no consumer advisories: its
// demand comes from the rabbitmq_event_exchange plugin, which package
// rabbitmq/events reads over STOMP connections that this package dials.

var (
	_ transport.DemandEndpoint = URI{}
	_ transport.DemandSource   = (*events.Source)(nil)
)

// DemandSource returns the demand source of the RabbitMQ broker u names: its
// event exchange, read over STOMP (rabbitmq/events). It does not connect.
func (u URI) DemandSource(log zerolog.Logger) (transport.DemandSource, error) {
	return events.NewSource(u.EventsConfig(), log)
}

// EventsConfig is the configuration of the RabbitMQ demand source of the
// broker u names: u's host, vhost, login, management URL and back-off, and
// STOMP connections like u's to read the event exchange.
func (u URI) EventsConfig() events.Config {
	return events.Config{
		Broker: u.String(), Host: u.Host, VHost: u.VHost,
		Login: u.Login, Passcode: u.Passcode, Management: u.Management,
		Reconnect: backoff.Policy(u.Reconnect),
		Dial: func(ctx context.Context, vhost string) (events.Feed, error) {
			eu := u
			eu.VHost = vhost
			c, err := Dial(ctx, eu, Options{})
			if err != nil {
				return nil, err
			}
			if c.Flavour() != RabbitMQ {
				c.Abort()
				return nil, fmt.Errorf("%w: %s is not RabbitMQ (server %q); set ?flavor= if it is", mgmt.ErrSetup, u, c.Server())
			}
			return eventFeed{c}, nil
		},
	}
}

// eventFeed is a Conn as rabbitmq/events reads it.
type eventFeed struct{ *Conn }

// Subscribe subscribes, telling a missing exchange (RabbitMQ's ERROR frame
// says not_found) by events.ErrNoExchange.
func (f eventFeed) Subscribe(ctx context.Context, id, dest, ack string) error {
	err := f.Conn.Subscribe(ctx, id, dest, ack)
	var be *BrokerError
	if errors.As(err, &be) && strings.Contains(be.Message+be.Detail, "not_found") {
		return events.NoExchange(err)
	}
	return err
}
