package mailbox

import (
	"slices"
	"sync"
	"testing"
)

func TestZeroValueIsEmptyAndUsable(t *testing.T) {
	var m Mailbox[int]
	if got := m.Take(); got != nil || m.Len() != 0 {
		t.Fatalf("zero mailbox holds %v", got)
	}
	m.Push(1)
	m.Push(2)
	select {
	case <-m.Signal():
	default:
		t.Fatal("no signal after Push")
	}
	if got := m.Take(); !slices.Equal(got, []int{1, 2}) {
		t.Fatalf("Take = %v, want [1 2]", got)
	}
	if m.Len() != 0 {
		t.Fatal("items left after Take")
	}
}

// TestOrderAcrossProducerAndConsumer: a consumer that waits on Signal and
// takes sees every pushed value once, in push order.
func TestOrderAcrossProducerAndConsumer(t *testing.T) {
	var m Mailbox[int]
	const n = 100000
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range n {
			m.Push(i)
		}
	}()
	next := 0
	for next < n {
		<-m.Signal()
		for _, v := range m.Take() {
			if v != next {
				t.Fatalf("got %d, want %d", v, next)
			}
			next++
		}
	}
	wg.Wait()
}

func TestRecycledSlicesKeepOrderAndAreReused(t *testing.T) {
	var m Mailbox[*int]
	const n = 100000
	go func() {
		for i := range n {
			m.Push(&i)
		}
	}()
	next := 0
	for next < n {
		<-m.Signal()
		items := m.Take()
		for _, v := range items {
			if *v != next {
				t.Fatalf("got %d, want %d", *v, next)
			}
			next++
		}
		m.Recycle(items)
	}
}

func TestRecycleDropsItsReferences(t *testing.T) {
	var m Mailbox[*int]
	m.Push(new(int))
	items := m.Take()
	m.Recycle(items)
	if items[0] != nil {
		t.Fatal("Recycle kept a reference to an item")
	}
}

func TestSteadyStreamAllocatesNoSlices(t *testing.T) {
	var m Mailbox[int]
	m.Recycle(m.Take()) // nothing to recycle yet
	m.Push(0)
	m.Recycle(m.Take())
	allocs := testing.AllocsPerRun(1000, func() {
		m.Push(1)
		m.Push(2)
		m.Recycle(m.Take())
	})
	if allocs != 0 {
		t.Fatalf("%.1f allocations per push, push, take and recycle, want 0", allocs)
	}
}
