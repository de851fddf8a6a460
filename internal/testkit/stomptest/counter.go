package stomptest

import (
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"
)

// Counter records what a test consumer received, counted by sequence number
// (the seq header or property the producers here set), whatever the protocol:
// stomptest's and amqptest's consumers embed one, so that both answer Count,
// Distinct, Duplicates, Seqs, Missing and WaitDistinct alike.
type Counter[M any] struct {
	tb    testing.TB
	seqOf func(M) (int, bool)

	mu   sync.Mutex
	msgs []M
	seqs map[int]int // seq -> times received
	dups int
}

// NewCounter returns a Counter reading each message's sequence number with seq
// (false: the message has none; it counts in Count only).
func NewCounter[M any](tb testing.TB, seq func(M) (int, bool)) *Counter[M] {
	return &Counter[M]{tb: tb, seqOf: seq, seqs: make(map[int]int)}
}

// Add records m as received.
func (c *Counter[M]) Add(m M) {
	s, ok := c.seqOf(m)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.msgs = append(c.msgs, m)
	if ok {
		c.seqs[s]++
		if c.seqs[s] > 1 {
			c.dups++
		}
	}
}

// Count is the number of messages received, duplicates included.
func (c *Counter[M]) Count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.msgs)
}

// Distinct is the number of distinct seq values received.
func (c *Counter[M]) Distinct() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.seqs)
}

// Duplicates is how many received messages repeated an earlier seq.
func (c *Counter[M]) Duplicates() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dups
}

// Received returns a copy of what was received, in order.
func (c *Counter[M]) Received() []M {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]M(nil), c.msgs...)
}

// Seqs returns the seq values in arrival order (0 for a message without one).
func (c *Counter[M]) Seqs() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]int, 0, len(c.msgs))
	for _, m := range c.msgs {
		s, _ := c.seqOf(m)
		out = append(out, s)
	}
	return out
}

// Missing lists the seqs in [from, from+n) never received.
func (c *Counter[M]) Missing(from, n int) []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []int
	for i := from; i < from+n; i++ {
		if c.seqs[i] == 0 {
			out = append(out, i)
		}
	}
	sort.Ints(out)
	return out
}

// WaitDistinct waits until n distinct seqs arrived, failing the test at the deadline.
func (c *Counter[M]) WaitDistinct(n int, timeout time.Duration) {
	c.tb.Helper()
	Eventually(c.tb, timeout, func() error {
		if got := c.Distinct(); got < n {
			return fmt.Errorf("consumer has %d distinct messages, want %d", got, n)
		}
		return nil
	})
}
