package bench

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestPauseDAMON(t *testing.T) {
	admin := t.TempDir()
	state := func(name string) string { return filepath.Join(admin, name, "state") }
	for name, st := range map[string]string{"0": "on\n", "1": "off\n", "2": "on\n"} {
		if err := os.MkdirAll(filepath.Dir(state(name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(state(name), []byte(st), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	read := func(name string) string {
		b, err := os.ReadFile(state(name))
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}

	if got := RunningDAMON(admin); !slices.Equal(got, []string{"0", "2"}) {
		t.Fatalf("RunningDAMON = %q, want [0 2]", got)
	}
	paused, restart, err := PauseDAMON(admin)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(paused, []string{"0", "2"}) {
		t.Fatalf("paused %q, want [0 2]", paused)
	}
	for _, name := range []string{"0", "1", "2"} {
		if got := read(name); got != "off" {
			t.Errorf("kdamond %s after the pause: %s, want off", name, got)
		}
	}
	if err := restart(); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"0": "on", "1": "off", "2": "on"} {
		if got := read(name); got != want {
			t.Errorf("kdamond %s after the restart: %s, want %s", name, got, want)
		}
	}
}

func TestPauseDAMONWithoutDAMON(t *testing.T) {
	paused, restart, err := PauseDAMON(filepath.Join(t.TempDir(), "none"))
	if err != nil || len(paused) > 0 {
		t.Fatalf("PauseDAMON without DAMON = %q, %v; want nothing, no error", paused, err)
	}
	if err := restart(); err != nil {
		t.Fatal(err)
	}
}
