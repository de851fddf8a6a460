package rabbitmq

import "testing"

func TestRabbitBridgeNames(t *testing.T) {
	for tag, want := range map[string]bool{
		"T_bn-d1": true, "bn-x": true, "T_1": false, "amq.ctag-x": false, "T_bn": false, "T_brokernet-x": false,
	} {
		if IsBridgeConsumerTag(tag) != want {
			t.Errorf("IsBridgeConsumerTag(%q) = %v", tag, !want)
		}
	}
	if !IsBridgeQueue("bn_s1.topics") || IsBridgeQueue("orders") || !PrivateQueue("amq.gen-x") || PrivateQueue("orders") {
		t.Error("IsBridgeQueue")
	}
}
