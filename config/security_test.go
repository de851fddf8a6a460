package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCredentialsFromPasswordFile(t *testing.T) {
	dir := t.TempDir()
	pw := filepath.Join(dir, "pw")
	if err := os.WriteFile(pw, []byte("Pw9marker\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := Parse(filepath.Join(dir, "f.toml"), []byte(brokerHeader+
		"[[networkConnector]]\nname = \"g\"\nuri = \"gossip:\"\nuserName = \"bridge\"\npasswordFile = \"pw\"\n[networkConnector.gossip]\nbind = \"127.0.0.1:0\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	nc := cfg.Connectors[0]
	if nc.UserName != "bridge" || nc.Password != "Pw9marker" {
		t.Fatalf("credentials %q/%q", nc.UserName, nc.Password)
	}
	other := nc
	other.Password = "other"
	if nc.Fingerprint() != other.Fingerprint() {
		t.Error("the fingerprint depends on the password; it may be logged")
	}

	for name, tc := range map[string]struct{ body, want string }{
		"a missing password file": {"userName = \"u\"\npasswordFile = \"nope\"\n", "passwordFile: reading password"},
		"a password without user": {"passwordFile = \"pw\"\n", "a password needs userName too"},
	} {
		t.Run(name+" is refused", func(t *testing.T) {
			_, err := Parse(filepath.Join(dir, "f.toml"), []byte(connector+tc.body))
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "Pw9") {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestGossipExposureRefused(t *testing.T) {
	_, err := Parse("f.toml", []byte(brokerHeader+"[[networkConnector]]\nname = \"g\"\nuri = \"gossip:\"\n[networkConnector.gossip]\nbind = \"0.0.0.0:7946\"\n"))
	if err == nil || !strings.Contains(err.Error(), "gossip.bind: gossip is not encrypted") || !strings.Contains(err.Error(), "insecure = true") {
		t.Fatalf("err = %v", err)
	}
	cfg, err := Parse("f.toml", []byte(brokerHeader+"[[networkConnector]]\nname = \"g\"\nuri = \"gossip:\"\n[networkConnector.gossip]\nbind = \"0.0.0.0:7946\"\ninsecure = true\nallowedBrokers = [\"10.0.0.0/8\", \"b.example\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if g := cfg.Connectors[0].Gossip; !g.Insecure || len(g.AllowedBrokers) != 2 {
		t.Fatalf("gossip %+v", g)
	}
	if _, err := Parse("f.toml", []byte(brokerHeader+"[[networkConnector]]\nname = \"g\"\nuri = \"gossip:\"\n[networkConnector.gossip]\nbind = \"127.0.0.1:7946\"\nallowedBrokers = [\"10.0.0.0/99\"]\n")); err == nil || !strings.Contains(err.Error(), "allowedBrokers[0]") {
		t.Fatalf("bad allowedBrokers: %v", err)
	}
}

func TestAdminExposure(t *testing.T) {
	dir := t.TempDir()
	tok := filepath.Join(dir, "tok")
	os.WriteFile(tok, []byte("t0ken\n"), 0o600)
	if _, err := Parse(filepath.Join(dir, "f.toml"), []byte("[admin]\nlisten = \"0.0.0.0:9464\"\n"+brokerHeader)); err == nil || !strings.Contains(err.Error(), "tokenFile") {
		t.Fatalf("exposed admin without token: %v", err)
	}
	cfg, err := Parse(filepath.Join(dir, "f.toml"), []byte("[admin]\nlisten = \"0.0.0.0:9464\"\ntokenFile = \"tok\"\n"+brokerHeader))
	if err != nil || cfg.Admin.Token != "t0ken" {
		t.Fatalf("admin with token: %+v, %v", cfg, err)
	}
}
