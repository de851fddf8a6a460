package deploy

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// systemdAnalyze returns the path of systemd-analyze, installing it with
// testdata/tools.sh (what `make deps` runs) if it is missing and we are root.
func systemdAnalyze(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("systemd-analyze"); err == nil {
		return p
	}
	if os.Geteuid() == 0 {
		if out, err := exec.Command("bash", "../testdata/tools.sh").CombinedOutput(); err != nil {
			t.Logf("installing systemd-analyze: %v\n%s", err, out)
		}
		if p, err := exec.LookPath("systemd-analyze"); err == nil {
			return p
		}
	}
	t.Skip("systemd-analyze is missing and could not be installed (Debian package systemd; `make deps` as root)")
	return ""
}

// TestSystemdUnitVerifies runs `systemd-analyze verify` on the unit, and checks
// the hardening it promises and its exposure score.
func TestSystemdUnitVerifies(t *testing.T) {
	sa := systemdAnalyze(t)
	unit, err := os.ReadFile("systemd/brokernet.service")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"DynamicUser=yes", "ProtectSystem=strict", "NoNewPrivileges=yes",
		"ExecReload=/bin/kill -HUP $MAINPID", "KillSignal=SIGTERM",
		"ExecStart=/usr/local/bin/brokernet run -c /etc/brokernet/federation.toml",
	} {
		if !bytes.Contains(unit, []byte(want+"\n")) {
			t.Errorf("unit lacks %q", want)
		}
	}
	// verify checks that ExecStart is executable: point it at this test's
	// own binary instead of an installed brokernet.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "brokernet.service")
	if err := os.WriteFile(path, bytes.ReplaceAll(unit, []byte("/usr/local/bin/brokernet"), []byte(self)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(sa, "verify", path).CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
	// Lower is better; systemd calls <2 "OK". --offline needs systemd 252.
	out, err = exec.Command(sa, "security", "--offline=yes", path).CombinedOutput()
	if err != nil {
		t.Logf("systemd-analyze security --offline not available here: %v", err)
		return
	}
	m := regexp.MustCompile(`Overall exposure level for brokernet.service: ([0-9.]+)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("no exposure level in:\n%s", out)
	}
	score, _ := strconv.ParseFloat(string(m[1]), 64)
	if score > 2.0 {
		t.Errorf("exposure level %.1f, want at most 2.0:\n%s", score, out)
	}
	t.Logf("systemd-analyze security: exposure %.1f", score)
}

// TestKubernetesProbesUseAdminEndpoint checks the manifest's wiring between
// the sidecar's flags, its ports and the probes (no cluster here to apply it).
func TestKubernetesProbesUseAdminEndpoint(t *testing.T) {
	y, err := os.ReadFile("kubernetes/brokernet.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s := string(y)
	for _, want := range []string{
		"clusterIP: None", "publishNotReadyAddresses: true", "serviceName: brokernet-gossip",
		"- --admin=0.0.0.0:9464", "- --admin-insecure", "{name: admin, containerPort: 9464, protocol: TCP}",
		"httpGet: {path: /healthz, port: admin}", "httpGet: {path: /readyz, port: admin}",
		"- --gossip-bind=0.0.0.0:7946", "- --join=brokers-0.brokernet-gossip:7946",
		"- --broker=stomp://127.0.0.1:61613",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("manifest lacks %q", want)
		}
	}
	if strings.Contains(s, "\t") {
		t.Error("manifest contains a tab (YAML forbids tabs in indentation)")
	}
}

// TestMakeDist builds the host's binary the way `make dist` builds all of
// them, and checks it is static, stamped with the version and in SHA256SUMS.
func TestMakeDist(t *testing.T) {
	if testing.Short() {
		t.Skip("builds brokernet")
	}
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make is not installed")
	}
	dir := t.TempDir()
	target := runtime.GOOS + "/" + runtime.GOARCH
	cmd := exec.Command("make", "-C", "..", "dist", "DIST="+dir, "DIST_TARGETS="+target, "VERSION=v0.0.0-disttest")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make dist: %v\n%s", err, out)
	}
	name := "brokernet-v0.0.0-disttest-" + runtime.GOOS + "-" + runtime.GOARCH
	bin := filepath.Join(dir, name)
	out, err := exec.Command(bin, "version").Output()
	if err != nil || strings.TrimSpace(string(out)) != "brokernet v0.0.0-disttest" {
		t.Errorf("%s version: %q %v", name, out, err)
	}
	if runtime.GOOS == "linux" {
		f, err := elf.Open(bin)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP {
				t.Errorf("%s has a dynamic loader: not static", name)
			}
		}
		f.Close()
	}
	sums, err := os.Open(filepath.Join(dir, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	defer sums.Close()
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	found := false
	for sc := bufio.NewScanner(sums); sc.Scan(); {
		if f := strings.Fields(sc.Text()); len(f) == 2 && f[1] == name {
			found = f[0] == hex.EncodeToString(sum[:])
		}
	}
	if !found {
		t.Errorf("SHA256SUMS has no matching line for %s", name)
	}
}
