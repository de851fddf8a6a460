package tlstest

import (
	"crypto/tls"
	"crypto/x509"
	"path/filepath"
	"testing"
)

func TestCertificatesVerify(t *testing.T) {
	ca := SelfSigned(t, "test CA", "")
	server := ca.Issue(t, "server", "", x509.ExtKeyUsageServerAuth)
	if _, err := server.X509.Verify(x509.VerifyOptions{Roots: ca.Pool(), DNSName: "127.0.0.1"}); err != nil {
		t.Errorf("issued server certificate: %v", err)
	}
	client := ca.Issue(t, "client", "", x509.ExtKeyUsageClientAuth)
	if _, err := client.X509.Verify(x509.VerifyOptions{Roots: ca.Pool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("issued client certificate: %v", err)
	}
	named := SelfSigned(t, "server", "broker.example", x509.ExtKeyUsageServerAuth)
	if _, err := named.X509.Verify(x509.VerifyOptions{Roots: named.Pool(), DNSName: "broker.example"}); err != nil {
		t.Errorf("self-signed for a name: %v", err)
	}
	if _, err := named.X509.Verify(x509.VerifyOptions{Roots: ca.Pool(), DNSName: "broker.example"}); err == nil {
		t.Error("a self-signed certificate verified against another CA")
	}
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "c.pem"), filepath.Join(dir, "k.pem")
	server.WriteFiles(t, certFile, keyFile)
	if _, err := tls.LoadX509KeyPair(certFile, keyFile); err != nil {
		t.Errorf("written files: %v", err)
	}
}
