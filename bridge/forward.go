package bridge

import (
	"strconv"

	"github.com/brokernet/brokernet/hop"
	"github.com/brokernet/brokernet/transport"
)

// outgoing returns the message to send to the remote broker remoteID for m,
// received locally: the same message, recording that it left broker localID.
//
// It keeps m's id (see identity.go), except toward a broker the message was
// on before, which gets an id of its own (revisitID).
//
// The hop path is "|id1|id2|": the brokers the message has left, in order. The
// demand subscription's selector keeps the local broker from dispatching a message
// whose path holds the remote broker or whose hop count reached messageTTL, so a
// message never revisits a broker and never travels further than allowed. A topic
// message also carries the brokers it is sent for (forIDs), which topic demand
// subscriptions there select on. brokernet's own headers come first.
func outgoing(m *transport.Message, localID, remoteID string, forIDs []string) *transport.Message {
	out := *m
	out.Redelivered = false
	var path string
	var hops int
	props := make([]transport.Property, 3, len(m.Props)+4) // room for IDHeader
	for _, p := range m.Props {
		switch p.Name {
		case hop.PathHeader:
			path, _ = p.Value.(string)
			continue
		case hop.HopsHeader:
			switch v := p.Value.(type) {
			case string:
				hops, _ = strconv.Atoi(v)
			case int32:
				hops = int(v)
			case int64:
				hops = int(v)
			}
			continue
		case hop.ForHeader:
			continue
		}
		props = append(props, p)
	}
	if out.ID != "" && hop.PathHolds(path, remoteID) {
		out.ID = revisitID(out.ID, hops+1)
	}
	props[0] = transport.Property{Name: hop.PathHeader, Value: hop.AppendPath(path, localID)}
	props[1] = transport.Property{Name: hop.HopsHeader, Value: strconv.Itoa(hops + 1)}
	if len(forIDs) > 0 {
		props[2] = transport.Property{Name: hop.ForHeader, Value: hop.FormatPath(forIDs)}
	} else {
		props = append(props[:2], props[3:]...)
	}
	out.Props = props
	return &out
}
