package discovery

import (
	"strings"
	"testing"
)

func TestParseURI(t *testing.T) {
	tests := []struct {
		name  string
		in    string
		kind  Kind
		addrs []string
		str   string
	}{
		{"a bare broker URI is one static peer", "stomp://a:61613", Static, []string{"a:61613"}, "stomp://a:61613"},
		{"the default port is 61613", "stomp://a", Static, []string{"a:61613"}, "stomp://a:61613"},
		{"surrounding space is ignored", "  stomp://a:1  ", Static, []string{"a:1"}, "stomp://a:1"},
		{"static lists peers in order", "static:(stomp://a:1,stomp://b:2)", Static, []string{"a:1", "b:2"}, "static:(stomp://a:1,stomp://b:2)"},
		{"static allows space around members", "static:( stomp://a:1 , stomp://b:2 )", Static, []string{"a:1", "b:2"}, "static:(stomp://a:1,stomp://b:2)"},
		{"static with one member", "static:(stomp://a:1)", Static, []string{"a:1"}, "stomp://a:1"},
		{"masterslave keeps the order", "masterslave:(stomp://m:1,stomp://s:2,stomp://t:3)", MasterSlave, []string{"m:1", "s:2", "t:3"}, "masterslave:(stomp://m:1,stomp://s:2,stomp://t:3)"},
		{"gossip takes no address", "gossip:", Gossip, nil, "gossip:"},
		{"gossip with slashes", "gossip://", Gossip, nil, "gossip:"},
		{"passcodes are redacted in String", "static:(stomp://u:secret@a:1,stomp://b:2)", Static, []string{"a:1", "b:2"}, "static:(stomp://u:***@a:1,stomp://b:2)"},
		{"TLS members", "masterslave:(stomp+ssl://m:1,stomp+ssl://s:2)", MasterSlave, []string{"m:1", "s:2"}, "masterslave:(stomp+ssl://m:1,stomp+ssl://s:2)"},
		{"one AMQP peer", "amqp://u:p@h:5672", Static, []string{"h:5672"}, "amqp://u:***@h:5672"},
		{"one OpenWire peer", "tcp://h", Static, []string{"h:61616"}, "tcp://h:61616"},
		{"a static list of every protocol", "static:(stomp://a:1,amqps://u:p,w@b:2,tcp://c:3,ssl://d:4)", Static, []string{"a:1", "b:2", "c:3", "d:4"}, "static:(stomp://a:1,amqps://u:***@b:2,tcp://c:3,ssl://d:4)"},
		{"OpenWire masterslave", "masterslave:(tcp://m:61616,tcp://s:61616)", MasterSlave, []string{"m:61616", "s:61616"}, "masterslave:(tcp://m:61616,tcp://s:61616)"},
		{"the same host with different vhosts is two brokers", "static:(stomp://a:1?vhost=x,stomp://a:1?vhost=y)", Static, []string{"a:1", "a:1"}, "static:(stomp://a:1?vhost=x,stomp://a:1?vhost=y)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec, err := ParseURI(tt.in)
			if err != nil {
				t.Fatalf("ParseURI(%q): %v", tt.in, err)
			}
			if spec.Kind != tt.kind {
				t.Errorf("kind = %s, want %s", spec.Kind, tt.kind)
			}
			var addrs []string
			for _, u := range spec.URIs {
				addrs = append(addrs, u.Addr())
			}
			if strings.Join(addrs, " ") != strings.Join(tt.addrs, " ") {
				t.Errorf("addrs = %v, want %v", addrs, tt.addrs)
			}
			if got := spec.String(); got != tt.str {
				t.Errorf("String() = %q, want %q", got, tt.str)
			}
		})
	}
}

func TestParseURIErrors(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string // part of the error
	}{
		{"no scheme", "a:61613", "missing scheme"},
		{"nothing at all", "", "missing scheme"},
		{"static without parentheses", "static:stomp://a:1", "want static:(URI,URI,...)"},
		{"static with an unclosed list", "static:(stomp://a:1", "want static:(URI,URI,...)"},
		{"empty static list", "static:()", "no broker URIs"},
		{"empty masterslave list", "masterslave:( )", "no broker URIs"},
		{"masterslave needs two brokers", "masterslave:(stomp://a:1)", "at least two"},
		{"bad member names its position", "static:(stomp://a:1,http://b:2)", "member 2"},
		{"empty member", "static:(stomp://a:1,)", "member 2"},
		{"repeated member", "static:(stomp://a:1,stomp://b:1,stomp://a:1)", "member 3 (stomp://a:1) repeats member 1"},
		{"repeated masterslave member", "masterslave:(stomp://a:1,stomp://a:1)", "repeats member 1"},
		{"gossip with an address", "gossip://10.0.0.1:7946", "gossip takes no address"},
		{"unknown scheme", "multicast://default", "unsupported scheme"},
		{"a bare broker URI without host", "stomp://:", "missing or malformed host"},
		{"a colon for a host", "stomp://::", "missing or malformed host"},
		{"a member without host", "static:(stomp://a:1,stomp://:2)", "member 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseURI(tt.in)
			if err == nil {
				t.Fatalf("ParseURI(%q) succeeded, want an error containing %q", tt.in, tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("ParseURI(%q) = %q, want it to contain %q", tt.in, err, tt.want)
			}
		})
	}
}

