// Package openwire is brokernet's OpenWire client for ActiveMQ Classic: a
// transport.Conn that speaks the broker's native protocol, so that JMS
// messages keep their type, typed properties and headers, and consumer
// advisories arrive as the broker's own ConsumerInfo/RemoveInfo commands.
//
// It implements the subset of OpenWire v12 (ActiveMQ 5.13 and later) the
// bridge needs, in tight or loose encoding (the URI's
// wireFormat.tightEncodingEnabled), always with size prefixes and without
// the marshal cache: brokernet's WireFormatInfo offers cacheEnabled=false
// and sizePrefixDisabled=false, and ActiveMQ negotiates the AND of both
// sides (OpenWireFormat.renegotiateWireFormat). The WireFormatInfo exchange
// itself is loose. The size prefix lets the reader skip commands it does
// not know, and bounds what a frame can make brokernet allocate.
//
// # Files
//
// The three transports (stomp, openwire, amqp) are cut the same way, by
// concern: a concern has the same file name in each.
//
//   - conn.go: the Conn type and its state, Info, Events/Done/Err, BrokerID, Close and Abort.
//   - dial.go: Dial, the WireFormatInfo and ConnectionInfo handshake, the keep-alive.
//   - subscribe.go: Subscribe, Unsubscribe, Browse, DestroyDurable, WatchConsumers, OwnConsumer.
//   - send.go: Send, Flush and Commit (the held tail message, the send transaction).
//   - settle.go: Settle and Sync (held acks, the ack tail, the BEGIN/ROLLBACK pair).
//   - message.go: mapping between transport.Message and an OpenWire message.
//   - reader.go: the read loop, dispatch of commands into events, advisories, the event queue.
//   - writer.go: writing commands and awaiting their responses, the reader's urgent writes, the write loop.
//   - temp.go: mirrored temporary destinations, destination and temporary destination advisories.
//   - durablesync.go: listing the broker's durable subscriptions (BrokerSubscriptionInfo).
//   - commands.go: the OpenWire commands and data structures, and their marshalling.
//   - props.go: typed property maps (primitive maps).
//   - wire.go: tight and loose encoding of primitive values.
//   - frame.go: size-prefixed frames, encoding and decoding commands.
//   - uri.go, uri_neutral.go: the openwire:// URI.
package openwire
