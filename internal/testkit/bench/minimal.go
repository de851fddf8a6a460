package bench

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	gostomp "github.com/go-stomp/stomp/v3"
)

// Minimal is the benchmark's yardstick for its own load generator: a producer
// and a consumer written directly on github.com/go-stomp/stomp/v3 the way a
// user would write them (plain Send without receipts, one subscription with ack
// mode auto and the broker's default prefetch). If the harness's producer and
// consumer move fewer messages per second on a path than this pair does, the
// harness, not the path, is the limit.
//
// The pair sends text messages (no content-length), as the harness does, and
// carries the harness's phase, sequence and timestamp headers, so that losses,
// duplicates and latencies are counted the same way.
type Minimal struct {
	Recorder
	prod, cons *gostomp.Conn
	sub        *gostomp.Subscription
	dest       string
	done       chan struct{}

	closeOnce sync.Once
	closeErr  error
}

// DialMinimal connects the pair: the producer to prodAddr, the consumer
// (subscribed to dest) to consAddr, both host:port of STOMP connectors.
func DialMinimal(prodAddr, consAddr, dest string) (*Minimal, error) {
	cons, err := gostomp.Dial("tcp", consAddr)
	if err != nil {
		return nil, fmt.Errorf("go-stomp consumer dialing %s: %w", consAddr, err)
	}
	// go-stomp's Subscribe does not wait for the broker; the first phase
	// (a warm-up) waits for its messages instead.
	sub, err := cons.Subscribe(dest, gostomp.AckAuto)
	if err != nil {
		cons.MustDisconnect()
		return nil, fmt.Errorf("go-stomp consumer subscribing to %s: %w", dest, err)
	}
	prod, err := gostomp.Dial("tcp", prodAddr)
	if err != nil {
		cons.MustDisconnect()
		return nil, fmt.Errorf("go-stomp producer dialing %s: %w", prodAddr, err)
	}
	m := &Minimal{prod: prod, cons: cons, sub: sub, dest: dest, done: make(chan struct{})}
	go m.run()
	return m, nil
}

func (m *Minimal) run() {
	defer close(m.done)
	for msg := range m.sub.C {
		if msg.Err != nil {
			return
		}
		m.record(msg.Header.Get(HeaderPhase), msg.Header.Get(HeaderSeq), msg.Header.Get(HeaderTS), time.Now())
	}
}

// Send sends n messages of phase p as fast as go-stomp takes them and returns
// when the last one was handed to the connection (go-stomp confirms nothing
// without a receipt). Call Expect first.
func (m *Minimal) Send(p Phase, n int, body []byte) (time.Time, error) {
	start := time.Now()
	tag := phaseTags[p]
	for i := range n {
		err := m.prod.Send(m.dest, "", body,
			gostomp.SendOpt.NoContentLength,
			gostomp.SendOpt.Header(HeaderPhase, tag),
			gostomp.SendOpt.Header(HeaderSeq, strconv.Itoa(i)),
			gostomp.SendOpt.Header(HeaderTS, strconv.FormatInt(time.Now().UnixNano(), 10)))
		if err != nil {
			return start, fmt.Errorf("go-stomp send %d of %d: %w", i+1, n, err)
		}
	}
	return start, nil
}

// Wait waits until every message of phase p arrived, or until nothing new
// arrived for stall, or ctx ends, or the subscription ended.
func (m *Minimal) Wait(ctx context.Context, p Phase, stall time.Duration) bool {
	return m.wait(ctx, p, stall, m.done)
}

// Close disconnects both connections (each DISCONNECT waits for its receipt,
// so every SEND before it was processed). Later calls return the first's result.
func (m *Minimal) Close() error {
	m.closeOnce.Do(func() {
		m.closeErr = errors.Join(m.sub.Unsubscribe(), m.prod.Disconnect(), m.cons.Disconnect())
		select {
		case <-m.done:
		case <-time.After(5 * time.Second):
		}
	})
	return m.closeErr
}
