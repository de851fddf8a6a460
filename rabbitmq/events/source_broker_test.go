package events_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/brokernet/brokernet/advisory"
	"github.com/brokernet/brokernet/internal/testkit/stomptest"
	"github.com/brokernet/brokernet/internal/testkit/testbroker"
	"github.com/brokernet/brokernet/rabbitmq"
	"github.com/brokernet/brokernet/rabbitmq/events"
	"github.com/brokernet/brokernet/rabbitmq/mgmt"
	"github.com/brokernet/brokernet/transport/stomp"
)

// The Source against real RabbitMQ nodes, over transport/stomp's connections
// (an external test: transport/stomp imports this package).

// demandView applies a source's events the way a bridge would.
type demandView struct {
	mu        sync.Mutex
	cur       map[string]advisory.Consumer
	pending   map[string]bool // during a snapshot: not yet re-added
	snapshots int
	lost      int // SourceLost events
	brokerID  string
	inSnap    bool
	err       error
}

func (v *demandView) emit(e advisory.Event) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if e.OriginBrokerID != "" {
		v.brokerID = e.OriginBrokerID
	}
	switch e.Kind {
	case advisory.SnapshotStart:
		v.inSnap = true
		v.pending = map[string]bool{}
		for id := range v.cur {
			v.pending[id] = true
		}
	case advisory.SnapshotDone:
		for id := range v.pending {
			delete(v.cur, id)
		}
		v.inSnap = false
		v.snapshots++
	case advisory.ConsumerAdded:
		if _, dup := v.cur[e.Consumer.ID]; dup && !v.inSnap {
			v.err = fmt.Errorf("consumer %s added twice", e.Consumer.ID)
		}
		v.cur[e.Consumer.ID] = e.Consumer
		delete(v.pending, e.Consumer.ID)
	case advisory.ConsumerRemoved:
		if _, ok := v.cur[e.Consumer.ID]; !ok {
			v.err = fmt.Errorf("consumer %s removed but not known", e.Consumer.ID)
		}
		delete(v.cur, e.Consumer.ID)
	case advisory.SourceLost:
		if e.Err == nil {
			v.err = fmt.Errorf("source lost without a reason")
		}
		v.lost++
	default:
		v.err = fmt.Errorf("unexpected event %v", e.Kind)
	}
}

// want checks that the demand is exactly the given destinations (URI forms,
// repeated per consumer) after at least minSnaps snapshots.
func (v *demandView) want(minSnaps int, dests ...string) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.err != nil {
		return v.err
	}
	if v.snapshots < minSnaps {
		return fmt.Errorf("%d snapshots, want %d", v.snapshots, minSnaps)
	}
	var got []string
	for _, c := range v.cur {
		got = append(got, c.Destination.String())
	}
	sort.Strings(got)
	sort.Strings(dests)
	if !equalStrings(got, dests) {
		return fmt.Errorf("demand %v, want %v", got, dests)
	}
	return nil
}

