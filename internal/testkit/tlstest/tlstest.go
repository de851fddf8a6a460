// Package tlstest makes throw-away certificates for tests of TLS: self-signed
// ones, and a CA that issues server and client certificates, in the forms
// crypto/tls wants and as PEM files for what reads files (URIs' ca, cert and
// key options; brokers).
package tlstest

import (
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
	"testing"
	"time"
)

// Cert is a certificate with its private key (ECDSA P-256), valid from an hour
// ago for two hours.
type Cert struct {
	// TLS is the certificate as a tls.Config takes it.
	TLS tls.Certificate
	// X509 is the parsed certificate.
	X509 *x509.Certificate
	key  *ecdsa.PrivateKey
}

// SelfSigned makes a self-signed certificate named cn for host dns, or for
// 127.0.0.1 when dns is "", with the given extended key usages. It may sign
// others (Issue), and a pool holding it trusts it as a server or client.
func SelfSigned(tb testing.TB, cn, dns string, usage ...x509.ExtKeyUsage) Cert {
	tb.Helper()
	return newCert(tb, cn, dns, usage, nil)
}

// Issue makes a certificate named cn for host dns (127.0.0.1 when ""), with
// the given extended key usages, signed by ca.
func (ca Cert) Issue(tb testing.TB, cn, dns string, usage ...x509.ExtKeyUsage) Cert {
	tb.Helper()
	return newCert(tb, cn, dns, usage, &ca)
}

func newCert(tb testing.TB, cn, dns string, usage []x509.ExtKeyUsage, parent *Cert) Cert {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		tb.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  usage,
	}
	if dns != "" {
		tmpl.DNSNames = []string{dns}
	} else {
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
	}
	signer, signerKey := tmpl, key
	if parent == nil {
		tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
		tmpl.KeyUsage |= x509.KeyUsageCertSign
	} else {
		signer, signerKey = parent.X509, parent.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, &key.PublicKey, signerKey)
	if err != nil {
		tb.Fatal(err)
	}
	parsed, err := x509.ParseCertificate(der)
	if err != nil {
		tb.Fatal(err)
	}
	return Cert{TLS: tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: parsed}, X509: parsed, key: key}
}

// PEM is the certificate, PEM-encoded.
func (c Cert) PEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.X509.Raw})
}

// KeyPEM is the private key, PEM-encoded PKCS #8.
func (c Cert) KeyPEM(tb testing.TB) []byte {
	tb.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(c.key)
	if err != nil {
		tb.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}

// Pool is a certificate pool that trusts c.
func (c Cert) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(c.X509)
	return p
}

// WriteFiles writes the certificate to certFile and its key to keyFile, both
// PEM, readable by everyone (a broker running as another user reads them).
func (c Cert) WriteFiles(tb testing.TB, certFile, keyFile string) {
	tb.Helper()
	WriteFile(tb, certFile, c.PEM())
	WriteFile(tb, keyFile, c.KeyPEM(tb))
}

// WriteFile writes data to name (mode 0644), failing the test on error.
func WriteFile(tb testing.TB, name string, data []byte) {
	tb.Helper()
	if err := os.WriteFile(name, data, 0o644); err != nil {
		tb.Fatal(err)
	}
}

// Serve listens on 127.0.0.1 with cfg until the test ends and runs handle on
// each connection it accepts (in a goroutine of its own), closing the
// connection when handle returns. It returns the listening address.
func Serve(tb testing.TB, cfg *tls.Config, handle func(nc net.Conn)) string {
	tb.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ln.Close() })
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer nc.Close()
				handle(nc)
			}()
		}
	}()
	return ln.Addr().String()
}
