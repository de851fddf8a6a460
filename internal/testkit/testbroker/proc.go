package testbroker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// This file holds what an ActiveMQ broker and a RabbitMQ node have in common:
// a control script in testdata that installs, starts, stops and kills them
// out of a throw-away directory, and the test scaffolding around it.

// findScript returns the absolute path of testdata/name, found by walking up to
// the module root (go.mod) from this source file or, failing that, from the
// working directory. $env, when set, overrides it.
func findScript(name, env string) (string, error) {
	if p := os.Getenv(env); p != "" {
		return filepath.Abs(p)
	}
	var starts []string
	if _, file, _, ok := runtime.Caller(0); ok {
		starts = append(starts, filepath.Dir(file))
	}
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	for _, start := range starts {
		for d := start; ; d = filepath.Dir(d) {
			if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
				p := filepath.Join(d, "testdata", name)
				if _, err := os.Stat(p); err == nil {
					return p, nil
				}
				break // module root without the script: try the next start
			}
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	return "", errors.New("testbroker: testdata/" + name + " not found above " + strings.Join(starts, " or "))
}

// installOnce runs `SCRIPT install` (found by find) the first time it is
// called for once, and returns that run's error every time.
func installOnce(once *sync.Once, errp *error, find func() (string, error)) error {
	once.Do(func() {
		script, err := find()
		if err != nil {
			*errp = err
			return
		}
		out, err := exec.Command("bash", script, "install").CombinedOutput()
		if err != nil {
			*errp = fmt.Errorf("testbroker: %s install: %v\n%s", script, err, out)
		}
	})
	return *errp
}

// instance is one broker process run by a control script out of its own
// directory: ActiveMQ and RabbitMQ embed it.
type instance struct {
	script string
	dir    string
	// kind ("broker", "node") and label (its name) are how messages call it.
	kind, label string

	mu     sync.Mutex
	pid    int
	closed bool
}

// run executes `SCRIPT args...` and returns its stdout; errors carry its stderr.
func (p *instance) run(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "bash", append([]string{p.script}, args...)...)
	var stdout, stderr strings.Builder
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%s %s: %v\n%s", filepath.Base(p.script), args[0], err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// start runs `SCRIPT start args... --no-wait` and records the pid the script
// prints last. On error the process, if any, has been killed.
func (p *instance) start(ctx context.Context, args ...string) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return fmt.Errorf("testbroker: %s is closed", p.kind)
	}
	p.mu.Unlock()
	out, err := p.run(ctx, append(append([]string{"start"}, args...), "--no-wait")...)
	if err != nil {
		p.run(context.Background(), "kill", "--dir", p.dir) //nolint:errcheck // best effort
		return fmt.Errorf("testbroker: starting %s: %w", p.label, err)
	}
	fields := strings.Fields(out)
	if len(fields) == 0 {
		return fmt.Errorf("testbroker: starting %s: script printed no pid", p.label)
	}
	pid, err := strconv.Atoi(fields[len(fields)-1])
	if err != nil {
		return fmt.Errorf("testbroker: starting %s: bad pid %q", p.label, out)
	}
	p.mu.Lock()
	p.pid = pid
	p.mu.Unlock()
	return nil
}

// Dir returns the instance's directory (configuration, data by default, logs).
func (p *instance) Dir() string { return p.dir }

// Pid returns the pid the control script reported at the last start.
func (p *instance) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pid
}

// Kill sends SIGKILL to the process and waits until it is gone. It succeeds if
// it is not running.
func (p *instance) Kill() error {
	if _, err := os.Stat(p.dir); err != nil {
		return nil
	}
	if _, err := p.run(context.Background(), "kill", "--dir", p.dir); err != nil {
		return fmt.Errorf("testbroker: %w", err)
	}
	return nil
}

// stop shuts the process down cleanly: SIGTERM, SIGKILL after timeout.
func (p *instance) stop(timeout time.Duration) error {
	if _, err := os.Stat(p.dir); err != nil {
		return nil
	}
	if _, err := p.run(context.Background(), "stop", "--dir", p.dir, "--timeout", strconv.Itoa(int(timeout.Seconds()))); err != nil {
		return fmt.Errorf("testbroker: %w", err)
	}
	return nil
}

// close kills the process and removes its directory, once; lastResort is
// called with the pid when the script could not kill it.
func (p *instance) close(lastResort func(pid int)) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.mu.Unlock()
	kerr := p.Kill()
	if kerr != nil {
		lastResort(p.Pid())
	}
	return errors.Join(kerr, os.RemoveAll(p.dir))
}

// closeAtCleanup closes b when tb ends, logging its log tail first if tb failed.
func (p *instance) closeAtCleanup(tb testing.TB, b interface {
	LogTail(n int) string
	Close() error
}) {
	tb.Cleanup(func() {
		if tb.Failed() {
			tb.Logf("testbroker: %s %s (dir %s) log tail:\n%s", p.kind, p.label, p.dir, b.LogTail(30))
		}
		if err := b.Close(); err != nil {
			tb.Errorf("testbroker: closing %s: %v", p.label, err)
		}
	})
}

// logTail returns, for each of files that holds anything, a "==> NAME <=="
// line and its last n lines (stdout.log: at most stdoutN), or a note that
// there is no log in the directory.
func (p *instance) logTail(files []string, n, stdoutN int) string {
	var parts []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil || len(data) == 0 {
			continue
		}
		m := n
		if filepath.Base(f) == "stdout.log" && m > stdoutN {
			m = stdoutN
		}
		parts = append(parts, "==> "+filepath.Base(f)+" <==\n"+tailLines(string(data), m))
	}
	if len(parts) == 0 {
		return "(no " + p.kind + " log in " + p.dir + ")"
	}
	return strings.Join(parts, "\n")
}

func tailLines(s string, n int) string {
	s = strings.TrimRight(s, "\n")
	lines := strings.Split(s, "\n")
	if n > 0 && len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// live reports whether pid is a process that is neither gone nor a zombie.
func live(pid int) bool {
	if pid <= 0 {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	if i := strings.LastIndexByte(string(stat), ')'); i >= 0 && i+2 < len(stat) {
		if s := stat[i+2]; s == 'Z' || s == 'X' {
			return false
		}
	}
	return true
}

// dialable reports whether addr accepts a TCP connection within a second.
func dialable(ctx context.Context, addr string) bool {
	var d net.Dialer
	dctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	c, err := d.DialContext(dctx, "tcp", addr)
	if err != nil {
		return false
	}
	c.Close()
	return true
}
