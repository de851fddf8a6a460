package amqp

import (
	"context"
	"crypto/x509"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/brokernet/brokernet/internal/testkit/testbroker"
	"github.com/brokernet/brokernet/transport"

	"github.com/brokernet/brokernet/internal/testkit/tlstest"
)

// pki writes a CA, a server certificate for 127.0.0.1 and a client
// certificate, all PEM, into dir.
func pki(t *testing.T, dir string) (ca, serverCert, serverKey, clientCert, clientKey string) {
	t.Helper()
	c := tlstest.SelfSigned(t, "test CA", "")
	ca = filepath.Join(dir, "ca.pem")
	tlstest.WriteFile(t, ca, c.PEM())
	serverCert, serverKey = filepath.Join(dir, "server.pem"), filepath.Join(dir, "server-key.pem")
	c.Issue(t, "server", "", x509.ExtKeyUsageServerAuth).WriteFiles(t, serverCert, serverKey)
	clientCert, clientKey = filepath.Join(dir, "client.pem"), filepath.Join(dir, "client-key.pem")
	c.Issue(t, "client", "", x509.ExtKeyUsageClientAuth).WriteFiles(t, clientCert, clientKey)
	return
}

// TestAMQPS connects over TLS to a RabbitMQ node that requires a client
// certificate: ?ca= trusts its CA and ?cert=&key= present the client's;
// without the CA, or without the client certificate, the dial fails.
func TestAMQPS(t *testing.T) {
	if testing.Short() {
		t.Skip("needs RabbitMQ")
	}
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	ca, sc, sk, cc, ck := pki(t, dir)
	port := testbroker.FreePort(t)
	r := testbroker.StartRabbitMQ(t, testbroker.RabbitOptions{Conf: []string{
		"listeners.ssl.default = 127.0.0.1:" + strconv.Itoa(port),
		"ssl_options.cacertfile = " + ca,
		"ssl_options.certfile = " + sc,
		"ssl_options.keyfile = " + sk,
		"ssl_options.verify = verify_peer",
		"ssl_options.fail_if_no_peer_cert = true",
	}})
	_ = r
	base := "amqps://guest:guest@127.0.0.1:" + strconv.Itoa(port)
	try := func(uri string) (*Conn, error) {
		u, err := ParseURI(uri)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		return DialConn(ctx, u)
	}
	c, err := try(base + "?ca=" + ca + "&cert=" + cc + "&key=" + ck)
	if err != nil {
		t.Fatalf("amqps with ca and client certificate: %v", err)
	}
	if c.Info().Flavour != transport.RabbitMQ {
		t.Fatalf("info %+v", c.Info())
	}
	c.Abort()
	if _, err := try(base + "?cert=" + cc + "&key=" + ck); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("without trusting the CA: err = %v, want a certificate error", err)
	}
	if _, err := try(base + "?ca=" + ca); err == nil {
		t.Fatal("without a client certificate the broker let us in")
	}
}

// TestDescribe reads the open frame's properties.
func TestDescribe(t *testing.T) {
	info, id := describe(map[string]any{"product": "RabbitMQ", "version": "3.10.8", "cluster_name": "rabbit@vm"}, transport.UnknownFlavour)
	if info.Flavour != transport.RabbitMQ || info.Server != "RabbitMQ/3.10.8" || id != "rabbit@vm" || info.Selectors || info.Protocol != "amqp" {
		t.Fatalf("%+v %q", info, id)
	}
	info, _ = describe(map[string]any{"product": "RabbitMQ"}, transport.Artemis)
	if info.Flavour != transport.Artemis {
		t.Fatalf("?flavor= did not win: %+v", info)
	}
	c := &Conn{uri: URI{Host: "h", Port: 5672, User: "u", Password: marker}, info: transport.Info{Server: "apache-activemq-artemis/2.30"}}
	if _, err := c.BrokerID(context.Background()); err == nil || !strings.Contains(err.Error(), "--local-id/--remote-id") || strings.Contains(err.Error(), marker) {
		t.Fatalf("BrokerID without cluster_name: %v", err)
	}
}
