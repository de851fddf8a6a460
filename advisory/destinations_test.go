package advisory

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/go-stomp/stomp/v3/frame"

	"github.com/brokernet/brokernet/destination"
)

func TestParseDestinationInfo(t *testing.T) {
	queue := func(op, name string) string {
		return `{"DestinationInfo":{"commandId":0,"responseRequired":false,"connectionId":{"value":"ID:vm-1-2-6:4"},
 "destination":{"@class":"ActiveMQQueue","string":"` + name + `","null":""},"operationType":` + op + `,"timeout":0}}`
	}
	brokerHeader := frame.NewHeader("message-id", "ID:vm-1-2-1:1:0:0:7")
	tests := []struct {
		name string
		h    *frame.Header
		body string
		want DestinationEvent
		err  string
	}{
		{"a queue added", brokerHeader, queue("0", "secret.x"), DestinationEvent{Destination: destination.Destination{Kind: destination.Queue, Name: "secret.x"}}, ""},
		{"a queue removed", brokerHeader, queue("1", "a"), DestinationEvent{Destination: destination.Destination{Kind: destination.Queue, Name: "a"}, Removed: true}, ""},
		{"a temporary queue", nil, sampleDestinationInfo, DestinationEvent{Destination: destination.Destination{Kind: destination.TempQueue, Name: "ID:vm-35885-1796032727730-6:4:1"}}, ""},
		{"a mirrored temporary queue carries its brokerPath", brokerHeader, `{"DestinationInfo":{"commandId":0,"responseRequired":false,"connectionId":{"value":"ID:vm-1-2-6:4"},
 "destination":{"@class":"ActiveMQTempQueue","string":"ID:b-1:1:1","null":""},"operationType":0,"timeout":0,"brokerPath":[{"BrokerId":{"value":"B"}}]}}`,
			DestinationEvent{Destination: destination.Destination{Kind: destination.TempQueue, Name: "ID:b-1:1:1"}, Path: []string{"B"}}, ""},
		{"forged by a client", frame.NewHeader("message-id", "ID:vm-1-2-4:5:-1:1:1"), queue("0", "x"), DestinationEvent{}, "forged"},
		{"an unknown operation", nil, queue("7", "x"), DestinationEvent{}, "operationType 7"},
		{"a consumer advisory", nil, sampleConsumerInfo, DestinationEvent{}, "want one DestinationInfo"},
		{"garbage", nil, "{", DestinationEvent{}, "parsing destination advisory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseDestinationInfo(tt.h, []byte(tt.body))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want %q", err, tt.err)
				}
				if tt.err == "forged" && !errors.Is(err, ErrForged) {
					t.Fatalf("err = %v, want ErrForged", err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

func FuzzParseDestinationInfo(f *testing.F) {
	f.Add([]byte(sampleDestinationInfo))
	f.Add([]byte(sampleConsumerInfo))
	f.Fuzz(func(t *testing.T, body []byte) {
		ev, err := ParseDestinationInfo(nil, body)
		if err == nil && (ev.Destination.Name == "" || !ev.Destination.Kind.Valid()) {
			t.Fatalf("accepted %q as %+v", body, ev)
		}
	})
}
