package demand

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/brokernet/brokernet/advisory"
	"github.com/brokernet/brokernet/destination"
	"github.com/brokernet/brokernet/hop"
)

// model is the churn test's independent statement of the rules. It knows
// the events and the options, not the table's internals, and computes the
// subscriptions the table must hold.
type model struct {
	o       Options
	remote  map[string]advisory.Consumer // live remote consumers, accepted or not
	local   map[string]advisory.Consumer // live local consumers, whatever they are
	recs    map[mKey]*mRec               // remote durable subscriptions
	started bool
}

// mKey identifies a remote durable subscription.
type mKey struct{ clientID, name, path string }

func (k mKey) String() string { return k.clientID + "\x00" + k.name + "\x00" + k.path }

// mRec is a remote durable subscription.
type mRec struct {
	dest     destination.Destination
	selector string
	online   map[string]bool
}

func newModel(o Options) *model {
	return &model{o: o, remote: map[string]advisory.Consumer{}, local: map[string]advisory.Consumer{}, recs: map[mKey]*mRec{}}
}

// blank reduces a blank selector to none.
func blank(s string) string {
	if strings.TrimSpace(s) == "" {
		return ""
	}
	return s
}

// accepts says whether a remote consumer creates demand.
func (m *model) accepts(c advisory.Consumer) bool {
	if c.Browser || c.Replay || !c.Destination.Kind.Valid() || slices.Contains(c.Path, m.o.LocalID) {
		return false
	}
	if m.o.ConsumerTTL >= 0 && len(c.Path) >= m.o.ConsumerTTL {
		return false
	}
	if c.Destination.IsTemp() {
		return m.o.BridgeTemp
	}
	for _, p := range m.o.Filter.Exclude {
		if p.Match(c.Destination) {
			return false
		}
	}
	for _, p := range m.o.StaticInclude {
		if p.Match(c.Destination) {
			return true
		}
	}
	return m.o.Filter.Allows(c.Destination)
}

func durableConsumer(c advisory.Consumer) bool {
	return c.Destination.Kind == destination.Topic && c.SubscriptionName != ""
}

func keyOf(c advisory.Consumer) mKey {
	return mKey{c.ClientID, c.SubscriptionName, hop.FormatPath(c.Path)}
}

// sameDemand restates which changes of a consumer matter.
func (m *model) sameDemand(a, b advisory.Consumer) bool {
	return a.Destination == b.Destination && blank(a.Selector) == blank(b.Selector) && slices.Equal(a.Path, b.Path) &&
		a.Origin == b.Origin && a.SubscriptionName == b.SubscriptionName && a.ClientID == b.ClientID &&
		a.Browser == b.Browser && a.Bridge == b.Bridge && a.Native == b.Native && a.Replay == b.Replay &&
		a.Exclusive == b.Exclusive && a.Retroactive == b.Retroactive &&
		(m.o.DecreasePriority || a.Priority == b.Priority)
}

func (m *model) addRemote(c advisory.Consumer) {
	if old, ok := m.remote[c.ID]; ok {
		if m.sameDemand(old, c) {
			return
		}
		m.removeRemote(c.ID)
	}
	m.remote[c.ID] = c
	if !m.accepts(c) || !durableConsumer(c) {
		return
	}
	k := keyOf(c)
	rec := m.recs[k]
	if rec == nil || rec.dest != c.Destination {
		rec = &mRec{dest: c.Destination, online: map[string]bool{}}
		m.recs[k] = rec
	}
	rec.selector = blank(c.Selector)
	rec.online[c.ID] = true
}

func (m *model) removeRemote(id string) {
	c, ok := m.remote[id]
	if !ok {
		return
	}
	delete(m.remote, id)
	if !m.accepts(c) || !durableConsumer(c) {
		return
	}
	k := keyOf(c)
	if rec := m.recs[k]; rec != nil && rec.online[id] {
		delete(rec.online, id)
		if len(rec.online) == 0 && m.o.DynamicOnly {
			delete(m.recs, k)
		}
	}
}

func (m *model) durableRemoved(c advisory.Consumer) {
	for k, rec := range m.recs {
		if k.name != c.SubscriptionName || c.Destination.Kind.Valid() && rec.dest != c.Destination ||
			k.clientID != "" && c.ClientID != "" && c.ClientID != c.SubscriptionName && k.clientID != c.ClientID {
			continue
		}
		if len(rec.online) == 0 {
			delete(m.recs, k)
		}
	}
}

