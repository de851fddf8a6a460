package endpoint

import (
	"testing"

	"github.com/brokernet/brokernet/transport/openwire"
	"github.com/brokernet/brokernet/transport/stomp"
)

// TestOpenWireOfSTOMP: the OpenWire side of a STOMP URI has its address,
// credentials and, over TLS, its CA file and server name, with OpenWire's
// default options.
func TestOpenWireOfSTOMP(t *testing.T) {
	tests := []struct {
		name string
		in   stomp.OpenWireTarget
		want string // the OpenWire URI, WithSecrets
	}{
		{"plain", stomp.OpenWireTarget{Host: "h", Port: 61616, User: "u", Password: "p"}, "tcp://u:p@h:61616"},
		{"TLS with a CA and a server name", stomp.OpenWireTarget{TLS: true, Host: "::1", Port: 61617, User: "u", Password: "p", CAFile: "/ca.pem", ServerName: "b.example"},
			"ssl://u:p@[::1]:61617?ca=%2Fca.pem&serverName=b.example"},
		{"no credentials", stomp.OpenWireTarget{Host: "h", Port: 1}, "tcp://h:1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := openWireOf(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			want, err := openwire.ParseURI(tt.want)
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Fatalf("openWireOf(%+v) = %+v, want %+v", tt.in, got, want)
			}
			if !got.ListsDurables() {
				t.Fatal("an OpenWire URI does not list durables")
			}
		})
	}
}
