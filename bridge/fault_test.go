package bridge_test

// Fault injection against real brokers: a faultproxy sits between the bridge and
// each broker (producers and consumers talk to the brokers directly), and each test
// breaks the path at one point of the protocol or of the network. Every test
// asserts the bridge's promise: nothing lost, duplicates at most one window (and
// reported), the bridge back within its back-off.

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/brokernet/brokernet/bridge"
	"github.com/brokernet/brokernet/internal/faultproxy"
	"github.com/brokernet/brokernet/internal/stomptest"
	"github.com/brokernet/brokernet/internal/testbroker"
)

const (
	faultWindow   = 200
	faultMaxDelay = time.Second // maxReconnectDelay of the bridge's URIs
	// faultHeartBeat is the bridge's heart-beat interval in the half-open tests.
	faultHeartBeat = time.Second
)

// faultRig is two brokers, a proxy in front of each, and a bridge through both
// proxies.
type faultRig struct {
	a, b   *testbroker.ActiveMQ
	pa, pb *faultproxy.Proxy
	br     *running
}

// proxied returns the URI of p with fast reconnects and query (extra options).
func proxied(p *faultproxy.Proxy, query string) string {
	u := fmt.Sprintf("stomp://%s?initialReconnectDelay=100&maxReconnectDelay=%d", p.Addr(), faultMaxDelay.Milliseconds())
	if query != "" {
		u += "&" + query
	}
	return u
}

func newFaultRig(t *testing.T, a, b *testbroker.ActiveMQ, query string) *faultRig {
	t.Helper()
	r := &faultRig{a: a, b: b, pa: faultproxy.Start(t, a.StompAddr()), pb: faultproxy.Start(t, b.StompAddr())}
	r.br = startBridge(t, proxied(r.pa, query), proxied(r.pb, query), func(c *bridge.Config) {
		c.Window = faultWindow
		c.LocalID, c.RemoteID = a.ID(), b.ID()
	})
	return r
}

// seqConsumer is a test consumer over any protocol, as tally reads it.
type seqConsumer interface {
	// Seqs returns the seq property of every message received, repeats included.
	Seqs() []int
}

// tally sums what consumers received of seqs [0, n).
func tally(n int, cs ...seqConsumer) (distinct, dups int, missing []int) {
	seen := make(map[int]int)
	for _, c := range cs {
		for _, s := range c.Seqs() {
			seen[s]++
		}
	}
	for i := 0; i < n; i++ {
		switch k := seen[i]; {
		case k == 0:
			missing = append(missing, i)
		default:
			distinct++
			dups += k - 1
		}
	}
	return distinct, dups, missing
}

// waitAll waits until the consumers hold every seq of [0, n), then checks the
// duplicates against the window and reports them.
func waitAll(t *testing.T, n int, timeout time.Duration, cs ...seqConsumer) {
	t.Helper()
	waitAllBeyond(t, n, 0, timeout, cs...)
}

// waitAllBeyond is waitAll where a broker is known to deliver up to extra
// copies of its own (acknowledgements it lost in a crash): the duplicates
// must stay within the window plus those.
func waitAllBeyond(t *testing.T, n, extra int, timeout time.Duration, cs ...seqConsumer) {
	t.Helper()
	stomptest.Eventually(t, timeout, func() error {
		if d, _, missing := tally(n, cs...); d != n {
			return fmt.Errorf("%d of %d distinct messages arrived; first missing %v", d, n, missing[:min(10, len(missing))])
		}
		return nil
	})
	_, dups, _ := tally(n, cs...)
	if extra == 0 {
		t.Logf("all %d messages arrived, %d duplicates (window %d)", n, dups, faultWindow)
	} else {
		t.Logf("all %d messages arrived, %d duplicates (window %d, plus up to %d the broker delivered again on its own)", n, dups, faultWindow, extra)
	}
	if dups > faultWindow+extra {
		t.Fatalf("%d duplicates, more than the window of %d plus the %d the broker may have delivered again on its own", dups, faultWindow, extra)
	}
}

// waitBack waits until the bridge has had more than sessions sessions and is up,
// and checks that it came back within its back-off (plus the time to connect).
func waitBack(t *testing.T, br *running, sessions int64, since time.Time) {
	t.Helper()
	stomptest.Eventually(t, 30*time.Second, func() error {
		if s := br.Stats().Sessions.Load(); s <= sessions || !br.Up() {
			return fmt.Errorf("bridge not back: %d sessions (had %d), up %v", s, sessions, br.Up())
		}
		return nil
	})
	took := time.Since(since)
	t.Logf("bridge back %v after the fault", took.Round(time.Millisecond))
	// One back-off delay (at most max × 1.2 jitter) plus a generous connect time.
	if limit := faultMaxDelay*12/10 + 5*time.Second; took > limit {
		t.Fatalf("bridge took %v to come back, more than its back-off allows (%v)", took, limit)
	}
}

