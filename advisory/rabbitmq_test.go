package advisory

import "testing"

func TestRabbitBridgeNames(t *testing.T) {
	for tag, want := range map[string]bool{
		"T_brokernet-bn-d1": true, "brokernet-x": true, "T_1": false, "amq.ctag-x": false, "T_brokernet": false, "T_bn-d1": false,
	} {
		if IsBridgeConsumerTag(tag) != want {
			t.Errorf("IsBridgeConsumerTag(%q) = %v", tag, !want)
		}
	}
	if !IsBridgeQueue("brokernet.s1.topics") || IsBridgeQueue("orders") || !PrivateQueue("amq.gen-x") || PrivateQueue("orders") {
		t.Error("IsBridgeQueue")
	}
}
