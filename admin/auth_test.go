package admin

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/brokernet/brokernet/internal/testkit/tlstest"
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
	c := tlstest.SelfSigned(t, "admin", "", x509.ExtKeyUsageServerAuth)
	certFile, keyFile := filepath.Join(dir, "c.pem"), filepath.Join(dir, "k.pem")
	c.WriteFiles(t, certFile, keyFile)
	return certFile, keyFile, c.Pool()
}
