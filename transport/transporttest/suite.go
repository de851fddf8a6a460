package transporttest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/brokernet/brokernet/destination"
	"github.com/brokernet/brokernet/transport"
)

// Features says what the transport under test reports and where its broker
// or protocol differs from what the suite checks by default. The zero value
// is a transport without selectors or transactions that refuses a request
// with a Refused event, as a plain AMQP 1.0 one would.
type Features struct {
	// Protocol is the Info.Protocol the transport reports.
	Protocol string
	// Flavour is the Info.Flavour of the broker under test; UnknownFlavour
	// skips the check (the bridge's fake).
	Flavour transport.Flavour
	// Selectors is Info.Selectors: subscriptions may carry a JMS selector.
	// Without, a subscription with one must be refused (an error wrapping
	// transport.ErrUnsupported, or a Refused event).
	Selectors bool
	// BadSelector says the broker checks selectors and refuses a malformed
	// one (ActiveMQ). The fake does not parse selectors.
	BadSelector bool
	// RefusalEndsConnection says the protocol cannot refuse one request: a
	// refused subscription ends the connection with an error wrapping
	// transport.ErrRefused instead of a Refused event (STOMP: an ERROR
	// frame, see stomp.BrokerConn.Subscribe).
	RefusalEndsConnection bool
	// Transactions is Info.Transactions: Commit is atomic over a batch.
	Transactions bool
	// ConnectionID says Info.ConnectionID is known (not "").
	ConnectionID bool
	// UnsubscribeUnmarked says the deliveries Unsubscribe gives back come
	// again without the Redelivered mark (ActiveMQ over OpenWire: measured
	// with the RemoveInfo's lastDeliveredSequenceId -1), where those a
	// connection's end gives back have it.
	UnsubscribeUnmarked bool
	// UnsubscribeHolds says Unsubscribe does not give the unsettled
	// deliveries back while the connection lives: they come back when it
	// ends (RabbitMQ's STOMP: UNSUBSCRIBE cancels the consumer, and its
	// channel keeps what it had not acknowledged). The Conn doc says they
	// return to the broker.
	UnsubscribeHolds bool
	// ConfirmsEach says the connection confirms messages one by one
	// (transport.ConfirmsEach finds it): ActiveMQ over OpenWire and STOMP.
	ConfirmsEach bool
	// NewID returns a fresh message id that Send keeps as the message's own
	// (Info.KeepsID holds for it); nil says the transport keeps none
	// (Info.KeepsID is nil: the broker assigns ids).
	NewID func() string
}

// Run runs the conformance suite of the transport.Conn contract (the doc of
// package transport and of Conn) against the broker that broker returns an
// endpoint of. broker is called once per subtest, which dials it as often as
// it needs (a publisher and a consumer, a second consumer after the first
// ended): every connection it dials must reach the same broker. The suite
// uses queues of its own, named afresh, so one broker can serve every
// subtest, and every run.
func Run(t *testing.T, f Features, broker func(t *testing.T) transport.Endpoint) {
	run := strconv.FormatInt(time.Now().UnixNano()%1e9, 36)
	var n atomic.Int64
	sub := func(name string, test func(s *suite)) {
		t.Run(name, func(t *testing.T) {
			s := &suite{t: t, f: f, ep: broker(t), prefix: fmt.Sprintf("transporttest.%s.%d", run, n.Add(1))}
			test(s)
		})
	}
	sub("Info describes the broker as the features say", (*suite).info)
	sub("Subscribe is confirmed", (*suite).subscribeConfirmed)
	sub("a subscription the broker cannot take is refused", (*suite).refused)
	sub("committed batches are confirmed and delivered in order, then settled and synced", (*suite).batches)
	sub("deliveries and confirmations share one stream, each in order", (*suite).oneStream)
	sub("messages sent one by one are confirmed each, in order, and delivered in order", (*suite).each)
	if f.NewID != nil {
		sub("a sent message keeps its id", (*suite).keepsID)
	}
	sub("settling in cumulative mode takes the deliveries given, and Unsubscribe gives back the rest redelivered", (*suite).cumulative)
	sub("settling in individual mode takes only the delivery given, and Abort gives back the rest redelivered", (*suite).individual)
	sub("Close returns nil once what was written before is processed, and again after", (*suite).close)
	sub("Abort ends the connection at once and again", (*suite).abort)
	sub("calls after Close fail with ErrClosed", (*suite).afterClose)
}

