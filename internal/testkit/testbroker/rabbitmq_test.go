package testbroker

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/go-stomp/stomp/v3"
)

func dialRabbit(t *testing.T, r *RabbitMQ) *stomp.Conn {
	t.Helper()
	conn, err := stomp.Dial("tcp", r.StompAddr(),
		stomp.ConnOpt.Host("/"),
		stomp.ConnOpt.Login("guest", "guest"),
		stomp.ConnOpt.HeartBeat(0, 0),
		stomp.ConnOpt.Logger(QuietLogger{}))
	if err != nil {
		t.Fatalf("STOMP connect to %s: %v\n%s", r.Node(), err, r.LogTail(20))
	}
	t.Cleanup(func() { conn.Disconnect() }) //nolint:errcheck // the node may be gone
	return conn
}

// overview reads GET /api/overview of r.
func overview(t *testing.T, r *RabbitMQ) (node, cluster string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, r.ManagementURL()+"/api/overview", nil)
	req.SetBasicAuth("guest", "guest")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("management API of %s: %v", r.Node(), err)
	}
	defer resp.Body.Close()
	var o struct {
		Node        string `json:"node"`
		ClusterName string `json:"cluster_name"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&o); err != nil {
		t.Fatalf("management API of %s: %v", r.Node(), err)
	}
	return o.Node, o.ClusterName
}

// TestRabbitMQTwoNodes starts two nodes at once and checks that each answers
// on its own ports (management names the right node, a message sent over
// STOMP to one is not on the other), then restarts one with its data.
func TestRabbitMQTwoNodes(t *testing.T) {
	nodes := StartRabbitMQs(t, RabbitOptions{}, RabbitOptions{})
	for _, r := range nodes {
		if node, _ := overview(t, r); node != r.Node() {
			t.Errorf("management port %d answers for %s, want %s", r.MgmtPort(), node, r.Node())
		}
		for _, p := range []int{r.AMQPPort(), r.StompPort(), r.MgmtPort()} {
			switch p {
			case 5672, 61613, 15672:
				t.Errorf("node %s on default port %d", r.Node(), p)
			}
		}
	}

	// A durable queue with one message on node 0 only.
	c0 := dialRabbit(t, nodes[0])
	if err := c0.Send("/queue/tb.q", "text/plain", []byte("on-0"),
		stomp.SendOpt.Receipt, stomp.SendOpt.Header("persistent", "true")); err != nil {
		t.Fatal(err)
	}
	c1 := dialRabbit(t, nodes[1])
	sub1, err := c1.Subscribe("/queue/tb.q", stomp.AckAuto)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-sub1.C:
		t.Fatalf("node 1 delivered %v: the nodes share state", m)
	case <-time.After(300 * time.Millisecond):
	}
	c0.Disconnect() //nolint:errcheck
	qctx, qcancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer qcancel()
	for {
		st, err := nodes[0].QueueStats(qctx, "tb.q")
		if err == nil && st.Messages == 1 && st.Durable {
			break
		}
		if qctx.Err() != nil {
			t.Fatalf("queue stats of tb.q on node 0: %+v, %v; want 1 durable message", st, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// rabbitmqctl starts an Erlang VM of its own: on a loaded machine that
	// alone took over 20 s (CI), so it gets a deadline of its own.
	cctx, ccancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer ccancel()
	if out, err := nodes[0].Ctl(cctx, "list_queues", "name", "messages"); err != nil || !strings.Contains(out, "tb.q") {
		t.Errorf("rabbitmqctl list_queues on node 0: %q, %v", out, err)
	}
	if _, err := nodes[1].QueueStats(qctx, "no.such.queue"); err == nil || !strings.Contains(err.Error(), "no.such.queue") {
		t.Errorf("stats of a missing queue: %v", err)
	}

	// Restart keeps name, ports and data.
	ctx, cancel := context.WithTimeout(context.Background(), DefaultRabbitStartTimeout)
	defer cancel()
	if err := nodes[0].Restart(ctx); err != nil {
		t.Fatal(err)
	}
	c0 = dialRabbit(t, nodes[0])
	sub0, err := c0.Subscribe("/queue/tb.q", stomp.AckAuto)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-sub0.C:
		if m.Err != nil || string(m.Body) != "on-0" {
			t.Fatalf("after restart got %v / %q, want on-0", m.Err, m.Body)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the persistent message did not survive the restart")
	}

	// Kill leaves nothing running; Close is idempotent.
	if err := nodes[1].Kill(); err != nil {
		t.Fatal(err)
	}
	if nodes[1].Running() {
		t.Error("node 1 still running after Kill")
	}
	// The listening socket goes with the last of the node's processes, which
	// the kernel may reap a moment after the wrapper (seen once in a full run).
	gone := false
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if !dialable(context.Background(), nodes[1].StompAddr()) {
			gone = true
			break
		}
	}
	if !gone {
		t.Error("node 1 STOMP port still answers 10 s after Kill")
	}
}
