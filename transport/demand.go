package transport

import (
	"context"

	"github.com/rs/zerolog"

	"github.com/brokernet/brokernet/advisory"
)

// DemandSource reports a broker's demand (its consumers) from beside its
// connections, for a broker whose connections carry no consumer advisories
// (Conn.WatchConsumers returns ErrUnsupported): RabbitMQ, whose demand comes
// from its event exchange and management API (package rabbitmq/events).
type DemandSource interface {
	// Run reports the broker's consumers until ctx ends (it then returns nil)
	// or the source meets a problem only the broker's operator can fix (it
	// then returns an error saying which). It retries lost connections itself.
	//
	// emit is called from Run's goroutine only, in order, and may block; Run
	// waits for it. Every (re)connection of the source starts with an Event of
	// Kind advisory.SnapshotStart, then an advisory.ConsumerAdded for every
	// current consumer, then advisory.SnapshotDone: whatever the receiver
	// knew from this source and was not added again in between is gone.
	// After it come ConsumerAdded and ConsumerRemoved as consumers change; a
	// lost connection is an advisory.SourceLost before the next attempt.
	// Consumer IDs are stable for as long as the consumer lives.
	Run(ctx context.Context, emit func(advisory.Event)) error
}

// DemandEndpoint is an Endpoint that can name its broker's DemandSource (a
// STOMP or AMQP 1.0 URI, for RabbitMQ). The bridge asks for it only when the
// broker's connections carry no consumer advisories.
type DemandEndpoint interface {
	// DemandSource returns the source of the broker's demand, logging to log;
	// it does not connect.
	DemandSource(log zerolog.Logger) (DemandSource, error)
}
