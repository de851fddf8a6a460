package advisory

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/go-stomp/stomp/v3/frame"

	"github.com/brokernet/brokernet/destination"
	"github.com/brokernet/brokernet/hop"
)

// Sample bodies, verbatim from activemq-network.md §6.1 where the document
// gives them whole; the elided native sample is completed with the fields the
// document lists.
const (
	sampleConsumerInfo = `{"ConsumerInfo":{"commandId":3,"responseRequired":true,
 "consumerId":{"connectionId":"ID:vm-35885-1796032727730-6:3","sessionId":-1,"value":1},
 "destination":{"@class":"ActiveMQQueue","string":"ADV.Q","null":""},
 "prefetchSize":0,"maximumPendingMessageLimit":0,"browser":false,"dispatchAsync":true,
 "selector":"convert_string_expressions:color = 'red'",
 "noLocal":true,"exclusive":true,"retroactive":true,"priority":-3,
 "optimizedAcknowledge":false,"noRangeAcks":false}}`

	sampleRemoveInfo = `{"RemoveInfo":{"commandId":0,"responseRequired":true,
 "objectId":{"@class":"ConsumerId","connectionId":"ID:vm-35885-1796032727730-6:3","sessionId":-1,"value":1},
 "lastDeliveredSequenceId":-2}}`

	sampleNativeOneHop = `{"ConsumerInfo":{"commandId":8,"responseRequired":false,
 "consumerId":{"connectionId":"R2->R1-35885-1796032727730-5:1","sessionId":1,"value":3},
 "destination":{"@class":"ActiveMQQueue","string":"NET.Q","null":""},"prefetchSize":1000,
 "maximumPendingMessageLimit":0,"browser":false,"dispatchAsync":true,"noLocal":false,"exclusive":false,
 "retroactive":false,"priority":4,
 "brokerPath":[{"BrokerId":{"value":"R1"}}],"optimizedAcknowledge":false,"noRangeAcks":false,
 "additionalPredicate":{"@class":"NetworkBridgeFilter","networkBrokerId":{"value":"R1"},"messageTTL":1,"consumerTTL":1}}}`

	sampleNativeTwoHops = `{"ConsumerInfo":{"commandId":8,"responseRequired":false,
 "consumerId":{"connectionId":"R3->R2-1-2-5:1","sessionId":1,"value":7},
 "destination":{"@class":"ActiveMQTopic","string":"NET.T","null":""},"prefetchSize":1000,"priority":-8,
 "brokerPath":[{"BrokerId":[{"value":"R1"},{"value":"R2"}]}],
 "additionalPredicate":{"@class":"NetworkBridgeFilter","networkBrokerId":{"value":"R2"},"messageTTL":3,"consumerTTL":3}}}`

	sampleTempQueueConsumer = `{"ConsumerInfo":{"commandId":4,"responseRequired":true,
 "consumerId":{"connectionId":"ID:vm-35885-1796032727730-6:4","sessionId":-1,"value":2},
 "destination":{"@class":"ActiveMQTempQueue","string":"ID:vm-35885-1796032727730-6:4:1","null":""},
 "prefetchSize":1000,"browser":false,"dispatchAsync":true,"noLocal":false,"exclusive":false,
 "retroactive":false,"priority":0}}`

	sampleDestinationInfo = `{"DestinationInfo":{"commandId":0,"responseRequired":false,
 "connectionId":{"value":"ID:vm-35885-1796032727730-6:4"},
 "destination":{"@class":"ActiveMQTempQueue","string":"ID:vm-35885-1796032727730-6:4:1","null":""},
 "operationType":0,"timeout":0}}`

	sampleRemoveSubscriptionInfo = `{"RemoveSubscriptionInfo":{"commandId":5,"responseRequired":true,
 "connectionId":{"value":"ID:vm-1"},"subcriptionName":"s1","clientId":"c1"}}`
)

// advisoryHeader returns MESSAGE headers like those of §6.1.
func advisoryHeader(count string) *frame.Header {
	h := frame.NewHeader(
		"destination", "/topic/ActiveMQ.Advisory.Consumer.Queue.ADV.Q",
		"message-id", "ID:vm-35885-1796032727730-1:1:0:0:10",
		"type", "Advisory",
		"originBrokerName", "R2",
		"originBrokerId", "ID:vm-35885-1796032727730-0:1",
		"originBrokerURL", "stomp://localhost:62613",
		"transformation", "jms-advisory-json",
		"priority", "0", "expires", "0", "timestamp", "0",
		"subscription", "adv-1",
	)
	if count != "" {
		h.Add("consumerCount", count)
	}
	return h
}

