package bridge

import (
	"strings"
	"testing"

	"github.com/brokernet/brokernet/destination"
	"github.com/brokernet/brokernet/transport"
)

func TestMessagesWithoutIDGetOneOfTheirOwn(t *testing.T) {
	s := &session{localID: "A"}
	q := destination.Destination{Kind: destination.Queue, Name: "q"}
	if got := s.stampOf(&transport.Message{ID: "ID:x-1", Destination: q}); got != "ID:x-1" {
		t.Errorf("a message with an id is stamped %q, want its id", got)
	}
	a, b := s.stampOf(&transport.Message{Destination: q}), s.stampOf(&transport.Message{Destination: q})
	if a == b || !strings.HasPrefix(a, "bn:A:") {
		t.Errorf("two messages without id stamped %q and %q, want distinct ids of this bridge", a, b)
	}
}

func TestHoldKeyTellsMessagesApart(t *testing.T) {
	q := destination.Destination{Kind: destination.Queue, Name: "q"}
	msg := func(id, body string, props ...transport.Property) *transport.Message {
		return &transport.Message{ID: id, Destination: q, Body: []byte(body), Props: props}
	}
	stamped := transport.Property{Name: IDHeader, Value: "bn:A:1"}
	for _, tc := range []struct {
		name string
		a, b *transport.Message
		same bool
	}{
		{"the stamp wins over the id of this broker", msg("ID:1", "x", stamped), msg("ID:2", "x", stamped), true},
		{"ids tell messages apart", msg("ID:1", "x"), msg("ID:2", "x"), false},
		{"without id, identical content is one message", msg("", "x"), msg("", "x"), true},
		{"without id, other bodies are other messages", msg("", "x"), msg("", "y"), false},
		{"without id, other properties are other messages", msg("", "x", transport.Property{Name: "seq", Value: "1"}),
			msg("", "x", transport.Property{Name: "seq", Value: "2"}), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := holdKey(tc.a) == holdKey(tc.b); got != tc.same {
				t.Errorf("same key = %v (%q, %q), want %v", got, holdKey(tc.a), holdKey(tc.b), tc.same)
			}
		})
	}
}
