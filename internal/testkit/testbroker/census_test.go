package testbroker

import (
	"context"
	"testing"
	"time"

	"github.com/go-stomp/stomp/v3"
)

func TestCensusCountsTempDestinationsAndConnections(t *testing.T) {
	b := StartActiveMQ(t, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	q0, t0, err := b.TempDestinations(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c0, err := b.Connections(ctx)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := stomp.Dial("tcp", b.StompAddr(), stomp.ConnOpt.Host("localhost"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Disconnect()
	for _, d := range []string{"/temp-queue/a", "/temp-queue/b", "/temp-topic/c"} {
		if _, err := conn.Subscribe(d, stomp.AckAuto); err != nil {
			t.Fatal(err)
		}
	}
	q1, t1, err := b.TempDestinations(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c1, err := b.Connections(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if q1-q0 != 2 || t1-t0 != 1 || c1-c0 != 1 {
		t.Fatalf("census: %d→%d temporary queues, %d→%d topics, %d→%d connections; want 2, 1 and 1 more", q0, q1, t0, t1, c0, c1)
	}
}
