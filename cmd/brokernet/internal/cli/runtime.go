package cli

import (
	"errors"
	"flag"
	"runtime"
	"runtime/debug"
	"strconv"

	"github.com/rs/zerolog"
)

// This file sizes the Go runtime for forwarding: how many threads run Go
// code at once (--procs, GOMAXPROCS) and how often the collector runs (GOGC).
// The commands that forward (bridge, run, sidecar) decide once at start, with
// chooseRuntime, and apply the choice with applyRuntime.

// defaultProcs is the GOMAXPROCS a forwarding process runs with unless told
// otherwise. A bridge does little work per message and hands each message
// between goroutines (reader, converter, session, writer); with more Ps than
// work, the scheduler wakes idle threads after every hand-over and they spin
// looking for work. Measured on a 2-core machine (bench/RESULTS.md), the same
// binary with GOMAXPROCS=1 spent about half the CPU per message at the same
// throughput (paced 2,000 msg/s: 82–113 µs/msg against 157–166; full speed
// 24–30 against 36–60), and one P carries one bridge at ~25 µs/msg, some
// 40k msg/s per core, where an ActiveMQ broker gives 5–15k over STOMP.
const defaultProcs = 1

// maxProcs bounds --procs and GOMAXPROCS: the runtime allocates per-P state
// for whatever it is given, so a slip of the keyboard must not become that.
const maxProcs = 1024

// defaultGCPercent is the collector's target (debug.SetGCPercent) unless the
// environment sets GOGC. The live heap of a forwarding process is small,
// bounded by the window of in-flight messages, while every message leaves
// garbage behind; at Go's default of 100 a collection starts each time the
// process has allocated as much as its live heap, which at forwarding rates
// is very often. At 400 the heap may grow to five times the live part
// between collections: a quarter as many collections, and memory still
// bounded by the window. Measured: 28.8 µs/msg with GOGC=400 against ~43 at
// the default (bench/RESULTS.md, one run each).
const defaultGCPercent = 400

// Where a runtime setting came from, as logged.
const (
	fromFlag    = "flag"
	fromEnv     = "env"
	fromDefault = "default"
)

// procsFlag is --procs: an integer that remembers whether it was given, since
// an explicit --procs wins over the environment's GOMAXPROCS and the default
// does not.
type procsFlag struct {
	n   int
	set bool
}

func (p *procsFlag) String() string {
	if p == nil {
		return "0"
	}
	return strconv.Itoa(p.n)
}

func (p *procsFlag) Set(s string) error {
	n, err := strconv.ParseInt(s, 0, strconv.IntSize)
	if err != nil {
		return errors.New("want a number of threads")
	}
	p.n, p.set = int(n), true
	return nil
}

// registerProcs adds --procs to fs.
func registerProcs(fs *flag.FlagSet) *procsFlag {
	p := &procsFlag{n: defaultProcs}
	fs.Var(p, "procs", "run Go code on at most `N` threads at once (GOMAXPROCS; 0: all cores or the container's CPU quota); "+
		"without --procs, the GOMAXPROCS environment variable replaces the default")
	return p
}

// runtimeChoice is how the process runs Go code, and why.
type runtimeChoice struct {
	procs     int    // GOMAXPROCS to set; 0: Go's default for the machine
	procsFrom string // fromFlag, fromEnv (GOMAXPROCS) or fromDefault
	gcPercent int    // collector target (GOGC); negative: collector off
	gcFrom    string // fromEnv (GOGC) or fromDefault
}

// chooseRuntime decides the runtime settings from --procs and the
// environment (getenv, e.g. os.Getenv; an empty value counts as unset, as
// for the runtime). Precedence for procs: an explicit --procs, then
// GOMAXPROCS, then defaultProcs; for the collector: GOGC, then
// defaultGCPercent. A negative or huge --procs, and an environment value the
// choice would rest on that is not a valid setting (the runtime would
// silently ignore it), are usage errors naming the value.
func chooseRuntime(procs procsFlag, getenv func(string) string) (runtimeChoice, error) {
	c := runtimeChoice{procs: defaultProcs, procsFrom: fromDefault, gcPercent: defaultGCPercent, gcFrom: fromDefault}
	switch env := getenv("GOMAXPROCS"); {
	case procs.set:
		if procs.n < 0 || procs.n > maxProcs {
			return runtimeChoice{}, usagef("--procs %d: want 1 to %d threads, or 0 for Go's default (all cores)", procs.n, maxProcs)
		}
		c.procs, c.procsFrom = procs.n, fromFlag
	case env != "":
		n, err := strconv.Atoi(env)
		if err != nil || n < 1 || n > maxProcs {
			return runtimeChoice{}, usagef("environment GOMAXPROCS=%q: want 1 to %d threads (or unset it, or give --procs)", env, maxProcs)
		}
		c.procs, c.procsFrom = n, fromEnv
	}
	if env := getenv("GOGC"); env != "" {
		if env == "off" {
			c.gcPercent = -1
		} else {
			n, err := strconv.Atoi(env)
			if err != nil {
				return runtimeChoice{}, usagef("environment GOGC=%q: want a percentage or off", env)
			}
			c.gcPercent = n
		}
		c.gcFrom = fromEnv
	}
	return c, nil
}

// setRuntime applies c to the process and returns the GOMAXPROCS now in
// effect. Environment values are applied again explicitly, which is what the
// runtime did with them at start. It is a variable so that tests running a
// command in-process can observe the choice without changing the test
// binary's runtime.
var setRuntime = func(c runtimeChoice) int {
	if c.procs == 0 {
		// Go's default ignoring GOMAXPROCS, and the runtime keeps following
		// the CPU quota as it changes.
		runtime.SetDefaultGOMAXPROCS()
	} else {
		runtime.GOMAXPROCS(c.procs)
	}
	debug.SetGCPercent(c.gcPercent)
	return runtime.GOMAXPROCS(0)
}

// applyRuntime applies c and logs what was chosen, once, at start.
func applyRuntime(log zerolog.Logger, c runtimeChoice) {
	procs := setRuntime(c)
	log.Info().Int("procs", procs).Str("procs_from", c.procsFrom).
		Int("gc_percent", c.gcPercent).Str("gc_from", c.gcFrom).Msg("go runtime")
}
