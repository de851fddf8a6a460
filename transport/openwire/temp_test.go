package openwire

import "testing"

func TestTempOwnerID(t *testing.T) {
	tests := []struct {
		name, owner string
		ok          bool
	}{
		{"ID:vm-40713-1796396461205-1:1:1", "ID:vm-40713-1796396461205-1:1", true},
		{"ID:vm-1-2-3:4:12", "ID:vm-1-2-3:4", true},
		{"amq.gen-hyY7lxDPENqw10bWyDAq-w", "", false}, // RabbitMQ's: no connection id
		{":1", "", false},
	}
	for _, tt := range tests {
		got, err := tempOwnerID(tt.name)
		if (err == nil) != tt.ok || got != tt.owner {
			t.Errorf("tempOwnerID(%q) = %q, %v; want %q (ok %v)", tt.name, got, err, tt.owner, tt.ok)
		}
	}
}
