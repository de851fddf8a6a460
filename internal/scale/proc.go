package scale

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

// rssKiB is the resident set size of pid in KiB (VmRSS), 0 if unknown.
func rssKiB(pid int) int64 {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return n
		}
	}
	return 0
}

// cpuTime is the user+system CPU time pid used so far (/proc/PID/stat, in
// clock ticks of 10 ms on Linux).
func cpuTime(pid int) time.Duration {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	k, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+k) * 10 * time.Millisecond
}

// metrics reads the admin endpoint's /metrics on port.
func metrics(port int) (string, error) {
	c := http.Client{Timeout: 3 * time.Second}
	resp, err := c.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", port))
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// gauge returns the value of the unlabelled metric name, or -1.
func gauge(text, name string) float64 {
	for _, l := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(l, name+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err == nil {
				return f
			}
		}
	}
	return -1
}

// bridgesUp counts the bridges whose brokernet_bridge_up is 1, by connector.
func bridgesUp(text string) map[string]int {
	up := map[string]int{}
	for _, l := range strings.Split(text, "\n") {
		if !strings.HasPrefix(l, "brokernet_bridge_up{") || !strings.HasSuffix(l, " 1") {
			continue
		}
		if i := strings.Index(l, `connector="`); i >= 0 {
			name := l[i+len(`connector="`):]
			up[name[:strings.IndexByte(name, '"')]]++
		}
	}
	return up
}