// suite is one subtest's state.
type suite struct {
	t      *testing.T
	f      Features
	ep     transport.Endpoint
	prefix string // of the subtest's queue names
	queues int
}

func (s *suite) dial() transport.Conn {
	s.t.Helper()
	return Dial(s.t, s.ep, transport.DialOptions{})
}

func (s *suite) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), DefaultTimeout)
	s.t.Cleanup(cancel)
	return ctx
}

// queue returns a queue of this subtest's own.
func (s *suite) queue() destination.Destination {
	s.queues++
	return destination.Destination{Kind: destination.Queue, Name: fmt.Sprintf("%s.q%d", s.prefix, s.queues)}
}

// message is message seq for q: its body is "q seq", its seq property seq.
func message(q destination.Destination, seq int) *transport.Message {
	return &transport.Message{Destination: q, Persistent: true, Priority: 4,
		Body:  fmt.Appendf(nil, "%s %d", q.Name, seq),
		Props: []transport.Property{{Name: "seq", Value: strconv.Itoa(seq)}}}
}

// seqOf reads the seq of a message made by message for q.
func (s *suite) seqOf(q destination.Destination, m *transport.Message) int {
	s.t.Helper()
	rest, ok := strings.CutPrefix(string(m.Body), q.Name+" ")
	n, err := strconv.Atoi(rest)
	if !ok || err != nil {
		s.t.Fatalf("delivered %q, not a message of %s", m.Body, q)
	}
	return n
}

// publish sends messages [from, from+n) to q on c in batches of per, every
// Commit in flight before the first confirmation is read, and checks that
// each batch is confirmed with every message accepted.
func (s *suite) publish(c transport.Conn, q destination.Destination, from, n, per int) {
	s.t.Helper()
	ctx := s.ctx()
	var toks []transport.Token
	for i := from; i < from+n; {
		for j := 0; j < per && i < from+n; j, i = j+1, i+1 {
			if err := c.Send(ctx, message(q, i)); err != nil {
				s.t.Fatalf("sending %d: %v", i, err)
			}
		}
		tok, err := c.Commit(ctx)
		if err != nil {
			s.t.Fatalf("committing: %v", err)
		}
		toks = append(toks, tok)
	}
	pending := make(map[transport.Token]bool)
	for _, tok := range toks {
		pending[tok] = true
	}
	deadline := time.Now().Add(DefaultTimeout)
	for len(pending) > 0 {
		ev := Next(s.t, c, time.Until(deadline))
		switch {
		case ev.Kind == transport.Refused && pending[ev.Token]:
			s.t.Fatalf("commit refused: %v", ev.Err)
		case ev.Kind == transport.Confirmed && pending[ev.Token]:
			if ev.Outcomes != nil {
				s.t.Fatalf("commit confirmed with outcomes %+v, want all accepted (nil)", ev.Outcomes)
			}
			delete(pending, ev.Token)
		default:
			s.t.Fatalf("publisher got %s %+v", kindName(ev.Kind), ev)
		}
	}
}

// subscribe subscribes c to q as id and waits for the confirmation; it
// returns the deliveries that came before it.
func (s *suite) subscribe(c transport.Conn, id string, q destination.Destination, ack transport.AckMode) []transport.Event {
	s.t.Helper()
	tok, err := c.Subscribe(s.ctx(), transport.Subscription{ID: id, Destination: q, Prefetch: 200, Ack: ack})
	if err != nil {
		s.t.Fatalf("subscribing %s to %s: %v", id, q, err)
	}
	return s.deliveriesOnly(Confirm(s.t, c, tok, "subscribing "+id))
}

