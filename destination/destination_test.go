package destination

import (
	"slices"
	"strings"
	"testing"
)

func TestKindString(t *testing.T) {
	tests := []struct {
		kind Kind
		want string
	}{
		{Queue, "queue"},
		{Topic, "topic"},
		{TempQueue, "temp-queue"},
		{TempTopic, "temp-topic"},
		{0, "Kind(0)"},
		{9, "Kind(9)"},
	}
	for _, tt := range tests {
		if got := tt.kind.String(); got != tt.want {
			t.Errorf("Kind(%d).String() = %q, want %q", uint8(tt.kind), got, tt.want)
		}
	}
}

func TestDestinationForms(t *testing.T) {
	tests := []struct {
		d         Destination
		uri, stmp string
		temp      bool
	}{
		{Destination{Queue, "orders"}, "queue://orders", "/queue/orders", false},
		{Destination{Topic, "prices.eu"}, "topic://prices.eu", "/topic/prices.eu", false},
		{Destination{TempQueue, "ID:host-1-2:1:1"}, "temp-queue://ID:host-1-2:1:1", "/temp-queue/ID:host-1-2:1:1", true},
		{Destination{TempTopic, "x"}, "temp-topic://x", "/temp-topic/x", true},
	}
	for _, tt := range tests {
		t.Run(tt.uri, func(t *testing.T) {
			if got := tt.d.String(); got != tt.uri {
				t.Errorf("String() = %q, want %q", got, tt.uri)
			}
			if got := tt.d.StompPath(); got != tt.stmp {
				t.Errorf("StompPath() = %q, want %q", got, tt.stmp)
			}
			if got := tt.d.IsTemp(); got != tt.temp {
				t.Errorf("IsTemp() = %v, want %v", got, tt.temp)
			}
			for _, s := range []string{tt.uri, tt.stmp} {
				got, err := Parse(s)
				if err != nil || got != tt.d {
					t.Errorf("Parse(%q) = %v, %v; want %v", s, got, err, tt.d)
				}
			}
			got, err := FromStomp(tt.stmp)
			if err != nil || got != tt.d {
				t.Errorf("FromStomp(%q) = %v, %v; want %v", tt.stmp, got, err, tt.d)
			}
		})
	}
}

func TestParse(t *testing.T) {
	tests := []struct {
		in      string
		want    Destination
		wantErr string // substring of the error; "" means success
	}{
		{in: "queue://a.b.c", want: Destination{Queue, "a.b.c"}},
		{in: "topic://a://b", want: Destination{Topic, "a://b"}},
		{in: "/queue/a/b", want: Destination{Queue, "a/b"}},
		{in: "/remote-temp-queue/ID:x:1", want: Destination{TempQueue, "ID:x:1"}},
		{in: "/remote-temp-topic/ID:x:1", want: Destination{TempTopic, "ID:x:1"}},
		{in: "queue:// spaced name ", want: Destination{Queue, " spaced name "}},
		{in: "", wantErr: `destination "": want`},
		{in: "orders", wantErr: `destination "orders": want "queue://NAME"`},
		{in: "queue://", wantErr: "empty name"},
		{in: "/queue/", wantErr: "empty name"},
		{in: "/queue", wantErr: `want "/queue/NAME"`},
		{in: "fifo://x", wantErr: `unknown kind "fifo"`},
		{in: "Queue://x", wantErr: `unknown kind "Queue"`},
		{in: "/exchange/x", wantErr: `unknown STOMP prefix "/exchange/"`},
		{in: "/remote-queue/x", wantErr: `unknown STOMP prefix "/remote-queue/"`},
		{in: "//x", wantErr: `unknown STOMP prefix "//"`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := Parse(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Parse(%q) error = %v, want it to contain %q", tt.in, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("Parse(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestFromStompRejectsURIForm(t *testing.T) {
	if _, err := FromStomp("queue://x"); err == nil || !strings.Contains(err.Error(), `must start with "/"`) {
		t.Fatalf("FromStomp(queue://x) error = %v", err)
	}
}

func TestDestinationText(t *testing.T) {
	var d Destination
	if err := d.UnmarshalText([]byte("/topic/t")); err != nil || d != (Destination{Topic, "t"}) {
		t.Fatalf("UnmarshalText = %v, %v", d, err)
	}
	b, err := d.MarshalText()
	if err != nil || string(b) != "topic://t" {
		t.Fatalf("MarshalText = %q, %v", b, err)
	}
	if _, err := (Destination{Name: "x"}).MarshalText(); err == nil {
		t.Fatal("MarshalText of an invalid kind succeeded")
	}
	if err := d.UnmarshalText([]byte("bogus")); err == nil {
		t.Fatal("UnmarshalText(bogus) succeeded")
	}
}

// FuzzParse checks that Parse never panics and that whatever it accepts
// round-trips through both textual forms.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"queue://a", "/topic/b.c", "/remote-temp-queue/ID:1", "temp-topic://", "x", "", "/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := Parse(s)
		if err != nil {
			return
		}
		if !d.Kind.Valid() || d.Name == "" {
			t.Fatalf("Parse(%q) = %#v without error", s, d)
		}
		for _, form := range []string{d.String(), d.StompPath()} {
			back, err := Parse(form)
			if err != nil || back != d {
				t.Fatalf("Parse(%q) = %v, %v; want %v", form, back, err, d)
			}
		}
	})
}

func TestMembers(t *testing.T) {
	tests := []struct {
		d    Destination
		want []Destination
	}{
		{Destination{Queue, "orders"}, []Destination{{Queue, "orders"}}},
		{Destination{Queue, "public.y,secret.x"}, []Destination{{Queue, "public.y"}, {Queue, "secret.x"}}},
		{Destination{Topic, " a , b "}, []Destination{{Topic, "a"}, {Topic, "b"}}},
		{Destination{Queue, "a,topic://b,temp-queue://ID:c,/topic/d"}, []Destination{{Queue, "a"}, {Topic, "b"}, {TempQueue, "ID:c"}, {Topic, "d"}}},
		{Destination{Queue, "a,,a,queue://a"}, []Destination{{Queue, "a"}}},
		{Destination{Queue, "fifo://x,y"}, []Destination{{Queue, "fifo://x"}, {Queue, "y"}}},
		{Destination{Queue, ","}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.d.String(), func(t *testing.T) {
			got := tt.d.Members()
			if !slices.Equal(got, tt.want) {
				t.Fatalf("Members() = %v, want %v", got, tt.want)
			}
			if tt.d.IsComposite() != strings.Contains(tt.d.Name, ",") {
				t.Fatalf("IsComposite() = %v", tt.d.IsComposite())
			}
		})
	}
}
