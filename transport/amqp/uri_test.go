package amqp

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/brokernet/brokernet/destination"
	"github.com/brokernet/brokernet/transport"
)

func TestParseURI(t *testing.T) {
	def := transport.DefaultReconnect()
	tests := []struct {
		in   string
		want URI
	}{
		{"amqp://127.0.0.1", URI{Host: "127.0.0.1", Port: 5672, IdleTimeout: defaultIdleTimeout, Reconnect: def}},
		{"amqps://broker.example", URI{TLS: true, Host: "broker.example", Port: 5671, IdleTimeout: defaultIdleTimeout, Reconnect: def}},
		{"amqp://guest:p%40ss@[::1]:5673/?vhost=prod&flavor=rabbitmq&idleTimeout=0&containerId=c1",
			URI{Host: "::1", Port: 5673, User: "guest", Password: "p@ss", VHost: "prod", Flavour: transport.RabbitMQ, ContainerID: "c1", Reconnect: def}},
		{"amqp://h?initialReconnectDelay=500&maxReconnectDelay=1m&backOffMultiplier=1.5&heartBeat=5s",
			URI{Host: "h", Port: 5672, IdleTimeout: 5 * time.Second, Reconnect: transport.Reconnect{Initial: 500 * time.Millisecond, Max: time.Minute, Multiplier: 1.5}}},
		{"amqps://h?ca=/etc/ca.pem&cert=/c.pem&key=/k.pem&serverName=broker",
			URI{TLS: true, Host: "h", Port: 5671, IdleTimeout: defaultIdleTimeout, Reconnect: def, CAFile: "/etc/ca.pem", CertFile: "/c.pem", KeyFile: "/k.pem", ServerName: "broker"}},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseURI(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("got %+v\nwant %+v", got, tc.want)
			}
			again, err := ParseURI(got.WithSecrets())
			if err != nil || again != got {
				t.Fatalf("WithSecrets %q does not parse back: %+v %v", got.WithSecrets(), again, err)
			}
		})
	}
}

func TestParseURIErrors(t *testing.T) {
	tests := []struct{ in, want string }{
		{"127.0.0.1:5672", "missing scheme"},
		{"stomp://h", `unsupported scheme "stomp"`},
		{"amqp://", "missing host"},
		{"amqp://h/vhost", `unexpected path "/vhost"`},
		{"amqp://h:0", `bad port "0"`},
		{"amqp://h?idleTimeout=-1", "option idleTimeout"},
		{"amqp://h?flavor=kafka", `option flavor="kafka": want activemq, rabbitmq or artemis`},
		{"amqp://h?ca=/x", "option ca needs amqps://"},
		{"amqps://h?cert=/c", "cert and key go together"},
		{"amqp://h?initialReconnectDelay=10s&maxReconnectDelay=1s", "below initialReconnectDelay"},
		{"amqp://h?bogus=1", `unknown option "bogus"`},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			_, err := ParseURI(tc.in)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestURIStringRedacts(t *testing.T) {
	u, err := ParseURI("amqp://guest:hunter2@h:5672?vhost=v")
	if err != nil {
		t.Fatal(err)
	}
	if s := u.String(); s != "amqp://guest:***@h:5672?vhost=v" {
		t.Fatalf("String = %q", s)
	}
	var _ transport.Endpoint = u
	if u.Addr() != "h:5672" || u.Backoff() != transport.DefaultReconnect() {
		t.Fatalf("Addr %q Backoff %+v", u.Addr(), u.Backoff())
	}
}

const marker = "s3cr3tMARKER"

// FuzzParseURINeverLeaksPassword: whatever surrounds it, the password never
// shows in an error or in String.
func FuzzParseURINeverLeaksPassword(f *testing.F) {
	for _, s := range []string{"h", "h:5672", "h/x", "h?vhost=/", "h?bogus", "[::1", "h:99999", "h?ca=x", "", "@@", "h#frag"} {
		f.Add("user", s, false)
		f.Add("", s, true)
	}
	f.Fuzz(func(t *testing.T, user, rest string, raw bool) {
		var s string
		if raw {
			// A password written unescaped, as people do.
			s = "amqp://" + user + ":" + marker + "@" + rest
		} else {
			s = "amqp://" + url.UserPassword(user, marker).String() + "@" + rest
		}
		u, err := ParseURI(s)
		if err != nil {
			if strings.Contains(err.Error(), marker) {
				t.Fatalf("error for %q shows the password: %v", s, err)
			}
			return
		}
		if strings.Contains(u.String(), marker) {
			t.Fatalf("String of %q shows the password: %s", s, u.String())
		}
	})
}

func TestAddress(t *testing.T) {
	tests := []struct {
		d      destination.Destination
		source bool
		want   string
		err    string
	}{
		{destination.Destination{Kind: destination.Queue, Name: "orders"}, false, "/queue/orders", ""},
		{destination.Destination{Kind: destination.Topic, Name: "prices.eu"}, false, "/exchange/amq.topic/prices.eu", ""},
		{destination.Destination{Kind: destination.Topic, Name: "prices.>"}, true, "/exchange/amq.topic/prices.#", ""},
		{destination.Destination{Kind: destination.Topic, Name: "prices.*.x"}, true, "/exchange/amq.topic/prices.*.x", ""},
		{destination.Destination{Kind: destination.Topic, Name: "prices.>"}, false, "", "cannot send to a wildcard"},
		{destination.Destination{Kind: destination.Queue, Name: "a/b"}, false, "/queue/a%2Fb", ""},
		{destination.Destination{Kind: destination.TempQueue, Name: "t1"}, false, "", "temporary queues have no RabbitMQ AMQP 1.0 address"},
	}
	for _, tc := range tests {
		t.Run(tc.d.String(), func(t *testing.T) {
			got, err := address(tc.d, tc.source)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %q %v, want %q", got, err, tc.want)
			}
			if back, ok := fromAddress(got); !tc.source && (!ok || back != tc.d) {
				t.Fatalf("fromAddress(%q) = %v %v", got, back, ok)
			}
		})
	}
	for in, want := range map[string]string{
		"/queue/r": "/queue/r", "/topic/r.x": "/exchange/amq.topic/r.x",
		"/temp-queue/t": "/temp-queue/t", "/exchange/x/y": "/exchange/x/y",
	} {
		if got := replyToAddress(in); got != want {
			t.Errorf("replyToAddress(%q) = %q, want %q", in, got, want)
		}
	}
}
