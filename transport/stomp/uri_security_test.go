package stomp

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-stomp/stomp/v3/frame"

	"github.com/brokernet/brokernet/internal/testkit/tlstest"
)

// marker is the passcode the redaction tests plant; no error may contain it.
const marker = "Pw9marker"

// TestParseURINeverShowsPasscode covers passcodes that url.Parse cuts in the
// wrong place: holding '?', '/', '#', '%' or '@'.
func TestParseURINeverShowsPasscode(t *testing.T) {
	for _, in := range []string{
		"stomp://u:2024?" + marker + "@host:1",
		"stomp://u:" + marker + "?x@host:1",
		"stomp://u:a/" + marker + "@host:1",
		"stomp://u:" + marker + "#frag@host:1",
		"stomp://u:" + marker + "%zz@host:1",
		"stomp://u:" + marker + "@x@host:99999",
		"stomp:u:" + marker + "@host",
		"u:" + marker + "@host:1",
		"http://u:" + marker + "@host:1",
		"stomp://u:" + marker + "@host:1?heartBeat=x",
		"stomp://u:" + marker + "@host:1/path",
		"stomp://u:" + marker + "@:1",
		"stomp+ssl://u:" + marker + "@host:1?ca=/does/not/exist",
		"stomp://u:" + marker + "@host:1?clientId=a@b",
	} {
		_, err := ParseURI(in)
		if err == nil {
			t.Errorf("ParseURI(%q) accepted", in)
			continue
		}
		if strings.Contains(err.Error(), marker) || strings.Contains(err.Error(), "Pw9") {
			t.Errorf("ParseURI(%q) error shows the passcode: %v", in, err)
		}
	}
	// Percent-encoded, the same passcodes are fine.
	u, err := ParseURI("stomp://u:2024%3F" + marker + "%2F%23%40@host:1")
	if err != nil || u.Passcode != "2024?"+marker+"/#@" {
		t.Fatalf("encoded passcode: %+v, %v", u, err)
	}
	if strings.Contains(u.String(), marker) {
		t.Fatalf("String shows the passcode: %s", u)
	}
}

// FuzzURIRedaction plants the marker as the passcode of random URIs: whatever
// ParseURI and Redact make of them, the marker never shows.
func FuzzURIRedaction(f *testing.F) {
	f.Add("stomp://", "2024?", "x", "host:1")
	f.Add("stomp+ssl://", "", "/a#b", "h:1?ca=/nope")
	f.Add("", "a", "", "h")
	f.Add("gossip://", "%", "%zz", "h:1?bogus=@")
	f.Add("stomp://h?x=", "", "", "h:1/p")
	f.Fuzz(func(t *testing.T, prefix, before, after, suffix string) {
		s := prefix + "u:" + before + marker + after + "@" + suffix
		if _, err := ParseURI(s); err != nil && strings.Contains(err.Error(), marker) {
			t.Fatalf("ParseURI(%q) error shows the passcode: %v", s, err)
		}
		if r := Redact(s); strings.Contains(r, marker) {
			t.Fatalf("Redact(%q) = %q", s, r)
		}
		if u, err := ParseURI(s); err == nil && strings.Contains(u.String(), marker) {
			t.Fatalf("URI(%q).String() = %q", s, u.String())
		}
	})
}

