package testbroker

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"github.com/go-stomp/stomp/v3"
)

// A census counts what a broker holds by its advisories: ActiveMQ replays one
// advisory per existing temporary destination (or connection) to a new
// subscriber of the advisory topic, in order, before any later event. So the
// census subscribes, then makes one thing of the kind itself (the marker),
// and counts the replay up to the marker's own advisory: no timeout decides
// when the replay is over.

// TempDestinations returns the temporary queues and topics the broker holds,
// those of the census's own connection excepted.
func (b *ActiveMQ) TempDestinations(ctx context.Context) (queues, topics int, err error) {
	ctx, cancel := withDefaultTimeout(ctx)
	defer cancel()
	conn, session, err := b.censusConn(ctx)
	if err != nil {
		return 0, 0, err
	}
	defer conn.MustDisconnect() //nolint:errcheck // nothing to do about it
	count := func(kind string) (int, error) {
		adv := "/topic/ActiveMQ.Advisory.TempQueue"
		if kind == "temp-topic" {
			adv = "/topic/ActiveMQ.Advisory.TempTopic"
		}
		sub, err := conn.Subscribe(adv, stomp.AckAuto)
		if err != nil {
			return 0, err
		}
		// The marker: a temporary destination of this connection.
		if _, err := conn.Subscribe("/"+kind+"/census", stomp.AckAuto); err != nil {
			return 0, err
		}
		live := map[string]bool{}
		for {
			select {
			case <-ctx.Done():
				return 0, fmt.Errorf("testbroker: census of %s on %s: %w", kind, b.name, ctx.Err())
			case msg, ok := <-sub.C:
				if !ok || msg.Err != nil {
					return 0, fmt.Errorf("testbroker: census of %s on %s: subscription ended", kind, b.name)
				}
				var body struct {
					DestinationInfo struct {
						Destination struct {
							Name string `json:"string"`
						} `json:"destination"`
						OperationType int `json:"operationType"`
					}
				}
				if err := json.Unmarshal(msg.Body, &body); err != nil {
					return 0, fmt.Errorf("testbroker: census: %w: %s", err, msg.Body)
				}
				name := body.DestinationInfo.Destination.Name
				if strings.HasPrefix(name, session+":") {
					return len(live), nil
				}
				if body.DestinationInfo.OperationType == 0 {
					live[name] = true
				} else {
					delete(live, name)
				}
			}
		}
	}
	if queues, err = count("temp-queue"); err != nil {
		return 0, 0, err
	}
	if topics, err = count("temp-topic"); err != nil {
		return 0, 0, err
	}
	return queues, topics, nil
}

// Connections returns the client connections the broker holds (every
// ConnectionInfo it registered, several per transport where a client sends
// several), the census's own excepted.
func (b *ActiveMQ) Connections(ctx context.Context) (int, error) {
	ctx, cancel := withDefaultTimeout(ctx)
	defer cancel()
	conn, session, err := b.censusConn(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.MustDisconnect() //nolint:errcheck // nothing to do about it
	sub, err := conn.Subscribe("/topic/ActiveMQ.Advisory.Connection", stomp.AckAuto)
	if err != nil {
		return 0, err
	}
	// The marker connects on another socket: the broker must have handled the
	// SUBSCRIBE (and its replay) first. It handles a connection's frames in
	// order, so a receipt for a frame after it says so.
	if err := conn.Send("/topic/ActiveMQ.Census.Sync", "", nil, stomp.SendOpt.Receipt); err != nil {
		return 0, fmt.Errorf("testbroker: census: %w", err)
	}
	marker, markerSession, err := b.censusConn(ctx)
	if err != nil {
		return 0, err
	}
	defer marker.MustDisconnect() //nolint:errcheck // nothing to do about it
	live := map[string]bool{}
	for {
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("testbroker: census of connections on %s: %w", b.name, ctx.Err())
		case msg, ok := <-sub.C:
			if !ok || msg.Err != nil {
				return 0, fmt.Errorf("testbroker: census of connections on %s: subscription ended", b.name)
			}
			var body struct {
				ConnectionInfo *struct {
					ConnectionID struct {
						Value string `json:"value"`
					} `json:"connectionId"`
				}
				RemoveInfo *struct {
					ObjectID struct {
						Value string `json:"value"`
					} `json:"objectId"`
				}
			}
			if err := json.Unmarshal(msg.Body, &body); err != nil {
				return 0, fmt.Errorf("testbroker: census: %w: %s", err, msg.Body)
			}
			switch {
			case body.ConnectionInfo != nil:
				id := body.ConnectionInfo.ConnectionID.Value
				if id == markerSession {
					delete(live, session)
					return len(live), nil
				}
				if _, census := censusConns.Load(id); !census {
					live[id] = true
				}
			case body.RemoveInfo != nil:
				delete(live, body.RemoveInfo.ObjectID.Value)
			}
		}
	}
}

// withDefaultTimeout bounds ctx by DefaultStatsTimeout unless it has a deadline.
func withDefaultTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, DefaultStatsTimeout)
}

// censusConn connects over STOMP and returns the connection and its ActiveMQ
// connection id (CONNECTED's session).
func (b *ActiveMQ) censusConn(ctx context.Context) (*stomp.Conn, string, error) {
	conn, err := stomp.DialWithContext(ctx, "tcp", b.StompAddr(),
		stomp.ConnOpt.Host("localhost"),
		stomp.ConnOpt.HeartBeat(0, 0),
		stomp.ConnOpt.Logger(QuietLogger{}),
	)
	if err != nil {
		return nil, "", fmt.Errorf("testbroker: census: connecting to %s: %w", b.name, err)
	}
	censusConns.Store(conn.Session(), true)
	return conn, conn.Session(), nil
}

// censusConns are the connection ids of every census connection of this
// process, so that a census does not count those of an earlier one that the
// broker has not removed yet (it did: one connection too many, in CI).
var censusConns sync.Map
