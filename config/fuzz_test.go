package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzParse checks that Parse never panics and that it either returns a
// configuration, which Validate accepts also without the file's positions,
// or *Errors whose every entry names the file.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.toml")
	for _, name := range files {
		if data, err := os.ReadFile(name); err == nil {
			f.Add(data)
		}
	}
	f.Add([]byte(connector + "excludedDestinations = [\"a..b\", 1]\ngossip.bind = 5\n"))
	f.Add([]byte("networkConnector = [{ name = \"a\", uri = \"gossip:\", gossip = { bind = \":0\" } }]\n" + brokerHeader))
	f.Add([]byte("[[broker]]\nuri = '''\nstomp://h'''\n[[networkConnector.x]]\n[networkConnector.gossip]\n"))
	// Relative secretKeyFile names resolve in an empty directory of its own.
	name := filepath.Join(f.TempDir(), "fuzz.toml")
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse(name, data)
		if err == nil {
			if cfg == nil || len(cfg.Brokers) == 0 {
				t.Fatalf("no error and no broker: %+v", cfg)
			}
			// The same tree built in code, without the file's positions,
			// passes the same rules.
			code := *cfg
			code.src = nil
			if err := code.Validate(); err != nil {
				t.Fatalf("Parse accepted what Validate rejects without the file: %v", err)
			}
			for _, nc := range cfg.Connectors {
				_ = nc.Fingerprint()
				if !nc.Equal(nc) {
					t.Fatalf("connector %q is not equal to itself", nc.Name)
				}
				if (nc.Gossip != nil) != (nc.URI.Kind.String() == "gossip") {
					t.Fatalf("connector %q: gossip settings %v for kind %v", nc.Name, nc.Gossip != nil, nc.URI.Kind)
				}
			}
			return
		}
		var errs *Errors
		if !errors.As(err, &errs) || len(*errs) == 0 {
			t.Fatalf("error %T %v, want non-empty *Errors", err, err)
		}
		for _, e := range *errs {
			if !strings.HasSuffix(e.File, "fuzz.toml") || e.Msg == "" {
				t.Fatalf("bad problem %+v", e)
			}
		}
	})
}