// deliveriesOnly fails the test on anything in evs but deliveries.
func (s *suite) deliveriesOnly(evs []transport.Event) []transport.Event {
	s.t.Helper()
	for _, ev := range evs {
		if ev.Kind != transport.Delivery {
			s.t.Fatalf("unexpected %s %+v", kindName(ev.Kind), ev)
		}
	}
	return evs
}

// receive reads deliveries of sub on c (after those already in early) until
// there are n, failing on any other event.
func (s *suite) receive(c transport.Conn, sub string, early []transport.Event, n int) []transport.Event {
	s.t.Helper()
	got := slices.Clone(early)
	deadline := time.Now().Add(DefaultTimeout)
	for len(got) < n {
		ev := Next(s.t, c, time.Until(deadline))
		if ev.Kind != transport.Delivery {
			s.t.Fatalf("after %d of %d deliveries: %s %+v", len(got), n, kindName(ev.Kind), ev)
		}
		got = append(got, ev)
	}
	if len(got) > n {
		s.t.Fatalf("%d deliveries, want %d", len(got), n)
	}
	for _, ev := range got {
		if ev.Sub != sub {
			s.t.Fatalf("delivery for subscription %q, want %q", ev.Sub, sub)
		}
	}
	return got
}

// untilMarker reads deliveries of sub on c until the message with seq
// marker (the last one sent) and returns the seqs before it, failing on any
// other event. Messages come back to a queue ahead of a later one, so what
// precedes the marker is everything the queue gave back.
func (s *suite) untilMarker(c transport.Conn, sub string, q destination.Destination, early []transport.Event, marker int) (seqs []int, redelivered []bool) {
	s.t.Helper()
	evs := slices.Clone(early)
	deadline := time.Now().Add(DefaultTimeout)
	for i := 0; ; i++ {
		if i == len(evs) {
			ev := Next(s.t, c, time.Until(deadline))
			if ev.Kind != transport.Delivery {
				s.t.Fatalf("waiting for the marker: %s %+v", kindName(ev.Kind), ev)
			}
			evs = append(evs, ev)
		}
		ev := evs[i]
		if ev.Sub != sub {
			s.t.Fatalf("delivery for subscription %q, want %q", ev.Sub, sub)
		}
		n := s.seqOf(q, ev.Msg)
		if n == marker {
			if ev.Msg.Redelivered {
				s.t.Errorf("the marker, delivered once, is marked redelivered")
			}
			return seqs, redelivered
		}
		seqs = append(seqs, n)
		redelivered = append(redelivered, ev.Msg.Redelivered)
	}
}

// sync asks c for a Sync and waits for its confirmation, failing on any
// event before it.
func (s *suite) sync(c transport.Conn) {
	s.t.Helper()
	tok, err := c.Sync(s.ctx())
	if err != nil {
		s.t.Fatalf("Sync: %v", err)
	}
	if rest := Confirm(s.t, c, tok, "Sync"); len(rest) != 0 {
		s.t.Fatalf("Sync confirmed after %d unexpected events: %+v", len(rest), rest[0])
	}
}

// ended waits until c has ended and its Events are closed (read to the end).
func (s *suite) ended(c transport.Conn) {
	s.t.Helper()
	timer := time.NewTimer(DefaultTimeout)
	defer timer.Stop()
	for {
		select {
		case _, ok := <-c.Events():
			if !ok {
				select {
				case <-c.Done():
				default:
					s.t.Fatal("Events closed before Done")
				}
				return
			}
		case <-timer.C:
			s.t.Fatal("Events still open after the connection ended")
		}
	}
}

