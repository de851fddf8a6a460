package mgmt_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/brokernet/brokernet/rabbitmq/mgmt"
)

func TestQueueCalls(t *testing.T) {
	var mu sync.Mutex
	var calls []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		calls = append(calls, r.Method+" "+r.URL.EscapedPath()+"?"+r.URL.RawQuery+" "+string(body))
		mu.Unlock()
		switch r.Method + " " + r.URL.EscapedPath() {
		case "GET /api/queues/%2F":
			if r.URL.Query().Get("page") == "1" {
				w.Write([]byte(`{"items":[{"name":"bn_a","consumers":2}],"page_count":2}`))
			} else {
				w.Write([]byte(`{"items":[{"name":"bn_b"}],"page_count":2}`))
			}
		case "POST /api/bindings/%2F/e/amq.topic/q/bn_amqp.x.topics":
			w.WriteHeader(http.StatusCreated)
		case "GET /api/bindings/%2F/e/amq.topic/q/bn_amqp.x.topics":
			w.Write([]byte(`[{"routing_key":"p.*","properties_key":"p.%2A","arguments":{}},` +
				`{"routing_key":"p.eu","properties_key":"p.eu~abc","arguments":{"x":1}},` +
				`{"routing_key":"p.eu","properties_key":"p.eu","arguments":{}}]`))
		case "DELETE /api/bindings/%2F/e/amq.topic/q/bn_amqp.x.topics/p.eu":
			w.WriteHeader(http.StatusNoContent)
		case "DELETE /api/queues/%2F/busy":
			w.WriteHeader(http.StatusBadRequest)
			w.Write([]byte(`{"error":"bad_request","reason":"queue 'busy' in vhost '/' in use"}`))
		case "DELETE /api/queues/%2F/idle":
			w.WriteHeader(http.StatusNoContent)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	c, err := mgmt.New(srv.URL, "guest", "s3cret", nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	qs, err := c.Queues(ctx, "/", "bn_")
	if err != nil || len(qs) != 2 || qs[0].Consumers != 2 || qs[1].Name != "bn_b" {
		t.Errorf("Queues = %+v, %v", qs, err)
	}
	if err := c.Bind(ctx, "/", "amq.topic", "bn_amqp.x.topics", "p.eu"); err != nil {
		t.Errorf("Bind: %v", err)
	}
	if err := c.Unbind(ctx, "/", "amq.topic", "bn_amqp.x.topics", "p.eu"); err != nil {
		t.Errorf("Unbind: %v", err)
	}
	if err := c.Unbind(ctx, "/", "amq.topic", "gone", "p.eu"); err != nil {
		t.Errorf("Unbind of a missing queue: %v, want nil", err)
	}
	if ok, err := c.DeleteQueue(ctx, "/", "busy", true); ok || !errors.Is(err, mgmt.ErrInUse) {
		t.Errorf("DeleteQueue(busy) = %v, %v; want ErrInUse", ok, err)
	}
	if ok, err := c.DeleteQueue(ctx, "/", "idle", true); !ok || err != nil {
		t.Errorf("DeleteQueue(idle) = %v, %v", ok, err)
	}
	if ok, err := c.DeleteQueue(ctx, "/", "missing", false); ok || err != nil {
		t.Errorf("DeleteQueue(missing) = %v, %v; want false, nil", ok, err)
	}
	if _, err := c.Queues(ctx, "other", ""); err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("Queues of a missing vhost: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	all := strings.Join(calls, "\n")
	for _, want := range []string{
		"GET /api/queues/%2F?columns=name%2Cconsumers&name=bn_&page=1&page_size=500&use_regex=false ",
		"GET /api/queues/%2F?columns=name%2Cconsumers&name=bn_&page=2&page_size=500&use_regex=false ",
		`POST /api/bindings/%2F/e/amq.topic/q/bn_amqp.x.topics? {"arguments":{},"routing_key":"p.eu"}`,
		// The binding without arguments, named by its properties key.
		"DELETE /api/bindings/%2F/e/amq.topic/q/bn_amqp.x.topics/p.eu? ",
		"DELETE /api/queues/%2F/busy?if-unused=true ",
		"DELETE /api/queues/%2F/missing? ",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("no request %q among:\n%s", want, all)
		}
	}
	if strings.Contains(all, "p.eu~abc") {
		t.Errorf("deleted the binding with arguments:\n%s", all)
	}
}
