package mgmt_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/brokernet/brokernet/internal/testkit/stomptest"
	"github.com/brokernet/brokernet/internal/testkit/testbroker"
	"github.com/brokernet/brokernet/rabbitmq/mgmt"
)

func TestErrorsNameTheFix(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, _ := r.BasicAuth(); u != "guest" || p != "s3cret" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		switch r.URL.EscapedPath() {
		case "/api/overview":
			w.Write([]byte(`{"cluster_name":"","node":"rabbit@h","disable_stats":true}`))
		case "/api/consumers/%2F":
			w.WriteHeader(http.StatusBadRequest)
			w.Write([]byte(`{"error":"bad_request","reason":"Stats in management UI are disabled on this node"}`))
		case "/api/bindings/%2F":
			w.Write([]byte(`[{"source":"amq.topic",`)) // truncated
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	ctx := context.Background()

	c, err := mgmt.New(srv.URL, "guest", "s3cret", nil)
	if err != nil {
		t.Fatal(err)
	}
	if id, err := c.BrokerID(ctx); err != nil || id != "rabbit@h" {
		t.Errorf("BrokerID = %q, %v; want the node name when cluster_name is empty", id, err)
	}
	_, err = c.Consumers(ctx, "/")
	if !errors.Is(err, mgmt.ErrSetup) || !strings.Contains(err.Error(), "management_agent.disable_metrics_collector") {
		t.Errorf("stats disabled: %v", err)
	}
	if _, err = c.Bindings(ctx, "/"); err == nil || !strings.Contains(err.Error(), "malformed JSON") {
		t.Errorf("truncated JSON: %v", err)
	}

	bad, _ := mgmt.New(strings.Replace(srv.URL, "http://", "http://guest:wrong@", 1), "x", "y", nil)
	_, err = bad.Overview(ctx)
	if !errors.Is(err, mgmt.ErrSetup) || !strings.Contains(err.Error(), "401") || strings.Contains(err.Error(), "wrong") {
		t.Errorf("bad credentials: %v", err)
	}

	if _, err := mgmt.New("localhost:15672", "", "", nil); err == nil || !strings.Contains(err.Error(), "localhost:15672") {
		t.Errorf("bad URL: %v", err)
	}
	if _, err := mgmt.New("ftp://u:pw@h", "", "", nil); err == nil || strings.Contains(err.Error(), "pw") {
		t.Errorf("bad URL error leaks or is nil: %v", err)
	}

	gone, _ := mgmt.New("http://127.0.0.1:1", "", "", nil)
	if _, err := gone.Overview(ctx); err == nil || !strings.Contains(err.Error(), "rabbitmq_management plugin") {
		t.Errorf("unreachable: %v", err)
	}
}

// TestAgainstRabbitMQ reads identity and snapshots from a real node, and the
// clear error from a node whose statistics are switched off.
func TestAgainstRabbitMQ(t *testing.T) {
	nodes := testbroker.StartRabbitMQs(t, testbroker.RabbitOptions{},
		testbroker.RabbitOptions{Conf: []string{"management_agent.disable_metrics_collector = true"}})
	ctx := context.Background()
	c, err := mgmt.New(nodes[0].ManagementURL(), "guest", "guest", nil)
	if err != nil {
		t.Fatal(err)
	}
	o, err := c.Overview(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if o.Node != nodes[0].Node() || !strings.HasPrefix(o.ClusterName, nodes[0].Name()+"@") || o.RabbitMQVersion == "" {
		t.Errorf("overview %+v for node %s", o, nodes[0].Node())
	}
	if id, err := c.BrokerID(ctx); err != nil || id != o.ClusterName {
		t.Errorf("BrokerID = %q, %v; want cluster name %q", id, err, o.ClusterName)
	}
	if _, err := c.Consumers(ctx, "/"); err != nil {
		t.Errorf("consumers: %v", err)
	}
	if _, err := c.Bindings(ctx, "/"); err != nil { // a fresh node has none in "/"
		t.Errorf("bindings: %v", err)
	}
	if ok, err := c.QueueExists(ctx, "/", "no/such queue"); ok || err != nil {
		t.Errorf("QueueExists(missing) = %v, %v", ok, err)
	}
	conn := stomptest.Dial(t, nodes[0].StompURI())
	if err := conn.Subscribe(ctx, "1", "/queue/a%2Fb c", "auto"); err != nil {
		t.Fatal(err)
	}
	if ok, err := c.QueueExists(ctx, "/", "a/b c"); !ok || err != nil {
		t.Errorf("QueueExists(a/b c) = %v, %v", ok, err)
	}

	// A memory alarm (the watermark below what the node uses) is listed,
	// then gone once the watermark is back.
	if alarms, err := c.Alarms(ctx); len(alarms) != 0 || err != nil {
		t.Errorf("Alarms on a fresh node = %q, %v", alarms, err)
	}
	watermark := func(v string) {
		if out, err := nodes[0].Ctl(ctx, "set_vm_memory_high_watermark", v); err != nil {
			t.Fatalf("set_vm_memory_high_watermark %s: %v %s", v, err, out)
		}
	}
	watermark("0.000001")
	stomptest.Eventually(t, 30*time.Second, func() error {
		if alarms, err := c.Alarms(ctx); err != nil || len(alarms) != 1 || alarms[0] != "memory alarm on "+nodes[0].Node() {
			return fmt.Errorf("alarms %q, %v; want the memory alarm of %s", alarms, err, nodes[0].Node())
		}
		return nil
	})
	watermark("0.4")
	stomptest.Eventually(t, 30*time.Second, func() error {
		if alarms, err := c.Alarms(ctx); err != nil || len(alarms) != 0 {
			return fmt.Errorf("alarms %q, %v after the watermark is back", alarms, err)
		}
		return nil
	})

	off, _ := mgmt.New(nodes[1].ManagementURL(), "guest", "guest", nil)
	_, err = off.Consumers(ctx, "/")
	if !errors.Is(err, mgmt.ErrSetup) || !strings.Contains(err.Error(), "disable_metrics_collector") {
		t.Errorf("stats off: %v", err)
	}
}
