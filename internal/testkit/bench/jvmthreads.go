package bench

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// JVMThreads is a JVM's CPU time so far, split by what its threads do, as
// HotSpot names them (/proc/PID/task/TID/comm): the garbage collector and the
// VM thread that runs its pauses, and the JIT compilers. The rest of the
// process's time (ProcCPU), threads that already exited included, is the
// application's: ActiveMQ's transport, dispatch and store threads.
type JVMThreads struct{ GC, JIT time.Duration }

// threadKind classifies a HotSpot thread name (comm, at most 15 bytes):
// "gc" for the collectors' workers and the VM thread (which runs the
// collectors' pauses: G1's and the serial collector's), "jit" for the
// compilers, "" for everything else.
func threadKind(comm string) string {
	switch {
	case strings.HasPrefix(comm, "GC Thread"), strings.HasPrefix(comm, "G1 "),
		comm == "VM Thread", strings.HasPrefix(comm, "ZWorker"), strings.HasPrefix(comm, "Shenandoah"):
		return "gc"
	case strings.HasPrefix(comm, "C1 Compiler"), strings.HasPrefix(comm, "C2 Compiler"):
		return "jit"
	}
	return ""
}

// JVMThreadCPU returns the CPU time pid's GC and JIT threads spent so far
// (zero for pid 0, or if /proc cannot be read).
func JVMThreadCPU(pid int) JVMThreads {
	var t JVMThreads
	if pid <= 0 {
		return t
	}
	dir := filepath.Join("/proc", strconv.Itoa(pid), "task")
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return t
	}
	for _, task := range tasks {
		comm, err := os.ReadFile(filepath.Join(dir, task.Name(), "comm"))
		if err != nil {
			continue // exited meanwhile
		}
		kind := threadKind(strings.TrimSuffix(string(comm), "\n"))
		if kind == "" {
			continue
		}
		stat, err := os.ReadFile(filepath.Join(dir, task.Name(), "stat"))
		if err != nil {
			continue
		}
		d := statCPU(string(stat))
		switch kind {
		case "gc":
			t.GC += d
		case "jit":
			t.JIT += d
		}
	}
	return t
}

func (t JVMThreads) sub(o JVMThreads) JVMThreads { return JVMThreads{t.GC - o.GC, t.JIT - o.JIT} }

// FullGC runs a full garbage collection in the JVM with pid (jcmd PID
// GC.run) and returns once it is done; ran is false, and nothing is done,
// if pid is not a JVM.
func FullGC(pid int) (ran bool, err error) {
	if pid <= 0 {
		return false, nil
	}
	comm, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "comm"))
	if err != nil || strings.TrimSuffix(string(comm), "\n") != "java" {
		return false, nil
	}
	out, err := exec.Command("jcmd", strconv.Itoa(pid), "GC.run").CombinedOutput()
	if err != nil {
		return false, fmt.Errorf("jcmd %d GC.run: %v: %s", pid, err, bytes.TrimSpace(out))
	}
	return true, nil
}