func startSource(t *testing.T, r *testbroker.RabbitMQ) (*demandView, func() error) {
	t.Helper()
	u := stomptest.URI(t, r.StompURI()+"?initialReconnectDelay=200&maxReconnectDelay=1000&management="+url.QueryEscape(r.ManagementURL()))
	src, err := newSource(u, 10*time.Second, stomptest.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	v := &demandView{cur: map[string]advisory.Consumer{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- src.Run(ctx, v.emit) }()
	stop := func() error {
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(10 * time.Second):
			return errors.New("Run did not return after cancel")
		}
	}
	t.Cleanup(func() { stop() })
	return v, stop
}

func subscribe(t *testing.T, c *stomp.Conn, id, dest string, headers ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Subscribe(ctx, id, dest, "client-individual", headers...); err != nil {
		t.Fatal(err)
	}
}

// TestSourceDemand runs the source against a real node: consumers
// from before and after its start, a consumer leaving, a topic subscriber,
// the bridge's own consumers, a connection closed abruptly, and a node
// restart after which the snapshot reconciles what changed meanwhile.
func TestSourceDemand(t *testing.T) {
	r := testbroker.StartRabbitMQ(t, testbroker.RabbitOptions{})
	uri := r.StompURI()

	before := stomptest.Dial(t, uri)
	subscribe(t, before, "1", "/queue/orders")
	subscribe(t, before, "2", "/queue/orders")

	v, stop := startSource(t, r)
	// The first snapshot may miss these (statistics lag); the resync a
	// window later finds them.
	stomptest.Eventually(t, 20*time.Second, func() error { return v.want(1, "queue://orders", "queue://orders") })

	after := stomptest.Dial(t, uri)
	subscribe(t, after, "1", "/queue/orders") // the same tag T_1 as an existing one
	subscribe(t, after, "2", "/queue/invoices")
	subscribe(t, after, "3", "/topic/prices.*")
	subscribe(t, after, "4", "/topic/news.#") // STOMP on RabbitMQ: # is a RabbitMQ wildcard
	// The bridge's own: never demand.
	subscribe(t, after, advisory.BridgeTagPrefix+"d1", "/queue/orders")
	subscribe(t, after, advisory.BridgeTagPrefix+"d2", "/topic/prices.eu", "x-queue-name", rabbitmq.BridgeQueuePrefix+"t.1")
	subscribe(t, after, advisory.BridgeTagPrefix+"d3", "/topic/rates.eu")
	all := []string{"queue://orders", "queue://orders", "queue://orders", "queue://invoices", "topic://prices.*", "topic://news.>"}
	stomptest.Eventually(t, 10*time.Second, func() error { return v.want(1, all...) })

	// A consumer leaves.
	ctx := context.Background()
	if err := after.Unsubscribe(ctx, "2"); err != nil {
		t.Fatal(err)
	}
	all = []string{"queue://orders", "queue://orders", "queue://orders", "topic://prices.*", "topic://news.>"}
	stomptest.Eventually(t, 10*time.Second, func() error { return v.want(1, all...) })

	// A connection that goes away abruptly takes its consumers along.
	before.Abort()
	all = []string{"queue://orders", "topic://prices.*", "topic://news.>"}
	stomptest.Eventually(t, 10*time.Second, func() error { return v.want(1, all...) })

	// The node restarts: the source reconnects, and the new snapshot holds
	// what exists now (the old clients are gone with the node).
	after.Abort()
	rctx, cancel := context.WithTimeout(ctx, testbroker.DefaultRabbitStartTimeout)
	defer cancel()
	if err := r.Restart(rctx); err != nil {
		t.Fatal(err)
	}
	again := stomptest.Dial(t, uri)
	subscribe(t, again, "1", "/queue/payments")
	subscribe(t, again, "2", "/topic/prices.eu")
	stomptest.Eventually(t, 30*time.Second, func() error { return v.want(2, "queue://payments", "topic://prices.eu") })
	v.mu.Lock()
	id, lost := v.brokerID, v.lost
	v.mu.Unlock()
	if lost == 0 {
		t.Error("the restart was not reported as a lost source")
	}
	if !strings.HasPrefix(id, r.Name()+"@") {
		t.Errorf("OriginBrokerID %q, want the cluster name of %s", id, r.Node())
	}
	if err := stop(); err != nil {
		t.Errorf("Run: %v", err)
	}
}

// TestSourceStatsDisabled: one clear error naming the setting.
func TestSourceStatsDisabled(t *testing.T) {
	r := testbroker.StartRabbitMQ(t, testbroker.RabbitOptions{Conf: []string{"management_agent.disable_metrics_collector = true"}})
	u := stomptest.URI(t, r.StompURI()+"?management="+url.QueryEscape(r.ManagementURL()))
	src, err := newSource(u, 0, stomptest.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err = src.Run(ctx, func(advisory.Event) {})
	if !errors.Is(err, mgmt.ErrSetup) || !strings.Contains(err.Error(), "disable_metrics_collector") {
		t.Fatalf("Run = %v, want a setup error naming the setting", err)
	}

	// No management API where it is looked for: the plugin is named, after
	// a few tries (a restarting node opens STOMP before management).
	nowhere := fmt.Sprintf("http://127.0.0.1:%d", testbroker.FreePort(t))
	u = stomptest.URI(t, r.StompURI()+"?initialReconnectDelay=50&maxReconnectDelay=100&management="+url.QueryEscape(nowhere))
	if src, err = newSource(u, 0, stomptest.Logger(t)); err != nil {
		t.Fatal(err)
	}
	err = src.Run(ctx, func(advisory.Event) {})
	if !errors.Is(err, mgmt.ErrSetup) || !strings.Contains(err.Error(), "rabbitmq_management plugin") || !strings.Contains(err.Error(), nowhere) {
		t.Fatalf("Run = %v, want a setup error naming the plugin and the URL", err)
	}
}

// mgmtPut sends a management API PUT with a JSON body.
func mgmtPut(t *testing.T, r *testbroker.RabbitMQ, path, body string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPut, r.ManagementURL()+path, strings.NewReader(body))
	req.SetBasicAuth("guest", "guest")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Fatalf("PUT %s: HTTP %d", path, resp.StatusCode)
	}
}

// TestSourceOtherVHost watches vhost "prod": the events come through the
// exchange in "/", and only prod's consumers are demand.
func TestSourceOtherVHost(t *testing.T) {
	r := testbroker.StartRabbitMQ(t, testbroker.RabbitOptions{})
	mgmtPut(t, r, "/api/vhosts/prod", "{}")
	mgmtPut(t, r, "/api/permissions/prod/guest", `{"configure":".*","write":".*","read":".*"}`)
	prod := r.StompURI() + "?vhost=prod"

	u := stomptest.URI(t, prod+"&management="+url.QueryEscape(r.ManagementURL()))
	src, err := newSource(u, 0, stomptest.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	v := &demandView{cur: map[string]advisory.Consumer{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- src.Run(ctx, v.emit) }()
	defer func() {
		cancel()
		<-done
	}()
	stomptest.Eventually(t, 20*time.Second, func() error { return v.want(1) })

	subscribe(t, stomptest.Dial(t, prod), "1", "/queue/orders")
	subscribe(t, stomptest.Dial(t, r.StompURI()), "1", "/queue/orders")   // vhost "/"
	subscribe(t, stomptest.Dial(t, r.StompURI()), "2", "/queue/invoices") // vhost "/"
	subscribe(t, stomptest.Dial(t, prod), "2", "/topic/prices.*")
	stomptest.Eventually(t, 10*time.Second, func() error { return v.want(1, "queue://orders", "topic://prices.*") })
}

// newSource is the demand source of the broker u names, as
// u.DemandSource makes it, resynchronising every resync (0: the default).
func newSource(u stomp.URI, resync time.Duration, log zerolog.Logger) (*events.Source, error) {
	cfg := u.EventsConfig()
	cfg.ResyncInterval = resync
	return events.NewSource(cfg, log)
}

func equalStrings(a, b []string) bool { return strings.Join(a, ",") == strings.Join(b, ",") }
