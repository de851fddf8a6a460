package stomptest

import (
	"reflect"
	"testing"
	"time"
)

func TestCounterCountsBySeq(t *testing.T) {
	type msg struct {
		seq int
		has bool
	}
	c := NewCounter(t, func(m msg) (int, bool) { return m.seq, m.has })
	for _, m := range []msg{{1, true}, {2, true}, {1, true}, {0, false}, {4, true}} {
		c.Add(m)
	}
	if c.Count() != 5 || c.Distinct() != 3 || c.Duplicates() != 1 {
		t.Errorf("count %d distinct %d duplicates %d, want 5 3 1", c.Count(), c.Distinct(), c.Duplicates())
	}
	if got := c.Seqs(); !reflect.DeepEqual(got, []int{1, 2, 1, 0, 4}) {
		t.Errorf("seqs %v", got)
	}
	if got := c.Missing(0, 5); !reflect.DeepEqual(got, []int{0, 3}) {
		t.Errorf("missing %v, want [0 3]", got)
	}
	if got := c.Received(); len(got) != 5 || got[3].has {
		t.Errorf("received %v", got)
	}
	c.WaitDistinct(3, time.Second)
}
