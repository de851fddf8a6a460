package bench

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestThreadKind(t *testing.T) {
	for comm, want := range map[string]string{
		"GC Thread#0":     "gc",
		"G1 Conc#0":       "gc",
		"G1 Refine#0":     "gc",
		"G1 Main Marker":  "gc",
		"VM Thread":       "gc",
		"C2 CompilerThre": "jit",
		"C1 CompilerThre": "jit",
		"ActiveMQ Transp": "",
		"VM Periodic Tas": "",
		"java":            "",
	} {
		if got := threadKind(comm); got != want {
			t.Errorf("threadKind(%q) = %q, want %q", comm, got, want)
		}
	}
}

func TestStatCPU(t *testing.T) {
	// A command with spaces and a parenthesis; utime 250 and stime 50 ticks.
	line := "1234 (GC Thread) x) S 1 1 1 0 -1 4194368 0 0 0 0 250 50 0 0 20 0 1 0 100 0 0\n"
	if got, want := statCPU(line), 3e9; float64(got) != want {
		t.Fatalf("statCPU = %v, want 3s", got)
	}
	if statCPU("garbage") != 0 || statCPU("1 (x) S 1") != 0 {
		t.Fatal("a short or malformed line gave CPU time")
	}
}

func TestJVMThreadCPUWithoutJVM(t *testing.T) {
	// This process has no HotSpot threads: nothing is counted, and no pid is
	// nothing.
	if got := JVMThreadCPU(os.Getpid()); got != (JVMThreads{}) {
		t.Fatalf("a Go process counted as %+v", got)
	}
	if JVMThreadCPU(0) != (JVMThreads{}) {
		t.Fatal("pid 0 counted")
	}
}

// TestJVMThreadCPUOfAJVM runs a JVM that allocates without pause and waits
// for its collector and compiler threads to show CPU time.
func TestJVMThreadCPUOfAJVM(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a JVM: an integration test")
	}
	java, err := exec.LookPath("java")
	if err != nil {
		t.Skip("no java on PATH")
	}
	src := filepath.Join(t.TempDir(), "Churn.java")
	prog := `public class Churn {
	public static void main(String[] a) {
		java.util.List<byte[]> keep = new java.util.ArrayList<>();
		for (long i = 0; ; i++) {
			keep.add(new byte[1024]);
			if (keep.size() > 10000) keep.clear();
		}
	}
}
`
	if err := os.WriteFile(src, []byte(prog), 0o644); err != nil {
		t.Fatal(err)
	}
	gcLog := filepath.Join(t.TempDir(), "gc.log")
	cmd := exec.Command(java, "-Xmx64m", "-XX:+UseG1GC", "-Xlog:gc:file="+gcLog, src)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	deadline := time.Now().Add(60 * time.Second)
	var got JVMThreads
	for time.Now().Before(deadline) {
		got = JVMThreadCPU(cmd.Process.Pid)
		if got.GC > 0 && got.JIT > 0 {
			if total := ProcCPU(cmd.Process.Pid); got.GC+got.JIT > total+10*time.Millisecond {
				t.Fatalf("GC %v + JIT %v exceed the process's %v", got.GC, got.JIT, total)
			}
			// -bench.gcbeforepaced's full collection, and none in a
			// process that is no JVM.
			if ran, err := FullGC(cmd.Process.Pid); !ran || err != nil {
				t.Fatalf("FullGC of the JVM: ran %v, %v", ran, err)
			}
			if log, err := os.ReadFile(gcLog); err != nil || !strings.Contains(string(log), "Pause Full") {
				t.Fatalf("FullGC returned, but the JVM's GC log has no full pause (%v):\n%s", err, log)
			}
			if ran, err := FullGC(os.Getpid()); ran || err != nil {
				t.Fatalf("FullGC of the test process: ran %v, %v", ran, err)
			}
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("after 60 s of allocation the JVM's threads counted %+v", got)
}
