package discovery

import (
	"encoding/json"
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

func TestMetaRoundTrip(t *testing.T) {
	meta, err := encodeMeta(LocalBroker{URI: "stomp://u:pw@10.0.0.1:61613", BrokerID: "ID:x-1", BrokerName: "b1", Protocol: ProtocolSTOMP})
	if err != nil {
		t.Fatal(err)
	}
	p, err := decodeMeta("node-1", meta)
	if err != nil {
		t.Fatal(err)
	}
	if p.Key != "node-1" || p.BrokerID != "ID:x-1" || p.BrokerName != "b1" || len(p.URIs) != 1 {
		t.Fatalf("peer = %+v", p)
	}
	// Credentials never travel: peers use their own.
	if u := p.URIs[0]; u.Addr() != "10.0.0.1:61613" || u.Login != "" || u.Passcode != "" || strings.Contains(string(meta), "pw") {
		t.Errorf("URI = %+v, meta %s", u, meta)
	}
}

func TestMetaOverTheLimitIsAClearError(t *testing.T) {
	_, err := encodeMeta(LocalBroker{URI: "stomp://h:1?vhost=" + strings.Repeat("v", 600)})
	if !errors.Is(err, ErrMetaTooLarge) {
		t.Fatalf("err = %v, want ErrMetaTooLarge", err)
	}
	if !strings.Contains(err.Error(), "limit 512; shorten the URI or ids") || !strings.Contains(err.Error(), "is 626 bytes") {
		t.Errorf("err = %q", err)
	}
}

func TestDecodeMetaRejects(t *testing.T) {
	tests := []struct {
		name, meta, want string
	}{
		{"not JSON", "{nope", "malformed broker metadata"},
		{"empty", "", "malformed broker metadata"},
		{"no URI", `{"id":"x"}`, "no URI"},
		{"an unparsable URI", `{"u":"http://h:1"}`, "unsupported scheme"},
		{"another protocol", `{"u":"tcp://h:5672","p":"amqp"}`, `protocol "amqp" is not supported`},
		{"a wrong type", `{"u":5}`, "malformed broker metadata"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := decodeMeta("n", []byte(tt.meta))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestDecodeMetaIgnoresUnknownKeys(t *testing.T) {
	p, err := decodeMeta("n", []byte(`{"u":"stomp://h:1","future":{"x":1}}`))
	if err != nil || p.URIs[0].Addr() != "h:1" {
		t.Fatalf("peer = %+v, err = %v", p, err)
	}
}

func TestTrimMetaRedactsAndShortens(t *testing.T) {
	got := trimMeta([]byte(`{"u":"stomp://user:hunter2@host:1", ` + strings.Repeat("x", 200) + "\xff"))
	if strings.Contains(got, "hunter2") {
		t.Errorf("trimMeta shows the passcode: %q", got)
	}
	if !strings.Contains(got, "stomp://***@host") {
		t.Errorf("trimMeta = %q", got)
	}
	if len(got) > 64+len("…") {
		t.Errorf("trimMeta is %d bytes", len(got))
	}
}

func FuzzDecodeMeta(f *testing.F) {
	f.Add([]byte(`{"u":"stomp://u:p@h:1","id":"ID:1","n":"b","p":"stomp"}`))
	f.Add([]byte(`{"u":"stomp+ssl://h?vhost=x"}`))
	f.Add([]byte(`{"u":"tcp://h:5672","p":"amqp"}`))
	f.Add([]byte(`{"u":`))
	f.Fuzz(func(t *testing.T, meta []byte) {
		p, err := decodeMeta("n", meta)
		if err != nil {
			var m brokerMeta
			if json.Unmarshal(meta, &m) != nil {
				return
			}
			if u, perr := url.Parse(m.URI); perr == nil && u.User != nil {
				if pw, ok := u.User.Password(); ok && len(pw) >= 4 && pw != "***" && strings.Contains(err.Error(), ":"+pw+"@") {
					t.Fatalf("decodeMeta(%q) error shows the passcode: %q", meta, err)
				}
			}
			return
		}
		if p.Key != "n" || len(p.URIs) != 1 || p.URIs[0].Host == "" {
			t.Fatalf("decodeMeta(%q) = %+v", meta, p)
		}
		_ = trimMeta(meta)
	})
}

func TestMemberlistLinesGetTheirLevel(t *testing.T) {
	tests := []struct {
		line string
		lvl  zerolog.Level
		msg  string
	}{
		{"[DEBUG] memberlist: Stream connection from=127.0.0.1:5\n", zerolog.DebugLevel, "Stream connection from=127.0.0.1:5"},
		{"[INFO] memberlist: Marking b as failed\n", zerolog.InfoLevel, "Marking b as failed"},
		{"[WARN] memberlist: Was able to connect to b over TCP\n", zerolog.WarnLevel, "Was able to connect to b over TCP"},
		{"[ERR] memberlist: Failed to send ping\n", zerolog.ErrorLevel, "Failed to send ping"},
		{"[ERR] Failed to shutdown transport: x", zerolog.ErrorLevel, "Failed to shutdown transport: x"},
		{"[TRACE] memberlist: t", zerolog.TraceLevel, "t"},
		{"no prefix at all\n", zerolog.InfoLevel, "no prefix at all"},
		{"[odd] memberlist: x", zerolog.InfoLevel, "[odd] memberlist: x"},
		{"[", zerolog.InfoLevel, "["},
	}
	for _, tt := range tests {
		lvl, msg := parseMemberlistLine(tt.line)
		if lvl != tt.lvl || msg != tt.msg {
			t.Errorf("parseMemberlistLine(%q) = %s %q, want %s %q", tt.line, lvl, msg, tt.lvl, tt.msg)
		}
	}
}
