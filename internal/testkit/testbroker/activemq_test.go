package testbroker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-stomp/stomp/v3"
)

func TestMain(m *testing.M) { Main(m) }

func dial(t *testing.T, b *ActiveMQ) *stomp.Conn {
	t.Helper()
	conn, err := stomp.Dial("tcp", b.StompAddr(),
		stomp.ConnOpt.Host("localhost"),
		stomp.ConnOpt.HeartBeat(0, 0),
		stomp.ConnOpt.Logger(QuietLogger{}))
	if err != nil {
		t.Fatalf("STOMP connect to %s: %v\n%s", b.Name(), err, b.LogTail(20))
	}
	t.Cleanup(func() { conn.MustDisconnect() })
	return conn
}

// receive reads one message or fails the test after d.
func receive(t *testing.T, sub *stomp.Subscription, d time.Duration) *stomp.Message {
	t.Helper()
	select {
	case msg, ok := <-sub.C:
		if !ok {
			t.Fatalf("subscription %s closed", sub.Destination())
		}
		if msg.Err != nil {
			t.Fatalf("subscription %s: %v", sub.Destination(), msg.Err)
		}
		return msg
	case <-time.After(d):
		t.Fatalf("no message on %s within %v", sub.Destination(), d)
		return nil
	}
}

// eventually polls f until it returns nil or the deadline passes.
func eventually(t *testing.T, d time.Duration, f func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %v: %v", d, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func TestStartConnectAndJSONAdvisory(t *testing.T) {
	t.Parallel()
	b := StartActiveMQ(t, Options{})
	if b.Pid() <= 0 || !b.Running() {
		t.Fatalf("pid %d running=%v", b.Pid(), b.Running())
	}
	if !strings.HasPrefix(b.StompURI(), "stomp://127.0.0.1:") || !strings.HasPrefix(b.OpenWireURI(), "tcp://127.0.0.1:") {
		t.Fatalf("URIs %s %s", b.StompURI(), b.OpenWireURI())
	}
	if !strings.HasPrefix(b.Name(), "TestStartConnectAndJSONAdvisory-") || b.ID() != b.Name()+"-id" {
		t.Fatalf("name %q id %q", b.Name(), b.ID())
	}

	adv := dial(t, b)
	sub, err := adv.Subscribe("/topic/ActiveMQ.Advisory.Consumer.Queue.>", stomp.AckAuto,
		stomp.SubscribeOpt.Header("transformation", "jms-advisory-json"))
	if err != nil {
		t.Fatal(err)
	}
	other := dial(t, b)
	if _, err := other.Subscribe("/queue/adv.q", stomp.AckAuto,
		stomp.SubscribeOpt.Header("selector", "color = 'red'")); err != nil {
		t.Fatal(err)
	}

	deadline := time.Now().Add(10 * time.Second)
	for {
		msg := receive(t, sub, time.Until(deadline))
		var body struct {
			ConsumerInfo *struct {
				Destination struct {
					Class string `json:"@class"`
					Name  string `json:"string"`
				} `json:"destination"`
				Selector string `json:"selector"`
			}
		}
		if err := json.Unmarshal(msg.Body, &body); err != nil {
			t.Fatalf("advisory body is not JSON: %v: %s", err, msg.Body)
		}
		if body.ConsumerInfo == nil || body.ConsumerInfo.Destination.Name != "adv.q" {
			continue
		}
		if c := body.ConsumerInfo.Destination.Class; c != "ActiveMQQueue" {
			t.Errorf("destination class %q", c)
		}
		if s := body.ConsumerInfo.Selector; s != "convert_string_expressions:color = 'red'" {
			t.Errorf("selector %q", s)
		}
		if got := msg.Header.Get("originBrokerName"); got != b.Name() {
			t.Errorf("originBrokerName %q, want %q", got, b.Name())
		}
		if got := msg.Header.Get("originBrokerId"); got != b.ID() {
			t.Errorf("originBrokerId %q, want %q", got, b.ID())
		}
		break
	}
	// The connection must have survived the JSON transformation (jars linked).
	if err := adv.Send("/queue/still.alive", "text/plain", []byte("x"), stomp.SendOpt.Receipt); err != nil {
		t.Fatalf("advisory connection broken: %v\n%s", err, b.LogTail(20))
	}
}