func (m *model) reset() {
	clear(m.remote)
	for _, rec := range m.recs {
		clear(rec.online)
	}
	m.started = false
}

// mSub is a subscription as the model describes it.
type mSub struct {
	dest    destination.Destination
	kind    string // "static", "demand", "replay"
	durable bool
	user    string
	members string
}

func (s mSub) String() string {
	return fmt.Sprintf("%s %s durable=%v %q [%s]", s.kind, s.dest, s.durable, s.user, s.members)
}

// mGroup is a demand group of the model.
type mGroup struct {
	dest      destination.Destination
	durable   bool
	candidate bool
	members   []advisory.Consumer
	recs      []*mRec
	rk        string // route: dest, origin broker and origin
	rank      rank
	static    bool
}

type mGroupKey struct {
	dest    destination.Destination
	durable bool
	id      string
	sel     string // topic conduits: one group per user selector
}

// statics returns the static include destinations while started.
func (m *model) statics() []destination.Destination {
	if !m.started {
		return nil
	}
	seen := map[destination.Destination]bool{}
	var out []destination.Destination
	for _, p := range m.o.StaticInclude {
		kinds := []destination.Kind{p.Kind()}
		name := strings.TrimPrefix(p.String(), p.Kind().String()+"://")
		if p.Kind() == 0 {
			kinds, name = []destination.Kind{destination.Queue, destination.Topic}, p.String()
		}
		for _, k := range kinds {
			d := destination.Destination{Kind: k, Name: name}
			excluded := false
			for _, e := range m.o.Filter.Exclude {
				excluded = excluded || e.Match(d)
			}
			if !excluded && !seen[d] {
				seen[d] = true
				out = append(out, d)
			}
		}
	}
	return out
}

func (m *model) priority(p int, path []string) int {
	if m.o.DecreasePriority {
		p = m.o.PriorityBase
		if len(path) > 1 {
			p -= len(path) + 1
		}
	}
	return min(max(p, -128), 127)
}

// betterRank restates the route order: priority, then length, then the
// joined path.
func betterRank(a, b rank) bool {
	if a.priority != b.priority {
		return a.priority > b.priority
	}
	if len(a.path) != len(b.path) {
		return len(a.path) < len(b.path)
	}
	return strings.Join(a.path, "|") < strings.Join(b.path, "|")
}

func (m *model) isPlainLocal(c advisory.Consumer) bool {
	return c.Destination.Kind.Valid() && c.Destination.Name != "" && !c.Replay && !c.Bridge && !c.Native && !c.Browser
}

