package bridge

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/go-stomp/stomp/v3/frame"

	"github.com/brokernet/brokernet/advisory"
	"github.com/brokernet/brokernet/transport/stomp"
)

// dropOnForward lists MESSAGE headers that belong to the delivery, not to the
// message: they are recomputed or meaningless on the remote broker. Everything else
// — persistent, priority, expires, timestamp, correlation-id, reply-to, type,
// content-type and every application header — is copied unchanged.
var dropOnForward = map[string]bool{
	frame.Subscription:  true,
	frame.MessageId:     true,
	frame.Ack:           true,
	frame.Destination:   true,
	frame.ContentLength: true,
	frame.Receipt:       true,
	frame.Transaction:   true,
	"redelivered":       true,
	advisory.PathHeader: true,
	advisory.HopsHeader: true,
	advisory.ForHeader:  true,
}

// forwardFrame turns a MESSAGE received locally into the SEND for the remote broker,
// inside transaction tx, recording that it left broker localID.
//
// The hop path is "|id1|id2|": the brokers the message has left, in order. The
// demand subscription's selector keeps the local broker from dispatching a message
// whose path holds the remote broker or whose hop count reached messageTTL, so a
// message never revisits a broker and never travels further than allowed.
func forwardFrame(m *frame.Frame, localID, tx string, forIDs []string) *frame.Frame {
	h := m.Header
	kv := make([]string, 0, 2*(h.Len()+4))
	kv = append(kv, frame.Destination, h.Get(frame.Destination), frame.Transaction, tx)
	hops, _ := strconv.Atoi(h.Get(advisory.HopsHeader))
	kv = append(kv,
		advisory.PathHeader, advisory.AppendPath(h.Get(advisory.PathHeader), localID),
		advisory.HopsHeader, strconv.Itoa(hops+1))
	if len(forIDs) > 0 {
		kv = append(kv, advisory.ForHeader, advisory.FormatPath(forIDs))
	}
	if _, ok := h.Contains(frame.ContentLength); ok {
		// A content-length makes ActiveMQ build a BytesMessage, its absence a
		// TextMessage: keep whichever the producer chose.
		kv = append(kv, frame.ContentLength, strconv.Itoa(len(m.Body)))
	}
	copied := len(kv)
	// STOMP says the first of repeated headers wins; send only that one. A linear
	// scan of what was copied is fastest for the usual dozen headers; past that a
	// set keeps the check linear in the header count (the decoder allows 1000).
	var seen map[string]struct{}
	if h.Len() > 16 {
		seen = make(map[string]struct{}, h.Len())
	}
	for i := 0; i < h.Len(); i++ {
		k, v := h.GetAt(i)
		if dropOnForward[k] {
			continue
		}
		if seen != nil {
			if _, dup := seen[k]; dup {
				continue
			}
			seen[k] = struct{}{}
		} else if repeated(kv[copied:], k) {
			continue
		}
		kv = append(kv, k, v)
	}
	// frame.Header has no way to take a slice as it is; NewHeader copies it once.
	return &frame.Frame{Command: frame.SEND, Header: frame.NewHeader(kv...), Body: m.Body}
}

// repeated reports whether key is among the keys of the key, value list kv.
func repeated(kv []string, key string) bool {
	for i := 0; i < len(kv); i += 2 {
		if kv[i] == key {
			return true
		}
	}
	return false
}

const connectionAdvisory = "/topic/ActiveMQ.Advisory.Connection"

// brokerID returns the broker's id: override when set, else what the broker tells.
// ActiveMQ replays a connection advisory for every open connection — ours included —
// to a new subscriber, and puts its brokerId on it as originBrokerId.
func brokerID(ctx context.Context, c *stomp.Conn, override string) (string, error) {
	if override != "" {
		return override, nil
	}
	if c.Flavour() != stomp.ActiveMQ {
		return "", fmt.Errorf("%s (%s) does not tell its broker id; configure it (--local-id/--remote-id)", c.URI(), c.Server())
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := c.Subscribe(ctx, identitySub, connectionAdvisory, "auto",
		advisory.TransformationHeader, advisory.TransformationJSON); err != nil {
		return "", err
	}
	defer c.Write(context.WithoutCancel(ctx), frame.New(frame.UNSUBSCRIBE, frame.Id, identitySub))
	for {
		select {
		case f, ok := <-c.Deliveries():
			if !ok {
				return "", c.Err()
			}
			if f.Header.Get(frame.Subscription) != identitySub {
				continue
			}
			if id := f.Header.Get("originBrokerId"); id != "" {
				return id, nil
			}
		case <-ctx.Done():
			return "", fmt.Errorf("waiting for the broker id on %s: %w", connectionAdvisory, ctx.Err())
		}
	}
}
