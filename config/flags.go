package config

import (
	"flag"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/brokernet/brokernet/destination"
)

// Flags is the command-line front end of the configuration (`brokernet
// bridge`, `brokernet sidecar`): flags that set the keys of a Config with one
// [[broker]] and one [[networkConnector]], decoded into the same typed tree
// as a file, with the defaults of Default and DefaultConnector, and checked by
// the same Validate, whose problems then name the flag that set the key
// ("--window 0: want at least 1 unconfirmed message, got 0").
type Flags struct {
	fs  *flag.FlagSet
	cfg Config
	src *source
	// byFlag lists the key paths each flag sets.
	byFlag map[string][]string
	// lists are the list flags, by key.
	lists map[string]*listFlag
}

// NewFlags returns the front end for flags registered on fs, for a connector
// called name from the broker DefaultBrokerName.
func NewFlags(fs *flag.FlagSet, name string) *Flags {
	f := &Flags{fs: fs, cfg: Default(), src: newSource(), byFlag: map[string][]string{}, lists: map[string]*listFlag{}}
	f.src.flags = fs
	nc := DefaultConnector()
	nc.Name, nc.Broker = name, DefaultBrokerName
	f.cfg.Brokers = []Broker{{Name: DefaultBrokerName}}
	f.cfg.Connectors = []NetworkConnector{nc}
	return f
}

// Config is the tree the flags write into: set the values that do not come
// from flags (URIs) here before Validate.
func (f *Flags) Config() *Config { return &f.cfg }

// Connector is the connector the flags configure.
func (f *Flags) Connector() *NetworkConnector { return &f.cfg.Connectors[0] }

// Name says that the key of the table kind ("log", "admin", "broker" or
// "networkConnector"; key dotted for sub-tables: "gossip.bind") is set by
// the flag called name (with its dashes, "--log-level"), or by an argument
// ("REMOTE"), which the caller registered itself.
func (f *Flags) Name(kind, key, name string) {
	f.src.names[kind+"."+key] = name
	if strings.HasPrefix(name, "-") {
		fl := strings.TrimLeft(name, "-")
		f.byFlag[fl] = append(f.byFlag[fl], pathKey(f.keyPath(kind, key)))
	}
}

// keyPath is the position path of a key of the one broker or connector.
func (f *Flags) keyPath(kind, key string) []string {
	var p []string
	switch kind {
	case "broker":
		p = f.src.brokerPath(0)
	case "networkConnector":
		p = f.src.connPath(0)
	default:
		p = []string{kind}
	}
	return append(slices.Clone(p), strings.Split(key, ".")...)
}

// Options registers the flag of each connector option key (see
// connectorOptions), with its default from DefaultConnector; without keys,
// the flag of every option that has one.
func (f *Flags) Options(keys ...string) {
	nc := f.Connector()
	if len(keys) == 0 {
		for _, o := range connectorOptions {
			if o.flag != "" {
				keys = append(keys, o.key)
			}
		}
	}
	for _, key := range keys {
		o, ok := optionByKey(key)
		if !ok || o.flag == "" {
			panic("config: no flag for connector key " + key)
		}
		switch p := o.field(nc).(type) {
		case *bool:
			f.fs.BoolVar(p, o.flag, *p, o.usage)
		case *int:
			v := *p
			if o.derived != "" {
				v = 0 // shown as "(default: --network-ttl)"; fill sets it
			}
			f.fs.IntVar(p, o.flag, v, o.usage)
		case *float64:
			f.fs.Float64Var(p, o.flag, *p, o.usage)
		case *string:
			f.fs.StringVar(p, o.flag, *p, o.usage)
		case *time.Duration:
			if o.offIfZero {
				f.fs.Var(offDuration{p}, o.flag, o.usage)
			} else {
				f.fs.DurationVar(p, o.flag, *p, o.usage)
			}
		}
		f.Name("networkConnector", key, "--"+o.flag)
	}
}

