package uriredact

import (
	"strings"
	"testing"
)

func TestRedact(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"tcp://u:2024?secret@h:1", "tcp://u:***@h:1"},
		{"amqp://u@h", "amqp://***@h"}, // a login alone may be a misplaced passcode
		{"xu://secret@h", "xu://***@h"},
		{"0u://secret@h", "***@h"},
		{"Au://secret:@h", "Au://***@h"},
		{"stomps://u:secret@h", "stomps://u:***@h"},
		{"u:secret@h:1", "***@h:1"},
		{"stomp://h:1?x=a@b", "stomp://h:***@b"}, // an @ in an option is over-redacted, harmlessly
		{"no credentials", "no credentials"},
	} {
		if got := Redact(tc.in); got != tc.want {
			t.Errorf("Redact(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestCheckUserinfoRefusesUnencodedDelimiters(t *testing.T) {
	for _, in := range []string{"tcp://u:a?secret@h:1", "amqp://u:a/secret@h", "stomp://u:a#secret@h:1"} {
		err := CheckUserinfo(in)
		if err == nil || !strings.Contains(err.Error(), "percent-encode") || strings.Contains(err.Error(), "secret") {
			t.Errorf("CheckUserinfo(%q) = %v", in, err)
		}
	}
	for _, in := range []string{"tcp://u:a%3Fsecret@h:1", "tcp://h:1?clientId=x", "h:1"} {
		if err := CheckUserinfo(in); err != nil {
			t.Errorf("CheckUserinfo(%q) = %v", in, err)
		}
	}
}

// TestRedactHidesEncodedCredentialsInOptions: an option value holding a URI
// with credentials, percent-encoded as CheckUserinfo's error asks, shows no
// passcode either.
func TestRedactHidesEncodedCredentialsInOptions(t *testing.T) {
	for _, in := range []string{
		"amqp://g:x@h:5672?management=http%3A%2F%2Fu%3Asecret%40h%3A15672",
		"stomp://h:61613?flavor=rabbitmq&management=http://u:secret%40h:15672",
		"amqp://h?management=http%3a%2f%2fu%3asecret%40h",
	} {
		got := Redact(in)
		if strings.Contains(got, "secret") {
			t.Errorf("Redact(%q) = %q: the passcode shows", in, got)
		}
	}
	if got := Redact("stomp://h:1?vhost=prod"); got != "stomp://h:1?vhost=prod" {
		t.Errorf("an option without credentials changed: %q", got)
	}
}
