package cli

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/brokernet/brokernet/admin"
	"github.com/brokernet/brokernet/bridge"
	"github.com/brokernet/brokernet/config"
)

const statusUsage = `Usage: brokernet status [--admin URL] [--token-file FILE] [--ca-file FILE]

Reads /status from a running brokernet's admin endpoint and prints its bridges,
demand subscriptions and stuck messages as tables. URL is http://HOST:PORT,
https://HOST:PORT or HOST:PORT.

Flags:
`

// defaultAdmin is the address the examples and packaged configurations use.
const defaultAdmin = "127.0.0.1:9464"

func runStatus(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet("status")
	addr := fs.String("admin", defaultAdmin, "admin endpoint of the brokernet to ask")
	var ask askFlags
	ask.register(fs)
	fs.DurationVar(&ask.timeout, "timeout", ask.timeout, "how long to wait for the answer")
	pos, err := parseFlags(e, fs, statusUsage, args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return usagef("unexpected argument %q", pos[0])
	}
	base, err := adminURL(*addr)
	if err != nil {
		return err
	}
	c, err := ask.client()
	if err != nil {
		return err
	}
	st, err := c.status(ctx, base)
	if err != nil {
		return err
	}
	var b bytes.Buffer
	printStatus(&b, st, time.Now())
	writeTrimmed(e.stdout, b.String())
	return nil
}

// writeTrimmed writes tables to w without the blanks tabwriter pads an empty
// last column with.
func writeTrimmed(w io.Writer, s string) {
	for _, line := range strings.SplitAfter(s, "\n") {
		if t := strings.TrimRight(line, " \n"); t != "" || line != "" {
			fmt.Fprintln(w, t)
		}
	}
}

// askFlags are the flags of a command that reads admin endpoints.
type askFlags struct {
	timeout           time.Duration
	tokenFile, caFile string
}

// register adds the token and CA flags; commands name their own --timeout.
func (a *askFlags) register(fs *flag.FlagSet) {
	a.timeout = 5 * time.Second
	fs.StringVar(&a.tokenFile, "token-file", "", "file holding the endpoint's bearer token")
	fs.StringVar(&a.caFile, "ca-file", "", "PEM CA certificate to trust for an https:// endpoint")
}

// adminClient asks admin endpoints for /status.
type adminClient struct {
	http    *http.Client
	token   string
	timeout time.Duration
}

