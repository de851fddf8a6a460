package bridge

import (
	"strconv"
	"strings"
)

// Message identity. A forwarded message keeps its id where the remote's
// protocol can set it (transport.Info.KeepsID: an ActiveMQ MessageId over
// OpenWire, any message-id over AMQP 1.0), as ActiveMQ's networkConnector keeps the MessageId
// (DemandForwardingBridgeSupport.configureMessage copies the message and
// changes its producerId, not its messageId). What that buys, on ActiveMQ
// 5.17 (read from its source, measured in identity_test.go):
//
//   - A JMS application sees on every broker the JMSMessageID the producer
//     got, and can reconcile by it.
//   - A message the bridge sends again after a crash (forwarded, not yet
//     acknowledged locally) is dropped by the receiving broker: the queue's
//     cursor audit (policyEntry enableAudit, on by default: ActiveMQMessageAudit
//     keyed by the MessageId's producer id and sequence, 2,048 deep per
//     producer) refuses a send it has seen ("cursor got duplicate send"), and
//     KahaDB refuses to index a message id its destination still holds
//     ("Duplicate message add attempt rejected"). Measured after a bridge
//     SIGKILL: B dropped every persistent message sent again, and a JMS
//     application saw none twice. ActiveMQ 5.17 audits no non-persistent
//     send, and its JMS client (whose connection has an audit too) let such
//     copies through; they at least carry their first copy's id.
//
// Over STOMP the broker assigns the id (ActiveMQ's STOMP converter discards a
// SEND's message-id header), so the bridge carries the original in IDHeader.
//
// The same audits would drop a legitimate message: one that comes back to a
// broker it was on before. The hop filter forwards nothing to a broker in a
// message's path, but a replay does (replay.go: a queue message taken back to
// its origin when its consumer moved there). ActiveMQ's own bridge keeps the
// id on a replay too; its origin accepts it because the network
// subscription's acknowledgement had rolled the id back out of the queue's
// audit (Queue.java: only for a consumer with networkSubscription set, or a
// poison ack). brokernet's demand subscriptions are ordinary consumers, so the
// origin still remembers the id and would drop the replay as a duplicate — a
// loss. A message forwarded to a broker in its path therefore gets an id of
// its own, derived from its id and its hop count (revisitID): distinct from
// every id the broker saw for it, and the same when a crashed bridge sends the
// same replay again, so that one is still dropped as a duplicate.

// revisitID returns the id of a message with id going to a broker it was on
// before, on its hop-th hop. An ActiveMQ MessageId
// ("ID:connection:session:producer:sequence", parsed from the end as
// ActiveMQ's MessageId does) gets the suffix on its connection id, so that its
// producer id differs (ActiveMQ's audits key on the producer id and sequence)
// and it stays a MessageId; any other id gets it at its end.
func revisitID(id string, hop int) string {
	suffix := "-bnr" + strconv.Itoa(hop)
	if p, ok := producerConnEnd(id); ok {
		return id[:p] + suffix + id[p:]
	}
	return id + suffix
}

// producerConnEnd returns where the connection id ends in an ActiveMQ
// MessageId: before ":session:producer:sequence", three integers.
func producerConnEnd(id string) (int, bool) {
	end := len(id)
	for range 3 {
		p := strings.LastIndexByte(id[:end], ':')
		if p <= 0 {
			return 0, false
		}
		if _, err := strconv.ParseInt(id[p+1:end], 10, 64); err != nil {
			return 0, false
		}
		end = p
	}
	return end, true
}
