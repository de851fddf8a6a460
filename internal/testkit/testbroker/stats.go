package testbroker

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/go-stomp/stomp/v3"
)

// ErrNoSuchDestination is returned by QueueStats and TopicStats when the
// broker has no destination of that name (it has never been used, or was
// garbage-collected).
var ErrNoSuchDestination = errors.New("testbroker: no such destination")

// DestStats are the per-destination counters reported by ActiveMQ's
// statisticsBrokerPlugin.
type DestStats struct {
	Size          int64 // messages currently held (pending + in flight)
	EnqueueCount  int64
	DequeueCount  int64
	ConsumerCount int64
	DispatchCount int64
	InflightCount int64
	ExpiredCount  int64
	ProducerCount int64
}

// DefaultStatsTimeout bounds a statistics query when the context has no deadline.
const DefaultStatsTimeout = 5 * time.Second

// Plugin protocol (StatisticsBroker in activemq-broker): a message with a
// reply-to sent to <type>/ActiveMQ.Statistics.Destination.<name> makes the
// broker send one map message per destination of that type matching <name>
// (wildcards allowed) to the reply-to. If the physical name also contains
// statsEndOfList, that string is removed from the query and an empty map
// message follows the results, so "no such destination" needs no timeout.
const (
	statsPrefix    = "ActiveMQ.Statistics.Destination."
	statsEndOfList = "ActiveMQ.Statistics.Destination.List.End.With.Null"
)

// QueueStats returns the counters of queue (its physical name, without
// /queue/). With wildcards (* or >) the counters of all matching queues are
// summed. It returns ErrNoSuchDestination if no queue matches.
func (b *ActiveMQ) QueueStats(ctx context.Context, queue string) (DestStats, error) {
	return b.destStats(ctx, "/queue/", queue)
}

// TopicStats is QueueStats for topics.
func (b *ActiveMQ) TopicStats(ctx context.Context, topic string) (DestStats, error) {
	return b.destStats(ctx, "/topic/", topic)
}

func (b *ActiveMQ) destStats(ctx context.Context, kind, name string) (DestStats, error) {
	maps, err := b.RawDestinationStats(ctx, kind+name)
	if err != nil {
		return DestStats{}, err
	}
	if len(maps) == 0 {
		return DestStats{}, fmt.Errorf("%w: %s%s on %s", ErrNoSuchDestination, kind, name, b.name)
	}
	var s DestStats
	for _, m := range maps {
		s.Size += mapInt(m, "size")
		s.EnqueueCount += mapInt(m, "enqueueCount")
		s.DequeueCount += mapInt(m, "dequeueCount")
		s.ConsumerCount += mapInt(m, "consumerCount")
		s.DispatchCount += mapInt(m, "dispatchCount")
		s.InflightCount += mapInt(m, "inflightCount")
		s.ExpiredCount += mapInt(m, "expiredCount")
		s.ProducerCount += mapInt(m, "producerCount")
	}
	return s, nil
}

// RawDestinationStats queries the statistics plugin for dest ("/queue/NAME"
// or "/topic/NAME", wildcards allowed) and returns one map per matching
// destination, as sent by the broker (keys such as size, enqueueCount,
// dequeueCount, dispatchCount, inflightCount, expiredCount, consumerCount,
// producerCount, memoryUsage, destinationName, brokerName, brokerId).
func (b *ActiveMQ) RawDestinationStats(ctx context.Context, dest string) ([]map[string]any, error) {
	var kind, name string
	switch {
	case len(dest) > 7 && dest[:7] == "/queue/":
		kind, name = "/queue/", dest[7:]
	case len(dest) > 7 && dest[:7] == "/topic/":
		kind, name = "/topic/", dest[7:]
	default:
		return nil, fmt.Errorf("testbroker: stats destination %q must start with /queue/ or /topic/", dest)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultStatsTimeout)
		defer cancel()
	}
	conn, err := stomp.DialWithContext(ctx, "tcp", b.StompAddr(),
		stomp.ConnOpt.Host("localhost"),
		stomp.ConnOpt.HeartBeat(0, 0),
		stomp.ConnOpt.Logger(QuietLogger{}),
	)
	if err != nil {
		return nil, fmt.Errorf("testbroker: stats: connecting to %s: %w", b.name, err)
	}
	defer conn.MustDisconnect() //nolint:errcheck // nothing to do about it

	var rnd [8]byte
	rand.Read(rnd[:]) //nolint:errcheck // never fails
	replyTo := "/temp-queue/stats-" + hex.EncodeToString(rnd[:])
	sub, err := conn.Subscribe(replyTo, stomp.AckAuto,
		stomp.SubscribeOpt.Header("transformation", "jms-map-json"))
	if err != nil {
		return nil, fmt.Errorf("testbroker: stats: %w", err)
	}
	// Same connection: the broker handles SUBSCRIBE (creating the temp
	// queue) before this SEND.
	err = conn.Send(kind+statsPrefix+name+statsEndOfList, "", nil,
		stomp.SendOpt.NoContentLength,
		stomp.SendOpt.Header("reply-to", replyTo))
	if err != nil {
		return nil, fmt.Errorf("testbroker: stats: %w", err)
	}
	var out []map[string]any
	for {
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("testbroker: stats for %s on %s: no end-of-list reply: %w", dest, b.name, ctx.Err())
		case msg, ok := <-sub.C:
			if !ok {
				return nil, errors.New("testbroker: stats: subscription closed")
			}
			if msg.Err != nil {
				return nil, fmt.Errorf("testbroker: stats: %w", msg.Err)
			}
			m, err := ParseMapMessageJSON(msg.Body)
			if err != nil {
				return nil, fmt.Errorf("testbroker: stats: %w", err)
			}
			if len(m) == 0 { // end of list
				return out, nil
			}
			out = append(out, m)
		}
	}
}

