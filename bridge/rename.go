package bridge

import (
	"fmt"
	"strings"

	"github.com/brokernet/brokernet/destination"
)

// Rename makes a destination of the local broker another one on the remote
// broker, for one connector (issue 7: "per-connector renames", e.g. ActiveMQ
// queue orders ⇄ RabbitMQ queue shop.orders): messages taken from Local are
// sent to Remote, and consumers of Remote make demand on Local. A duplex
// connector's reverse bridge gets the inverse (InvertRenames).
//
// Renames name exact destinations of one kind, no wildcards: a remote
// consumer with a wildcard subscribes to the same pattern locally, and each
// concrete message it takes goes to its renamed destination (if renamed).
// A remote destination that is the local name of a rename and not itself a
// rename's remote name has no local counterpart: its consumers make no demand
// (otherwise their messages would be sent to the renamed destination).
type Rename struct {
	Local, Remote destination.Destination
}

// String is "LOCAL=REMOTE" in URI form, as ParseRename reads it.
func (r Rename) String() string { return r.Local.String() + "=" + r.Remote.String() }

// ParseRename reads "LOCAL=REMOTE", each a destination in URI or STOMP form
// ("queue://orders=queue://shop.orders", "/topic/a=/topic/b").
func ParseRename(s string) (Rename, error) {
	l, r, ok := strings.Cut(s, "=")
	if !ok {
		return Rename{}, fmt.Errorf("rename %q: want LOCAL=REMOTE (e.g. queue://orders=queue://shop.orders)", s)
	}
	var out Rename
	var err error
	if out.Local, err = destination.Parse(strings.TrimSpace(l)); err != nil {
		return Rename{}, fmt.Errorf("rename %q: %w", s, err)
	}
	if out.Remote, err = destination.Parse(strings.TrimSpace(r)); err != nil {
		return Rename{}, fmt.Errorf("rename %q: %w", s, err)
	}
	return out, out.check()
}

func (r Rename) check() error {
	for _, d := range []destination.Destination{r.Local, r.Remote} {
		switch {
		case d.Name == "":
			return fmt.Errorf("rename %s: empty destination", r)
		case d.Kind != destination.Queue && d.Kind != destination.Topic:
			return fmt.Errorf("rename %s: %s is not a queue or topic", r, d)
		case d.IsWildcard():
			return fmt.Errorf("rename %s: %s is a wildcard; renames name exact destinations", r, d)
		}
	}
	if r.Local.Kind != r.Remote.Kind {
		return fmt.Errorf("rename %s: a %s cannot become a %s", r, r.Local.Kind, r.Remote.Kind)
	}
	return nil
}

// CheckRenames reports the first problem of rs: an invalid rename, or two
// that map one destination two ways.
func CheckRenames(rs []Rename) error {
	_, err := newRenames(rs)
	return err
}

// InvertRenames returns rs for the bridge of the other direction.
func InvertRenames(rs []Rename) []Rename {
	if rs == nil {
		return nil
	}
	out := make([]Rename, len(rs))
	for i, r := range rs {
		out[i] = Rename{Local: r.Remote, Remote: r.Local}
	}
	return out
}

// renames maps destinations both ways; the zero value maps nothing.
type renames struct {
	toRemote, toLocal map[destination.Destination]destination.Destination
}

func newRenames(rs []Rename) (renames, error) {
	if len(rs) == 0 {
		return renames{}, nil
	}
	m := renames{toRemote: map[destination.Destination]destination.Destination{}, toLocal: map[destination.Destination]destination.Destination{}}
	for _, r := range rs {
		if err := r.check(); err != nil {
			return renames{}, err
		}
		if prev, dup := m.toRemote[r.Local]; dup && prev != r.Remote {
			return renames{}, fmt.Errorf("renames: %s is renamed twice (%s and %s)", r.Local, prev, r.Remote)
		}
		if prev, dup := m.toLocal[r.Remote]; dup && prev != r.Local {
			return renames{}, fmt.Errorf("renames: %s and %s are both renamed to %s", prev, r.Local, r.Remote)
		}
		m.toRemote[r.Local], m.toLocal[r.Remote] = r.Remote, r.Local
	}
	return m, nil
}

// remote is where a message taken from local destination d goes.
func (m renames) remote(d destination.Destination) destination.Destination {
	if r, ok := m.toRemote[d]; ok {
		return r
	}
	return d
}

// local is the local destination that consumers of remote destination d
// demand; ok is false when d has none (see Rename).
func (m renames) local(d destination.Destination) (destination.Destination, bool) {
	if l, ok := m.toLocal[d]; ok {
		return l, true
	}
	if _, shadowed := m.toRemote[d]; shadowed {
		return destination.Destination{}, false
	}
	return d, true
}
