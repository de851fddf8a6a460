package openwire

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/brokernet/brokernet/transport"

	"github.com/brokernet/brokernet/internal/testkit/tlstest"
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

func TestSSLWithCAFile(t *testing.T) {
	ca := tlstest.SelfSigned(t, "test broker", "", x509.ExtKeyUsageServerAuth)
	cert, caPEM := ca.TLS, ca.PEM()
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

// TestOneSyncOnTheWire: while a Sync awaits its response, further Syncs are
// not written; the response releases them as one more empty transaction,
// whose ROLLBACK's response confirms them all (see Conn.Sync for why). Only
// the ROLLBACK asks for a response: the BEGIN's could come before the acks
// are on disk (syncPair).
func TestOneSyncOnTheWire(t *testing.T) {
	rollbacks := make(chan int32, 10)
	var wrong atomic.Value // what the fake saw amiss
	answer := make(chan int32, 10)
	c := dialFake(t, func(nc net.Conn, br *bufio.Reader) {
		go func() {
			for id := range answer {
				nc.Write(encodeFrame(&response{CorrelationID: id}))
			}
		}()
		for {
			p, err := readFrame(br, nil, 1<<20)
			if err != nil {
				return
			}
			cmd, _ := decodeCommand(p, false)
			ti, ok := cmd.(*transactionInfo)
			if !ok {
				continue
			}
			if want := ti.Type == txRollback; ti.ResponseRequired != want {
				wrong.Store(fmt.Sprintf("transaction command of type %d asks for a response: %v, want %v", ti.Type, ti.ResponseRequired, want))
			}
			if ti.Type == txRollback {
				rollbacks <- ti.CommandID
			}
		}
	})
	t.Cleanup(func() { close(answer) })
	next := func() int32 {
		t.Helper()
		select {
		case id := <-rollbacks:
			return id
		case <-time.After(3 * time.Second):
			t.Fatal("no ROLLBACK written")
			return 0
		}
	}
	ctx := context.Background()
	tok1, err := c.Sync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	first := next()
	tok2, _ := c.Sync(ctx)
	tok3, _ := c.Sync(ctx)
	select {
	case <-rollbacks:
		t.Fatal("a second Sync was written while the first awaited its response")
	case <-time.After(300 * time.Millisecond):
	}
	answer <- first
	answer <- next()
	want := map[transport.Token]bool{tok1: true, tok2: true, tok3: true}
	for len(want) > 0 {
		select {
		case ev := <-c.Events():
			if ev.Kind != transport.Confirmed || !want[ev.Token] {
				t.Fatalf("unexpected event %+v", ev)
			}
			delete(want, ev.Token)
		case <-time.After(3 * time.Second):
			t.Fatalf("tokens never confirmed: %v", want)
		}
	}
	select {
	case <-rollbacks:
		t.Fatal("a Sync nobody asked for")
	case <-time.After(200 * time.Millisecond):
	}
	if w := wrong.Load(); w != nil {
		t.Fatal(w)
	}
}
