package demand

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/go-stomp/stomp/v3/frame"

	"github.com/brokernet/brokernet/advisory"
	"github.com/brokernet/brokernet/destination"
	"github.com/brokernet/brokernet/hop"
)

// consumerAdvisory renders the ConsumerInfo advisory that ActiveMQ publishes
// on broker for a STOMP consumer, in the JSON shape of activemq-network.md
// §6.1, and parses it back as the bridge watching that broker would.
func consumerAdvisory(t *testing.T, broker, connection string, value int, d destination.Destination, selector string, priority, prefetch int) advisory.Event {
	t.Helper()
	class := map[destination.Kind]string{
		destination.Queue: "ActiveMQQueue", destination.Topic: "ActiveMQTopic",
		destination.TempQueue: "ActiveMQTempQueue", destination.TempTopic: "ActiveMQTempTopic",
	}[d.Kind]
	info := map[string]any{
		"commandId": 3, "responseRequired": true,
		"consumerId":   map[string]any{"connectionId": connection, "sessionId": -1, "value": value},
		"destination":  map[string]any{"@class": class, "string": d.Name, "null": ""},
		"prefetchSize": prefetch, "maximumPendingMessageLimit": 0, "browser": false, "dispatchAsync": true,
		"noLocal": false, "exclusive": false, "retroactive": false, "priority": priority,
		"optimizedAcknowledge": false, "noRangeAcks": false,
	}
	if selector != "" {
		info["selector"] = hop.ConvertStringPrefix + selector
	}
	body, err := json.Marshal(map[string]any{"ConsumerInfo": info})
	if err != nil {
		t.Fatal(err)
	}
	h := frame.NewHeader("originBrokerId", broker, "originBrokerName", broker, "consumerCount", "1")
	ev, err := advisory.ParseActiveMQ(h, body)
	if err != nil {
		t.Fatalf("parsing %s: %v", body, err)
	}
	return ev
}

// subAdvisory is the advisory of a demand subscription that the bridge
// created on broker, as another bridge watching that broker sees it.
func subAdvisory(t *testing.T, broker string, s Subscription) advisory.Event {
	t.Helper()
	var n int
	fmt.Sscanf(strings.TrimPrefix(s.ID, subIDPrefix), "%d", &n)
	return consumerAdvisory(t, broker, "ID:bridge-on-"+broker+":1", n, s.Destination, s.Selector, s.Priority, s.Prefetch)
}

func bridgeOptions(local, remote string) Options {
	o := DefaultOptions()
	o.LocalID, o.RemoteID = local, remote
	return o
}

// TestDuplexPair: two bridges between A and B, one forwarding A->B (local A)
// and one B->A (local B). A consumer on B creates a demand subscription on A;
// the B->A bridge sees that subscription's advisory on A and must not treat
// it as demand, or the two bridges would feed each other's demand forever.
func TestDuplexPair(t *testing.T) {
	ab := New(bridgeOptions("A", "B")) // watches B, subscribes on A
	ba := New(bridgeOptions("B", "A")) // watches A, subscribes on B

	onB := consumerAdvisory(t, "B", "ID:client-b:1", 1, qOrders, "color = 'red'", 0, 1000)
	changes, d := ab.Apply(onB)
	if d.Action != Added || len(changes) != 1 {
		t.Fatalf("A->B bridge: %+v", d)
	}
	subOnA := changes[0].Sub

	seen := subAdvisory(t, "A", subOnA)
	if !seen.Consumer.Bridge || !slices.Equal(seen.Consumer.Path, []string{"B"}) || seen.Consumer.Selector != "color = 'red'" {
		t.Fatalf("the demand subscription's advisory parses as %+v", seen.Consumer)
	}
	if want := conduitOrigin("B", qOrders, false); seen.Consumer.Origin != want {
		t.Fatalf("origin %q, want %q", seen.Consumer.Origin, want)
	}
	changes, d = ba.Apply(seen)
	if d.Action != Ignored || d.Reason != ReasonLoop || len(changes) != 0 || ba.Len() != 0 {
		t.Fatalf("B->A bridge took our demand subscription as demand: %+v, %v", d, changes)
	}

	// The same holds with unlimited consumerTTL, where only the loop check
	// protects the pair.
	o := bridgeOptions("B", "A")
	o.ConsumerTTL = -1
	if _, d := New(o).Apply(seen); d.Reason != ReasonLoop {
		t.Fatalf("with unlimited consumerTTL: %+v", d)
	}

	// A real consumer on A is demand for the B->A bridge.
	onA := consumerAdvisory(t, "A", "ID:client-a:1", 1, qOrders, "", 0, 1000)
	if _, d := ba.Apply(onA); d.Action != Added {
		t.Fatalf("B->A bridge ignored a real consumer: %+v", d)
	}
	// Its demand subscription on B is in turn ignored by the A->B bridge.
	s := ba.Subscriptions()[0]
	if _, d := ab.Apply(subAdvisory(t, "B", s)); d.Reason != ReasonLoop {
		t.Fatalf("A->B bridge took the B->A demand as demand: %+v", d)
	}
	if ab.Len() != 1 || ba.Len() != 1 {
		t.Fatalf("Len = %d, %d", ab.Len(), ba.Len())
	}
}

// TestChain propagates demand along R1 <- R2 <- R3 <- R4 (each bridge local
// on the left, remote on the right) and checks the hop limit and the
// priorities ActiveMQ documents: -5, -8, -9.
func TestChain(t *testing.T) {
	tests := []struct {
		name          string
		consumerTTL   int
		wantPriority  []int // of the demand subscriptions on R2, R3, R4; missing = none
		wantLastPaths []string
	}{
		{"consumerTTL 1 stops after one hop", 1, []int{-5}, []string{"R1"}},
		{"consumerTTL 2 reaches two hops", 2, []int{-5, -8}, []string{"R1", "R2"}},
		{"consumerTTL 3 reaches three hops", 3, []int{-5, -8, -9}, []string{"R1", "R2", "R3"}},
		{"unlimited consumerTTL", -1, []int{-5, -8, -9}, []string{"R1", "R2", "R3"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			brokers := []string{"R1", "R2", "R3", "R4"}
			ev := consumerAdvisory(t, "R1", "ID:client:1", 1, tPrices, "", 0, 1000)
			var priorities []int
			var lastPath []string
			for i := 1; i < len(brokers); i++ {
				o := bridgeOptions(brokers[i], brokers[i-1])
				o.ConsumerTTL = tt.consumerTTL
				tbl := New(o)
				changes, d := tbl.Apply(ev)
				if d.Action != Added {
					if d.Reason != ReasonConsumerTTL {
						t.Fatalf("bridge %s<-%s: %+v", brokers[i], brokers[i-1], d)
					}
					break
				}
				s := changes[0].Sub
				priorities = append(priorities, s.Priority)
				_, tag, _ := hop.ParseSelector(s.Selector)
				lastPath = tag.Path
				if tag.Origin != "conduit:R1:topic://prices" {
					t.Fatalf("origin %q lost along the chain", tag.Origin)
				}
				ev = subAdvisory(t, brokers[i], s)
			}
			if !slices.Equal(priorities, tt.wantPriority) || !slices.Equal(lastPath, tt.wantLastPaths) {
				t.Fatalf("priorities %v, last path %v; want %v, %v", priorities, lastPath, tt.wantPriority, tt.wantLastPaths)
			}
		})
	}
}
