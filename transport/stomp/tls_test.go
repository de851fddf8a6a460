package stomp

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-stomp/stomp/v3/frame"
)

// selfSigned makes a certificate for 127.0.0.1 and returns it with its PEM.
func selfSigned(t *testing.T) (tls.Certificate, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "test broker"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA:                  true,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key},
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// TestTLSWithCAFile connects over stomp+ssl to a broker whose certificate is
// trusted through ?ca=FILE, and fails against the system roots.
func TestTLSWithCAFile(t *testing.T) {
	cert, caPEM := selfSigned(t)
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
