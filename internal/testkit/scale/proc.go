package scale

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

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
