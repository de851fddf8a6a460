// Package amqp is the AMQP 1.0 transport: a transport.Conn over
// github.com/Azure/go-amqp, shaped by what RabbitMQ 3.10's AMQP 1.0 plugin does.
//
// One AMQP connection carries a session per subscription (its receiver link
// and Sync's ping sender) and one for the sender links, one per destination
// sent to. A session per subscription because RabbitMQ 3.10 keeps what a
// detached link had been sent, unacknowledged, on the session's channel until
// the session ends, and ends a session when it refuses an attach on it: ending
// a subscription's session gives all of it back and touches no other. The
// senders' session is replaced after a refusal. RabbitMQ 3.10 backs an
// AMQP 1.0 session with one AMQP 0-9-1 channel and handles the session's
// frames one at a time, settling each disposition with a synchronous call to
// that channel (rabbit_amqp1_0_session_process); Sync relies on that. On
// RabbitMQ, topic subscriptions consume one queue of the connection, bound
// and deleted through the management API (topics.go).
//
// Order of events: a subscription's Confirmed comes before its deliveries, and
// its deliveries keep link order. go-amqp hands each link's frames to a
// goroutine of its own, so across links — and between deliveries and a
// Commit's or Sync's confirmation — events come in the order go-amqp passed
// them on, which can differ from the wire order by what was in flight
// between its goroutines.
//
// # Files
//
// The three transports (stomp, openwire, amqp) are cut the same way, by
// concern: a concern has the same file name in each.
//
//   - conn.go: the Conn type and its state, Info, Events/Done/Err, BrokerID, Close and Abort, error classification.
//   - dial.go: DialConn, the open frame's properties (describe).
//   - subscribe.go: Subscribe (attaching a receiver link), Unsubscribe, DestroyDurable, WatchConsumers, OwnConsumer.
//   - send.go: Send, sender links, Commit and the batch's confirmation.
//   - settle.go: Settle and Sync (the ping round trip on each settling session).
//   - message.go: mapping between transport.Message and an AMQP 1.0 message.
//   - reader.go: the receiver links' pumps and the ordered event queue.
//   - credit.go: receiver link credit against RabbitMQ 3.10.
//   - topics.go: RabbitMQ topic subscriptions on one queue of the connection.
//   - address.go: destinations as AMQP 1.0 addresses.
//   - uri.go, uri_neutral.go: the amqp:// URI.
package amqp