func TestTopics(t *testing.T) {
	want := []string{"/topic/ActiveMQ.Advisory.Consumer.Queue.>", "/topic/ActiveMQ.Advisory.Consumer.Topic.>"}
	got := Topics()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Topics() = %q", got)
	}
	got[0] = "mutated"
	if Topics()[0] != want[0] {
		t.Fatal("Topics returns a shared slice")
	}
}

func TestParseActiveMQ(t *testing.T) {
	demandSel := hop.Selector("color = 'red'", "R2", 1, hop.Tag{Path: []string{"R9", "R1"}, Origin: "ID:orig-1:1:-1:1"})
	tests := []struct {
		name string
		body string
		want Event // header fields are checked separately
	}{
		{
			name: "a STOMP consumer with selector, priority and flags",
			body: sampleConsumerInfo,
			want: Event{Kind: ConsumerAdded, Consumer: Consumer{
				ID:          "ID:vm-35885-1796032727730-6:3:-1:1",
				Destination: destination.Destination{Kind: destination.Queue, Name: "ADV.Q"},
				Selector:    "color = 'red'", Priority: -3, Prefetch: 0,
				Exclusive: true, NoLocal: true, Retroactive: true,
			}},
		},
		{
			name: "a RemoveInfo yields the same id as the ConsumerInfo",
			body: sampleRemoveInfo,
			want: Event{Kind: ConsumerRemoved, Consumer: Consumer{ID: "ID:vm-35885-1796032727730-6:3:-1:1"}},
		},
		{
			name: "a native network consumer one hop away (brokerPath as an object)",
			body: sampleNativeOneHop,
			want: Event{Kind: ConsumerAdded, Consumer: Consumer{
				ID:          "R2->R1-35885-1796032727730-5:1:1:3",
				Destination: destination.Destination{Kind: destination.Queue, Name: "NET.Q"},
				Priority:    4, Prefetch: 1000, Path: []string{"R1"}, Native: true,
			}},
		},
		{
			name: "a native network consumer two hops away (brokerPath as an array)",
			body: sampleNativeTwoHops,
			want: Event{Kind: ConsumerAdded, Consumer: Consumer{
				ID:          "R3->R2-1-2-5:1:1:7",
				Destination: destination.Destination{Kind: destination.Topic, Name: "NET.T"},
				Priority:    -8, Prefetch: 1000, Path: []string{"R1", "R2"}, Native: true,
			}},
		},
		{
			name: "a temporary queue consumer",
			body: sampleTempQueueConsumer,
			want: Event{Kind: ConsumerAdded, Consumer: Consumer{
				ID:          "ID:vm-35885-1796032727730-6:4:-1:2",
				Destination: destination.Destination{Kind: destination.TempQueue, Name: "ID:vm-35885-1796032727730-6:4:1"},
				Prefetch:    1000,
			}},
		},
		{
			name: "a brokernet demand subscription is recognised by its tag",
			body: `{"ConsumerInfo":{"consumerId":{"connectionId":"ID:b-1","sessionId":-1,"value":9},
				"destination":{"@class":"ActiveMQQueue","string":"Q"},"priority":-8,"prefetchSize":1000,
				"selector":` + jsonString(hop.ConvertStringPrefix+demandSel) + `}}`,
			want: Event{Kind: ConsumerAdded, Consumer: Consumer{
				ID:          "ID:b-1:-1:9",
				Destination: destination.Destination{Kind: destination.Queue, Name: "Q"},
				Selector:    "color = 'red'", Priority: -8, Prefetch: 1000,
				Path: []string{"R9", "R1"}, Origin: "ID:orig-1:1:-1:1", Bridge: true,
			}},
		},
		{
			name: "a brokernet replay subscription is recognised by its tag",
			body: `{"ConsumerInfo":{"consumerId":{"connectionId":"ID:b-1","sessionId":-1,"value":10},
				"destination":{"@class":"ActiveMQQueue","string":"Q"},"priority":-5,"prefetchSize":1000,
				"selector":` + jsonString(hop.ConvertStringPrefix+hop.ReplaySelector("color = 'red'", "R1", 0, hop.Tag{Path: []string{"R1"}, Origin: "replay"})) + `}}`,
			want: Event{Kind: ConsumerAdded, Consumer: Consumer{
				ID:          "ID:b-1:-1:10",
				Destination: destination.Destination{Kind: destination.Queue, Name: "Q"},
				Selector:    "color = 'red'", Priority: -5, Prefetch: 1000,
				Path: []string{"R1"}, Origin: "replay", Bridge: true, Replay: true,
			}},
		},
		{
			name: "native hops after a brokernet hop extend the tag's path",
			body: `{"ConsumerInfo":{"consumerId":{"connectionId":"ID:c-1","sessionId":1,"value":2},
				"destination":{"@class":"ActiveMQQueue","string":"Q"},
				"selector":` + jsonString(demandSel) + `,
				"brokerPath":[{"BrokerId":[{"value":"B"},{"value":"C"}]}]}}`,
			want: Event{Kind: ConsumerAdded, Consumer: Consumer{
				ID:          "ID:c-1:1:2",
				Destination: destination.Destination{Kind: destination.Queue, Name: "Q"},
				Selector:    "color = 'red'",
				Path:        []string{"R9", "R1", "B", "C"}, Origin: "ID:orig-1:1:-1:1", Bridge: true, Native: true,
			}},
		},
		{
			name: "numbers and booleans rendered as strings",
			body: `{"ConsumerInfo":{"consumerId":{"connectionId":"ID:x","sessionId":"-1","value":"12"},
				"destination":{"@class":"ActiveMQTopic","string":"T"},"priority":"-3","prefetchSize":" 7 ",
				"browser":"false","exclusive":"true","noLocal":"TRUE","retroactive":1,"subscriptionName":"dur","clientId":"cid"}}`,
			want: Event{Kind: ConsumerAdded, Consumer: Consumer{
				ID:          "ID:x:-1:12",
				Destination: destination.Destination{Kind: destination.Topic, Name: "T"},
				Priority:    -3, Prefetch: 7, Exclusive: true, NoLocal: true, Retroactive: true,
				SubscriptionName: "dur", ClientID: "cid",
			}},
		},
		{
			name: "integral floats, nulls and unknown fields are tolerated",
			body: `{"ConsumerInfo":{"consumerId":{"connectionId":"ID:x","sessionId":1.0,"value":3e0},
				"destination":{"@class":"org.apache.activemq.command.ActiveMQQueue","physicalName":"P"},
				"priority":null,"selector":null,"brokerPath":null,"additionalPredicate":null,"future":{"a":[1]}}}`,
			want: Event{Kind: ConsumerAdded, Consumer: Consumer{
				ID:          "ID:x:1:3",
				Destination: destination.Destination{Kind: destination.Queue, Name: "P"},
			}},
		},
		{
			name: "a browser",
			body: `{"ConsumerInfo":{"consumerId":{"connectionId":"ID:x","sessionId":-1,"value":1},
				"destination":{"@class":"ActiveMQQueue","string":"Q"},"browser":true,"prefetchSize":500}}`,
			want: Event{Kind: ConsumerAdded, Consumer: Consumer{
				ID:          "ID:x:-1:1",
				Destination: destination.Destination{Kind: destination.Queue, Name: "Q"},
				Prefetch:    500, Browser: true,
			}},
		},
		{
			name: "a blank selector counts as none",
			body: `{"ConsumerInfo":{"consumerId":{"connectionId":"ID:x","sessionId":-1,"value":1},
				"destination":{"@class":"ActiveMQQueue","string":"Q"},"selector":"convert_string_expressions:  "}}`,
			want: Event{Kind: ConsumerAdded, Consumer: Consumer{
				ID:          "ID:x:-1:1",
				Destination: destination.Destination{Kind: destination.Queue, Name: "Q"},
			}},
		},
		{
			name: "a network filter without brokerPath takes the path from networkBrokerId",
			body: `{"ConsumerInfo":{"consumerId":{"connectionId":"ID:x","sessionId":1,"value":1},
				"destination":{"@class":"ActiveMQQueue","string":"Q"},
				"additionalPredicate":{"@class":"ConditionalNetworkBridgeFilterFactory_-ConditionalNetworkBridgeFilter","networkBrokerId":{"value":"R7"}}}}`,
			want: Event{Kind: ConsumerAdded, Consumer: Consumer{
				ID:          "ID:x:1:1",
				Destination: destination.Destination{Kind: destination.Queue, Name: "Q"},
				Path:        []string{"R7"}, Native: true,
			}},
		},
		{
			name: "another additionalPredicate does not make a network consumer",
			body: `{"ConsumerInfo":{"consumerId":{"connectionId":"ID:x","sessionId":1,"value":1},
				"destination":{"@class":"ActiveMQQueue","string":"Q"},"additionalPredicate":{"@class":"SomethingElse"}}}`,
			want: Event{Kind: ConsumerAdded, Consumer: Consumer{
				ID:          "ID:x:1:1",
				Destination: destination.Destination{Kind: destination.Queue, Name: "Q"},
			}},
		},
		{
			name: "a brokerPath element without the BrokerId wrapper",
			body: `{"ConsumerInfo":{"consumerId":{"connectionId":"ID:x","sessionId":1,"value":1},
				"destination":{"@class":"ActiveMQQueue","string":"Q"},"brokerPath":{"BrokerId":{"value":"R1"}}}}`,
			want: Event{Kind: ConsumerAdded, Consumer: Consumer{
				ID:          "ID:x:1:1",
				Destination: destination.Destination{Kind: destination.Queue, Name: "Q"},
				Path:        []string{"R1"}, Native: true,
			}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseActiveMQ(advisoryHeader("2"), []byte(tt.body))
			if err != nil {
				t.Fatalf("ParseActiveMQ: %v", err)
			}
			tt.want.OriginBrokerID = "ID:vm-35885-1796032727730-0:1"
			tt.want.OriginBrokerName = "R2"
			tt.want.ConsumerCount = 2
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("ParseActiveMQ =\n%+v\nwant\n%+v", got, tt.want)
			}
		})
	}
}