// TestFaultCutPoints cuts a connection at each point of the forwarding protocol,
// mid-stream: nothing is lost, duplicates stay within the window.
func TestFaultCutPoints(t *testing.T) {
	t.Parallel()
	bs := startBrokers(t, 2, true)
	a, b := bs[0], bs[1]
	cases := []struct {
		name string
		// side picks the proxy to cut: the local one (bridge ↔ A) or the remote one.
		local bool
		rule  func(cut *time.Time) func(faultproxy.Frame) faultproxy.Action
	}{
		{"remote after SENDs before COMMIT", false, func(cut *time.Time) func(faultproxy.Frame) faultproxy.Action {
			commits := 0
			return func(f faultproxy.Frame) faultproxy.Action {
				if f.Dir == faultproxy.ToServer && f.Command == "COMMIT" {
					if commits++; commits == 5 {
						*cut = time.Now()
						return faultproxy.CutBefore
					}
				}
				return faultproxy.Pass
			}
		}},
		{"remote after COMMIT before its RECEIPT", false, func(cut *time.Time) func(faultproxy.Frame) faultproxy.Action {
			receipts := map[string]bool{}
			return func(f faultproxy.Frame) faultproxy.Action {
				switch {
				case f.Dir == faultproxy.ToServer && f.Command == "COMMIT":
					receipts[f.Get("receipt")] = true
				case f.Dir == faultproxy.ToClient && f.Command == "RECEIPT" && receipts[f.Get("receipt-id")] && len(receipts) >= 5:
					*cut = time.Now()
					return faultproxy.CutBefore
				}
				return faultproxy.Pass
			}
		}},
		{"local after the RECEIPT before the ACK", true, func(cut *time.Time) func(faultproxy.Frame) faultproxy.Action {
			acks := 0
			return func(f faultproxy.Frame) faultproxy.Action {
				if f.Dir == faultproxy.ToServer && f.Command == "ACK" {
					if acks++; acks == 5 {
						*cut = time.Now()
						return faultproxy.CutBefore
					}
				}
				return faultproxy.Pass
			}
		}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			q := "fault.cut" + strconv.Itoa(i)
			r := newFaultRig(t, a, b, "")
			const n = 1500
			stomptest.SendN(t, a.StompURI(), "/queue/"+q, 0, n, true)
			var cut time.Time
			p := r.pb
			if tc.local {
				p = r.pa
			}
			p.CutWhen(tc.rule(&cut))
			sessions := r.br.Stats().Sessions.Load()
			c := stomptest.Subscribe(t, b.StompURI(), "/queue/"+q)
			stomptest.Eventually(t, 30*time.Second, func() error {
				if p.Cuts() == 0 {
					return fmt.Errorf("the cut point was never reached (%d forwarded)", r.br.Stats().Forwarded.Load())
				}
				return nil
			})
			waitBack(t, r.br, sessions, cut)
			waitAll(t, n, 60*time.Second, c)
		})
	}
}

// TestFaultHalfOpen black-holes each side (no FIN, no RST): the bridge must notice
// within two heart-beat intervals, and forward everything once the path heals.
func TestFaultHalfOpen(t *testing.T) {
	t.Parallel()
	bs := startBrokers(t, 2, true)
	a, b := bs[0], bs[1]
	for i, local := range []bool{false, true} {
		name := "remote"
		if local {
			name = "local"
		}
		t.Run(name, func(t *testing.T) {
			q := "fault.half" + strconv.Itoa(i)
			r := newFaultRig(t, a, b, "heartBeat="+strconv.FormatInt(faultHeartBeat.Milliseconds(), 10))
			const n = 1500
			stomptest.SendN(t, a.StompURI(), "/queue/"+q, 0, n, true)
			c := stomptest.Subscribe(t, b.StompURI(), "/queue/"+q)
			stomptest.Eventually(t, 30*time.Second, func() error {
				if c.Distinct() < 300 {
					return fmt.Errorf("only %d received before the fault", c.Distinct())
				}
				return nil
			})
			p := r.pb
			if local {
				p = r.pa
			}
			sessions := r.br.Stats().Sessions.Load()
			p.BlackHole()
			holed := time.Now()
			stomptest.Eventually(t, 30*time.Second, func() error {
				if r.br.Up() {
					return fmt.Errorf("bridge still up %v after the black hole", time.Since(holed).Round(time.Millisecond))
				}
				return nil
			})
			detected := time.Since(holed)
			t.Logf("half-open %s connection detected after %v (heart-beat %v)", name, detected.Round(time.Millisecond), faultHeartBeat)
			p.Heal()
			healed := time.Now()
			if detected > 2*faultHeartBeat {
				t.Errorf("half-open connection detected after %v, more than two heart-beat intervals (%v)", detected, 2*faultHeartBeat)
			}
			waitBack(t, r.br, sessions, healed)
			waitAll(t, n, 60*time.Second, c)
		})
	}
}