func TestKillRestartKeepsPersistentMessages(t *testing.T) {
	t.Parallel()
	b := StartActiveMQ(t, Options{Persistent: true})
	p := dial(t, b)
	for i := range 10 {
		if err := p.Send("/queue/persist.q", "text/plain", fmt.Appendf(nil, "m%d", i),
			stomp.SendOpt.Receipt, stomp.SendOpt.Header("persistent", "true")); err != nil {
			t.Fatal(err)
		}
	}
	oldPid := b.Pid()
	if err := b.Kill(); err != nil {
		t.Fatal(err)
	}
	if b.Running() {
		t.Fatal("still running after Kill")
	}
	if err := b.Kill(); err != nil { // already gone: fine
		t.Fatal(err)
	}
	if err := b.Restart(ctxT(t, 60*time.Second)); err != nil {
		t.Fatal(err)
	}
	if b.Pid() == oldPid || !b.Running() {
		t.Fatalf("pid after restart %d (before %d), running=%v", b.Pid(), oldPid, b.Running())
	}
	c := dial(t, b)
	sub, err := c.Subscribe("/queue/persist.q", stomp.AckAuto)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		msg := receive(t, sub, 10*time.Second)
		if got, want := string(msg.Body), fmt.Sprintf("m%d", i); got != want {
			t.Fatalf("message %d: %q, want %q", i, got, want)
		}
	}
	// Graceful stop + restart works too.
	if err := b.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := b.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := b.Restart(ctxT(t, 60*time.Second)); err != nil {
		t.Fatal(err)
	}
	if tail := b.LogTail(5); !strings.Contains(tail, "activemq.log") {
		t.Fatalf("LogTail: %q", tail)
	}
}

func TestQueueAndTopicStats(t *testing.T) {
	t.Parallel()
	b := StartActiveMQ(t, Options{})
	ctx := ctxT(t, 30*time.Second)

	if _, err := b.QueueStats(ctx, "stats.q"); !errors.Is(err, ErrNoSuchDestination) {
		t.Fatalf("stats of unused queue: %v, want ErrNoSuchDestination", err)
	}
	p := dial(t, b)
	for range 3 {
		if err := p.Send("/queue/stats.q", "text/plain", []byte("x"), stomp.SendOpt.Receipt); err != nil {
			t.Fatal(err)
		}
	}
	s, err := b.QueueStats(ctx, "stats.q")
	if err != nil {
		t.Fatal(err)
	}
	if s.EnqueueCount != 3 || s.Size != 3 || s.DequeueCount != 0 || s.ConsumerCount != 0 {
		t.Fatalf("stats %+v", s)
	}

	c := dial(t, b)
	sub, err := c.Subscribe("/queue/stats.q", stomp.AckClientIndividual)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := c.Ack(receive(t, sub, 10*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 10*time.Second, func() error {
		s, err := b.QueueStats(ctx, "stats.q")
		if err != nil {
			return err
		}
		if s.DequeueCount != 3 || s.Size != 0 || s.ConsumerCount != 1 {
			return fmt.Errorf("stats %+v", s)
		}
		return nil
	})

	if _, err := c.Subscribe("/topic/stats.t", stomp.AckAuto); err != nil {
		t.Fatal(err)
	}
	if err := p.Send("/topic/stats.t", "text/plain", []byte("x"), stomp.SendOpt.Receipt); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, func() error {
		s, err := b.TopicStats(ctx, "stats.t")
		if err != nil {
			return err
		}
		if s.ConsumerCount != 1 || s.EnqueueCount != 1 {
			return fmt.Errorf("topic stats %+v", s)
		}
		return nil
	})
	// The query type matters: there is no queue named stats.t.
	if _, err := b.QueueStats(ctx, "stats.t"); !errors.Is(err, ErrNoSuchDestination) {
		t.Fatalf("QueueStats of a topic name: %v", err)
	}
	// Wildcards sum over matching queues.
	if err := p.Send("/queue/stats.q2", "text/plain", []byte("x"), stomp.SendOpt.Receipt); err != nil {
		t.Fatal(err)
	}
	s, err = b.QueueStats(ctx, "stats.>")
	if err != nil {
		t.Fatal(err)
	}
	if s.EnqueueCount != 4 {
		t.Fatalf("wildcard stats %+v", s)
	}
}