// TestTLSFilesCheckedAtParse: a stomp+ssl URI whose files are missing or
// malformed is an error when it is parsed, naming the file.
func TestTLSFilesCheckedAtParse(t *testing.T) {
	dir := t.TempDir()
	cert := tlstest.SelfSigned(t, "test broker", "", x509.ExtKeyUsageServerAuth)
	caFile := filepath.Join(dir, "ca.pem")
	certFile := filepath.Join(dir, "cert.pem")
	keyFile := filepath.Join(dir, "key.pem")
	tlstest.WriteFile(t, caFile, cert.PEM())
	cert.WriteFiles(t, certFile, keyFile)
	missing := filepath.Join(dir, "missing.pem")
	tests := []struct{ name, uri, want string }{
		{"a missing CA file", "stomp+ssl://h:1?ca=" + missing, "missing.pem"},
		{"a CA file without PEM", "stomp+ssl://h:1?ca=" + filepath.Join(dir, "key.pem"), "no PEM certificate"},
		{"a cert without key", "stomp+ssl://h:1?cert=" + certFile, "cert and key go together"},
		{"a missing key", "stomp+ssl://h:1?cert=" + certFile + "&key=" + missing, "missing.pem"},
		{"a key that is not the cert's", "stomp+ssl://h:1?cert=" + certFile + "&key=" + caFile, "loading client certificate"},
		{"cert on plain stomp", "stomp://h:1?cert=" + certFile + "&key=" + keyFile, "needs stomp+ssl"},
		{"serverName on plain stomp", "stomp://h:1?serverName=b", "needs stomp+ssl"},
	}
	for _, tt := range tests {
		t.Run(tt.name+" is refused", func(t *testing.T) {
			_, err := ParseURI(tt.uri)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("ParseURI(%q) = %v, want error containing %q", tt.uri, err, tt.want)
			}
		})
	}
	u, err := ParseURI("stomp+ssl://h:1?ca=" + caFile + "&cert=" + certFile + "&key=" + keyFile + "&serverName=broker.example")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := u.TLSOptions().Config(u.Host)
	if err != nil || len(cfg.Certificates) != 1 || cfg.ServerName != "broker.example" || cfg.RootCAs == nil {
		t.Fatalf("config %+v, %v", cfg, err)
	}
	back, err := ParseURI(u.WithSecrets())
	if err != nil || back != u {
		t.Fatalf("round trip: %+v, %v", back, err)
	}
}

// serveTLS answers every STOMP CONNECT over TLS with cfg; it returns the address.
func serveTLS(t *testing.T, cfg *tls.Config) string {
	t.Helper()
	return tlstest.Serve(t, cfg, func(nc net.Conn) {
		if _, err := frame.NewReader(nc).Read(); err != nil {
			return
		}
		w := bufio.NewWriter(nc)
		(&encoder{w: w}).writeFrame(frame.New(frame.CONNECTED, frame.Version, "1.2", frame.Server, "ActiveMQ/5.17.2"))
		w.Flush()
		time.Sleep(time.Second)
	})
}

// TestTLSClientCertificateAndServerName dials a server that requires a client
// certificate and whose certificate names broker.example, not 127.0.0.1: it
// answers only with ?cert=&key= and ?serverName=broker.example.
func TestTLSClientCertificateAndServerName(t *testing.T) {
	dir := t.TempDir()
	srv := tlstest.SelfSigned(t, "server", "broker.example", x509.ExtKeyUsageServerAuth)
	srvPEM := filepath.Join(dir, "server.pem")
	tlstest.WriteFile(t, srvPEM, srv.PEM())
	client := tlstest.SelfSigned(t, "client", "", x509.ExtKeyUsageClientAuth)
	clientPEM, clientKey := filepath.Join(dir, "client.pem"), filepath.Join(dir, "client.key")
	client.WriteFiles(t, clientPEM, clientKey)
	addr := serveTLS(t, &tls.Config{
		Certificates: []tls.Certificate{srv.TLS},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    client.Pool(),
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	base := "stomp+ssl://" + addr + "?ca=" + srvPEM
	for _, tt := range []struct {
		name, opts string
		ok         bool
	}{
		{"with certificate and server name", "&serverName=broker.example&cert=" + clientPEM + "&key=" + clientKey, true},
		{"without the server name", "&cert=" + clientPEM + "&key=" + clientKey, false},
		{"without a client certificate", "&serverName=broker.example", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			u, err := ParseURI(base + tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			c, err := Dial(ctx, u, Options{})
			if tt.ok != (err == nil) {
				t.Fatalf("dial: err = %v, want success %v", err, tt.ok)
			}
			if c != nil {
				c.Abort()
			}
		})
	}
}
