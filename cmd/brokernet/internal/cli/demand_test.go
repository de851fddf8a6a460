package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/brokernet/brokernet/admin"
	"github.com/brokernet/brokernet/bridge"
)

// chainStatus is what the sidecar next to broker at says: one bridge to the
// broker after it in the chain D > C > B > A, with demand for queue://orders made
// by a consumer on D when active.
func chainStatus(at, next string, path []string, active bool) admin.Status {
	return admin.Status{
		Nodes: []admin.Node{{Addr: at + ":61616", BrokerID: at, Role: "local"}, {Addr: next + ":61616", BrokerID: next, Role: "peer"}},
		Bridges: []admin.BridgeStatus{{Bridge: at + "->" + next, Local: at + ":61616", LocalID: at, RemoteID: next,
			Demand: []bridge.DemandInfo{{Destination: "queue://orders", Consumers: []string{"c"}, Path: path, Origin: "ID:consumer-1",
				Active: active}}}},
	}
}

func TestDemandRoutesAcrossEndpoints(t *testing.T) {
	sts := []admin.Status{
		chainStatus("A", "B", []string{"D", "C", "B"}, true),
		chainStatus("C", "D", []string{"D"}, true),
		chainStatus("B", "C", []string{"D", "C"}, false),
	}
	rs := routes(sts)
	var got []string
	for _, r := range rs {
		got = append(got, r.Broker+":"+strings.Join(r.Path, ">"))
	}
	if want := "C:D>C B:D>C>B A:D>C>B>A"; strings.Join(got, " ") != want {
		t.Fatalf("routes %q, want %q", got, want)
	}
	if rs[0].From != "D" || rs[0].FromAddr != "D:61616" {
		t.Errorf("consumers' broker %q (%q), want D (D:61616)", rs[0].From, rs[0].FromAddr)
	}
	var b bytes.Buffer
	printDemand(&b, rs, len(sts))
	out := b.String()
	for _, want := range []string{
		"Demand seen by 3 brokernet endpoint(s)\n\nqueue://orders\n",
		"  installed on  consumers on  hops  route          bridge  consumers  active  kind\n",
		"  C             D             1     D > C          C->D    1          yes     for ID:consumer-1\n",
		"  B             D             2     D > C > B      B->C    1          no      for ID:consumer-1\n",
		"  A             D             3     D > C > B > A  A->B    1          yes     for ID:consumer-1\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestDemandDestination(t *testing.T) {
	for in, want := range map[string]string{
		"orders": "queue://orders", "queue://orders": "queue://orders", "/topic/prices": "topic://prices",
		"topic://prices.>": "topic://prices.>",
	} {
		got, err := demandDestination(in)
		if err != nil || got != want {
			t.Errorf("demandDestination(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := demandDestination("nosuch://x"); err == nil {
		t.Error("nosuch://x: no error")
	}
}

// TestDemandWait serves /status from two endpoints whose demand reaches broker
// A on the fourth read: wait returns then, and a wait for a broker the demand
// never reaches fails with what it saw.
func TestDemandWait(t *testing.T) {
	var reads atomic.Int32
	serve := func(st func() admin.Status) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			json.NewEncoder(w).Encode(st())
		}))
		t.Cleanup(srv.Close)
		return srv.URL
	}
	near := serve(func() admin.Status { return chainStatus("B", "C", []string{"C"}, true) })
	far := serve(func() admin.Status {
		if reads.Add(1) < 4 {
			return admin.Status{}
		}
		return chainStatus("A", "B", []string{"C", "B"}, true)
	})
	var out, errOut bytes.Buffer
	e := &env{stdout: &out, stderr: &errOut}
	args := []string{"wait", "orders", "--admin", near + "," + far, "--interval", "10ms", "--timeout", "10s", "--broker"}
	if err := runDemand(context.Background(), e, append(args, "A:61616")); err != nil {
		t.Fatalf("wait for A: %v", err)
	}
	if n := reads.Load(); n != 4 {
		t.Errorf("returned after %d reads, want 4", n)
	}
	if want := "queue://orders: demand on A:61616 (C > B > A)\n"; out.String() != want {
		t.Errorf("printed %q, want %q", out.String(), want)
	}
	// The consumers' own broker has its demand.
	if err := runDemand(context.Background(), e, append(args, "C")); err != nil {
		t.Errorf("wait for C: %v", err)
	}
	args[len(args)-2] = "50ms"
	err := runDemand(context.Background(), e, append(args, "Z"))
	if err == nil || !strings.Contains(err.Error(), "no demand for queue://orders on Z after 50ms; it is on B, A") {
		t.Errorf("wait for Z: %v", err)
	}
	err = runDemand(context.Background(), e, []string{"wait", "orders", "--admin", near})
	if err == nil || !strings.Contains(err.Error(), "--broker is required") {
		t.Errorf("without --broker: %v", err)
	}
}
