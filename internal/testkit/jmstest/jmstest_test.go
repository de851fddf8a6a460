package jmstest_test

import (
	"strings"
	"testing"
	"time"

	"github.com/brokernet/brokernet/internal/testkit/jmstest"
	"github.com/brokernet/brokernet/internal/testkit/testbroker"
)

func TestMain(m *testing.M) { testbroker.Main(m) }

// TestProduceConsume runs the JMS client against one broker: the ids the
// consumer sees are the producer's.
func TestProduceConsume(t *testing.T) {
	if testing.Short() {
		t.Skip("needs ActiveMQ and a JDK")
	}
	b := testbroker.StartActiveMQ(t, testbroker.Options{})
	c := jmstest.Start(t, "Jms", "consume", b.OpenWireURI(), "queue://kit.q", "", "60000", "5")
	c.WaitLine(t, "READY", 30*time.Second)
	sent := jmstest.Prefixed(strings.Split(jmstest.Run(t, 60*time.Second, "Jms", "produce", b.OpenWireURI(), "queue://kit.q", "5"), "\n"), "ID ")
	got := c.Wait(t, 60*time.Second)
	if len(sent) != 5 {
		t.Fatalf("sent %d ids, want 5", len(sent))
	}
	msgs := jmstest.Prefixed(got, "MSG id=")
	if len(msgs) != 5 || got[len(got)-1] != "COUNT 5" {
		t.Fatalf("consumer printed:\n%s", strings.Join(got, "\n"))
	}
	for i, m := range msgs {
		if id, _, _ := strings.Cut(m, " "); id != sent[i] {
			t.Errorf("message %d: id %s, producer's %s", i, id, sent[i])
		}
	}
}
