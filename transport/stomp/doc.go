// Package stomp is brokernet's STOMP 1.2 client: one connection with pipelined
// writes, any number of receipts outstanding, bounded frames and spec-correct heart-beats.
//
// It is built on go-stomp's frame types rather than on go-stomp's Conn because that
// client allows one outstanding receipt per connection, wedges after a late receipt,
// flushes the socket once per frame and misreads a heart-beat answer of 0,0
// (measured; see shared/reference/go-libraries.md §1). A bridge needs hundreds of
// confirmations in flight on one connection.
//
// Conn is that client; BrokerConn is a Conn seen through transport.Conn.
//
// # Files
//
// The three transports (stomp, openwire, amqp) are cut the same way, by
// concern: a concern has the same file name in each.
//
//   - conn.go: the Conn and BrokerConn types and their state, Info, Events/Done/Err, BrokerID, Close and Abort.
//   - dial.go: Dial, Options, the CONNECT/CONNECTED handshake and heart-beat negotiation, NewBrokerConn.
//   - subscribe.go: Subscribe, Unsubscribe, Browse, DestroyDurable, WatchConsumers/WatchDestinations, OwnConsumer.
//   - send.go: Send, Flush and Commit (transactions, the held tail SEND, early receipts).
//   - settle.go: Settle and Sync (ACK/NACK, held ACKs, the BEGIN/ABORT pair).
//   - message.go: mapping between transport.Message and MESSAGE/SEND frames, RabbitMQ's headers.
//   - reader.go: the read loop, the inbox, Deliveries, and the converter of frames into events.
//   - writer.go: Write, WriteNow, receipts, the write loop and heart-beats, the held tail frame.
//   - confirm.go: batches to RabbitMQ confirmed by a receipt per SEND.
//   - durables.go: listing durable subscriptions over the broker's OpenWire port.
//   - codec.go: encoding and decoding STOMP frames.
//   - uri.go, uri_neutral.go: the stomp:// URI.
package stomp
