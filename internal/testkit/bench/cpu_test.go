package bench

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"testing"
	"time"

	"github.com/brokernet/brokernet/bridge"
	"github.com/brokernet/brokernet/demand"
	"github.com/brokernet/brokernet/internal/testkit/testbroker"
	"github.com/brokernet/brokernet/transport/endpoint"
)

var (
	flagCPU        = flag.String("bench.cpu", "", "TestBridgeCPU: transports to measure the bridge's CPU per message on (stomp,openwire); empty skips it")
	flagCPUN       = flag.Int("bench.cpun", 50000, "TestBridgeCPU: measured messages per transport")
	flagCPUProfile = flag.String("bench.cpuprofile", "", "TestBridgeCPU: run the bridge in this process and write a CPU profile per transport into this folder (samples of the bridge's goroutines carry the label bench=bridge: go tool pprof -tagfocus bench=bridge)")
)

// TestBridgeCPU measures what the bridge costs per message, non-persistent, A→B on
// fresh default-config brokers: a go-stomp producer on A (Minimal, no receipts),
// a go-stomp consumer on B, warm-up, then -bench.cpun messages. By default the
// bridge is the brokernet binary and the number is its CPU time (/proc/PID/stat)
// over the measured messages: unlike wall-clock figures, it holds on a busy
// machine. With -bench.cpuprofile the bridge runs in this process instead, under
// a pprof label, and the profile shows where its time goes.
//
//	go test -count=1 -run TestBridgeCPU ./internal/testkit/bench/ -args -bench.cpu=stomp,openwire [-bench.cpuprofile=/tmp/prof]
func TestBridgeCPU(t *testing.T) {
	if *flagCPU == "" {
		t.Skip("set -bench.cpu=stomp,openwire to run")
	}
	testbroker.Require(t)
	for _, tr := range splitList(*flagCPU) {
		t.Run(tr, func(t *testing.T) { bridgeCPU(t, tr) })
	}
}

func bridgeCPU(t *testing.T, transport string) {
	a := testbroker.StartActiveMQ(t, testbroker.Options{Name: "cpu-A", ID: "cpu-A-id", FullJIT: true})
	b := testbroker.StartActiveMQ(t, testbroker.Options{Name: "cpu-B", ID: "cpu-B-id", FullJIT: true})
	local, remote := a.StompURI(), b.StompURI()
	if transport == "openwire" {
		local, remote = a.OpenWireURI(), b.OpenWireURI()
	}
	pid := 0
	var cpu func() time.Duration
	var stop func()
	if *flagCPUProfile == "" {
		bin := *flagBin
		if bin == "" {
			var err error
			if bin, err = BuildBrokernet(t.TempDir()); err != nil {
				t.Fatal(err)
			}
		}
		br, err := StartBridge(bin, "bridge", "--log-level", "warn", local, remote)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(br.Kill)
		pid = br.Pid()
		cpu = func() time.Duration { return ProcCPU(pid) }
		stop = func() {}
	} else {
		lu, err := endpoint.Parse(local)
		if err != nil {
			t.Fatal(err)
		}
		ru, err := endpoint.Parse(remote)
		if err != nil {
			t.Fatal(err)
		}
		br, err := bridge.New(bridge.Config{Local: lu, Remote: ru,
			Demand: demand.Options{Conduit: true, ConsumerTTL: 1, MessageTTL: 1, PriorityBase: -5, Prefetch: 1000}})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go pprof.Do(ctx, pprof.Labels("bench", "bridge"), func(ctx context.Context) {
			defer close(done)
			br.Run(ctx)
		})
		t.Cleanup(func() { cancel(); <-done })
		if err := os.MkdirAll(*flagCPUProfile, 0o755); err != nil {
			t.Fatal(err)
		}
		name := filepath.Join(*flagCPUProfile, transport+".pprof")
		f, err := os.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		cpu = func() time.Duration { return 0 }
		started := false
		stop = func() {
			if !started {
				return
			}
			started = false
			pprof.StopCPUProfile()
			f.Close()
			t.Logf("CPU profile in %s (go tool pprof -tagfocus bench=bridge -top %s)", name, name)
			if af, err := os.Create(filepath.Join(*flagCPUProfile, transport+".allocs.pprof")); err == nil {
				pprof.Lookup("allocs").WriteTo(af, 0)
				af.Close()
			}
		}
		defer stop()
		// The profile covers the measured messages only.
		cpuStart := func() {
			if err := pprof.StartCPUProfile(f); err != nil {
				t.Fatal(err)
			}
			started = true
		}
		cpu = func() time.Duration {
			if !started {
				cpuStart()
			}
			return 0
		}
	}
	m, err := DialMinimal(a.StompAddr(), b.StompAddr(), "/queue/cpu")
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	body := Body(1024)
	ctx := context.Background()
	run := func(p Phase, n int) time.Duration {
		m.Expect(p, n)
		start, err := m.Send(p, n, body)
		if err != nil {
			t.Fatal(err)
		}
		if !m.Wait(ctx, p, 30*time.Second) {
			r := m.Result(p)
			t.Fatalf("%s: only %d of %d arrived", p, r.Distinct, n)
		}
		return m.Result(p).Last.Sub(start)
	}
	// The warm-up also waits for the bridge's demand subscription.
	run(Warmup, 5000)
	var load [3]float64
	if s, err := os.ReadFile("/proc/loadavg"); err == nil {
		fmt.Sscan(string(s), &load[0], &load[1], &load[2])
	}
	n := *flagCPUN
	c0, a0, b0 := cpu(), ProcCPU(a.Pid()), ProcCPU(b.Pid())
	wall := run(Full, n)
	c1, a1, b1 := cpu(), ProcCPU(a.Pid()), ProcCPU(b.Pid())
	stop()
	r := m.Result(Full)
	if *flagCPUProfile == "" {
		t.Logf("%s bridge: %.1f µs CPU per message (%d messages, %s CPU, %.0f msg/s, lost %d, dup %d; brokers A %.1f B %.1f µs/msg; load average %.2f %.2f %.2f, %d cores)",
			transport, usPerMsg(c1-c0, n), n, c1-c0, float64(n)/wall.Seconds(), r.Lost, r.Dups,
			usPerMsg(a1-a0, n), usPerMsg(b1-b0, n), load[0], load[1], load[2], runtime.NumCPU())
	} else {
		t.Logf("%s: %d messages, %.0f msg/s (load average %.2f)", transport, n, float64(n)/wall.Seconds(), load[0])
	}
}
