package bridge

import (
	"testing"

	"github.com/brokernet/brokernet/transport"
)

func TestEventQueueKeepsOrder(t *testing.T) {
	var q eventQueue
	next, want := 0, 0
	push := func() { q.push(transport.Event{Token: transport.Token(next)}); next++ }
	pop := func() {
		t.Helper()
		if got := int(q.pop().Token); got != want {
			t.Fatalf("popped %d, want %d", got, want)
		}
		want++
	}
	for round := 0; round < 50; round++ {
		for i := 0; i < 7; i++ {
			push()
		}
		for i := 0; i < 5; i++ {
			pop()
		}
		// Put the head back, as a suspect waiting to go alone is.
		want--
		q.pushFront(transport.Event{Token: transport.Token(want)})
		pop()
	}
	for q.len() > 0 {
		pop()
	}
	if want != next {
		t.Fatalf("popped %d of %d", want, next)
	}
	// At most 100 were queued at once; the array stays within a few times that.
	if cap(q.items) > 512 {
		t.Fatalf("a queue of at most 100 grew to %d", cap(q.items))
	}
	q.pushFront(transport.Event{Token: 1})
	q.pushFront(transport.Event{Token: 0})
	if a, b := q.pop().Token, q.pop().Token; a != 0 || b != 1 || q.len() != 0 {
		t.Fatalf("pushFront on an empty queue: %d %d, %d left", a, b, q.len())
	}
}