// ParseMapMessageJSON decodes the body of a JMS MapMessage delivered over
// STOMP with `transformation:jms-map-json` (XStream + Jettison), e.g.
//
//	{"map":{"entry":[{"string":"size","long":1},{"string":["brokerName","A"]}]}}
//
// An empty map is {"map":""}; a single entry is an object, not an array.
// String values come as the second element of the "string" array; other
// values are keyed by their Java type (long, int, double, boolean, ...).
// Numbers are returned as json.Number, strings as string.
func ParseMapMessageJSON(body []byte) (map[string]any, error) {
	var top struct {
		Map json.RawMessage `json:"map"`
	}
	if err := json.Unmarshal(body, &top); err != nil {
		return nil, fmt.Errorf("map message JSON %q: %w", truncate(body), err)
	}
	out := map[string]any{}
	raw := bytes.TrimSpace(top.Map)
	if len(raw) == 0 || raw[0] != '{' { // "" for an empty map
		return out, nil
	}
	var m struct {
		Entry json.RawMessage `json:"entry"`
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("map message JSON %q: %w", truncate(body), err)
	}
	var entries []map[string]json.RawMessage
	e := bytes.TrimSpace(m.Entry)
	switch {
	case len(e) == 0:
	case e[0] == '[':
		if err := json.Unmarshal(e, &entries); err != nil {
			return nil, fmt.Errorf("map message JSON %q: %w", truncate(body), err)
		}
	default:
		var one map[string]json.RawMessage
		if err := json.Unmarshal(e, &one); err != nil {
			return nil, fmt.Errorf("map message JSON %q: %w", truncate(body), err)
		}
		entries = append(entries, one)
	}
	for _, ent := range entries {
		key, val, err := mapEntry(ent)
		if err != nil {
			return nil, fmt.Errorf("map message JSON %q: %w", truncate(body), err)
		}
		out[key] = val
	}
	return out, nil
}

func mapEntry(ent map[string]json.RawMessage) (string, any, error) {
	rawKey, ok := ent["string"]
	if !ok {
		return "", nil, errors.New("entry without a string key")
	}
	var key string
	if err := json.Unmarshal(rawKey, &key); err == nil {
		// Key alone; the value is under its type name.
		for typ, raw := range ent {
			if typ == "string" {
				continue
			}
			dec := json.NewDecoder(bytes.NewReader(raw))
			dec.UseNumber()
			var v any
			if err := dec.Decode(&v); err != nil {
				return "", nil, err
			}
			return key, v, nil
		}
		return key, nil, nil
	}
	// ["key","value"]: a String entry. Jettison may render numeric-looking
	// strings as JSON numbers, so accept any scalar and keep its text.
	var kv []json.RawMessage
	if err := json.Unmarshal(rawKey, &kv); err != nil || len(kv) == 0 {
		return "", nil, fmt.Errorf("bad entry key %s", rawKey)
	}
	key = jsonScalarText(kv[0])
	if len(kv) == 1 {
		return key, "", nil
	}
	return key, jsonScalarText(kv[1]), nil
}

func jsonScalarText(raw json.RawMessage) string {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s
	}
	return string(bytes.TrimSpace(raw))
}

func mapInt(m map[string]any, key string) int64 {
	switch v := m[key].(type) {
	case json.Number:
		if i, err := v.Int64(); err == nil {
			return i
		}
		if f, err := v.Float64(); err == nil {
			return int64(f)
		}
	case string:
		if i, err := strconv.ParseInt(v, 10, 64); err == nil {
			return i
		}
	}
	return 0
}

func truncate(b []byte) string {
	if len(b) > 200 {
		return string(b[:200]) + "..."
	}
	return string(b)
}

// QuietLogger is a stomp.Logger that discards everything (go-stomp logs an
// INFO line for every subscription still open at disconnect).
type QuietLogger struct{}

func (QuietLogger) Debugf(string, ...any)   {}
func (QuietLogger) Infof(string, ...any)    {}
func (QuietLogger) Warningf(string, ...any) {}
func (QuietLogger) Errorf(string, ...any)   {}
func (QuietLogger) Debug(string)            {}
func (QuietLogger) Info(string)             {}
func (QuietLogger) Warning(string)          {}
func (QuietLogger) Error(string)            {}

// CheckQueueConsumers returns nil when queue q has exactly n consumers, and an
// error saying how many it has otherwise (for polling in tests).
func (b *ActiveMQ) CheckQueueConsumers(q string, n int64) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := b.QueueStats(ctx, q)
	if err != nil {
		return err
	}
	if st.ConsumerCount != n {
		return fmt.Errorf("queue %s on %s has %d consumers, want %d", q, b.Name(), st.ConsumerCount, n)
	}
	return nil
}