func (s *suite) info() {
	c := s.dial()
	i := c.Info()
	s.t.Logf("Info: %+v", i)
	if i.Protocol != s.f.Protocol {
		s.t.Errorf("Protocol %q, want %q", i.Protocol, s.f.Protocol)
	}
	if i.Server == "" {
		s.t.Error("Server is empty")
	}
	if s.f.Flavour != transport.UnknownFlavour && i.Flavour != s.f.Flavour {
		s.t.Errorf("Flavour %v, want %v", i.Flavour, s.f.Flavour)
	}
	if i.Selectors != s.f.Selectors {
		s.t.Errorf("Selectors %v, want %v", i.Selectors, s.f.Selectors)
	}
	if i.Transactions != s.f.Transactions {
		s.t.Errorf("Transactions %v, want %v", i.Transactions, s.f.Transactions)
	}
	if s.f.ConnectionID && i.ConnectionID == "" {
		s.t.Error("ConnectionID is empty")
	}
	switch {
	case (i.KeepsID != nil) != (s.f.NewID != nil):
		s.t.Errorf("KeepsID set %v, want %v", i.KeepsID != nil, s.f.NewID != nil)
	case i.KeepsID != nil:
		if id := s.f.NewID(); !i.KeepsID(id) {
			s.t.Errorf("KeepsID(%q) false", id)
		}
	}
	if err := c.Err(); err != nil {
		s.t.Errorf("Err %v while up", err)
	}
	select {
	case <-c.Done():
		s.t.Error("Done closed while up")
	default:
	}
}

func (s *suite) subscribeConfirmed() {
	c := s.dial()
	q := s.queue()
	if early := s.subscribe(c, "s", q, transport.Cumulative); len(early) != 0 {
		s.t.Fatalf("%d deliveries from an empty queue", len(early))
	}
	// A second subscription of the connection, to the same queue, is
	// confirmed on its own token.
	s.subscribe(c, "t", q, transport.Individual)
	s.sync(c)
}

func (s *suite) refused() {
	c := s.dial()
	q := s.queue()
	ctx := s.ctx()
	sub := transport.Subscription{ID: "x", Destination: q, Prefetch: 10, Selector: "color = 'red'"}
	if s.f.Selectors {
		if !s.f.BadSelector {
			s.t.Skip("the broker does not check selectors (Features.BadSelector)")
		}
		sub.Selector = "intProp >"
	}
	tok, err := c.Subscribe(ctx, sub)
	switch {
	case err != nil && !s.f.Selectors && errors.Is(err, transport.ErrUnsupported):
		s.t.Logf("refused at once: %v", err)
	case err != nil:
		s.t.Fatalf("Subscribe: %v, want a refusal after it", err)
	case s.f.RefusalEndsConnection:
		s.ended(c)
		if !errors.Is(c.Err(), transport.ErrRefused) {
			s.t.Fatalf("connection ended with %v, want an error wrapping ErrRefused", c.Err())
		}
		s.t.Logf("refused, the connection ended: %v", c.Err())
		return
	default:
		ev, other := WaitToken(s.t, c, tok)
		s.deliveriesOnly(other)
		if ev.Kind != transport.Refused || ev.Err == nil {
			s.t.Fatalf("subscription with selector %q: %s (err %v), want refused with a reason", sub.Selector, kindName(ev.Kind), ev.Err)
		}
		s.t.Logf("refused: %v", ev.Err)
	}
	// The connection lives on, and the id is free again.
	early := s.subscribe(c, "x", q, transport.Cumulative)
	p := s.dial()
	s.publish(p, q, 0, 1, 1)
	got := s.receive(c, "x", early, 1)
	if n := s.seqOf(q, got[0].Msg); n != 0 {
		s.t.Fatalf("delivered %d, want 0", n)
	}
}