// expect computes the live subscriptions and the durable groups that may be
// kept inactive (by destination, with their user selector).
func (m *model) expect() (live []mSub, mayKeep map[string]bool) {
	statics := m.statics()
	groups := map[mGroupKey]*mGroup{}
	group := func(k mGroupKey) *mGroup {
		g := groups[k]
		if g == nil {
			g = &mGroup{dest: k.dest, durable: k.durable}
			groups[k] = g
		}
		return g
	}
	for _, id := range slices.Sorted(maps.Keys(m.remote)) {
		c := m.remote[id]
		if !m.accepts(c) {
			continue
		}
		c.Selector = blank(c.Selector)
		durable := durableConsumer(c)
		conduit := m.o.Conduit && len(c.Path) == 0
		if conduit && !durable {
			var st *destination.Destination
			for _, d := range statics {
				p, _ := destination.ParsePattern(d.String())
				if d.Kind == c.Destination.Kind && p.Match(c.Destination) && (st == nil || d.Name < st.Name) {
					st = &d
				}
			}
			if st != nil {
				g := group(mGroupKey{dest: *st, id: "static"})
				g.static = true
				g.members = append(g.members, c)
				continue
			}
		}
		k := mGroupKey{dest: c.Destination, durable: durable}
		switch {
		case conduit:
			if c.Destination.Kind == destination.Topic {
				k.sel = c.Selector
			}
		case durable:
			k.id = keyOf(c).String()
		default:
			k.id = c.ID
		}
		g := group(k)
		g.members = append(g.members, c)
		if !conduit && !durable && len(c.Path) > 0 {
			path := append(slices.Clone(c.Path), m.o.RemoteID)
			origin := c.ID
			if c.Bridge && c.Origin != "" {
				origin = c.Origin
			}
			g.candidate = true
			g.rk = c.Destination.String() + "\x00" + path[0] + "\x00" + origin
			g.rank = rank{priority: m.priority(c.Priority, path), path: path}
		}
	}
	for k, rec := range m.recs {
		gk := mGroupKey{dest: rec.dest, durable: true}
		if !(m.o.Conduit && k.path == "") {
			gk.id = k.String()
		} else {
			gk.sel = blank(rec.selector)
		}
		g := group(gk)
		g.recs = append(g.recs, rec)
	}
	// Foreign routes by route.
	foreign := map[string][]rank{}
	for _, c := range m.local {
		if c.Bridge && !c.Replay && c.Origin != "" && len(c.Path) > 0 && c.Destination.Kind.Valid() && c.Destination.Name != "" {
			rk := c.Destination.String() + "\x00" + c.Path[0] + "\x00" + c.Origin
			foreign[rk] = append(foreign[rk], rank{priority: c.Priority, path: c.Path})
		}
	}
	suppressionOn := func(k destination.Kind) bool {
		return k == destination.Queue && m.o.SuppressQueues || k == destination.Topic && m.o.SuppressTopics
	}
	selectors := func(g *mGroup, key mGroupKey) []string {
		var sels []string
		for _, rec := range g.recs {
			sels = append(sels, rec.selector)
		}
		for _, c := range g.members {
			if !g.durable {
				sels = append(sels, c.Selector)
				continue
			}
			rec := m.recs[keyOf(c)]
			recKey := mGroupKey{dest: c.Destination, durable: true}
			if rec != nil {
				recKey.dest = rec.dest
				if !(m.o.Conduit && len(c.Path) == 0) {
					recKey.id = keyOf(c).String()
				} else {
					recKey.sel = blank(rec.selector)
				}
			}
			// A consumer whose durable subscription moved to another topic
			// (or was re-created by another consumer) still selects.
			if rec == nil || recKey != key || !rec.online[c.ID] {
				sels = append(sels, c.Selector)
			}
		}
		return sels
	}
	mayKeep = map[string]bool{}
	liveSels := map[destination.Destination][]string{}
	for key, g := range groups {
		ids := make([]string, len(g.members))
		for i, c := range g.members {
			ids[i] = c.ID
		}
		if g.static {
			live = append(live, mSub{dest: g.dest, kind: "static", members: strings.Join(ids, ",")})
			continue
		}
		sels := selectors(g, key)
		if len(g.members) == 0 {
			if len(g.recs) > 0 {
				mayKeep[g.dest.String()+" "+orSelectors(sels)] = true
			}
			continue
		}
		if g.candidate && suppressionOn(g.dest.Kind) {
			suppressed := false
			for _, r := range foreign[g.rk] {
				suppressed = suppressed || betterRank(r, g.rank)
			}
			for _, o := range groups {
				if o != g && o.candidate && o.rk == g.rk && len(o.members) > 0 {
					suppressed = suppressed || betterRank(o.rank, g.rank)
				}
			}
			if suppressed {
				continue
			}
		}
		live = append(live, mSub{dest: g.dest, kind: "demand", durable: g.durable, user: orSelectors(sels), members: strings.Join(ids, ",")})
		liveSels[g.dest] = append(liveSels[g.dest], sels...)
	}
	for _, d := range statics {
		if groups[mGroupKey{dest: d, id: "static"}] == nil {
			live = append(live, mSub{dest: d, kind: "static"})
		}
	}
	if m.o.ReplayWhenNoConsumers {
		for d, sels := range liveSels {
			if d.Kind != destination.Queue {
				continue
			}
			consumers := 0
			for _, c := range m.local {
				if !m.isPlainLocal(c) {
					continue
				}
				if c.Destination == d {
					consumers++
				} else if isWildcard(c.Destination.Name) {
					if p, err := destination.ParsePattern(c.Destination.String()); err == nil && p.Match(d) {
						consumers++
					}
				}
			}
			if consumers == 0 {
				live = append(live, mSub{dest: d, kind: "replay", user: orSelectors(sels)})
			}
		}
	}
	slices.SortFunc(live, func(a, b mSub) int { return strings.Compare(a.String(), b.String()) })
	return live, mayKeep
}

// check compares the table with the model.
func (m *model) check(t testing.TB, tbl *Table) {
	t.Helper()
	want, mayKeep := m.expect()
	var got []mSub
	for _, s := range tbl.Subscriptions() {
		kind := "demand"
		if s.Static {
			kind = "static"
		} else if s.Replay {
			kind = "replay"
		}
		got = append(got, mSub{dest: s.Destination, kind: kind, durable: s.DurableName != "", user: s.UserSelector, members: strings.Join(s.Consumers, ",")})
		m.checkSubscription(t, s)
	}
	slices.SortFunc(got, func(a, b mSub) int { return strings.Compare(a.String(), b.String()) })
	if !slices.Equal(got, want) {
		t.Fatalf("table serves\n%v\nmodel expects\n%v", got, want)
	}
	for _, s := range tbl.InactiveDurables() {
		if !mayKeep[s.Destination.String()+" "+s.UserSelector] {
			t.Fatalf("table keeps durable %+v, model has no offline durable demand like it (%v)", s, mayKeep)
		}
	}
}

