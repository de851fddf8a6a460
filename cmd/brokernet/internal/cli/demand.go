package cli

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/brokernet/brokernet/admin"
	"github.com/brokernet/brokernet/destination"
)

const demandUsage = `Usage: brokernet demand [--admin URL]... [--destination DEST]
       brokernet demand wait DEST --broker BROKER [--timeout D] [--admin URL]...

Reads /status from one or more running brokernets (one per sidecar, or one
daemon) and shows, for each destination, where its consumers are and every
broker their demand was installed on: through which bridge, over how many hops,
by which route (the consumers' broker first).

'demand wait' exits 0 once demand for DEST is installed and confirmed on
BROKER (a broker id, or the host:port the bridges name it by) - the broker a
producer will send to - or the consumers are on BROKER itself; it exits 1 when
--timeout passes first, saying what it saw. DEST is queue://NAME, topic://NAME,
/queue/NAME, /topic/NAME or NAME (a queue).

Flags:
`

// route is one place a destination's demand is installed: a demand
// subscription on Broker, made by Bridge for consumers on Consumers' broker.
type route struct {
	Destination string
	// Broker is where the demand subscription is (its id, or host:port
	// while the id is not known); Addr is its host:port.
	Broker, Addr string
	// From is the consumers' broker (Path[0]), FromAddr its host:port when
	// a bridge knows it, Origin what the demand is for.
	From, FromAddr, Origin string
	// Path is the brokers the demand came through, the consumers' first,
	// then Broker.
	Path      []string
	Bridge    string
	Consumers int
	Active    bool
	Kind      string // "", "static", "replay", "durable=NAME"
}

// routes lists every demand subscription of the given /status documents,
// by destination, then by hops, then by broker.
func routes(sts []admin.Status) []route {
	addrOf := map[string]string{}
	for _, st := range sts {
		for _, n := range st.Nodes {
			if n.BrokerID != "" {
				addrOf[n.BrokerID] = n.Addr
			}
		}
	}
	var out []route
	for _, st := range sts {
		for _, b := range st.Bridges {
			at := b.LocalID
			if at == "" {
				at = b.Local
			}
			for _, d := range b.Demand {
				r := route{Destination: d.Destination, Broker: at, Addr: b.Local, Origin: d.Origin,
					Path: append(slices.Clone(d.Path), at), Bridge: b.Bridge, Consumers: len(d.Consumers), Active: d.Active}
				if len(d.Path) > 0 {
					r.From, r.FromAddr = d.Path[0], addrOf[d.Path[0]]
				}
				switch {
				case d.Replay:
					r.Kind = "replay"
				case d.Static:
					r.Kind = "static"
				case d.Durable != "":
					r.Kind = "durable=" + d.Durable
				}
				out = append(out, r)
			}
		}
	}
	slices.SortFunc(out, func(x, y route) int {
		if c := strings.Compare(x.Destination, y.Destination); c != 0 {
			return c
		}
		if c := len(x.Path) - len(y.Path); c != 0 {
			return c
		}
		return strings.Compare(x.Broker+"\x00"+x.Bridge, y.Broker+"\x00"+y.Bridge)
	})
	return out
}

// printDemand writes the routes as one table per destination.
func printDemand(w io.Writer, rs []route, endpoints int) {
	fmt.Fprintf(w, "Demand seen by %d brokernet endpoint(s)\n", endpoints)
	if len(rs) == 0 {
		fmt.Fprintln(w, "  (none)")
		return
	}
	var tw *tabwriter.Writer
	for i, r := range rs {
		if i == 0 || rs[i-1].Destination != r.Destination {
			if tw != nil {
				tw.Flush()
			}
			fmt.Fprintf(w, "\n%s\n", r.Destination)
			tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "  installed on\tconsumers on\thops\troute\tbridge\tconsumers\tactive\tkind")
		}
		active := "yes"
		if !r.Active {
			active = "no"
		}
		kind := r.Kind
		if kind == "" && r.Origin != "" {
			kind = "for " + r.Origin
		}
		fmt.Fprintf(tw, "  %s\t%s\t%d\t%s\t%s\t%d\t%s\t%s\n", r.Broker, r.From, len(r.Path)-1,
			strings.Join(r.Path, " > "), r.Bridge, r.Consumers, active, kind)
	}
	tw.Flush()
}

// demandDestination turns the DEST argument into /status's form ("queue://x").
func demandDestination(s string) (string, error) {
	var d destination.Destination
	var err error
	switch {
	case strings.Contains(s, "://"):
		d, err = destination.Parse(s)
	case strings.HasPrefix(s, "/"):
		d, err = destination.FromStomp(s)
	default:
		d, err = destination.Parse("queue://" + s)
	}
	if err != nil {
		return "", usagef("destination %q: %v", s, err)
	}
	return d.String(), nil
}

