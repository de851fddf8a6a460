package netsim

import (
	"errors"
	"slices"
	"strconv"
	"time"
)

// Workload is what Run does to a network.
type Workload struct {
	// PerBroker consumers open on every broker for Background, each on one
	// of Dests destinations.
	PerBroker, Dests int
	// ChurnPerBrokerSecond is the rate of consumers appearing, per broker
	// and simulated second, during ChurnFor; each stays for an
	// exponentially distributed time of mean ChurnLife. Zero skips churn.
	ChurnPerBrokerSecond float64
	ChurnLife, ChurnFor  time.Duration
	// SkipBackground measures only Appear and Leave.
	SkipBackground bool
}

// DefaultWorkload is two consumers per broker on 10 destinations, and churn
// of one consumer per 10 brokers per second living 5 s on average, for 20 s.
func DefaultWorkload() Workload {
	return Workload{PerBroker: 2, Dests: 10, ChurnPerBrokerSecond: 0.1, ChurnLife: 5 * time.Second, ChurnFor: 20 * time.Second}
}

// Result is what Run measured on one configuration.
type Result struct {
	Config  Config
	Bridges int
	// Distance is the hop distance from the broker where Appear's consumer
	// opened to the farthest broker.
	Distance int
	// Appear is one consumer opening on an idle network (no other
	// consumer) on a broker chosen from the seed; Leave is it closing.
	Appear, Leave Phase
	// Background is PerBroker consumers opening on every broker at once.
	Background Phase
	// Churn is the churn window on top of Background, ChurnTail the time
	// from its end until nothing changes. Empty without churn.
	Churn, ChurnTail Phase
	// ChurnSettled is true when the network after churn holds exactly the
	// demand a fresh network builds for the consumers that remain.
	ChurnSettled bool
	// Err is set when a step failed (ErrBudget: the demand exploded); the
	// steps after it are empty.
	Err error
}

// Exploded reports whether the run stopped at the advisory budget.
func (r Result) Exploded() bool { return errors.Is(r.Err, ErrBudget) }

// Run builds the network of cfg and measures w on it.
func Run(cfg Config, w Workload) Result {
	r := Result{Config: cfg}
	s, err := New(cfg)
	if err != nil {
		r.Err = err
		return r
	}
	r.Bridges = s.Bridges()
	at := RandomBroker(s)
	_, r.Distance = Farthest(s, at)
	var id string
	if r.Appear, r.Err = s.Measure(func() { id = s.AddConsumer(at, "solo") }); r.Err != nil {
		return r
	}
	if r.Leave, r.Err = s.Measure(func() { s.RemoveConsumer(at, id) }); r.Err != nil {
		return r
	}
	if w.SkipBackground {
		return r
	}
	if r.Background, r.Err = s.Measure(func() { Populate(s, w.PerBroker, w.Dests) }); r.Err != nil {
		return r
	}
	if w.ChurnPerBrokerSecond <= 0 || w.ChurnFor <= 0 {
		return r
	}
	rate := w.ChurnPerBrokerSecond * float64(cfg.Brokers)
	n := int(rate * w.ChurnFor.Seconds())
	end := s.Now() + w.ChurnFor
	// Consumers that would outlive the window stay, so that the tail
	// measures the network calming down, not scheduled departures.
	if r.Churn, r.Err = s.MeasureUntil(end, func() { churnUntil(s, n, rate, w.ChurnLife, w.Dests, end) }); r.Err != nil {
		return r
	}
	if r.ChurnTail, r.Err = s.Measure(nil); r.Err != nil {
		return r
	}
	fresh, err := New(cfg)
	if err != nil {
		r.Err = err
		return r
	}
	if _, r.Err = fresh.Measure(func() {
		for i, dests := range s.PlainConsumers() {
			for _, d := range dests {
				fresh.AddConsumer(i, d)
			}
		}
	}); r.Err != nil {
		return r
	}
	r.ChurnSettled = slices.Equal(s.Routes(), fresh.Routes())
	return r
}

// churnUntil is Churn on the Background destinations, stopping at end;
// consumers whose time ends later stay.
func churnUntil(s *Sim, n int, rate float64, life time.Duration, dests int, end time.Duration) {
	t := s.now
	for range n {
		t += time.Duration(s.work.ExpFloat64() / rate * float64(time.Second))
		broker := s.work.IntN(len(s.brokers))
		dest := "d" + strconv.Itoa(s.work.IntN(dests))
		leave := t + time.Duration(s.work.ExpFloat64()*float64(life))
		if t >= end {
			break
		}
		s.At(t, func() {
			id := s.AddConsumer(broker, dest)
			if leave < end {
				s.At(leave, func() { s.RemoveConsumer(broker, id) })
			}
		})
	}
}