func TestNativeNetworkConnector(t *testing.T) {
	t.Parallel()
	bB := StartActiveMQ(t, Options{})
	bA := StartActiveMQ(t, Options{NetworkConnectors: []string{bB.OpenWireURI()}, NetworkTTL: 2})
	ctx := ctxT(t, 30*time.Second)

	c := dial(t, bB)
	sub, err := c.Subscribe("/queue/net.q", stomp.AckAuto)
	if err != nil {
		t.Fatal(err)
	}
	// Demand crosses once A's bridge has a consumer for net.q.
	eventually(t, 20*time.Second, func() error {
		s, err := bA.QueueStats(ctx, "net.q")
		if err != nil {
			return err
		}
		if s.ConsumerCount < 1 {
			return fmt.Errorf("no network consumer on %s yet: %+v", bA.Name(), s)
		}
		return nil
	})
	p := dial(t, bA)
	if err := p.Send("/queue/net.q", "text/plain", []byte("over the bridge"), stomp.SendOpt.Receipt); err != nil {
		t.Fatal(err)
	}
	msg := receive(t, sub, 10*time.Second)
	if string(msg.Body) != "over the bridge" {
		t.Fatalf("body %q", msg.Body)
	}
	if err := bA.Close(); err != nil { // explicit Close, then the cleanup's Close: idempotent
		t.Fatal(err)
	}
	if _, err := os.Stat(bA.Dir()); !os.IsNotExist(err) {
		t.Fatalf("dir %s not removed: %v", bA.Dir(), err)
	}
}

func TestSharedStorageMasterSlave(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	master := StartActiveMQ(t, Options{Name: "ms", ID: "ms-master", Persistent: true, DataDir: data})
	slave := StartActiveMQ(t, Options{Name: "ms", ID: "ms-slave", Persistent: true, DataDir: data, NoWait: true})

	p := dial(t, master)
	if err := p.Send("/queue/ms.q", "text/plain", []byte("survives"), stomp.SendOpt.Receipt,
		stomp.SendOpt.Header("persistent", "true")); err != nil {
		t.Fatal(err)
	}
	if !slave.Running() {
		t.Fatalf("slave not running:\n%s", slave.LogTail(20))
	}
	if err := master.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := slave.WaitReady(ctxT(t, 30*time.Second)); err != nil {
		t.Fatal(err)
	}
	c := dial(t, slave)
	sub, err := c.Subscribe("/queue/ms.q", stomp.AckAuto)
	if err != nil {
		t.Fatal(err)
	}
	if msg := receive(t, sub, 10*time.Second); string(msg.Body) != "survives" {
		t.Fatalf("body %q", msg.Body)
	}
}

func TestStartFailsWhenPortTaken(t *testing.T) {
	t.Parallel()
	a := StartActiveMQ(t, Options{})
	dir := t.TempDir()
	// The script gives a taken port 15 s to be freed before it says so.
	_, err := Start(ctxT(t, 60*time.Second), dir, Options{StompPort: a.StompPort()})
	if err == nil || !strings.Contains(err.Error(), "already in use") {
		t.Fatalf("Start on a taken port: %v", err)
	}
}

func TestFreePortsDistinct(t *testing.T) {
	seen := map[int]bool{}
	for range 4 {
		ps, err := FreePorts(3)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range ps {
			if seen[p] {
				t.Fatalf("port %d handed out twice", p)
			}
			seen[p] = true
		}
	}
	if p := FreePort(t); seen[p] || p <= 0 {
		t.Fatalf("FreePort %d", p)
	}
}

func TestParseMapMessageJSON(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want map[string]string
	}{
		{`{"map":""}`, map[string]string{}},
		{`{"map":{"entry":{"string":"size","long":7}}}`, map[string]string{"size": "7"}},
		{`{"map":{"entry":[{"string":["brokerName","A"]},{"string":"enqueueCount","long":3},{"string":"avg","double":1.5},{"string":["n",12]}]}}`,
			map[string]string{"brokerName": "A", "enqueueCount": "3", "avg": "1.5", "n": "12"}},
	} {
		got, err := ParseMapMessageJSON([]byte(tc.in))
		if err != nil {
			t.Fatalf("%s: %v", tc.in, err)
		}
		if len(got) != len(tc.want) {
			t.Fatalf("%s: got %v", tc.in, got)
		}
		for k, v := range tc.want {
			if fmt.Sprint(got[k]) != v {
				t.Fatalf("%s: %s = %v, want %s", tc.in, k, got[k], v)
			}
		}
	}
	if got := mapInt(map[string]any{"x": json.Number("5")}, "x"); got != 5 {
		t.Fatalf("mapInt %d", got)
	}
	if _, err := ParseMapMessageJSON([]byte("not json")); err == nil {
		t.Fatal("no error for bad JSON")
	}
}