func (s *suite) batches() {
	const batches, per = 4, 25
	q := s.queue()
	c := s.dial()
	p := s.dial()
	early := s.subscribe(c, "s", q, transport.Cumulative)
	s.publish(p, q, 0, batches*per, per)
	got := s.receive(c, "s", early, batches*per)
	ctx := s.ctx()
	for i, ev := range got {
		if n := s.seqOf(q, ev.Msg); n != i {
			s.t.Fatalf("delivery %d is message %d: out of order", i, n)
		}
		if ev.Msg.Redelivered {
			s.t.Fatalf("delivery %d, its first, is marked redelivered", i)
		}
		if (i+1)%per == 0 {
			refs := make([]transport.Ref, 0, per)
			for _, e := range got[i+1-per : i+1] {
				refs = append(refs, e.Ref)
			}
			if err := c.Settle(ctx, "s", refs, transport.Accepted); err != nil {
				s.t.Fatalf("Settle: %v", err)
			}
		}
	}
	s.sync(c)
	// Synced: nothing comes back once the consumer is gone.
	c.Abort()
	c2 := s.dial()
	early = s.subscribe(c2, "again", q, transport.Cumulative)
	marker := batches * per
	s.publish(p, q, marker, 1, 1)
	if seqs, _ := s.untilMarker(c2, "again", q, early, marker); len(seqs) != 0 {
		s.t.Fatalf("settled and synced, yet %v came back", seqs)
	}
}

// each sends messages one by one (transport.EachConfirmer) where the features
// say the connection can, every confirmation in flight before the first is
// read: each is confirmed, in send order, and delivered in order. Where they
// say it cannot, transport.ConfirmsEach must not find it.
func (s *suite) each() {
	const n = 50
	p := s.dial()
	ec, ok := transport.ConfirmsEach(p)
	if ok != s.f.ConfirmsEach {
		s.t.Fatalf("transport.ConfirmsEach = %v, want %v", ok, s.f.ConfirmsEach)
	}
	if !ok {
		return
	}
	q := s.queue()
	c := s.dial()
	early := s.subscribe(c, "s", q, transport.Individual)
	ctx := s.ctx()
	toks := make([]transport.Token, n)
	for i := range toks {
		tok, err := ec.SendConfirmed(ctx, message(q, i))
		if err != nil {
			s.t.Fatalf("SendConfirmed %d: %v", i, err)
		}
		toks[i] = tok
	}
	deadline := time.Now().Add(DefaultTimeout)
	for i := 0; i < n; {
		ev := Next(s.t, p, time.Until(deadline))
		switch {
		case ev.Kind == transport.Confirmed && ev.Token == toks[i]:
			i++
		case ev.Kind == transport.Refused:
			s.t.Fatalf("message refused: %v", ev.Err)
		default:
			s.t.Fatalf("waiting for the confirmation of message %d, got %s %+v", i, kindName(ev.Kind), ev)
		}
	}
	for i, ev := range s.receive(c, "s", early, n) {
		if got := s.seqOf(q, ev.Msg); got != i {
			s.t.Fatalf("delivery %d is message %d: out of order", i, got)
		}
	}
}

// oneStream sends on the consuming connection, one message a batch, every
// Commit in flight: its deliveries and the confirmations of its commits
// come on the one Events stream, deliveries in send order, confirmations in
// commit order. (Whether a confirmation could overtake a delivery the
// broker wrote before it is not forced here: a real broker decides when it
// dispatches.)
func (s *suite) oneStream() {
	const n = 10
	q := s.queue()
	c := s.dial()
	early := s.subscribe(c, "s", q, transport.Individual)
	ctx := s.ctx()
	var toks []transport.Token
	for i := range n {
		if err := c.Send(ctx, message(q, i)); err != nil {
			s.t.Fatalf("sending %d: %v", i, err)
		}
		tok, err := c.Commit(ctx)
		if err != nil {
			s.t.Fatalf("committing: %v", err)
		}
		toks = append(toks, tok)
	}
	var seqs []int
	var confirmed []transport.Token
	var refs []transport.Ref
	deadline := time.Now().Add(DefaultTimeout)
	for i := 0; len(seqs) < n || len(confirmed) < n; i++ {
		var ev transport.Event
		if i < len(early) {
			ev = early[i]
		} else {
			ev = Next(s.t, c, time.Until(deadline))
		}
		switch ev.Kind {
		case transport.Delivery:
			seqs = append(seqs, s.seqOf(q, ev.Msg))
			refs = append(refs, ev.Ref)
		case transport.Confirmed:
			if ev.Outcomes != nil {
				s.t.Fatalf("commit confirmed with outcomes %+v, want all accepted (nil)", ev.Outcomes)
			}
			confirmed = append(confirmed, ev.Token)
		default:
			s.t.Fatalf("%s %+v", kindName(ev.Kind), ev)
		}
	}
	if want := []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}; !slices.Equal(seqs, want) {
		s.t.Fatalf("delivered %v, want %v", seqs, want)
	}
	if !slices.Equal(confirmed, toks) {
		s.t.Fatalf("confirmed %v, committed %v", confirmed, toks)
	}
	if err := c.Settle(ctx, "s", refs, transport.Accepted); err != nil {
		s.t.Fatalf("Settle: %v", err)
	}
	s.sync(c)
}

