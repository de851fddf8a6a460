// Package jmstest runs ActiveMQ's own JMS client (OpenWire, from the Debian
// activemq package's jars) in tests, so that a test sees what a JMS
// application sees: JMSMessageID, temporary queues, typed properties.
//
// The Java programs are the *.java files of this package, compiled once per
// process into a cache directory keyed by their content. Each test pattern
// may add its own class file here; Run and Start take the class name first.
package jmstest

import (
	"bufio"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

//go:embed *.java
var sources embed.FS

// Jars are the Debian activemq package's jars a JMS client needs
// (shared/reference/verified-here.md, "A real JMS client for tests").
var Jars = []string{"activemq-client.jar", "geronimo-jms_1.1_spec.jar", "geronimo-j2ee-management-1.1-spec.jar", "hawtbuf.jar", "slf4j-api.jar"}

// LibDir is where the Debian package puts them.
const LibDir = "/usr/share/activemq/lib"

var (
	compileOnce sync.Once
	classpath   string
	compileErr  error
)

// Classpath compiles the package's Java sources (once per process, cached
// across processes by content) and returns the class path that runs them.
func Classpath() (string, error) {
	compileOnce.Do(func() { classpath, compileErr = compile() })
	return classpath, compileErr
}

func compile() (string, error) {
	var jars []string
	for _, j := range Jars {
		p := filepath.Join(LibDir, j)
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("JMS client jar: %w (the activemq package installs it: testdata/activemq.sh install)", err)
		}
		jars = append(jars, p)
	}
	names, err := fs.Glob(sources, "*.java")
	if err != nil {
		return "", err
	}
	h := sha256.New()
	for _, n := range names {
		b, _ := sources.ReadFile(n)
		fmt.Fprintf(h, "%s\x00%d\x00", n, len(b))
		h.Write(b)
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "brokernet-jmstest", hex.EncodeToString(h.Sum(nil))[:16])
	cp := strings.Join(append(jars, dir), ":")
	if _, err := os.Stat(filepath.Join(dir, "ok")); err == nil {
		return cp, nil
	}
	if _, err := exec.LookPath("javac"); err != nil {
		return "", fmt.Errorf("javac not found: the JDK is needed for the JMS client tests")
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), "build-")
	if err != nil {
		if err = os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
			return "", err
		}
		if tmp, err = os.MkdirTemp(filepath.Dir(dir), "build-"); err != nil {
			return "", err
		}
	}
	defer os.RemoveAll(tmp)
	src := filepath.Join(tmp, "src")
	if err := os.Mkdir(src, 0o755); err != nil {
		return "", err
	}
	var files []string
	for _, n := range names {
		b, _ := sources.ReadFile(n)
		p := filepath.Join(src, n)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return "", err
		}
		files = append(files, p)
	}
	out := filepath.Join(tmp, "classes")
	args := append([]string{"-nowarn", "-cp", strings.Join(jars, ":"), "-d", out}, files...)
	if b, err := exec.Command("javac", args...).CombinedOutput(); err != nil {
		return "", fmt.Errorf("javac: %v\n%s", err, b)
	}
	if err := os.WriteFile(filepath.Join(out, "ok"), nil, 0o644); err != nil {
		return "", err
	}
	// Another process may have built the same directory meanwhile: theirs is as good.
	if err := os.Rename(out, dir); err != nil {
		if _, serr := os.Stat(filepath.Join(dir, "ok")); serr != nil {
			return "", err
		}
	}
	return cp, nil
}

// command returns the java command running class with args.
func command(ctx context.Context, tb testing.TB, class string, args ...string) *exec.Cmd {
	tb.Helper()
	cp, err := Classpath()
	if err != nil {
		tb.Fatal(err)
	}
	return exec.CommandContext(ctx, "java", append([]string{"-Xmx128m", "-XX:TieredStopAtLevel=1", "-cp", cp, class}, args...)...)
}

// Run runs class with args to its end (at most timeout) and returns its
// standard output; a failure ends the test with both outputs.
func Run(tb testing.TB, timeout time.Duration, class string, args ...string) string {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := command(ctx, tb, class, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		tb.Fatalf("java %s %s: %v\nstdout:\n%s\nstderr:\n%s", class, strings.Join(args, " "), err, tail(string(out)), tail(stderr.String()))
	}
	return string(out)
}

