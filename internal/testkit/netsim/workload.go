package netsim

import (
	"math"
	"strconv"
	"time"
)

// Churn schedules, from now on, n consumers appearing on random brokers at an
// average rate of rate per simulated second (a Poisson process), each on one
// of dests destinations ("d0"…) and staying for an exponentially distributed
// time of mean life. All choices come from the Sim's seed.
func Churn(s *Sim, n int, rate float64, life time.Duration, dests int) {
	t := s.now
	for range n {
		t += time.Duration(s.work.ExpFloat64() / rate * float64(time.Second))
		broker := s.work.IntN(len(s.brokers))
		dest := "d" + strconv.Itoa(s.work.IntN(dests))
		stay := time.Duration(s.work.ExpFloat64() * float64(life))
		s.At(t, func() {
			id := s.AddConsumer(broker, dest)
			s.At(s.now+stay, func() { s.RemoveConsumer(broker, id) })
		})
	}
}

// Populate opens perBroker consumers on every broker now, each on one of
// dests destinations chosen from the seed.
func Populate(s *Sim, perBroker, dests int) {
	for i := range s.brokers {
		for range perBroker {
			s.AddConsumer(i, "d"+strconv.Itoa(s.work.IntN(dests)))
		}
	}
}

// RandomBroker returns a broker index chosen from the seed.
func RandomBroker(s *Sim) int { return s.work.IntN(len(s.brokers)) }

// Farthest returns a broker at the largest hop distance from broker i, and
// that distance.
func Farthest(s *Sim, i int) (int, int) {
	adj := make([][]int, len(s.brokers))
	for _, e := range s.edges {
		adj[e.A] = append(adj[e.A], e.B)
		adj[e.B] = append(adj[e.B], e.A)
	}
	dist := make([]int, len(s.brokers))
	for k := range dist {
		dist[k] = math.MaxInt
	}
	dist[i] = 0
	q := []int{i}
	far := i
	for len(q) > 0 {
		v := q[0]
		q = q[1:]
		if dist[v] > dist[far] {
			far = v
		}
		for _, w := range adj[v] {
			if dist[w] == math.MaxInt {
				dist[w] = dist[v] + 1
				q = append(q, w)
			}
		}
	}
	return far, dist[far]
}
