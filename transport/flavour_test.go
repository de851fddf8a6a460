package transport

import "testing"

func TestParseFlavour(t *testing.T) {
	for in, want := range map[string]Flavour{"activemq": ActiveMQ, "RABBITMQ": RabbitMQ, " artemis ": Artemis} {
		if f, err := ParseFlavour(in); err != nil || f != want {
			t.Errorf("ParseFlavour(%q) = %v, %v; want %v", in, f, err, want)
		}
		if f, err := ParseFlavour(want.String()); err != nil || f != want {
			t.Errorf("ParseFlavour(%q) = %v, %v", want.String(), f, err)
		}
	}
	for _, in := range []string{"", "kafka", "unknown"} {
		if f, err := ParseFlavour(in); err == nil {
			t.Errorf("ParseFlavour(%q) = %v, want an error", in, f)
		}
	}
}
