package stomp

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-stomp/stomp/v3/frame"

	"github.com/brokernet/brokernet/internal/tlstest"
)

// TestTLSWithCAFile connects over stomp+ssl to a broker whose certificate is
// trusted through ?ca=FILE, and fails against the system roots.
func TestTLSWithCAFile(t *testing.T) {
	ca := tlstest.SelfSigned(t, "test broker", "", x509.ExtKeyUsageServerAuth)
	cert, caPEM := ca.TLS, ca.PEM()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer nc.Close()
				if _, err := frame.NewReader(nc).Read(); err != nil {
					return
				}
				w := bufio.NewWriter(nc)
				(&encoder{w: w}).writeFrame(frame.New(frame.CONNECTED, frame.Version, "1.2", frame.Server, "ActiveMQ/5.17.2"))
				w.Flush()
				time.Sleep(time.Second)
			}()
		}
	}()
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, caPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	u, err := ParseURI("stomp+ssl://" + ln.Addr().String() + "?ca=" + caFile)
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
