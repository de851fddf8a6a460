// Package cli implements the brokernet command line: it parses arguments into
// configurations, sets up logging and signals, and runs the requested command.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/rs/zerolog"

	"github.com/brokernet/brokernet/transport/stomp"
)

// Version is set at build time with -ldflags "-X github.com/brokernet/brokernet/cmd/brokernet/internal/cli.Version=...".
var Version = "dev"

// errUsage marks errors that are the user's input; they exit with status 2.
var errUsage = errors.New("usage")

type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }
func (e *usageError) Is(target error) bool {
	return target == errUsage
}

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

type command struct {
	name    string
	summary string
	run     func(ctx context.Context, env *env, args []string) error
}

// env is what a command may touch of the process.
type env struct {
	stdout, stderr io.Writer
}

func commands() []command {
	return []command{
		{"bridge", "forward messages from LOCAL to REMOTE on demand", runBridge},
		{"run", "run the federation described by a TOML file", runRun},
		{"check", "validate a federation TOML file", runCheck},
		{"sidecar", "run next to one broker and find peers by gossip", runSidecar},
		{"status", "print a running brokernet's bridges, demand and stuck messages", runStatus},
		{"demand", "show where each destination's demand is installed, or wait for it", runDemand},
		{"import", "translate an ActiveMQ activemq.xml's networkConnectors to TOML", runImport},
		{"send", "send test messages to a destination", runSend},
		{"receive", "receive and count messages from a destination", runReceive},
		{"version", "print the version", runVersion},
	}
}

const topUsage = `brokernet links message brokers into a network: a demand-forwarding bridge.

Usage:
  brokernet <command> [flags] [arguments]

Commands:
%s
Run 'brokernet <command> --help' for a command's flags.
`

func printTopUsage(w io.Writer) {
	var b strings.Builder
	for _, c := range commands() {
		fmt.Fprintf(&b, "  %-9s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(w, topUsage, b.String())
}

// Main runs brokernet with args (without the program name) and returns the exit status.
func Main(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		printTopUsage(stderr)
		return 2
	}
	switch args[0] {
	case "-h", "--help", "help":
		printTopUsage(stdout)
		return 0
	case "-version", "--version":
		args[0] = "version"
	}
	var cmd *command
	for _, c := range commands() {
		if c.name == args[0] {
			cmd = &c
			break
		}
	}
	if cmd == nil {
		fmt.Fprintf(stderr, "brokernet: unknown command %q (see 'brokernet --help')\n", stomp.Redact(args[0]))
		return 2
	}

	ctx, stop := signalContext()
	defer stop()
	err := cmd.run(ctx, &env{stdout: stdout, stderr: stderr}, args[1:])
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		fmt.Fprintf(stderr, "brokernet %s: %v\n", cmd.name, err)
		return 2
	default:
		fmt.Fprintf(stderr, "brokernet %s: %v\n", cmd.name, err)
		return 1
	}
}

// signalContext is cancelled by the first SIGINT or SIGTERM, which starts a drain;
// a second one exits at once.
func signalContext() (context.Context, func()) {
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	go func() {
		select {
		case <-ch:
			cancel()
		case <-ctx.Done():
			return
		}
		select {
		case <-ch:
			fmt.Fprintln(os.Stderr, "brokernet: second signal, exiting without drain")
			os.Exit(1)
		case <-ctx.Done():
		}
	}()
	return ctx, func() { signal.Stop(ch); cancel() }
}

// parseInterleaved parses flags that may come before, between or after positional
// arguments, and returns the positional ones.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if rest[0] == "--" {
			return append(pos, rest[1:]...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// newFlagSet returns a flag set whose errors are returned, not printed; parseFlags
// prints the usage for --help.
func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// parseFlags parses args and turns flag errors into usage errors; --help prints the
// command's usage to stdout.
func parseFlags(e *env, fs *flag.FlagSet, usage string, args []string) ([]string, error) {
	pos, err := parseInterleaved(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(e.stdout, usage)
		fs.SetOutput(e.stdout)
		fs.PrintDefaults()
		return nil, flag.ErrHelp
	}
	if err != nil {
		// The flag package quotes the bad value, which may be a URI with a passcode.
		return nil, usagef("%s", stomp.Redact(err.Error()))
	}
	return pos, nil
}

// stringList is a repeatable flag; commas also separate values.
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error {
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			*l = append(*l, p)
		}
	}
	return nil
}

// newLogger builds the process logger from a validated [log] table
// (config.Validate owns the rules for level and format).
func newLogger(w io.Writer, level, format string) (zerolog.Logger, error) {
	lvl, err := zerolog.ParseLevel(strings.ToLower(level))
	if err != nil {
		return zerolog.Nop(), fmt.Errorf("log level %q: %w", level, err)
	}
	zerolog.TimeFieldFormat = "2006-01-02T15:04:05.000Z07:00"
	if format == "console" {
		noColor := true
		if f, ok := w.(*os.File); ok {
			if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
				noColor = false
			}
		}
		w = zerolog.ConsoleWriter{Out: w, TimeFormat: "15:04:05.000", NoColor: noColor}
	}
	return zerolog.New(w).Level(lvl).With().Timestamp().Logger(), nil
}

func runVersion(_ context.Context, e *env, args []string) error {
	fs := newFlagSet("version")
	if _, err := parseFlags(e, fs, "Usage: brokernet version\n", args); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "brokernet %s\n", Version)
	return nil
}
