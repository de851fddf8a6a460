// Package transporttest holds what every transport's tests share: the
// conformance suite of the transport.Conn contract (Run), which each
// transport runs against real brokers and the bridge's fake runs always, and
// the helpers the transports' own tests read events with.
package transporttest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/brokernet/brokernet/transport"
)

// DefaultTimeout is how long a helper waits for an event unless told.
const DefaultTimeout = 30 * time.Second

// Dial dials ep with opts within 20 s, failing the test if it cannot, and
// aborts the connection when the test ends.
func Dial(t testing.TB, ep transport.Endpoint, opts transport.DialOptions) transport.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), DefaultTimeout)
	defer cancel()
	c, err := ep.Dial(ctx, opts)
	if err != nil {
		t.Fatalf("dialling %s: %v", ep, err)
	}
	t.Cleanup(c.Abort)
	return c
}

// Next returns the next event of c, failing the test if none comes within
// timeout or the stream ends.
func Next(t testing.TB, c transport.Conn, timeout time.Duration) transport.Event {
	t.Helper()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case ev, ok := <-c.Events():
		if !ok {
			t.Fatalf("events closed: %v", c.Err())
		}
		return ev
	case <-timer.C:
		t.Fatalf("no event within %s", timeout)
	}
	return transport.Event{}
}

// WaitToken reads events of c until tok is confirmed or refused (within
// DefaultTimeout in all), and returns that event with the events met on the
// way, in order.
func WaitToken(t testing.TB, c transport.Conn, tok transport.Token) (transport.Event, []transport.Event) {
	t.Helper()
	return WaitTokenWithin(t, c, tok, DefaultTimeout)
}

// WaitTokenWithin is WaitToken with a deadline of its own.
func WaitTokenWithin(t testing.TB, c transport.Conn, tok transport.Token, timeout time.Duration) (transport.Event, []transport.Event) {
	t.Helper()
	var other []transport.Event
	deadline := time.Now().Add(timeout)
	for {
		ev := Next(t, c, time.Until(deadline))
		if (ev.Kind == transport.Confirmed || ev.Kind == transport.Refused) && ev.Token == tok {
			return ev, other
		}
		other = append(other, ev)
	}
}

// Confirm waits for tok (see WaitToken) and fails the test unless it is
// Confirmed; what describes the request in the failure.
func Confirm(t testing.TB, c transport.Conn, tok transport.Token, what string) []transport.Event {
	t.Helper()
	ev, other := WaitToken(t, c, tok)
	if ev.Kind != transport.Confirmed {
		t.Fatalf("%s: %s, want confirmed (err %v)", what, kindName(ev.Kind), ev.Err)
	}
	return other
}

// Eventually polls cond every 5 ms until it returns nil, failing the test
// with its last error once timeout has passed.
func Eventually(t testing.TB, timeout time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %v", timeout, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// WaitFor polls cond until it holds, failing the test with what once timeout
// has passed.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	Eventually(t, timeout, func() error {
		if cond() {
			return nil
		}
		return fmt.Errorf("timed out waiting for %s", what)
	})
}

// kindName names an event kind for failure messages.
func kindName(k transport.EventKind) string {
	switch k {
	case transport.Delivery:
		return "delivery"
	case transport.Confirmed:
		return "confirmed"
	case transport.Refused:
		return "refused"
	case transport.Consumer:
		return "consumer advisory"
	case transport.BadConsumer:
		return "bad advisory"
	case transport.DestinationChanged:
		return "destination change"
	case transport.BrowseDone:
		return "browse done"
	}
	return fmt.Sprintf("event kind %d", k)
}