// Proc is a Java program running in the background, its output read line
// by line.
type Proc struct {
	cmd    *exec.Cmd
	mu     sync.Mutex
	lines  []string
	stderr strings.Builder
	more   chan struct{} // closed and replaced on each new line
	done   chan struct{} // closed when the program ended
	err    error
}

// Start starts class with args; the program is killed when the test ends.
func Start(tb testing.TB, class string, args ...string) *Proc {
	tb.Helper()
	cmd := command(context.Background(), tb, class, args...)
	p := &Proc{cmd: cmd, more: make(chan struct{}), done: make(chan struct{})}
	cmd.Stderr = &lockedWriter{p: p}
	out, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	go p.read(out)
	tb.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
	})
	return p
}

type lockedWriter struct{ p *Proc }

func (w *lockedWriter) Write(b []byte) (int, error) {
	w.p.mu.Lock()
	defer w.p.mu.Unlock()
	return w.p.stderr.Write(b)
}

func (p *Proc) read(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		p.mu.Lock()
		p.lines = append(p.lines, sc.Text())
		close(p.more)
		p.more = make(chan struct{})
		p.mu.Unlock()
	}
	err := p.cmd.Wait()
	p.mu.Lock()
	p.err = err
	p.mu.Unlock()
	close(p.done)
}

// Lines returns the lines printed so far.
func (p *Proc) Lines() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.lines...)
}

// WaitLine waits until the program printed a line starting with prefix and
// returns it; it ends the test if the program ended first or timeout passed.
func (p *Proc) WaitLine(tb testing.TB, prefix string, timeout time.Duration) string {
	tb.Helper()
	deadline := time.After(timeout)
	seen := 0
	for {
		p.mu.Lock()
		for ; seen < len(p.lines); seen++ {
			if strings.HasPrefix(p.lines[seen], prefix) {
				l := p.lines[seen]
				p.mu.Unlock()
				return l
			}
		}
		more := p.more
		p.mu.Unlock()
		select {
		case <-more:
		case <-p.done:
			p.mu.Lock()
			n := len(p.lines)
			p.mu.Unlock()
			if seen < n {
				continue
			}
			tb.Fatalf("java %s ended (%v) before printing %q:\n%s", strings.Join(p.cmd.Args[5:], " "), p.err, prefix, p.output())
		case <-deadline:
			tb.Fatalf("java printed no %q in %v:\n%s", prefix, timeout, p.output())
		}
	}
}

// Wait waits for the program's end (at most timeout) and returns its output
// lines; a failure ends the test.
func (p *Proc) Wait(tb testing.TB, timeout time.Duration) []string {
	tb.Helper()
	select {
	case <-p.done:
	case <-time.After(timeout):
		tb.Fatalf("java did not end in %v:\n%s", timeout, p.output())
	}
	p.mu.Lock()
	err := p.err
	p.mu.Unlock()
	if err != nil {
		tb.Fatalf("java: %v\n%s", err, p.output())
	}
	return p.Lines()
}

func (p *Proc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return "stdout:\n" + tail(strings.Join(p.lines, "\n")) + "\nstderr:\n" + tail(p.stderr.String())
}

// tail keeps the last 4 KiB of s for failure messages.
func tail(s string) string {
	if len(s) > 4096 {
		return "…" + s[len(s)-4096:]
	}
	return s
}

// Prefixed returns the lines that start with prefix, without it.
func Prefixed(lines []string, prefix string) []string {
	var out []string
	for _, l := range lines {
		if v, ok := strings.CutPrefix(l, prefix); ok {
			out = append(out, v)
		}
	}
	return out
}

// IdentMsg is one message an Ident consumer printed.
type IdentMsg struct {
	ID   string // JMSMessageID
	I    int    // property i
	Orig string // property BrokernetID, "-" when absent
}

// IdentMsgs parses an Ident consumer's MSG lines; a line without a numeric
// i fails tb.
func IdentMsgs(tb testing.TB, lines []string) []IdentMsg {
	tb.Helper()
	var out []IdentMsg
	for _, l := range Prefixed(lines, "MSG ") {
		m, seq := IdentMsg{}, false
		for _, f := range strings.Fields(l) {
			k, v, _ := strings.Cut(f, "=")
			switch k {
			case "id":
				m.ID = v
			case "i":
				var err error
				if m.I, err = strconv.Atoi(v); err != nil {
					tb.Fatalf("bad line %q", l)
				}
				seq = true
			case "orig":
				m.Orig = v
			}
		}
		if !seq {
			tb.Fatalf("bad line %q", l)
		}
		out = append(out, m)
	}
	return out
}
