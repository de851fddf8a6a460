package stomp

import (
	"strings"
	"testing"
)

func TestFlavorAndManagementOptions(t *testing.T) {
	u, err := ParseURI("stomp://guest:guest@h:1?flavor=RabbitMQ&management=http://h:15673")
	if err != nil {
		t.Fatal(err)
	}
	if u.Flavour != RabbitMQ || u.Management != "http://h:15673" {
		t.Fatalf("parsed flavour %v management %q", u.Flavour, u.Management)
	}
	back, err := ParseURI(u.WithSecrets())
	if err != nil || back != u {
		t.Fatalf("round trip %q: %+v, %v", u.WithSecrets(), back, err)
	}
	if d, _ := ParseURI("stomp://h:1"); d.Flavour != Unknown || d.Management != "" {
		t.Fatalf("defaults: flavour %v management %q", d.Flavour, d.Management)
	}
	for in, want := range map[string]string{
		"stomp://h:1?flavor=kafka":         `option flavor="kafka": want activemq, rabbitmq or artemis`,
		"stomp://h:1?management=h:15672":   "option management",
		"stomp://h:1?management=ftp://h/x": "option management",
	} {
		if _, err := ParseURI(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseURI(%q) = %v, want error containing %q", in, err, want)
		}
	}
}

func TestFlavourOfServerHeader(t *testing.T) {
	if flavourOf("RabbitMQ/3.10.8") != RabbitMQ || flavourOf("ActiveMQ/5.17.2") != ActiveMQ {
		t.Error("server header not recognised")
	}
}
