package advisory

import (
	"errors"
	"testing"

	"github.com/go-stomp/stomp/v3/frame"
)

func TestCheckBrokerGenerated(t *testing.T) {
	for _, tt := range []struct {
		name, id string
		forged   bool
	}{
		{"the broker's advisory producer", "ID:vm-42233-1796135445856-1:1:0:0:5", false},
		{"a broker with a dotted host name", "ID:broker.example.com-42233-1796135445856-1:1:0:0:123", false},
		{"a STOMP client's message", "ID:vm-42233-1796135445856-4:5:-1:1:1", true},
		{"a JMS client's message", "ID:client-40001-1796135445999-1:1:1:1:1", true},
		{"a producer 0 in session 1", "ID:client-40001-1796135445999-1:1:1:0:1", true},
		{"garbage", "hello", true},
		{"a truncated id", "ID:0:0:1", true},
		{"a non-numeric sequence", "ID:vm-1-2-1:1:0:0:x", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckBrokerGenerated(tt.id)
			if tt.forged != errors.Is(err, ErrForged) {
				t.Fatalf("CheckBrokerGenerated(%q) = %v, want forged %v", tt.id, err, tt.forged)
			}
		})
	}
	h := frame.NewHeader("message-id", "ID:vm-42233-1796135445856-4:5:-1:1:1", "originBrokerId", "B")
	if _, err := ParseActiveMQ(h, []byte(sampleRemoveInfo)); !errors.Is(err, ErrForged) {
		t.Fatalf("ParseActiveMQ of a client's RemoveInfo = %v, want ErrForged", err)
	}
}
