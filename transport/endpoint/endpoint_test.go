package endpoint

import (
	"strings"
	"testing"
	"time"

	"github.com/brokernet/brokernet/transport"
	"github.com/brokernet/brokernet/transport/stomp"
)

// marker is the passcode the redaction tests plant; no error may contain it.
const marker = "Pw9marker"

func TestParseDispatchesOnScheme(t *testing.T) {
	for _, tc := range []struct{ in, protocol, addr string }{
		{"stomp://h:1", "stomp", "h:1"},
		{"stomp+ssl://h", "stomp", "h:61613"},
		{"amqp://h", "amqp", "h:5672"},
		{"amqps://h", "amqp", "h:5671"},
		{"tcp://h", "openwire", "h:61616"},
		{"ssl://[::1]:2", "openwire", "[::1]:2"},
		{"TCP://h:3", "openwire", "h:3"},
	} {
		u, err := Parse(tc.in)
		if err != nil {
			t.Fatalf("Parse(%q): %v", tc.in, err)
		}
		if u.Protocol() != tc.protocol || u.Addr() != tc.addr {
			t.Errorf("Parse(%q) = %s %s, want %s %s", tc.in, u.Protocol(), u.Addr(), tc.protocol, tc.addr)
		}
		back, err := Parse(u.WithSecrets())
		if err != nil || back.WithSecrets() != u.WithSecrets() {
			t.Errorf("round trip of %q: %v, %v", tc.in, back, err)
		}
	}
}

func TestParseRefusesUnknownSchemesNamingTheAccepted(t *testing.T) {
	for _, in := range []string{"http://h:1", "h:1", "mqtt://u:" + marker + "@h"} {
		_, err := Parse(in)
		if err == nil {
			t.Fatalf("Parse(%q) accepted", in)
		}
		for _, want := range []string{"stomp://", "amqp://", "tcp://", "ssl://"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("Parse(%q) error %q does not list %s", in, err, want)
			}
		}
		if strings.Contains(err.Error(), marker) {
			t.Errorf("Parse(%q) error shows the passcode: %v", in, err)
		}
	}
}

// TestErrorsNeverShowPasscode covers passcodes that url.Parse cuts in the wrong
// place, in every scheme.
func TestErrorsNeverShowPasscode(t *testing.T) {
	for _, scheme := range []string{"stomp", "stomp+ssl", "amqp", "amqps", "tcp", "ssl"} {
		for _, rest := range []string{
			"u:2024?" + marker + "@host:1",
			"u:" + marker + "?x@host:1",
			"u:a/" + marker + "@host:1",
			"u:" + marker + "#frag@host:1",
			"u:" + marker + "%zz@host:1",
			"u:" + marker + "@x@host:99999",
			"u:" + marker + "@host:1?heartBeat=x&bogus=1",
			"u:" + marker + "@host:1/path",
			"u:" + marker + "@:1",
			"u:" + marker + "@host:1?clientId=a@b&bogus=1",
		} {
			in := scheme + "://" + rest
			_, err := Parse(in)
			if err == nil {
				t.Errorf("Parse(%q) accepted", in)
				continue
			}
			if strings.Contains(err.Error(), "Pw9") {
				t.Errorf("Parse(%q) error shows the passcode: %v", in, err)
			}
		}
	}
}

// FuzzParseNeverShowsPasscode plants the marker as the passcode of random URIs
// of every scheme: neither errors nor String ever show it.
func FuzzParseNeverShowsPasscode(f *testing.F) {
	for _, p := range []string{"stomp://", "amqp://", "amqps://", "tcp://", "ssl://", "", "x://"} {
		f.Add(p, "2024?", "x", "host:1")
		f.Add(p, "", "/a#b", "h:1?ca=/nope")
		f.Add(p, "%", "%zz", "h:1?bogus=@")
	}
	f.Fuzz(func(t *testing.T, prefix, before, after, suffix string) {
		s := prefix + "u:" + before + marker + after + "@" + suffix
		u, err := Parse(s)
		if err != nil {
			if strings.Contains(err.Error(), marker) {
				t.Fatalf("Parse(%q) error shows the passcode: %v", s, err)
			}
			return
		}
		if strings.Contains(u.String(), marker) {
			t.Fatalf("Parse(%q).String() = %q", s, u.String())
		}
		if strings.Contains(u.Public().WithSecrets(), marker) {
			t.Fatalf("Parse(%q).Public() = %q", s, u.Public().WithSecrets())
		}
	})
}

