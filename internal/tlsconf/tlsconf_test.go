package tlsconf

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/brokernet/brokernet/internal/testkit/tlstest"
)

type name string

func (n name) String() string { return string(n) }

// TestClientHandshakes dials a TLS server whose certificate the options trust
// (or not): trusted, the handshake succeeds; untrusted, the error names the
// broker and the connection is closed.
func TestClientHandshakes(t *testing.T) {
	ca := tlstest.SelfSigned(t, "test broker", "", x509.ExtKeyUsageServerAuth)
	addr := tlstest.Serve(t, &tls.Config{Certificates: []tls.Certificate{ca.TLS}}, func(nc net.Conn) {
		nc.(*tls.Conn).Handshake() //nolint:errcheck // the client's side is under test
	})
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	tlstest.WriteFile(t, caFile, ca.PEM())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	dial := func() net.Conn {
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		return nc
	}

	tc, err := Options{CAFile: caFile}.Client(ctx, dial(), "127.0.0.1", name("stomp+ssl://b"))
	if err != nil {
		t.Fatalf("trusted: %v", err)
	}
	tc.Close()

	nc := dial()
	_, err = Options{}.Client(ctx, nc, "127.0.0.1", name("stomp+ssl://b"))
	if err == nil || !strings.Contains(err.Error(), "tls handshake with stomp+ssl://b") {
		t.Fatalf("untrusted: err = %v, want a handshake error naming the broker", err)
	}
	if _, err := nc.Write([]byte("x")); err == nil {
		t.Error("the connection was left open after a failed handshake")
	}

	if _, err := (Options{CAFile: filepath.Join(t.TempDir(), "none.pem")}).Client(ctx, dial(), "127.0.0.1", name("b")); err == nil || !strings.Contains(err.Error(), "none.pem") {
		t.Errorf("missing CA file: %v", err)
	}
}
