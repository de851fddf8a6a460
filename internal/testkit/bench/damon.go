package bench

// DAMON, the kernel's data access monitor, stalls a loaded machine for tens of
// milliseconds every time it samples: with a kdamond running in physical
// address mode (sampling every 500 ms, as on the development VM) every
// process on the machine, the native networkConnector's brokers included,
// saw a stall of 20–35 ms about every 0.55 s of the paced phase, and the
// p99 at 2,000 msg/s was 19–27 ms on the native path instead of 4 ms with
// the kdamond stopped (bench/history/2026-12-03.md). Distributions ship
// with no kdamond running, so the benchmark stops them for its run, as a
// machine its users run would be, and starts them again at the end.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// damonAdmin is where the kernel's DAMON sysfs interface lists its kdamonds.
const damonAdmin = "/sys/kernel/mm/damon/admin/kdamonds"

// RunningDAMON returns the names of the kdamonds running under admin
// (damonAdmin outside tests): none when the kernel has no DAMON.
func RunningDAMON(admin string) []string {
	var names []string
	for _, st := range runningStates(admin) {
		names = append(names, filepath.Base(filepath.Dir(st)))
	}
	return names
}

// runningStates returns the state files of the running kdamonds.
func runningStates(admin string) []string {
	states, _ := filepath.Glob(filepath.Join(admin, "*", "state"))
	var on []string
	for _, st := range states {
		if b, err := os.ReadFile(st); err == nil && strings.TrimSpace(string(b)) == "on" {
			on = append(on, st)
		}
	}
	return on
}

// PauseDAMON stops every running kdamond under admin and returns their names
// and a function that starts them again. No DAMON in the kernel is no error:
// nothing is paused. If stopping one fails (not root), it returns the ones it
// stopped, the restart for them, and the error.
func PauseDAMON(admin string) (paused []string, restart func() error, err error) {
	var stopped []string // state files
	restart = func() error {
		var errs []error
		for _, st := range stopped {
			if err := os.WriteFile(st, []byte("on"), 0); err != nil {
				errs = append(errs, fmt.Errorf("restarting kdamond %s: %w", filepath.Base(filepath.Dir(st)), err))
			}
		}
		return errors.Join(errs...)
	}
	for _, st := range runningStates(admin) {
		name := filepath.Base(filepath.Dir(st))
		if err := os.WriteFile(st, []byte("off"), 0); err != nil {
			return paused, restart, fmt.Errorf("stopping kdamond %s: %w", name, err)
		}
		stopped = append(stopped, st)
		paused = append(paused, name)
	}
	return paused, restart, nil
}