// listOptions are the connector's list keys that flags may set, each flag
// repeatable (commas also separate values).
var listOptions = []struct{ key, flag, usage string }{
	{"dynamicallyIncludedDestinations", "include", "destination pattern to forward (repeatable; queue://a.>, topic://b.*, or bare for both)"},
	{"excludedDestinations", "exclude", "destination pattern never to forward (repeatable; wins over --include)"},
	{"staticallyIncludedDestinations", "static-include", "destination always forwarded, with or without demand (repeatable)"},
	{"destinationRateLimits", "destination-rate-limit", "PATTERN=RATE: the destinations PATTERN matches get at most RATE together, messages (500/s) or bytes (2MB/s) a second (repeatable)"},
	{"destinationFilters", "destination-filter", "PATTERN=SELECTOR: of the destinations PATTERN matches, forward only the messages SELECTOR selects (repeatable)"},
	{"renames", "rename", "LOCAL=REMOTE: the local destination is REMOTE on the remote broker (repeatable; exact names, e.g. queue://orders=queue://shop.orders)"},
}

// Lists registers the flags of the destination lists and renames.
func (f *Flags) Lists() {
	for _, l := range listOptions {
		lf := &listFlag{}
		f.lists[l.key] = lf
		f.fs.Var(lf, l.flag, l.usage)
		f.Name("networkConnector", l.key, "--"+l.flag)
	}
}

// Validate decodes what the flags hold into the tree (the list flags' patterns
// and renames), fills in the defaults of keys no flag set (messageTTL and
// consumerTTL from --network-ttl), and validates the Config. Its *Errors name
// the flags. Call it once, after the flags were parsed.
func (f *Flags) Validate() (*Config, error) {
	f.fs.Visit(func(fl *flag.Flag) {
		for _, p := range f.byFlag[fl.Name] {
			f.src.written[p] = true
		}
	})
	var errs Errors
	nc := f.Connector()
	for _, l := range listOptions {
		lf := f.lists[l.key]
		if lf == nil {
			continue
		}
		f.src.lists[l.flag] = *lf
		var kept []int
		for j, s := range *lf {
			var err error
			switch l.key {
			case "renames":
				var r destination.Rename
				if r, err = destination.ParseRename(s); err == nil {
					nc.Renames = append(nc.Renames, r)
				}
			case "destinationFilters":
				var r DestinationFilter
				if r, err = ParseDestinationFilter(s); err == nil {
					nc.DestinationFilters = append(nc.DestinationFilters, r)
				}
			case "destinationRateLimits":
				var r DestinationRateLimit
				if r, err = ParseDestinationRateLimit(s); err == nil {
					nc.DestinationRateLimits = append(nc.DestinationRateLimits, r)
				}
			default:
				var p destination.Pattern
				if p, err = destination.ParsePattern(s); err == nil {
					dst := map[string]*[]destination.Pattern{
						"dynamicallyIncludedDestinations": &nc.DynamicallyIncludedDestinations,
						"excludedDestinations":            &nc.ExcludedDestinations,
						"staticallyIncludedDestinations":  &nc.StaticallyIncludedDestinations,
					}[l.key]
					*dst = append(*dst, p)
				}
			}
			if err != nil {
				errs = append(errs, Error{Flag: "--" + l.flag, Msg: err.Error()})
				continue
			}
			kept = append(kept, j)
		}
		f.src.elems[pathKey(f.keyPath("networkConnector", l.key))] = kept
	}
	f.cfg.src = f.src
	f.cfg.fill()
	if err := f.cfg.Validate(); err != nil {
		errs = append(errs, *err.(*Errors)...)
	}
	if len(errs) > 0 {
		errs.sort()
		return nil, &errs
	}
	return &f.cfg, nil
}

// listFlag is a repeatable flag; commas also separate values.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error {
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			*l = append(*l, p)
		}
	}
	return nil
}

// offDuration is the flag of an interval that 0 turns off (Off in the tree).
type offDuration struct{ p *time.Duration }

func (d offDuration) String() string {
	switch {
	case d.p == nil:
		return "0s"
	case *d.p == Off:
		return "0s"
	}
	return d.p.String()
}

func (d offDuration) Set(s string) error {
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("want a duration such as \"30s\" (0: off)")
	}
	if v == 0 {
		v = Off
	}
	*d.p = v
	return nil
}

func (d offDuration) Get() any { return *d.p }