func TestParseURIErrorsNeverShowThePasscode(t *testing.T) {
	for _, in := range []string{
		"static:(stomp://u:hunter2@a:1,stomp://u:hunter2@a:1)",
		"static:(stomp://u:hunter2@a:notaport)",
		"masterslave:(stomp://u:hunter2@a:1)",
		"stomp://u:hunter2@a:1?bogus=1",
		"static:(stomp://u:hunter2@a:1",
	} {
		_, err := ParseURI(in)
		if err == nil {
			t.Fatalf("ParseURI(%q) succeeded", in)
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("ParseURI(%q) error shows the passcode: %v", in, err)
		}
	}
}

func FuzzParseURI(f *testing.F) {
	for _, s := range []string{
		"stomp://a:61613",
		"static:(stomp://a:1,stomp://b:2)",
		"masterslave:(stomp://u:p@m:1,stomp+ssl://s:2?vhost=v)",
		"gossip:",
		"static:(stomp://a:1,stomp://a:1)",
		"static:()",
		"stomp://[::1]:61613?heartBeat=0",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		spec, err := ParseURI(s)
		if err != nil {
			return
		}
		switch spec.Kind {
		case Static:
			if len(spec.URIs) == 0 {
				t.Fatalf("ParseURI(%q): static spec without URIs", s)
			}
		case MasterSlave:
			if len(spec.URIs) < 2 {
				t.Fatalf("ParseURI(%q): masterslave spec with %d URIs", s, len(spec.URIs))
			}
		case Gossip:
			if len(spec.URIs) != 0 {
				t.Fatalf("ParseURI(%q): gossip spec with URIs", s)
			}
		default:
			t.Fatalf("ParseURI(%q): kind %s", s, spec.Kind)
		}
		if _, err := ParseURI(spec.String()); err != nil {
			t.Fatalf("ParseURI(%q) ok, but its String %q does not parse: %v", s, spec.String(), err)
		}
		for _, u := range spec.URIs {
			_, pass := credentialsOf(u)
			if portOf(u) <= 0 || portOf(u) > 65535 || u.Hostname() == "" {
				t.Fatalf("ParseURI(%q): bad member %+v", s, u)
			}
			if pass != "" && strings.Contains(spec.String(), ":"+pass+"@") && pass != "***" {
				t.Fatalf("ParseURI(%q).String() = %q shows the passcode", s, spec.String())
			}
		}
	})
}

// FuzzParseURIRedaction plants a marker passcode in random discovery URIs
// (inside lists, after gossip:, with commas and reserved characters around it):
// no error text and no String shows it.
func FuzzParseURIRedaction(f *testing.F) {
	const marker = "Pw9marker"
	f.Add("gossip://", "", "", "h")
	f.Add("static:(stomp://", "a,", "?", "h:1,stomp://b:2)")
	f.Add("masterslave:(stomp://", "", "/x", "m:1)")
	f.Add("static:(stomp://a:1,stomp://", "", "", "a:1)")
	f.Add("bogus", "", "", "")
	f.Add("static:(tcp://", "2024?", "", "h:1,amqp://b:2)")
	f.Add("masterslave:(ssl://a:1,amqps://", "", "#", "m:1)")
	f.Add("tcp://", "", "/", "h:1?bogus=1")
	f.Fuzz(func(t *testing.T, prefix, before, after, suffix string) {
		s := prefix + "u:" + before + marker + after + "@" + suffix
		spec, err := ParseURI(s)
		if err != nil {
			if strings.Contains(err.Error(), marker) {
				t.Fatalf("ParseURI(%q) error shows the passcode: %v", s, err)
			}
			return
		}
		if strings.Contains(spec.String(), marker) {
			t.Fatalf("ParseURI(%q).String() = %q", s, spec.String())
		}
	})
}

func TestParseURIKeepsCommasInPasscodes(t *testing.T) {
	spec, err := ParseURI("static:(stomp://u:a,b@h1:1,stomp://h2:2)")
	if err != nil || len(spec.URIs) != 2 || func() bool { _, p := credentialsOf(spec.URIs[0]); return p != "a,b" }() {
		t.Fatalf("got %+v, %v", spec, err)
	}
	if _, err := ParseURI("gossip://u:hunter2@h"); err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("gossip with an address: %v", err)
	}
}
