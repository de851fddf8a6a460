package destination

import (
	"fmt"
	"strings"
)

// Rename makes a destination of the local broker another one on the remote
// broker, for one connector (e.g. ActiveMQ queue orders ⇄ RabbitMQ queue
// shop.orders): a bridge sends what it takes from Local to Remote, and
// consumers of Remote make demand on Local (bridge.Config.Renames). A duplex
// connector's reverse bridge gets the inverse (InvertRenames). Renames name
// exact destinations of one kind, no wildcards.
type Rename struct {
	Local, Remote Destination
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
	if out.Local, err = Parse(strings.TrimSpace(l)); err != nil {
		return Rename{}, fmt.Errorf("rename %q: %w", s, err)
	}
	if out.Remote, err = Parse(strings.TrimSpace(r)); err != nil {
		return Rename{}, fmt.Errorf("rename %q: %w", s, err)
	}
	return out, out.check()
}

func (r Rename) check() error {
	for _, d := range []Destination{r.Local, r.Remote} {
		switch {
		case d.Name == "":
			return fmt.Errorf("rename %s: empty destination", r)
		case d.Kind != Queue && d.Kind != Topic:
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
	toRemote, toLocal := map[Destination]Destination{}, map[Destination]Destination{}
	for _, r := range rs {
		if err := r.check(); err != nil {
			return err
		}
		if prev, dup := toRemote[r.Local]; dup && prev != r.Remote {
			return fmt.Errorf("renames: %s is renamed twice (%s and %s)", r.Local, prev, r.Remote)
		}
		if prev, dup := toLocal[r.Remote]; dup && prev != r.Local {
			return fmt.Errorf("renames: %s and %s are both renamed to %s", prev, r.Local, r.Remote)
		}
		toRemote[r.Local], toLocal[r.Remote] = r.Remote, r.Local
	}
	return nil
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
