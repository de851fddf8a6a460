package brokeruri

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/brokernet/brokernet/internal/tlsconf"
	"github.com/brokernet/brokernet/transport"
)

var test = Syntax{Plain: "x", TLS: "xs", TLSAliases: []string{"x+ssl"}, Port: 1, TLSPort: 2, Secret: "passcode", PathHint: "use ?vhost=", ClientCert: true}

// parse runs Parse, Options (with one option "own" of the transport's, and
// "hidden" whose error must not show its value) and CheckTLS, as a transport's
// parser does.
func parse(s string, syn Syntax) (URI, tlsconf.Options, transport.Reconnect, error) {
	var o tlsconf.Options
	p := transport.DefaultReconnect()
	u, err := Parse(s, syn)
	if err != nil {
		return u, o, p, err
	}
	err = u.Options(&o, &p, func(name, v string) (bool, error) {
		switch name {
		case "own":
			if v != "ok" {
				return true, errors.New("want ok")
			}
		case "management":
			return true, ManagementURL(v)
		default:
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return u, o, p, err
	}
	return u, o, p, u.CheckTLS(o, false)
}

func TestParseReadsTheSharedParts(t *testing.T) {
	u, o, p, err := parse("xs://me:s3cret@[::1]:7?ca=/c&cert=/a&key=/b&serverName=n&own=ok&maxReconnectDelay=5s", test)
	if err != nil {
		t.Fatal(err)
	}
	if !u.TLS || u.Host != "::1" || u.Port != 7 || u.User != "me" || u.Password != "s3cret" {
		t.Errorf("parsed %+v", u)
	}
	if o != (tlsconf.Options{CAFile: "/c", CertFile: "/a", KeyFile: "/b", ServerName: "n"}) {
		t.Errorf("TLS options %+v", o)
	}
	if p.Max != 5*time.Second {
		t.Errorf("reconnect %+v", p)
	}
	if u, _, _, err := parse("x://h", test); err != nil || u.TLS || u.Port != 1 {
		t.Errorf("x://h: %+v %v", u, err)
	}
	if u, _, _, err := parse("x+ssl://h", test); err != nil || !u.TLS || u.Port != 2 {
		t.Errorf("x+ssl://h: %+v %v", u, err)
	}
}

func TestErrorsNameThePartAndNeverThePassword(t *testing.T) {
	noCert := test
	noCert.ClientCert = false
	for _, tc := range []struct {
		name, in, want string
		syn            Syntax
	}{
		{"no scheme", "h:1", "missing scheme (want x://host:port or xs://host:port)", test},
		{"another scheme", "y://u:secret@h", `unsupported scheme "y" (want x:// or xs://)`, test},
		{"unparsable", "x://u:secret@h:port", "percent-encode special characters in the passcode", test},
		{"a path", "x://u:secret@h/v", `unexpected path "/v" (use ?vhost=)`, test},
		{"no host", "x://u:secret@:1", "missing or malformed host", test},
		{"a bad port", "x://u:secret@h:70000", `bad port "70000"`, test},
		{"a bad own option", "x://u:secret@h?own=no", `option own="no": want ok`, test},
		{"an unknown option", "x://u:secret@h?nope=1", `unknown option "nope"`, test},
		{"a bad back-off", "x://u:secret@h?backOffMultiplier=0.5", "backOffMultiplier", test},
		{"a management URL that is not http", "x://u:secret@h?management=ftp:%2F%2Fh", "option management: want http://HOST:PORT", test},
		{"TLS option without TLS", "x://u:secret@h?serverName=n", "option serverName needs xs://", test},
		{"cert without key", "xs://u:secret@h?cert=/a", "cert and key go together", test},
		{"cert where the syntax takes none", "xs://u:secret@h?cert=/a", `unknown option "cert"`, noCert},
		{"ambiguous credentials", "x://u:a?secret@h", "percent-encode", test},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, _, err := parse(tc.in, tc.syn)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%s: error %v, want %q", tc.in, err, tc.want)
			}
			if strings.Contains(err.Error(), "secret") {
				t.Fatalf("%s: error shows the password: %v", tc.in, err)
			}
		})
	}
}

func TestCheckTLSLoadsFilesOnlyWhenAsked(t *testing.T) {
	u, err := Parse("xs://h?ca=/nonexistent/ca.pem", test)
	if err != nil {
		t.Fatal(err)
	}
	o := tlsconf.Options{CAFile: "/nonexistent/ca.pem"}
	if err := u.CheckTLS(o, false); err != nil {
		t.Errorf("without loading files: %v", err)
	}
	if err := u.CheckTLS(o, true); err == nil || !strings.Contains(err.Error(), "/nonexistent/ca.pem") {
		t.Errorf("loading files: %v, want the file named", err)
	}
}

func FuzzErrorsNeverShowThePassword(f *testing.F) {
	for _, s := range []string{"x://u:pw@h:1?own=no", "xs://u:pw@h?cert=a", "y://u:pw@h", "x://u:pw@h?management=pw"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		const pw = "Zq9Secret"
		s = strings.Replace(s, "pw", pw, 1)
		_, _, _, err := parse(s, test)
		if err != nil && strings.Contains(s, ":"+pw+"@") && strings.Contains(err.Error(), pw) {
			t.Fatalf("%q: error shows the password: %v", s, err)
		}
	})
}