func TestPublicKeepsOnlyWhereAndHow(t *testing.T) {
	for _, in := range []string{
		"stomp+ssl://u:" + marker + "@h:1?ca=/etc/ca.pem&clientId=c1&management=http://h:15672&serverName=b",
		"amqps://u:" + marker + "@h:1?ca=/etc/ca.pem&containerId=c1&management=http://h:15672&serverName=b",
		"ssl://u:" + marker + "@h:1?ca=/etc/ca.pem&clientId=c1&serverName=b",
	} {
		u, err := ParseRemote(in)
		if err != nil {
			t.Fatal(err)
		}
		p := u.Public().WithSecrets()
		for _, gone := range []string{marker, "u:", "/etc/ca.pem", "c1", "15672"} {
			if strings.Contains(p, gone) {
				t.Errorf("Public(%s) = %q still holds %q", u, p, gone)
			}
		}
		if !strings.Contains(p, "serverName=b") || !strings.Contains(p, "h:1") {
			t.Errorf("Public(%s) = %q lost where or how to verify", u, p)
		}
		back, err := ParseRemote(p)
		if err != nil || back.Protocol() != u.Protocol() {
			t.Errorf("Public(%s) does not parse back: %v", u, err)
		}
	}
}

func TestWithDefaultsFillsOnlyWhatTheURILeavesOpen(t *testing.T) {
	pol := transport.Reconnect{Initial: time.Millisecond, Max: time.Second, Multiplier: 3}
	d := transport.Defaults{User: "cfg", Password: "cfgpw", CAFile: "/ca.pem", Reconnect: pol}
	for _, scheme := range []string{"stomp+ssl", "amqps", "ssl"} {
		u, err := ParseRemote(scheme + "://h:1")
		if err != nil {
			t.Fatal(err)
		}
		got := u.WithDefaults(d)
		if !got.HasPassword() || !strings.Contains(got.WithSecrets(), "cfg:cfgpw@") || !strings.Contains(got.WithSecrets(), "ca=%2Fca.pem") {
			t.Errorf("%s: defaults not applied: %s", scheme, got.WithSecrets())
		}
		if got.Backoff() != pol {
			t.Errorf("%s: reconnect %+v, want %+v", scheme, got.Backoff(), pol)
		}
		own, err := ParseRemote(scheme + "://me:mine@h:1?ca=/own.pem")
		if err != nil {
			t.Fatal(err)
		}
		if s := own.WithDefaults(d).WithSecrets(); !strings.Contains(s, "me:mine@") || !strings.Contains(s, "own.pem") {
			t.Errorf("%s: the URI's own credentials or CA were replaced: %s", scheme, s)
		}
		if own.WithDefaults(transport.Defaults{}).WithSecrets() != own.WithSecrets() {
			t.Errorf("%s: empty defaults changed the URI", scheme)
		}
	}
}

// TestParseWiresSTOMPDurablesOverOpenWire: a STOMP URI parsed here, locally or
// from a peer, lists its broker's durable subscriptions over OpenWire.
func TestParseWiresSTOMPDurablesOverOpenWire(t *testing.T) {
	for _, parse := range []func(string) (transport.URI, error){Parse, ParseRemote} {
		u, err := parse("stomp://h:61613?openwirePort=61616")
		if err != nil {
			t.Fatal(err)
		}
		su := u.(stomp.URI)
		if su.OpenWireLister != (stompDurables{}) {
			t.Errorf("OpenWireLister = %#v, want stompDurables", su.OpenWireLister)
		}
		if _, ok := transport.ListsDurables(u); !ok {
			t.Error("ListsDurables false")
		}
	}
}
