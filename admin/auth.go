package admin

import (
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// Security protects the admin endpoint: an optional bearer token and TLS.
type Security struct {
	// Token, when set, must come as "Authorization: Bearer TOKEN" on every
	// request; others get 401. It is never logged.
	Token string
	// CertFile and KeyFile, when set, serve HTTPS with this PEM certificate and key.
	CertFile, KeyFile string
	// Insecure allows a non-loopback address without a token.
	Insecure bool
}

// ErrExposed is matched (errors.Is) by CheckExposure's error.
var ErrExposed = errors.New("admin endpoint reachable from other machines without a token")

// CheckExposure refuses a listen address other machines can reach when no
// token protects it, unless insecure: /status names every peer and broker.
func CheckExposure(listen string, sec Security) error {
	if sec.Token != "" || sec.Insecure {
		return nil
	}
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		host = listen
	}
	if strings.EqualFold(host, "localhost") {
		return nil
	}
	if ip, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("%w: %s; set a token ([admin] tokenFile) or insecure = true", ErrExposed, listen)
}

// Protect applies sec to a server returned by Listen, before Serve: it wraps
// the handler with the token check and the listener with TLS.
func (s *Server) Protect(sec Security) error {
	if err := CheckExposure(s.Addr(), sec); err != nil {
		return err
	}
	if sec.Token != "" {
		s.srv.Handler = RequireToken(s.srv.Handler, sec.Token)
	}
	if (sec.CertFile == "") != (sec.KeyFile == "") {
		return errors.New("admin TLS: certFile and keyFile go together")
	}
	if sec.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(sec.CertFile, sec.KeyFile)
		if err != nil {
			return fmt.Errorf("admin TLS: loading %s with key %s: %w", sec.CertFile, sec.KeyFile, err)
		}
		s.ln = tls.NewListener(s.ln, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	}
	return nil
}

// RequireToken answers 401 to requests without "Authorization: Bearer token".
// The comparison takes the same time whatever the guess (hashes compared in
// constant time).
func RequireToken(next http.Handler, token string) http.Handler {
	want := sha256.Sum256([]byte(token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		sum := sha256.Sum256([]byte(got))
		if !ok || subtle.ConstantTimeCompare(sum[:], want[:]) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="brokernet"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}
