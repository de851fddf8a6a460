package stomp

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/brokernet/brokernet/internal/testkit/tlstest"
)

// TestTLSWithCAFile connects over stomp+ssl to a broker whose certificate is
// trusted through ?ca=FILE, and fails against the system roots.
func TestTLSWithCAFile(t *testing.T) {
	ca := tlstest.SelfSigned(t, "test broker", "", x509.ExtKeyUsageServerAuth)
	addr := serveTLS(t, &tls.Config{Certificates: []tls.Certificate{ca.TLS}})
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	tlstest.WriteFile(t, caFile, ca.PEM())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	u, err := ParseURI("stomp+ssl://" + addr + "?ca=" + caFile)
	if err != nil {
		t.Fatal(err)
	}
	c, err := Dial(ctx, u, Options{})
	if err != nil {
		t.Fatalf("dial with the CA file: %v", err)
	}
	c.Abort()

	u.CAFile = ""
	if _, err := Dial(ctx, u, Options{}); err == nil || !strings.Contains(err.Error(), "tls") {
		t.Fatalf("dial without trusting the CA: err = %v, want a TLS verification error", err)
	}
}
