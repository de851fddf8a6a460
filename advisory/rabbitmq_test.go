package advisory

import "testing"

func TestRabbitBridgeNames(t *testing.T) {
	for tag, want := range map[string]bool{
		"T_brokernet-d1": true, "brokernet-x": true, "T_1": false, "amq.ctag-x": false, "T_brokernet": false,
	} {
		if IsBridgeConsumerTag(tag) != want {
			t.Errorf("IsBridgeConsumerTag(%q) = %v", tag, !want)
		}
	}
	if !IsBridgeQueue("brokernet.t.1") || IsBridgeQueue("orders") || !PrivateQueue("amq.gen-x") || PrivateQueue("orders") {
		t.Error("IsBridgeQueue")
	}
}
