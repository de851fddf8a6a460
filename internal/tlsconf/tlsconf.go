// Package tlsconf builds the client side of a broker connection's TLS from the
// options broker URIs carry (ca, cert, key, serverName), so every transport
// (stomp+ssl://, amqps://, ssl://) reads and checks them the same way.
package tlsconf

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
)

// Options are the TLS settings of one broker URI. The zero value means: verify
// the broker against the system roots under its host name, present no client
// certificate.
type Options struct {
	// CAFile is a PEM file of the roots to trust instead of the system's.
	CAFile string
	// CertFile and KeyFile are a PEM client certificate and its private key,
	// for brokers that authenticate clients by certificate (ActiveMQ's
	// needClientAuth). Both or neither.
	CertFile, KeyFile string
	// ServerName is the name to verify the broker's certificate against, when
	// it differs from the host dialled (an IP address, a load balancer).
	ServerName string
}

// Validate checks the options without touching files: cert and key come together.
func (o Options) Validate() error {
	if (o.CertFile == "") != (o.KeyFile == "") {
		return errors.New("cert and key go together: give both or neither")
	}
	return nil
}

// Check loads every file the options name, so a missing or malformed CA, cert or
// key is reported when the configuration is read rather than on every dial.
// Errors name the file, never its contents.
func (o Options) Check() error {
	_, err := o.Config("localhost")
	return err
}

// Config returns the TLS configuration for dialling host (TLS 1.2 or later,
// certificates verified). The files are read on each call, so renewed
// certificates are picked up on the next connection.
func (o Options) Config(host string) (*tls.Config, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	cfg := &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12}
	if o.ServerName != "" {
		cfg.ServerName = o.ServerName
	}
	if o.CAFile != "" {
		pem, err := readFile(o.CAFile)
		if err != nil {
			return nil, fmt.Errorf("reading CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("CA file %s holds no PEM certificate", o.CAFile)
		}
		cfg.RootCAs = pool
	}
	if o.CertFile != "" {
		certPEM, err := readFile(o.CertFile)
		if err != nil {
			return nil, fmt.Errorf("reading client certificate: %w", err)
		}
		keyPEM, err := readFile(o.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("reading client key: %w", err)
		}
		// X509KeyPair's errors name what failed, not the key material.
		cert, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			return nil, fmt.Errorf("loading client certificate %s with key %s: %w", o.CertFile, o.KeyFile, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// Client runs the TLS handshake over nc as a client of host under o and
// returns the TLS connection. On error nc is closed; a handshake error names
// broker (a URI safe to log).
func (o Options) Client(ctx context.Context, nc net.Conn, host string, broker fmt.Stringer) (net.Conn, error) {
	cfg, err := o.Config(host)
	if err != nil {
		nc.Close()
		return nil, err
	}
	tc := tls.Client(nc, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		nc.Close()
		return nil, fmt.Errorf("tls handshake with %s: %w", broker, err)
	}
	return tc, nil
}

// maxFile bounds what is read of a PEM file.
const maxFile = 1 << 20

// readFile reads a regular file of at most maxFile bytes: a FIFO or a device
// named by mistake would block or never end.
func readFile(name string) ([]byte, error) {
	fi, err := os.Stat(name)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", name)
	}
	if fi.Size() > maxFile {
		return nil, fmt.Errorf("%s is larger than %d bytes", name, maxFile)
	}
	return os.ReadFile(name)
}
