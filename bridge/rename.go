package bridge

import (
	"strings"

	"github.com/brokernet/brokernet/destination"
)

// renames maps destinations both ways for Config.Renames; the zero value maps
// nothing. A remote destination that is the local name of a rename and not
// itself a rename's remote name has no local counterpart: its consumers make
// no demand (otherwise their messages would be sent to the renamed
// destination). Renames name exact destinations: a remote consumer with a
// wildcard subscribes to the same pattern locally, and each concrete message
// it takes goes to its renamed destination, if renamed.
type renames struct {
	toRemote, toLocal map[destination.Destination]destination.Destination
}

// newRenames checks rs (destination.CheckRenames) and indexes it.
func newRenames(rs []destination.Rename) (renames, error) {
	if len(rs) == 0 {
		return renames{}, nil
	}
	if err := destination.CheckRenames(rs); err != nil {
		return renames{}, err
	}
	m := renames{toRemote: map[destination.Destination]destination.Destination{}, toLocal: map[destination.Destination]destination.Destination{}}
	for _, r := range rs {
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
// demand; ok is false when d has none (see Rename). A composite destination
// is renamed member by member (each written "kind://name"), without the
// members renamed away.
func (m renames) local(d destination.Destination) (destination.Destination, bool) {
	if d.IsComposite() && m.toLocal != nil {
		var kept []destination.Destination
		var parts []string
		for _, member := range d.Members() {
			if l, ok := m.local(member); ok {
				kept = append(kept, l)
				parts = append(parts, l.String())
			}
		}
		switch len(kept) {
		case 0:
			return destination.Destination{}, false
		case 1:
			return kept[0], true
		}
		return destination.Destination{Kind: d.Kind, Name: strings.Join(parts, destination.CompositeSeparator)}, true
	}
	if l, ok := m.toLocal[d]; ok {
		return l, true
	}
	if _, shadowed := m.toRemote[d]; shadowed {
		return destination.Destination{}, false
	}
	return d, true
}