func (s *suite) keepsID() {
	q := s.queue()
	p := s.dial()
	id := s.f.NewID()
	m := message(q, 0)
	m.ID = id
	ctx := s.ctx()
	if err := p.Send(ctx, m); err != nil {
		s.t.Fatal(err)
	}
	tok, err := p.Commit(ctx)
	if err != nil {
		s.t.Fatal(err)
	}
	Confirm(s.t, p, tok, "Commit")
	c := s.dial()
	got := s.receive(c, "s", s.subscribe(c, "s", q, transport.Cumulative), 1)
	if got[0].Msg.ID != id {
		s.t.Fatalf("delivered with id %q, sent with %q", got[0].Msg.ID, id)
	}
}

// firstThree publishes three messages to a fresh queue and receives them on a
// fresh subscription "s" with ack mode ack.
func (s *suite) firstThree(ack transport.AckMode) (q destination.Destination, p, c transport.Conn, got []transport.Event) {
	s.t.Helper()
	q = s.queue()
	p, c = s.dial(), s.dial()
	early := s.subscribe(c, "s", q, ack)
	s.publish(p, q, 0, 3, 3)
	got = s.receive(c, "s", early, 3)
	for i, ev := range got {
		if n := s.seqOf(q, ev.Msg); n != i {
			s.t.Fatalf("delivery %d is message %d", i, n)
		}
	}
	return q, p, c, got
}

// checkBack checks that exactly want came back, each marked redelivered
// if marked.
func (s *suite) checkBack(seqs []int, redelivered []bool, want []int, marked bool) {
	s.t.Helper()
	if !slices.Equal(seqs, want) {
		s.t.Fatalf("came back: %v, want %v", seqs, want)
	}
	for i, r := range redelivered {
		if marked && !r {
			s.t.Errorf("message %d came back not marked redelivered", seqs[i])
		}
	}
}

func (s *suite) cumulative() {
	q, p, c, got := s.firstThree(transport.Cumulative)
	if err := c.Settle(s.ctx(), "s", []transport.Ref{got[0].Ref, got[1].Ref}, transport.Accepted); err != nil {
		s.t.Fatalf("Settle: %v", err)
	}
	s.sync(c)
	if err := c.Unsubscribe(s.ctx(), "s"); err != nil {
		s.t.Fatalf("Unsubscribe: %v", err)
	}
	if s.f.UnsubscribeHolds {
		// What the subscription held comes back when the connection ends.
		c.Abort()
		c = s.dial()
	}
	early := s.subscribe(c, "again", q, transport.Cumulative)
	s.publish(p, q, 3, 1, 1)
	seqs, redelivered := s.untilMarker(c, "again", q, early, 3)
	s.checkBack(seqs, redelivered, []int{2}, !s.f.UnsubscribeUnmarked || s.f.UnsubscribeHolds)
}

func (s *suite) individual() {
	q, p, c, got := s.firstThree(transport.Individual)
	if err := c.Settle(s.ctx(), "s", []transport.Ref{got[1].Ref}, transport.Accepted); err != nil {
		s.t.Fatalf("Settle: %v", err)
	}
	s.sync(c)
	c.Abort()
	c2 := s.dial()
	early := s.subscribe(c2, "again", q, transport.Individual)
	s.publish(p, q, 3, 1, 1)
	seqs, redelivered := s.untilMarker(c2, "again", q, early, 3)
	s.checkBack(seqs, redelivered, []int{0, 2}, true)
}

