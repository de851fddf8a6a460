package stomp

import (
	"context"
	"crypto/x509"
	"path/filepath"
	"strings"
	"testing"

	"github.com/brokernet/brokernet/destination"
	"github.com/brokernet/brokernet/internal/testkit/tlstest"
)

// TestOpenWirePortOption: ?openwirePort= names the broker's OpenWire port, makes
// the URI list durable subscriptions, survives every rendering another process
// or the configuration reads back, and points at the same host with the same
// credentials and TLS settings.
func TestOpenWirePortOption(t *testing.T) {
	u, err := ParseURI("stomp://user:" + marker + "@broker.example:61613?openwirePort=61616&vhost=prod")
	if err != nil {
		t.Fatal(err)
	}
	if u.OpenWirePort != 61616 || !u.ListsDurables() {
		t.Fatalf("parsed OpenWirePort %d, ListsDurables %v", u.OpenWirePort, u.ListsDurables())
	}
	want := OpenWireTarget{Host: "broker.example", Port: 61616, User: "user", Password: marker}
	if got := u.OpenWire(); got != want {
		t.Fatalf("OpenWire() = %+v, want %+v", got, want)
	}
	t.Run("String shows it and hides the passcode", func(t *testing.T) {
		s := u.String()
		if !strings.Contains(s, "openwirePort=61616") || !strings.Contains(s, "vhost=prod") || strings.Contains(s, marker) {
			t.Fatalf("String() = %q", s)
		}
		back, err := ParseURI(strings.Replace(s, "***", marker, 1))
		if err != nil || back != u {
			t.Fatalf("String round trip: %+v, %v", back, err)
		}
	})
	t.Run("WithSecrets round-trips, also as a peer's URI", func(t *testing.T) {
		for _, parse := range []func(string) (URI, error){ParseURI, ParseRemoteURI} {
			back, err := parse(u.WithSecrets())
			if err != nil || back != u {
				t.Fatalf("round trip of %q: %+v, %v", u.WithSecrets(), back, err)
			}
		}
	})
	t.Run("gossip keeps it", func(t *testing.T) {
		// Same host, and the member dials it with its own credentials.
		p := u.Public().(URI)
		back, err := ParseRemoteURI(p.WithSecrets())
		if err != nil || back.OpenWirePort != 61616 || back.Passcode != "" {
			t.Fatalf("public %q: %+v, %v", p.WithSecrets(), back, err)
		}
	})
	t.Run("without it nothing is listed", func(t *testing.T) {
		d, err := ParseURI("stomp://user:" + marker + "@h:1")
		if err != nil {
			t.Fatal(err)
		}
		if d.ListsDurables() || strings.Contains(d.String(), "openwirePort") || strings.Contains(d.WithSecrets(), "openwirePort") {
			t.Fatalf("default: ListsDurables %v, %q, %q", d.ListsDurables(), d.String(), d.WithSecrets())
		}
		_, err = d.DurableSubscriptions(context.Background(), "", []destination.Destination{{Kind: destination.Topic, Name: ">"}})
		if err == nil || !strings.Contains(err.Error(), "openwirePort") || strings.Contains(err.Error(), marker) {
			t.Fatalf("DurableSubscriptions without openwirePort: %v", err)
		}
	})
}

// TestOpenWirePortOverTLS: a stomp+ssl URI's OpenWire side is TLS too, with the
// same CA file and server name.
func TestOpenWirePortOverTLS(t *testing.T) {
	ca := tlstest.SelfSigned(t, "test broker", "", x509.ExtKeyUsageServerAuth)
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	tlstest.WriteFile(t, caFile, ca.PEM())
	u, err := ParseURI("stomp+ssl://u:p@[::1]:61614?openwirePort=61617&ca=" + caFile + "&serverName=broker.example")
	if err != nil {
		t.Fatal(err)
	}
	want := OpenWireTarget{TLS: true, Host: "::1", Port: 61617, User: "u", Password: "p", CAFile: caFile, ServerName: "broker.example"}
	if got := u.OpenWire(); got != want {
		t.Fatalf("OpenWire() = %+v, want %+v", got, want)
	}
	if back, err := ParseURI(u.WithSecrets()); err != nil || back != u {
		t.Fatalf("round trip of %q: %+v, %v", u.WithSecrets(), back, err)
	}
}

// TestOpenWirePortRefused: a value that is not a port is refused naming the
// option and the value, never the passcode.
func TestOpenWirePortRefused(t *testing.T) {
	tests := []struct{ name, value, want string }{
		{"a word", "abc", `option openwirePort="abc": want a port number`},
		{"zero", "0", `option openwirePort="0"`},
		{"a negative port", "-1", `option openwirePort="-1"`},
		{"a port above 65535", "65536", `option openwirePort="65536"`},
		{"an empty value", "", `option openwirePort=""`},
		{"a host and port", "h:61616", `option openwirePort="h:61616"`},
	}
	for _, tt := range tests {
		t.Run(tt.name+" is refused", func(t *testing.T) {
			in := "stomp://u:" + marker + "@h:1?openwirePort=" + tt.value
			_, err := ParseURI(in)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("ParseURI(%q) = %v, want error containing %q", in, err, tt.want)
			}
			if strings.Contains(err.Error(), marker) {
				t.Fatalf("error shows the passcode: %v", err)
			}
		})
	}
	t.Run("a RabbitMQ broker is refused", func(t *testing.T) {
		_, err := ParseURI("stomp://u:" + marker + "@h:1?flavor=rabbitmq&openwirePort=61616")
		if err == nil || !strings.Contains(err.Error(), "openwirePort=61616") || strings.Contains(err.Error(), marker) {
			t.Fatalf("ParseURI = %v, want an openwirePort error without the passcode", err)
		}
	})
}