// checkSubscription checks the selector, tag and priority of one live
// subscription.
func (m *model) checkSubscription(t testing.TB, s Subscription) {
	t.Helper()
	user, tag, ok := hop.ParseSelector(s.Selector)
	if !ok || user != s.UserSelector || tag.Replay != s.Replay {
		t.Fatalf("subscription %+v: selector parses as %q %+v %v", s, user, tag, ok)
	}
	switch {
	case s.Replay || s.Static:
		if s.Exclusive || s.Retroactive {
			t.Fatalf("static or replay subscription %+v carries consumer flags", s)
		}
	}
	switch {
	case s.Replay:
		if want := hop.ReplaySelector(s.UserSelector, m.o.RemoteID, m.o.MaxReplays, tag); s.Selector != want || !slices.Equal(tag.Path, []string{m.o.RemoteID}) {
			t.Fatalf("replay subscription %+v, want selector %q", s, want)
		}
		return
	case s.Static:
		if tag.Origin != StaticOrigin || !slices.Equal(tag.Path, []string{m.o.RemoteID}) {
			t.Fatalf("static subscription %+v: tag %+v", s, tag)
		}
		return
	}
	if want := hop.Selector(s.UserSelector, m.o.RemoteID, m.o.MessageTTL, tag); s.Selector != want {
		t.Fatalf("subscription %s: selector %q, want %q", s.ID, s.Selector, want)
	}
	first := m.remote[s.Consumers[0]]
	// Exclusive: a queue subscription serving any exclusive consumer.
	exclusive := false
	for _, id := range s.Consumers {
		exclusive = exclusive || m.remote[id].Exclusive
	}
	if want := exclusive && s.Destination.Kind == destination.Queue; s.Exclusive != want {
		t.Fatalf("subscription %s: exclusive %v, want %v (consumers %v)", s.ID, s.Exclusive, want, s.Consumers)
	}
	// Retroactive: a non-durable topic subscription's first consumer's, which
	// the model knows for solo groups only; never on queues or durables.
	if s.Retroactive && (s.Destination.Kind != destination.Topic || s.DurableName != "") {
		t.Fatalf("subscription %s: retroactive on %s (durable %q)", s.ID, s.Destination, s.DurableName)
	}
	conduit := m.o.Conduit && len(first.Path) == 0
	wantPath := append(slices.Clone(first.Path), m.o.RemoteID)
	if conduit {
		wantPath = []string{m.o.RemoteID}
	}
	if !slices.Equal(tag.Path, wantPath) {
		t.Fatalf("subscription %s: path %v, want %v", s.ID, tag.Path, wantPath)
	}
	if !conduit && !durableConsumer(first) {
		wantOrigin := first.ID
		if first.Bridge && first.Origin != "" {
			wantOrigin = first.Origin
		}
		if tag.Origin != wantOrigin {
			t.Fatalf("subscription %s: origin %q, want %q", s.ID, tag.Origin, wantOrigin)
		}
	}
	if !conduit && s.DurableName == "" && s.Destination.Kind == destination.Topic && s.Retroactive != first.Retroactive {
		t.Fatalf("subscription %s: retroactive %v, its consumer's %v", s.ID, s.Retroactive, first.Retroactive)
	}
	if conduit && tag.Origin != conduitOrigin(m.o.RemoteID, s.Destination, s.DurableName != "") {
		t.Fatalf("conduit subscription %s: origin %q", s.ID, tag.Origin)
	}
	if (s.DurableName != "") != durableConsumer(first) || s.DurableName != "" && !strings.HasPrefix(s.DurableName, "bn_L_") {
		t.Fatalf("subscription %s: durable name %q for %+v", s.ID, s.DurableName, first)
	}
	// Without DecreasePriority a group keeps its first consumer's priority,
	// which the model does not track for shared groups.
	if m.o.DecreasePriority || !conduit && !durableConsumer(first) {
		if want := m.priority(first.Priority, wantPath); s.Priority != want {
			t.Fatalf("subscription %s: priority %d, want %d", s.ID, s.Priority, want)
		}
	}
}