func (a *askFlags) client() (*adminClient, error) {
	c := &adminClient{http: &http.Client{}, timeout: a.timeout}
	if a.caFile != "" {
		pem, err := os.ReadFile(a.caFile)
		if err != nil {
			return nil, usagef("--ca-file: %v", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, usagef("--ca-file %s: no PEM certificate in it", a.caFile)
		}
		c.http.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
	}
	if a.tokenFile != "" {
		var err error
		if c.token, _, err = config.ReadPasswordFile(a.tokenFile); err != nil {
			return nil, usagef("--token-file: %v", err)
		}
	}
	return c, nil
}

// adminURL turns HOST:PORT or an http(s) URL into the base URL.
func adminURL(s string) (string, error) {
	if !strings.Contains(s, "://") {
		s = "http://" + s
	}
	if !strings.HasPrefix(s, "http://") && !strings.HasPrefix(s, "https://") {
		return "", usagef("--admin %q: want HOST:PORT or an http:// or https:// URL", s)
	}
	return strings.TrimRight(s, "/"), nil
}

// status reads /status from the endpoint at base.
func (c *adminClient) status(ctx context.Context, base string) (admin.Status, error) {
	var st admin.Status
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/status", nil)
	if err != nil {
		return st, usagef("--admin %q: %v", base, err)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return st, fmt.Errorf("asking %s: %w", base, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
		return st, fmt.Errorf("asking %s/status: %s: %s", base, resp.Status, strings.TrimSpace(string(body)))
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return st, fmt.Errorf("reading %s/status: %w", base, err)
	}
	return st, nil
}

// printStatus writes the tables, qdstat style: a title, then aligned columns.
func printStatus(w io.Writer, st admin.Status, now time.Time) {
	ready := "ready"
	if !st.Ready {
		down, blind, held, refused := 0, 0, 0, 0
		for _, r := range st.Reasons {
			switch {
			case r.Held && r.Destination != "":
				refused++
			case r.Held:
				held++
			case r.Up:
				blind++
			default:
				down++
			}
		}
		var why []string
		if down > 0 {
			why = append(why, fmt.Sprintf("%d bridge(s) down", down))
		}
		if blind > 0 {
			why = append(why, fmt.Sprintf("%d bridge(s) blind to remote demand", blind))
		}
		if held > 0 {
			why = append(why, fmt.Sprintf("%d bridge(s) held by the remote broker", held))
		}
		if refused > 0 {
			why = append(why, fmt.Sprintf("%d destination(s) refused by a full remote queue", refused))
		}
		ready = fmt.Sprintf("NOT READY (%s)", strings.Join(why, ", "))
	}
	fmt.Fprintf(w, "brokernet %s, up %s, %s\n\n", st.Version, since(now, st.Started), ready)

	fmt.Fprintln(w, "Bridges")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  bridge\tpeer\tup\tforwarded/s\tforwarded\tin flight\tdemand\tsince\tlast error")
	for _, b := range st.Bridges {
		up, lastErr := "no", b.LastError
		switch {
		case b.Up && b.DemandBlind != "":
			up, lastErr = "blind", b.DemandBlind
		case b.Up && b.RemoteHold != nil:
			up, lastErr = "held", heldWhy(b.RemoteHold)
		case b.Up:
			up = "yes"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%.1f\t%d\t%d/%d\t%d\t%s\t%s\n", b.Bridge, b.Peer, up, b.Rate, b.Forwarded,
			b.InFlight, b.Window, b.DemandSubs, since(now, b.Since), shorten(lastErr, 60))
	}
	if len(st.Bridges) == 0 {
		fmt.Fprintln(tw, "  (none)")
	}
	tw.Flush()

	fmt.Fprintln(w, "\nDemand")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  destination\tbridge\tconsumers\tpriority\thops\tpath\tselector")
	rows := 0
	for _, b := range st.Bridges {
		for _, d := range b.Demand {
			rows++
			kind := d.Selector
			switch {
			case d.Replay:
				kind = "(replay)"
			case d.Static:
				kind = "(static)"
			}
			if d.Durable != "" {
				kind = strings.TrimSpace(kind + " durable=" + d.Durable)
			}
			fmt.Fprintf(tw, "  %s\t%s\t%d\t%d\t%d\t%s\t%s\n", d.Destination, b.Bridge, len(d.Consumers), d.Priority,
				len(d.Path), strings.Join(d.Path, ">"), kind)
		}
	}
	if rows == 0 {
		fmt.Fprintln(tw, "  (none)")
	}
	tw.Flush()

	blocked := 0
	for _, b := range st.Bridges {
		blocked += len(b.Blocked)
	}
	if blocked > 0 {
		// Shown only when there are: the remote broker holds these back,
		// the bridge's other destinations flow.
		fmt.Fprintln(w, "\nBlocked destinations (the remote broker does not confirm their messages, or refuses them)")
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  destination\tbridge\tsince\tunconfirmed\twaiting\twhy")
		for _, b := range st.Bridges {
			for _, x := range b.Blocked {
				fmt.Fprintf(tw, "  %s\t%s\t%s\t%d\t%d\t%s\n", x.Destination, b.Bridge, since(now, x.Since), x.Unconfirmed, x.Waiting,
					shorten(cmp.Or(x.Reason, "not confirmed"), 80))
			}
		}
		tw.Flush()
	}

	fmt.Fprintln(w, "\nStuck messages")
	switch {
	case len(st.Stuck) == 0 && !st.StuckMeasured:
		fmt.Fprintln(w, "  (not measured)")
	case len(st.Stuck) == 0:
		fmt.Fprintln(w, "  (none)")
	default:
		if !st.StuckMeasured {
			fmt.Fprintln(w, "  (not measured on every bridge)")
		}
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  broker\tdestination\tmessages\tdemand at")
		for _, s := range st.Stuck {
			fmt.Fprintf(tw, "  %s\t%s\t%d\t%s\n", s.Broker, s.Destination, s.Messages, strings.Join(s.Demand, ","))
		}
		tw.Flush()
	}
}

// since renders how long ago t was, coarsely: 42s, 7m, 3h, 2d.
func since(now, t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := now.Sub(t)
	switch {
	case d < 90*time.Second:
		return strconv.Itoa(int(d.Seconds())) + "s"
	case d < 90*time.Minute:
		return strconv.Itoa(int(d.Minutes())) + "m"
	case d < 36*time.Hour:
		return strconv.Itoa(int(d.Hours())) + "h"
	}
	return strconv.Itoa(int(d.Hours()/24)) + "d"
}

func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}

// heldWhy says in a table cell why a remote broker holds a bridge: the alarm
// first, which the cell may cut.
func heldWhy(h *bridge.RemoteHold) string {
	why := "confirms nothing"
	if len(h.Alarms) > 0 {
		why = strings.Join(h.Alarms, ", ") + ": " + why
	}
	return fmt.Sprintf("%s (%d unconfirmed)", why, h.Unconfirmed)
}
