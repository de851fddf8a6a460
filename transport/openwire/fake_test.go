package openwire

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/brokernet/brokernet/transport"
)

// fakeBroker is just enough of an OpenWire broker, in loose encoding, for
// tests of TLS and of bad broker input: it negotiates, answers
// ConnectionInfo and then runs script with the connection.
func fakeBroker(t *testing.T, ln net.Listener, script func(nc net.Conn, br *bufio.Reader)) {
	t.Helper()
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		defer nc.Close()
		if tc, ok := nc.(*tls.Conn); ok {
			if err := tc.Handshake(); err != nil {
				return
			}
		}
		props, _ := encodeProps([]transport.Property{{Name: "TightEncodingEnabled", Value: false},
			{Name: "ProviderName", Value: "ActiveMQ"}, {Name: "ProviderVersion", Value: "fake"}})
		nc.Write(encodeFrame(&wireFormatInfo{Magic: magic, Version: 12, Props: props}))
		nc.Write(encodeFrame(&brokerInfo{BrokerID: &brokerID{Value: "fake-id"}, BrokerName: "fake"}))
		br := bufio.NewReader(nc)
		for {
			p, err := readFrame(br, nil, 1<<20)
			if err != nil {
				return
			}
			cmd, err := decodeCommand(p, false)
			if err != nil {
				continue
			}
			if ci, ok := cmd.(*connectionInfo); ok {
				nc.Write(encodeFrame(&response{CorrelationID: ci.CommandID}))
				break
			}
		}
		script(nc, br)
	}()
}

// selfSigned makes a certificate for 127.0.0.1 and returns it with its PEM.
func selfSigned(t *testing.T) (tls.Certificate, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test broker"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA:        true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key},
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func TestSSLWithCAFile(t *testing.T) {
	cert, caPEM := selfSigned(t)
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	os.WriteFile(caFile, caPEM, 0o600)
	fakeBroker(t, ln, func(net.Conn, *bufio.Reader) { time.Sleep(time.Second) })

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := mustParse(t, "ssl://"+ln.Addr().String()+"?ca="+caFile).Dial(ctx, transport.DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Abort()
	if id, _ := c.BrokerID(ctx); id != "fake-id" || c.Info().Server != "ActiveMQ fake" {
		t.Fatalf("broker id %q, server %q", id, c.Info().Server)
	}
	// Without the CA the system roots do not trust it.
	fakeBroker(t, ln, func(net.Conn, *bufio.Reader) {})
	if _, err := mustParse(t, "ssl://"+ln.Addr().String()).Dial(ctx, transport.DialOptions{}); err == nil ||
		!strings.Contains(err.Error(), "tls") {
		t.Fatalf("untrusted certificate: err %v", err)
	}
}

func mustParse(t *testing.T, s string) URI {
	t.Helper()
	u, err := ParseURI(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func dialFake(t *testing.T, script func(nc net.Conn, br *bufio.Reader)) *Conn {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	fakeBroker(t, ln, script)
	u, _ := ParseURI("tcp://" + ln.Addr().String() + "?wireFormat.maxFrameSize=4096")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := Dial(ctx, u, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Abort)
	return c
}

func TestMalformedFramesAreSkipped(t *testing.T) {
	c := dialFake(t, func(nc net.Conn, br *bufio.Reader) {
		// A truncated MessageDispatch, an unknown command, then a good response.
		bad := encodeFrame(&messageDispatch{ConsumerID: &consumerID{ConnectionID: "x"}})
		binary.BigEndian.PutUint32(bad, uint32(len(bad)-4-3))
		nc.Write(bad[:len(bad)-3])
		nc.Write([]byte{0, 0, 0, 3, 200, 1, 2})
		nc.Write(encodeFrame(&keepAliveInfo{}))
		time.Sleep(2 * time.Second)
	})
	select {
	case <-c.Done():
		t.Fatalf("connection ended on bad frames: %v", c.Err())
	case <-time.After(500 * time.Millisecond):
	}
}

func TestOversizedFrameEndsTheConnection(t *testing.T) {
	c := dialFake(t, func(nc net.Conn, br *bufio.Reader) {
		nc.Write([]byte{0x7f, 0xff, 0xff, 0xff, 23})
		time.Sleep(2 * time.Second)
	})
	select {
	case <-c.Done():
		if err := c.Err(); err == nil || !strings.Contains(err.Error(), "maxFrameSize") {
			t.Fatalf("err %v", err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("oversized frame accepted")
	}
}

func TestConnectionErrorIsRefused(t *testing.T) {
	c := dialFake(t, func(nc net.Conn, br *bufio.Reader) {
		nc.Write(encodeFrame(&connectionError{Exception: "java.lang.SecurityException: not allowed"}))
		time.Sleep(2 * time.Second)
	})
	select {
	case <-c.Done():
		if err := c.Err(); !errors.Is(err, transport.ErrRefused) || !strings.Contains(err.Error(), "not allowed") {
			t.Fatalf("err %v", err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("connection error ignored")
	}
	if _, ok := <-c.Events(); ok {
		t.Fatal("events open after the connection ended")
	}
}