// TestFaultSlowLinks runs the stream over a remote link with 200 ms latency each
// way, then over one limited to 1 MB/s.
func TestFaultSlowLinks(t *testing.T) {
	t.Parallel()
	bs := startBrokers(t, 2, false)
	a, b := bs[0], bs[1]
	t.Run("latency 200ms", func(t *testing.T) {
		r := newFaultRig(t, a, b, "")
		r.pb.SetLatency(200 * time.Millisecond)
		const n = 500
		c := stomptest.Subscribe(t, b.StompURI(), "/queue/fault.latency")
		waitDemand(t, r.br, 1, 20*time.Second)
		start := time.Now()
		stomptest.SendN(t, a.StompURI(), "/queue/fault.latency", 0, n, false)
		waitAll(t, n, 60*time.Second, c)
		t.Logf("%d messages over a 200 ms link in %v", n, time.Since(start).Round(time.Millisecond))
		if s := r.br.Stats().Sessions.Load(); s != 1 {
			t.Errorf("bridge had %d sessions over a slow but working link, want 1", s)
		}
	})
	t.Run("bandwidth 1MB/s", func(t *testing.T) {
		r := newFaultRig(t, a, b, "")
		r.pb.SetBandwidth(1_000_000)
		const n = 300 // 10 kB each: 3 MB, about 3 s at 1 MB/s
		c := stomptest.Subscribe(t, b.StompURI(), "/queue/fault.bandwidth")
		waitDemand(t, r.br, 1, 20*time.Second)
		start := time.Now()
		pc := stomptest.Dial(t, a.StompURI())
		body := make([]byte, 10_000)
		for i := range body {
			body[i] = 'x'
		}
		if err := stomptest.SendBody(context.Background(), pc, "/queue/fault.bandwidth", 0, n, false, body); err != nil {
			t.Fatal(err)
		}
		waitAll(t, n, 60*time.Second, c)
		took := time.Since(start)
		t.Logf("%d × 10 kB over a 1 MB/s link in %v", n, took.Round(time.Millisecond))
		if took < 2*time.Second {
			t.Errorf("3 MB crossed a 1 MB/s link in %v: the limit was not applied", took)
		}
		if s := r.br.Stats().Sessions.Load(); s != 1 {
			t.Errorf("bridge had %d sessions over a slow but working link, want 1", s)
		}
	})
}

// TestFaultKillLocalBroker SIGKILLs the local (persistent) broker mid-stream and
// restarts it on its store: the messages it still held are forwarded after the
// restart, at most a window of them twice.
func TestFaultKillLocalBroker(t *testing.T) {
	t.Parallel()
	bs := startBrokers(t, 2, true)
	a, b := bs[0], bs[1]
	r := newFaultRig(t, a, b, "")
	const n = 1500
	stomptest.SendN(t, a.StompURI(), "/queue/fault.killa", 0, n, true)
	c := stomptest.Subscribe(t, b.StompURI(), "/queue/fault.killa")
	stomptest.Eventually(t, 30*time.Second, func() error {
		if c.Distinct() < 300 {
			return fmt.Errorf("only %d received before the kill", c.Distinct())
		}
		return nil
	})
	sessions := r.br.Stats().Sessions.Load()
	if err := a.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := a.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("broker A restarted %v after the kill", time.Since(killed).Round(time.Millisecond))
	waitBack(t, r.br, sessions, time.Now())
	waitAll(t, n, 60*time.Second, c)
}

// TestFaultKillRemoteBroker SIGKILLs the remote broker mid-stream and restarts it:
// what it had confirmed is on its store, the rest comes again from the local one.
func TestFaultKillRemoteBroker(t *testing.T) {
	t.Parallel()
	bs := startBrokers(t, 2, true)
	a, b := bs[0], bs[1]
	r := newFaultRig(t, a, b, "")
	const n = 1500
	stomptest.SendN(t, a.StompURI(), "/queue/fault.killb", 0, n, true)
	c1 := stomptest.Subscribe(t, b.StompURI(), "/queue/fault.killb")
	stomptest.Eventually(t, 30*time.Second, func() error {
		if c1.Distinct() < 300 {
			return fmt.Errorf("only %d received before the kill", c1.Distinct())
		}
		return nil
	})
	// The consumer leaves first, with every acknowledgement processed (Close
	// waits for the DISCONNECT receipt): a consumer's own acknowledgements lost
	// in the kill would make B redeliver, and those duplicates are not the
	// bridge's. The stream keeps flowing into B until the kill.
	c1.Close()
	sessions := r.br.Stats().Sessions.Load()
	if err := b.Kill(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := b.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	c2 := stomptest.Subscribe(t, b.StompURI(), "/queue/fault.killb")
	waitBack(t, r.br, sessions, restarted)
	waitAll(t, n, 60*time.Second, c1, c2)
}
