package mgmt

import (
	"encoding/json"
	"testing"
)

func TestQueueLimits(t *testing.T) {
	for _, tc := range []struct {
		name    string
		json    string
		want    Limits
		refuses bool
	}{
		{"none", `{"arguments":{},"effective_policy_definition":{},"messages":3}`,
			Limits{Overflow: "drop-head", Messages: 3}, false},
		{"argument", `{"arguments":{"x-max-length":10,"x-overflow":"reject-publish"},"messages":10,"message_bytes":40}`,
			Limits{Overflow: "reject-publish", MaxLength: 10, Messages: 10, Bytes: 40}, true},
		{"policy", `{"arguments":{},"effective_policy_definition":{"max-length-bytes":1000,"overflow":"reject-publish-dlx"}}`,
			Limits{Overflow: "reject-publish-dlx", MaxBytes: 1000}, true},
		{"lower wins, argument's overflow wins", `{"arguments":{"x-max-length":50,"x-overflow":"drop-head"},"effective_policy_definition":{"max-length":20,"overflow":"reject-publish"}}`,
			Limits{Overflow: "drop-head", MaxLength: 20}, false},
		{"policy lower", `{"arguments":{"x-max-length":5},"effective_policy_definition":{"max-length":20,"overflow":"reject-publish"}}`,
			Limits{Overflow: "reject-publish", MaxLength: 5}, true},
		{"no limit", `{"arguments":{"x-overflow":"reject-publish"}}`,
			Limits{Overflow: "reject-publish"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var q queueLimits
			if err := json.Unmarshal([]byte(tc.json), &q); err != nil {
				t.Fatal(err)
			}
			got := q.limits()
			if got != tc.want || got.Refuses() != tc.refuses {
				t.Errorf("limits = %+v (refuses %v), want %+v (refuses %v)", got, got.Refuses(), tc.want, tc.refuses)
			}
		})
	}
}