func (s *suite) close() {
	q := s.queue()
	p, c := s.dial(), s.dial()
	ctx := s.ctx()
	// A batch committed and a delivery settled, neither confirmed: Close
	// returns once both are processed.
	s.publish(p, q, 0, 1, 1)
	got := s.receive(c, "s", s.subscribe(c, "s", q, transport.Cumulative), 1)
	if err := c.Settle(ctx, "s", []transport.Ref{got[0].Ref}, transport.Accepted); err != nil {
		s.t.Fatalf("Settle: %v", err)
	}
	if err := p.Send(ctx, message(q, 1)); err != nil {
		s.t.Fatal(err)
	}
	if _, err := p.Commit(ctx); err != nil {
		s.t.Fatal(err)
	}
	for _, x := range []transport.Conn{p, c} {
		if err := x.Close(ctx); err != nil {
			s.t.Fatalf("Close: %v", err)
		}
		s.ended(x)
		if !errors.Is(x.Err(), transport.ErrClosed) {
			s.t.Errorf("Err after Close: %v, want ErrClosed", x.Err())
		}
		if err := x.Close(ctx); err != nil {
			s.t.Errorf("second Close: %v, want nil", err)
		}
		x.Abort()
		if !errors.Is(x.Err(), transport.ErrClosed) {
			s.t.Errorf("Err after Close, Close and Abort: %v, want ErrClosed", x.Err())
		}
	}
	// Message 0 was settled, message 1 committed.
	c2 := s.dial()
	early := s.subscribe(c2, "again", q, transport.Cumulative)
	s.publish(s.dial(), q, 2, 1, 1)
	seqs, _ := s.untilMarker(c2, "again", q, early, 2)
	if !slices.Equal(seqs, []int{1}) {
		s.t.Fatalf("after Close: %v before the marker, want [1] (0 settled, 1 committed)", seqs)
	}
}

func (s *suite) abort() {
	c := s.dial()
	s.subscribe(c, "s", s.queue(), transport.Cumulative)
	c.Abort()
	c.Abort()
	s.ended(c)
	if c.Err() == nil {
		s.t.Fatal("Err nil after Abort")
	}
	c.Abort()
	ctx, cancel := context.WithTimeout(context.Background(), DefaultTimeout)
	defer cancel()
	err := c.Close(ctx)
	s.t.Logf("Err after Abort: %v; Close after Abort: %v", c.Err(), err)
	if ctx.Err() != nil {
		s.t.Fatal("Close after Abort waited for its context")
	}
}

func (s *suite) afterClose() {
	c := s.dial()
	q := s.queue()
	s.subscribe(c, "s", q, transport.Cumulative)
	ctx := s.ctx()
	if err := c.Close(ctx); err != nil {
		s.t.Fatalf("Close: %v", err)
	}
	mustFail := func(what string, err error) {
		s.t.Helper()
		if !errors.Is(err, transport.ErrClosed) {
			s.t.Errorf("%s after Close: %v, want an error wrapping ErrClosed", what, err)
		}
	}
	mayFail := func(what string, err error) {
		s.t.Helper()
		if err != nil && !errors.Is(err, transport.ErrClosed) {
			s.t.Errorf("%s after Close: %v, want nil or an error wrapping ErrClosed", what, err)
		}
	}
	_, err := c.Subscribe(ctx, transport.Subscription{ID: "t", Destination: q, Prefetch: 1})
	mustFail("Subscribe", err)
	mayFail("Send", c.Send(ctx, message(q, 0)))
	_, err = c.Commit(ctx)
	mustFail("Commit", err)
	_, err = c.Sync(ctx)
	mustFail("Sync", err)
	mayFail("Unsubscribe", c.Unsubscribe(ctx, "s"))
}
