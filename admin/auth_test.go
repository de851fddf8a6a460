package admin

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

func TestCheckExposure(t *testing.T) {
	for _, tt := range []struct {
		listen string
		sec    Security
		ok     bool
	}{
		{"127.0.0.1:9464", Security{}, true},
		{"[::1]:9464", Security{}, true},
		{"localhost:9464", Security{}, true},
		{"0.0.0.0:9464", Security{}, false},
		{"10.0.0.1:9464", Security{}, false},
		{"0.0.0.0:9464", Security{Token: "t"}, true},
		{"0.0.0.0:9464", Security{Insecure: true}, true},
	} {
		err := CheckExposure(tt.listen, tt.sec)
		if tt.ok != (err == nil) || err != nil && !errors.Is(err, ErrExposed) {
			t.Errorf("CheckExposure(%s, %+v) = %v, want ok %v", tt.listen, tt.sec, err, tt.ok)
		}
	}
}

// TestTokenAndTLS serves /status over HTTPS with a token: without the token
// (or with a wrong one) it answers 401, with it 200; plain HTTP gets nothing.
func TestTokenAndTLS(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, pool := writeCert(t, dir)
	srv, err := Listen("127.0.0.1:0", Options{Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Protect(Security{Token: "s3cret-token", CertFile: certFile, KeyFile: keyFile}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go srv.Serve(ctx)
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	get := func(scheme, auth string) (int, error) {
		req, _ := http.NewRequest("GET", scheme+"://"+srv.Addr()+"/status", nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	for _, tt := range []struct {
		name, auth string
		want       int
	}{
		{"no token", "", 401},
		{"a wrong token", "Bearer guess", 401},
		{"the token as basic auth", "Basic s3cret-token", 401},
		{"the token", "Bearer s3cret-token", 200},
	} {
		if code, err := get("https", tt.auth); err != nil || code != tt.want {
			t.Errorf("%s: status %d, err %v; want %d", tt.name, code, err, tt.want)
		}
	}
	if code, err := get("http", "Bearer s3cret-token"); err == nil && code == 200 {
		t.Error("plain HTTP was served")
	}
}

func writeCert(t *testing.T, dir string) (string, string, *x509.CertPool) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "admin"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kd, _ := x509.MarshalECPrivateKey(key)
	certFile, keyFile := filepath.Join(dir, "c.pem"), filepath.Join(dir, "k.pem")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kd}), 0o600)
	c, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(c)
	return certFile, keyFile, pool
}