func jsonString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"', '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

func TestParseActiveMQHeaders(t *testing.T) {
	tests := []struct {
		name      string
		h         *frame.Header
		wantCount int
		wantID    string
	}{
		{"nil header", nil, -1, ""},
		{"no consumerCount", advisoryHeader(""), -1, "ID:vm-35885-1796032727730-0:1"},
		{"invalid consumerCount", advisoryHeader("many"), -1, "ID:vm-35885-1796032727730-0:1"},
		{"negative consumerCount", advisoryHeader("-4"), -1, "ID:vm-35885-1796032727730-0:1"},
		{"zero consumerCount", advisoryHeader("0"), 0, "ID:vm-35885-1796032727730-0:1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev, err := ParseActiveMQ(tt.h, []byte(sampleRemoveInfo))
			if err != nil {
				t.Fatal(err)
			}
			if ev.ConsumerCount != tt.wantCount || ev.OriginBrokerID != tt.wantID {
				t.Fatalf("ConsumerCount, OriginBrokerID = %d, %q; want %d, %q", ev.ConsumerCount, ev.OriginBrokerID, tt.wantCount, tt.wantID)
			}
		})
	}
}

func TestParseActiveMQNotConsumer(t *testing.T) {
	tests := []struct{ name, body string }{
		{"DestinationInfo", sampleDestinationInfo},
		{"RemoveInfo of a producer", `{"RemoveInfo":{"objectId":{"@class":"ProducerId","connectionId":"ID:x","sessionId":1,"value":1}}}`},
		{"an unknown command", `{"BrokerInfo":{}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseActiveMQ(advisoryHeader("1"), []byte(tt.body))
			if !errors.Is(err, ErrNotConsumerAdvisory) {
				t.Fatalf("error = %v, want ErrNotConsumerAdvisory", err)
			}
		})
	}
}

func TestParseRemoveSubscriptionInfo(t *testing.T) {
	topicHeader := func(dest string) *frame.Header {
		h := advisoryHeader("0")
		h.Set("destination", dest)
		return h
	}
	tests := []struct {
		name string
		h    *frame.Header
		body string
		want Consumer
	}{
		{
			name: "the misspelt field of ActiveMQ 5.x, with the topic from the header",
			h:    topicHeader("/topic/ActiveMQ.Advisory.Consumer.Topic.prices.eu"),
			body: sampleRemoveSubscriptionInfo,
			want: Consumer{SubscriptionName: "s1", ClientID: "c1", Destination: destination.Destination{Kind: destination.Topic, Name: "prices.eu"}},
		},
		{
			name: "the correct spelling",
			h:    topicHeader("/topic/ActiveMQ.Advisory.Consumer.Topic.T"),
			body: `{"RemoveSubscriptionInfo":{"commandId":5,"connectionId":{"value":"ID:vm-1"},"subscriptionName":"s2"}}`,
			want: Consumer{SubscriptionName: "s2", Destination: destination.Destination{Kind: destination.Topic, Name: "T"}},
		},
		{
			name: "the correct spelling wins when both are present",
			h:    nil,
			body: `{"RemoveSubscriptionInfo":{"subscriptionName":"right","subcriptionName":"wrong","clientId":"c"}}`,
			want: Consumer{SubscriptionName: "right", ClientID: "c"},
		},
		{
			name: "no destination header leaves the destination unknown",
			h:    frame.NewHeader("consumerCount", "0"),
			body: sampleRemoveSubscriptionInfo,
			want: Consumer{SubscriptionName: "s1", ClientID: "c1"},
		},
		{
			name: "a queue advisory topic",
			h:    topicHeader("/topic/ActiveMQ.Advisory.Consumer.Queue.Q"),
			body: sampleRemoveSubscriptionInfo,
			want: Consumer{SubscriptionName: "s1", ClientID: "c1", Destination: destination.Destination{Kind: destination.Queue, Name: "Q"}},
		},
		{
			name: "an unrelated destination header",
			h:    topicHeader("/topic/Other"),
			body: sampleRemoveSubscriptionInfo,
			want: Consumer{SubscriptionName: "s1", ClientID: "c1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev, err := ParseActiveMQ(tt.h, []byte(tt.body))
			if err != nil {
				t.Fatalf("ParseActiveMQ: %v", err)
			}
			if ev.Kind != DurableRemoved || !reflect.DeepEqual(ev.Consumer, tt.want) {
				t.Fatalf("ParseActiveMQ = %v %+v, want %+v", ev.Kind, ev.Consumer, tt.want)
			}
		})
	}
	for _, bad := range []string{
		`{"RemoveSubscriptionInfo":{"clientId":"c"}}`,
		`{"RemoveSubscriptionInfo":{"subcriptionName":""}}`,
		`{"RemoveSubscriptionInfo":{"subcriptionName":{}}}`,
		`{"RemoveSubscriptionInfo":[]}`,
	} {
		if _, err := ParseActiveMQ(nil, []byte(bad)); err == nil || errors.Is(err, ErrNotConsumerAdvisory) {
			t.Errorf("ParseActiveMQ(%s) = %v, want a parse error", bad, err)
		}
	}
}

func TestParseActiveMQErrors(t *testing.T) {
	tests := []struct{ name, body, wantErr string }{
		{"empty body", "", "empty body"},
		{"blank body", " \n\t", "empty body"},
		{"garbage", "<xml/>", "parsing advisory: invalid character"},
		{"truncated JSON", sampleConsumerInfo[:60], "parsing advisory: unexpected end"},
		{"an array", "[1,2]", "cannot unmarshal array"},
		{"a string", `"ConsumerInfo"`, "cannot unmarshal string"},
		{"two roots", `{"ConsumerInfo":{},"RemoveInfo":{}}`, "want one root element, got 2"},
		{"no root", `{}`, "want one root element, got 0"},
		{"ConsumerInfo is not an object", `{"ConsumerInfo":[1]}`, "ConsumerInfo: want an object"},
		{"ConsumerInfo is null", `{"ConsumerInfo":null}`, "ConsumerInfo: want an object"},
		{"missing consumerId", `{"ConsumerInfo":{"destination":{"@class":"ActiveMQQueue","string":"Q"}}}`, "missing consumerId"},
		{"missing connectionId", `{"ConsumerInfo":{"consumerId":{"sessionId":1,"value":1}}}`, "consumerId: missing connectionId"},
		{"missing sessionId", `{"ConsumerInfo":{"consumerId":{"connectionId":"c","value":1}}}`, "consumerId: missing sessionId"},
		{"missing value", `{"ConsumerInfo":{"consumerId":{"connectionId":"c","sessionId":1}}}`, "consumerId: missing value"},
		{"fractional value", `{"ConsumerInfo":{"consumerId":{"connectionId":"c","sessionId":1,"value":1.5}}}`, `consumerId.value: want an integer, got "1.5"`},
		{"object connectionId", `{"ConsumerInfo":{"consumerId":{"connectionId":{},"sessionId":1,"value":1}}}`, "consumerId.connectionId: want a scalar"},
		{"missing destination", `{"ConsumerInfo":{"consumerId":{"connectionId":"c","sessionId":1,"value":1}}}`, "missing destination"},
		{"destination without class", `{"ConsumerInfo":{"consumerId":{"connectionId":"c","sessionId":1,"value":1},"destination":{"string":"Q"}}}`, "destination: missing @class"},
		{"destination without name", `{"ConsumerInfo":{"consumerId":{"connectionId":"c","sessionId":1,"value":1},"destination":{"@class":"ActiveMQQueue","null":""}}}`, "destination: missing name"},
		{"unknown destination class", `{"ConsumerInfo":{"consumerId":{"connectionId":"c","sessionId":1,"value":1},"destination":{"@class":"ActiveMQFoo","string":"Q"}}}`, `unknown class "ActiveMQFoo"`},
		{"bad priority", `{"ConsumerInfo":{"consumerId":{"connectionId":"c","sessionId":1,"value":1},"destination":{"@class":"ActiveMQQueue","string":"Q"},"priority":"high"}}`, `priority: want an integer, got "high"`},
		{"huge priority", `{"ConsumerInfo":{"consumerId":{"connectionId":"c","sessionId":1,"value":1},"destination":{"@class":"ActiveMQQueue","string":"Q"},"priority":99999999999}}`, "priority: 99999999999 out of range"},
		{"bad browser", `{"ConsumerInfo":{"consumerId":{"connectionId":"c","sessionId":1,"value":1},"destination":{"@class":"ActiveMQQueue","string":"Q"},"browser":"maybe"}}`, `browser: want a boolean, got "maybe"`},
		{"bad brokerPath", `{"ConsumerInfo":{"consumerId":{"connectionId":"c","sessionId":1,"value":1},"destination":{"@class":"ActiveMQQueue","string":"Q"},"brokerPath":[{"Other":1}]}}`, "brokerPath: want BrokerId or value"},
		{"numeric brokerPath", `{"ConsumerInfo":{"consumerId":{"connectionId":"c","sessionId":1,"value":1},"destination":{"@class":"ActiveMQQueue","string":"Q"},"brokerPath":7}}`, "brokerPath: unexpected 7"},
		{"deep brokerPath", `{"ConsumerInfo":{"consumerId":{"connectionId":"c","sessionId":1,"value":1},"destination":{"@class":"ActiveMQQueue","string":"Q"},"brokerPath":[[[[[[[[["R"]]]]]]]]]}}`, "brokerPath: nested too deeply"},
		{"bad predicate", `{"ConsumerInfo":{"consumerId":{"connectionId":"c","sessionId":1,"value":1},"destination":{"@class":"ActiveMQQueue","string":"Q"},"additionalPredicate":"x"}}`, "additionalPredicate: want an object"},
		{"RemoveInfo without objectId", `{"RemoveInfo":{"commandId":0}}`, "missing objectId"},
		{"RemoveInfo with incomplete objectId", `{"RemoveInfo":{"objectId":{"@class":"ConsumerId","connectionId":"c"}}}`, "objectId: missing sessionId"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseActiveMQ(advisoryHeader("1"), []byte(tt.body))
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error = %v, want it to contain %q", err, tt.wantErr)
			}
			if errors.Is(err, ErrNotConsumerAdvisory) {
				t.Fatalf("malformed body reported as ErrNotConsumerAdvisory: %v", err)
			}
		})
	}
}

func TestTrim(t *testing.T) {
	tests := []struct {
		body string
		n    int
		want string
	}{
		{"hello", 10, "hello"},
		{"hello", 5, "hello"},
		{"hello", 4, "hell…"},
		{"hello", 0, "…"},
		{"hello", -3, "…"},
		{"", 0, ""},
		{"héllo", 2, "h…"}, // 'é' is 2 bytes; cutting at 2 would split it
		{"héllo", 3, "hé…"},
		{"日本語", 4, "日…"},
		{"日本語", 6, "日本…"},
		{"a\xffb", 10, "a\uFFFDb"},
		{"a\xffbcdef", 3, "a\uFFFDb…"},
	}
	for _, tt := range tests {
		got := Trim([]byte(tt.body), tt.n)
		if got != tt.want {
			t.Errorf("Trim(%q, %d) = %q, want %q", tt.body, tt.n, got, tt.want)
		}
		if !utf8.ValidString(got) {
			t.Errorf("Trim(%q, %d) = %q is not valid UTF-8", tt.body, tt.n, got)
		}
	}
}

func TestKindString(t *testing.T) {
	for k, want := range map[Kind]string{ConsumerAdded: "added", ConsumerRemoved: "removed", DurableRemoved: "durable-removed", 0: "Kind(0)"} {
		if got := k.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", uint8(k), got, want)
		}
	}
}

// FuzzParseActiveMQ checks that ParseActiveMQ never panics and that what it
// accepts is consistent.
func FuzzParseActiveMQ(f *testing.F) {
	for _, s := range []string{
		sampleConsumerInfo, sampleRemoveInfo, sampleNativeOneHop, sampleNativeTwoHops,
		sampleTempQueueConsumer, sampleDestinationInfo, sampleRemoveSubscriptionInfo,
		"", "{}", "null", `{"ConsumerInfo":{}}`, `{"RemoveInfo":{"objectId":{}}}`,
		`{"ConsumerInfo":{"consumerId":{"connectionId":"c","sessionId":"1","value":"2"},"destination":{"@class":"ActiveMQQueue","string":"Q"},"selector":` +
			jsonString(hop.Selector("a = 1", "R", 1, hop.Tag{Path: []string{"X"}, Origin: "o"})) + `}}`,
		`{"ConsumerInfo":{"consumerId":{"connectionId":"c","sessionId":"1","value":"2"},"destination":{"@class":"ActiveMQQueue","string":"Q"},"selector":` +
			jsonString(hop.ReplaySelector("a = 1", "R", 0, hop.Tag{Path: []string{"R"}, Origin: "replay"})) + `}}`,
		`{"RemoveSubscriptionInfo":{"subscriptionName":"s","clientId":"c"}}`,
	} {
		f.Add([]byte(s), "3")
	}
	f.Fuzz(func(t *testing.T, body []byte, count string) {
		h := frame.NewHeader("consumerCount", count, "originBrokerId", "B", "destination", "/topic/ActiveMQ.Advisory.Consumer.Topic."+count)
		ev, err := ParseActiveMQ(h, body)
		if err != nil {
			if !reflect.DeepEqual(ev, Event{}) {
				t.Fatalf("error %v with non-zero event %+v", err, ev)
			}
			return
		}
		if ev.Kind == DurableRemoved {
			c := ev.Consumer
			if c.SubscriptionName == "" || c.ID != "" || c.Destination.Kind.Valid() && (c.Destination.Kind != destination.Topic || c.Destination.Name != count) {
				t.Fatalf("accepted RemoveSubscriptionInfo as %+v", c)
			}
			return
		}
		if ev.Consumer.ID == "" {
			t.Fatalf("accepted event without consumer id: %+v", ev)
		}
		switch ev.Kind {
		case ConsumerAdded:
			if !ev.Consumer.Destination.Kind.Valid() || ev.Consumer.Destination.Name == "" {
				t.Fatalf("accepted ConsumerInfo with bad destination: %+v", ev)
			}
			if ev.Consumer.Origin != "" && !ev.Consumer.Bridge || ev.Consumer.Replay && !ev.Consumer.Bridge {
				t.Fatalf("tag fields without a brokernet tag: %+v", ev.Consumer)
			}
		case ConsumerRemoved:
			if !reflect.DeepEqual(ev.Consumer, Consumer{ID: ev.Consumer.ID}) {
				t.Fatalf("RemoveInfo with more than an id: %+v", ev.Consumer)
			}
		default:
			t.Fatalf("accepted event of kind %v", ev.Kind)
		}
		if ev.ConsumerCount < -1 {
			t.Fatalf("ConsumerCount %d", ev.ConsumerCount)
		}
		if s := Trim(body, 40); !utf8.ValidString(s) {
			t.Fatalf("Trim returned invalid UTF-8 %q", s)
		}
	})
}
