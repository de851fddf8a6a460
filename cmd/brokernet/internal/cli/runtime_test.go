package cli

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/brokernet/brokernet/internal/testkit/syncbuf"
)

func TestChooseRuntime(t *testing.T) {
	flagSet := func(n int) procsFlag { return procsFlag{n: n, set: true} }
	unset := procsFlag{n: defaultProcs}
	tests := []struct {
		name  string
		procs procsFlag
		env   map[string]string
		want  runtimeChoice
		err   string // part of the usage error; "" for none
	}{
		{"nothing set runs on one thread with the collector at 400", unset, nil,
			runtimeChoice{procs: 1, procsFrom: fromDefault, gcPercent: 400, gcFrom: fromDefault}, ""},
		{"an explicit --procs is used", flagSet(4), nil,
			runtimeChoice{procs: 4, procsFrom: fromFlag, gcPercent: 400, gcFrom: fromDefault}, ""},
		{"--procs 0 asks for Go's default", flagSet(0), nil,
			runtimeChoice{procs: 0, procsFrom: fromFlag, gcPercent: 400, gcFrom: fromDefault}, ""},
		{"an explicit --procs 1 is the flag's, not the default", flagSet(1), map[string]string{"GOMAXPROCS": "2"},
			runtimeChoice{procs: 1, procsFrom: fromFlag, gcPercent: 400, gcFrom: fromDefault}, ""},
		{"GOMAXPROCS wins over the default", unset, map[string]string{"GOMAXPROCS": "2"},
			runtimeChoice{procs: 2, procsFrom: fromEnv, gcPercent: 400, gcFrom: fromDefault}, ""},
		{"--procs wins over GOMAXPROCS", flagSet(3), map[string]string{"GOMAXPROCS": "2"},
			runtimeChoice{procs: 3, procsFrom: fromFlag, gcPercent: 400, gcFrom: fromDefault}, ""},
		{"--procs 0 wins over GOMAXPROCS", flagSet(0), map[string]string{"GOMAXPROCS": "2"},
			runtimeChoice{procs: 0, procsFrom: fromFlag, gcPercent: 400, gcFrom: fromDefault}, ""},
		{"an empty GOMAXPROCS is unset", unset, map[string]string{"GOMAXPROCS": ""},
			runtimeChoice{procs: 1, procsFrom: fromDefault, gcPercent: 400, gcFrom: fromDefault}, ""},
		{"a bad GOMAXPROCS does not matter under --procs", flagSet(2), map[string]string{"GOMAXPROCS": "lots"},
			runtimeChoice{procs: 2, procsFrom: fromFlag, gcPercent: 400, gcFrom: fromDefault}, ""},
		{"GOGC wins over the default", unset, map[string]string{"GOGC": "150"},
			runtimeChoice{procs: 1, procsFrom: fromDefault, gcPercent: 150, gcFrom: fromEnv}, ""},
		{"GOGC=off turns the collector off", flagSet(2), map[string]string{"GOGC": "off", "GOMAXPROCS": "4"},
			runtimeChoice{procs: 2, procsFrom: fromFlag, gcPercent: -1, gcFrom: fromEnv}, ""},
		{"a negative --procs is refused", flagSet(-1), nil, runtimeChoice{}, "--procs -1: want 1 to 1024 threads, or 0"},
		{"a huge --procs is refused", flagSet(100000), nil, runtimeChoice{}, "--procs 100000"},
		{"a GOMAXPROCS that is no number is refused", unset, map[string]string{"GOMAXPROCS": "lots"}, runtimeChoice{}, `GOMAXPROCS="lots"`},
		{"GOMAXPROCS=0 is refused", unset, map[string]string{"GOMAXPROCS": "0"}, runtimeChoice{}, `GOMAXPROCS="0"`},
		{"a GOGC that is no number is refused", unset, map[string]string{"GOGC": "fast"}, runtimeChoice{}, `GOGC="fast": want a percentage or off`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := chooseRuntime(tt.procs, func(k string) string { return tt.env[k] })
			if tt.err != "" {
				if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want a usage error containing %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestProcsFlagParsing: --procs takes Go's integer syntax, remembers that it
// was given, and names itself in a parse error.
func TestProcsFlagParsing(t *testing.T) {
	fs := newFlagSet("x")
	p := registerProcs(fs)
	if p.set || p.n != defaultProcs {
		t.Fatalf("before parsing: %+v", *p)
	}
	if err := fs.Parse([]string{"--procs", "2"}); err != nil || !p.set || p.n != 2 {
		t.Fatalf("--procs 2: %+v, %v", *p, err)
	}
	fs = newFlagSet("x")
	registerProcs(fs)
	if err := fs.Parse([]string{"--procs", "two"}); err == nil || !strings.Contains(err.Error(), `invalid value "two" for flag -procs`) {
		t.Fatalf("--procs two: %v", err)
	}
}

// observeRuntime replaces setRuntime for one test, so that commands run
// in-process leave the test binary's GOMAXPROCS and GC percent alone, and
// returns the choices the commands made.
func observeRuntime(t *testing.T) *[]runtimeChoice {
	t.Helper()
	var got []runtimeChoice
	prev := setRuntime
	setRuntime = func(c runtimeChoice) int {
		got = append(got, c)
		return max(c.procs, 1)
	}
	t.Cleanup(func() { setRuntime = prev })
	return &got
}

// TestForwardingCommandsApplyAndLogTheRuntimeChoice: bridge and run apply
// the choice once at start and log it with its sources. The commands run with
// a context that is already cancelled: they start, apply, and drain at once
// (nothing listens on the brokers' ports).
func TestForwardingCommandsApplyAndLogTheRuntimeChoice(t *testing.T) {
	t.Setenv("GOMAXPROCS", "")
	t.Setenv("GOGC", "")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	conf := filepath.Join(t.TempDir(), "f.toml")
	if err := os.WriteFile(conf, []byte(`
[log]
format = "json"
[[broker]]
name = "local"
uri = "stomp://127.0.0.1:1"
[[networkConnector]]
name = "c"
uri = "stomp://127.0.0.1:2"
`), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		env  map[string]string
		run  func(context.Context, *env, []string) error
		args []string
		want runtimeChoice
		log  string
	}{
		{"bridge with no settings", nil, runBridge,
			[]string{"--log-format", "json", "stomp://127.0.0.1:1", "stomp://127.0.0.1:2"},
			runtimeChoice{procs: 1, procsFrom: fromDefault, gcPercent: 400, gcFrom: fromDefault},
			`"procs":1,"procs_from":"default","gc_percent":400,"gc_from":"default","time"`},
		{"bridge with --procs over GOMAXPROCS, GOGC from the environment", map[string]string{"GOMAXPROCS": "2", "GOGC": "200"}, runBridge,
			[]string{"--log-format", "json", "--procs", "3", "stomp://127.0.0.1:1", "stomp://127.0.0.1:2"},
			runtimeChoice{procs: 3, procsFrom: fromFlag, gcPercent: 200, gcFrom: fromEnv},
			`"procs":3,"procs_from":"flag","gc_percent":200,"gc_from":"env"`},
		{"run with GOMAXPROCS", map[string]string{"GOMAXPROCS": "2"}, runRun,
			[]string{"-c", conf},
			runtimeChoice{procs: 2, procsFrom: fromEnv, gcPercent: 400, gcFrom: fromDefault},
			`"procs":2,"procs_from":"env","gc_percent":400,"gc_from":"default"`},
		{"run with --procs", nil, runRun,
			[]string{"-c", conf, "--procs", "2"},
			runtimeChoice{procs: 2, procsFrom: fromFlag, gcPercent: 400, gcFrom: fromDefault},
			`"procs":2,"procs_from":"flag"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			got := observeRuntime(t)
			var stdout, stderr syncbuf.Buffer
			if err := tt.run(ctx, &env{stdout: &stdout, stderr: &stderr}, tt.args); err != nil {
				t.Fatalf("%v\n%s", err, stderr.String())
			}
			if len(*got) != 1 || (*got)[0] != tt.want {
				t.Errorf("applied %+v, want once %+v", *got, tt.want)
			}
			if n := strings.Count(stderr.String(), `"message":"go runtime"`); n != 1 {
				t.Errorf("%d go runtime lines, want 1:\n%s", n, stderr.String())
			}
			if !strings.Contains(stderr.String(), tt.log) {
				t.Errorf("log lacks %s:\n%s", tt.log, stderr.String())
			}
		})
	}
}

// TestBadProcsIsAUsageErrorAndChangesNothing: `--procs -1` exits 2 with a
// line naming the flag and its value, before anything is applied; the same
// for sidecar and run.
func TestBadProcsIsAUsageErrorAndChangesNothing(t *testing.T) {
	t.Setenv("GOMAXPROCS", "")
	got := observeRuntime(t)
	for _, args := range [][]string{
		{"bridge", "--procs", "-1", "stomp://127.0.0.1:1", "stomp://127.0.0.1:2"},
		{"sidecar", "--broker", "stomp://127.0.0.1:1", "--procs", "-1"},
		{"run", "-c", "../../../../testdata/federation-static.toml", "--procs", "-1"},
	} {
		var stdout, stderr bytes.Buffer
		code := Main(args, &stdout, &stderr)
		want := "brokernet " + args[0] + ": --procs -1: want 1 to 1024 threads, or 0 for Go's default (all cores)\n"
		if code != 2 || stderr.String() != want {
			t.Errorf("%q: exit %d, stderr %q; want 2 and %q", args, code, stderr.String(), want)
		}
	}
	if len(*got) != 0 {
		t.Errorf("applied %+v after usage errors", *got)
	}
}