func runDemand(ctx context.Context, e *env, args []string) error {
	if len(args) > 0 && args[0] == "wait" {
		return runDemandWait(ctx, e, args[1:])
	}
	fs := newFlagSet("demand")
	var addrs adminList
	addrs.register(fs)
	only := fs.String("destination", "", "show only this destination")
	var ask askFlags
	ask.register(fs)
	fs.DurationVar(&ask.timeout, "timeout", ask.timeout, "how long to wait for each endpoint's answer")
	pos, err := parseFlags(e, fs, demandUsage, args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return usagef("unexpected argument %q (did you mean 'demand wait'?)", pos[0])
	}
	want := ""
	if *only != "" {
		if want, err = demandDestination(*only); err != nil {
			return err
		}
	}
	c, bases, err := addrs.ask(&ask)
	if err != nil {
		return err
	}
	sts, errs := c.statuses(ctx, bases)
	if len(sts) == 0 {
		return errors.Join(errs...)
	}
	rs := routes(sts)
	if want != "" {
		rs = slices.DeleteFunc(rs, func(r route) bool { return r.Destination != want })
	}
	var b bytes.Buffer
	printDemand(&b, rs, len(sts))
	for _, err := range errs {
		fmt.Fprintf(&b, "\nnot read: %v\n", err)
	}
	writeTrimmed(e.stdout, b.String())
	if len(errs) > 0 {
		return fmt.Errorf("%d of %d endpoint(s) not read", len(errs), len(bases))
	}
	return nil
}

func runDemandWait(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet("demand wait")
	var addrs adminList
	addrs.register(fs)
	broker := fs.String("broker", "", "the broker the demand must reach: its broker id or host:port (required)")
	wait := fs.Duration("timeout", time.Minute, "how long to wait for the demand")
	every := fs.Duration("interval", 250*time.Millisecond, "how often to ask")
	var ask askFlags
	ask.register(fs)
	pos, err := parseFlags(e, fs, demandUsage, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("want one DEST, got %d argument(s)", len(pos))
	}
	if *broker == "" {
		return usagef("--broker is required: the broker id or host:port the demand must reach")
	}
	if *every <= 0 {
		return usagef("--interval %v: want a positive duration", *every)
	}
	dest, err := demandDestination(pos[0])
	if err != nil {
		return err
	}
	c, bases, err := addrs.ask(&ask)
	if err != nil {
		return err
	}
	// Each request may take the interval, and no less than 2 s.
	c.timeout = max(*every, 2*time.Second)
	ctx, cancel := context.WithTimeout(ctx, *wait)
	defer cancel()
	tick := time.NewTicker(*every)
	defer tick.Stop()
	var seen []route
	var lastErrs []error
	for {
		sts, errs := c.statuses(ctx, bases)
		if ctx.Err() != nil {
			// Reads cut by the deadline say nothing: report the last round.
			return waitFailed(dest, *broker, *wait, seen, lastErrs)
		}
		seen, lastErrs = seen[:0], errs
		for _, r := range routes(sts) {
			if r.Destination != dest {
				continue
			}
			seen = append(seen, r)
			if r.Active && (r.Broker == *broker || r.Addr == *broker) || r.From == *broker || r.FromAddr == *broker {
				fmt.Fprintf(e.stdout, "%s: demand on %s (%s)\n", dest, *broker, strings.Join(r.Path, " > "))
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return waitFailed(dest, *broker, *wait, seen, lastErrs)
		case <-tick.C:
		}
	}
}

// waitFailed says what 'demand wait' saw when its time ran out.
func waitFailed(dest, broker string, wait time.Duration, seen []route, errs []error) error {
	var b strings.Builder
	fmt.Fprintf(&b, "no demand for %s on %s after %v", dest, broker, wait)
	if len(seen) == 0 {
		fmt.Fprintf(&b, "; no broker has demand for %s", dest)
	} else {
		var at []string
		for _, r := range seen {
			s := r.Broker
			if !r.Active {
				s += " (not yet confirmed)"
			}
			at = append(at, s)
		}
		fmt.Fprintf(&b, "; it is on %s", strings.Join(at, ", "))
	}
	for _, err := range errs {
		fmt.Fprintf(&b, "; not read: %v", err)
	}
	return errors.New(b.String())
}

// adminList is the --admin flag of the demand commands: endpoints to ask,
// repeated or comma-separated.
type adminList struct{ stringList }

func (l *adminList) register(fs *flag.FlagSet) {
	fs.Var(&l.stringList, "admin", "admin endpoint of a brokernet to ask (repeat, or separate with commas; default "+defaultAdmin+")")
}

// ask returns the client and the base URLs of the endpoints to ask.
func (l *adminList) ask(a *askFlags) (*adminClient, []string, error) {
	addrs := []string(l.stringList)
	if len(addrs) == 0 {
		addrs = []string{defaultAdmin}
	}
	bases := make([]string, 0, len(addrs))
	for _, s := range addrs {
		base, err := adminURL(s)
		if err != nil {
			return nil, nil, err
		}
		bases = append(bases, base)
	}
	c, err := a.client()
	return c, bases, err
}

// statuses reads /status from every endpoint at once; it returns those it
// read and an error for each it could not.
func (c *adminClient) statuses(ctx context.Context, bases []string) ([]admin.Status, []error) {
	type answer struct {
		st  admin.Status
		err error
	}
	answers := make([]answer, len(bases))
	done := make(chan struct{})
	for i, base := range bases {
		go func() {
			answers[i].st, answers[i].err = c.status(ctx, base)
			done <- struct{}{}
		}()
	}
	for range bases {
		<-done
	}
	var sts []admin.Status
	var errs []error
	for _, a := range answers {
		if a.err != nil {
			errs = append(errs, a.err)
			continue
		}
		sts = append(sts, a.st)
	}
	return sts, errs
}
