package netconnector_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/brokernet/brokernet/bridge"
	"github.com/brokernet/brokernet/config"
	"github.com/brokernet/brokernet/discovery"
	"github.com/brokernet/brokernet/internal/testkit/stomptest"
	"github.com/brokernet/brokernet/internal/testkit/testbroker"
	"github.com/brokernet/brokernet/transport/stomp"
)

// TestGossipPeersLogInWithLocalCredentials: two brokers that require a login,
// one gossip connector each. Gossip carries no passcode, so each connector logs
// in to the other's broker with its own userName/passwordFile, and messages flow.
func TestGossipPeersLogInWithLocalCredentials(t *testing.T) {
	if testing.Short() {
		t.Skip("starts brokers")
	}
	const user, pw = "bridge", "Pw9marker"
	users := map[string]string{user: pw}
	var a, b *testbroker.ActiveMQ
	var wg sync.WaitGroup
	for _, x := range []struct {
		dst  **testbroker.ActiveMQ
		name string
	}{{&a, "authA"}, {&b, "authB"}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			*x.dst = testbroker.StartActiveMQ(t, testbroker.Options{Name: x.name, ID: x.name + "-id", Users: users})
		}()
	}
	wg.Wait()
	if a == nil || b == nil {
		t.FailNow()
	}
	withCreds := func(br *testbroker.ActiveMQ) string { return "stomp://" + user + ":" + pw + "@" + br.StompAddr() }
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if c, err := stomp.Dial(ctx, stomptest.URI(t, a.StompURI()), stomp.Options{}); err == nil {
		c.Abort()
		t.Fatal("the broker lets anonymous clients in; the test would prove nothing")
	}
	ports, err := testbroker.FreePorts(2)
	if err != nil {
		t.Fatal(err)
	}
	connect := func(br *testbroker.ActiveMQ, port int, join []string) func() []string {
		nc := config.DefaultConnector()
		nc.Name = "gossip-" + br.Name()
		nc.URI = discovery.Spec{Kind: discovery.Gossip}
		nc.UserName, nc.Password = user, pw
		nc.Gossip = &config.Gossip{Bind: fmt.Sprintf("127.0.0.1:%d", port), Join: join, NodeName: br.Name(), Timings: config.GossipTimingsFast}
		local := config.Broker{Name: "local", URI: brokerSpec(t, withCreds(br)), ID: br.ID()}
		c := runConnector(t, nc, local, nil)
		return func() []string {
			var up []string
			for _, st := range c.Status() {
				if st.Up {
					up = append(up, st.Key)
				}
				for _, u := range st.URIs {
					if strings.Contains(u, pw) {
						t.Errorf("status shows the passcode: %s", u)
					}
				}
			}
			return up
		}
	}
	upA := connect(a, ports[0], nil)
	upB := connect(b, ports[1], []string{fmt.Sprintf("127.0.0.1:%d", ports[0])})
	stomptest.Eventually(t, 20*time.Second, func() error {
		if len(upA()) != 1 || len(upB()) != 1 {
			return fmt.Errorf("bridges up: A %v, B %v", upA(), upB())
		}
		return nil
	})
	cons := stomptest.Subscribe(t, withCreds(b), "/queue/auth.q")
	stomptest.SendN(t, withCreds(a), "/queue/auth.q", 0, 50, false)
	cons.WaitDistinct(50, 20*time.Second)
}

// TestBridgeRefusesABrokerWithAnotherID: discovery says the remote broker is
// "someone-else"; the broker reached reports its own id, so the bridge refuses
// for good (ErrWrongBroker) instead of forwarding to it.
func TestBridgeRefusesABrokerWithAnotherID(t *testing.T) {
	if testing.Short() {
		t.Skip("starts brokers")
	}
	a := testbroker.StartActiveMQ(t, testbroker.Options{Name: "idA", ID: "idA-id"})
	b := testbroker.StartActiveMQ(t, testbroker.Options{Name: "idB", ID: "idB-id"})
	for _, tc := range []struct {
		name, expect string
		wrong        bool
	}{
		{"another id is refused", "someone-else", true},
		{"the advertised id is accepted", "idB-id", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			br, err := bridge.New(bridge.Config{
				Local: stomptest.URI(t, a.StompURI()), Remote: stomptest.URI(t, b.StompURI()),
				ExpectRemoteID: tc.expect, Log: stomptest.Logger(t),
			})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- br.Run(ctx) }()
			if tc.wrong {
				err := <-done
				if !errors.Is(err, bridge.ErrWrongBroker) || !strings.Contains(err.Error(), `"idB-id"`) {
					t.Fatalf("Run = %v, want ErrWrongBroker naming idB-id", err)
				}
				return
			}
			if err := br.WaitUp(ctx); err != nil {
				t.Fatalf("bridge not up: %v", err)
			}
			cancel()
			<-done
		})
	}
}
