package hop

import (
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestSelectorShape(t *testing.T) {
	tests := []struct {
		name       string
		user, id   string
		maxHops    int
		tag        Tag
		want       string
		wantTagLit string
	}{
		{
			name: "user selector, one-hop limit",
			user: "color = 'red'", id: "B", maxHops: 1,
			tag:  Tag{Path: []string{"B"}, Origin: "ID:x-1:1:-1:1"},
			want: `(color = 'red') AND (BrokernetPath IS NULL OR BrokernetPath NOT LIKE '%|B|%' ESCAPE '\') AND (BrokernetHops IS NULL OR BrokernetHops < 1) AND 'brokernet' <> 'v1;path=B;origin=ID:x-1:1:-1:1'`,
		},
		{
			name: "no user selector, unlimited hops",
			id:   "B", maxHops: -1,
			tag:  Tag{Path: []string{"A", "B"}, Origin: "o"},
			want: `(BrokernetPath IS NULL OR BrokernetPath NOT LIKE '%|B|%' ESCAPE '\') AND 'brokernet' <> 'v1;path=A,B;origin=o'`,
		},
		{
			name: "any negative maxHops is unlimited",
			id:   "B", maxHops: -7,
			tag:  Tag{Path: []string{"B"}, Origin: "o"},
			want: `(BrokernetPath IS NULL OR BrokernetPath NOT LIKE '%|B|%' ESCAPE '\') AND 'brokernet' <> 'v1;path=B;origin=o'`,
		},
		{
			name: "zero maxHops keeps the clause",
			id:   "B", maxHops: 0,
			tag:  Tag{Path: []string{"B"}, Origin: "o"},
			want: `(BrokernetPath IS NULL OR BrokernetPath NOT LIKE '%|B|%' ESCAPE '\') AND (BrokernetHops IS NULL OR BrokernetHops < 0) AND 'brokernet' <> 'v1;path=B;origin=o'`,
		},
		{
			name: "LIKE metacharacters and quotes in the id are escaped",
			id:   `a%b_c\d'e`, maxHops: 3,
			tag:  Tag{Path: []string{"x"}, Origin: "o"},
			want: `(BrokernetPath IS NULL OR BrokernetPath NOT LIKE '%|a\%25b\_c\\d''e|%' ESCAPE '\') AND (BrokernetHops IS NULL OR BrokernetHops < 3) AND 'brokernet' <> 'v1;path=x;origin=o'`,
		},
		{
			name: "a bar in the id is encoded as in the path header",
			id:   "a|b", maxHops: -1,
			tag:  Tag{Path: []string{"x"}, Origin: "o"},
			want: `(BrokernetPath IS NULL OR BrokernetPath NOT LIKE '%|a\%7Cb|%' ESCAPE '\') AND 'brokernet' <> 'v1;path=x;origin=o'`,
		},
		{
			name: "tag fields are percent-escaped",
			id:   "ID:host-1:2", maxHops: 1,
			tag:  Tag{Path: []string{"a;b", "c,d", "e=f", "g%h", "i'j", "k\nl", "mé"}, Origin: "o;,='%"},
			want: `(BrokernetPath IS NULL OR BrokernetPath NOT LIKE '%|ID:host-1:2|%' ESCAPE '\') AND (BrokernetHops IS NULL OR BrokernetHops < 1) AND 'brokernet' <> 'v1;path=a%3Bb,c%2Cd,e%3Df,g%25h,i%27j,k%0Al,m%C3%A9;origin=o%3B%2C%3D%27%25'`,
		},
		{
			name: "empty path is omitted, one empty id is kept",
			id:   "B", maxHops: -1,
			tag:  Tag{Path: []string{""}, Origin: ""},
			want: `(BrokernetPath IS NULL OR BrokernetPath NOT LIKE '%|B|%' ESCAPE '\') AND 'brokernet' <> 'v1;path=;origin='`,
		},
		{
			name: "no path at all",
			id:   "B", maxHops: -1,
			tag:  Tag{Origin: "o"},
			want: `(BrokernetPath IS NULL OR BrokernetPath NOT LIKE '%|B|%' ESCAPE '\') AND 'brokernet' <> 'v1;origin=o'`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Selector(tt.user, tt.id, tt.maxHops, tt.tag)
			if got != tt.want {
				t.Fatalf("Selector =\n%s\nwant\n%s", got, tt.want)
			}
			user, tag, notVisited, maxHops, ok := parseSelector(got)
			wantHops := tt.maxHops
			if wantHops < 0 {
				wantHops = -1
			}
			if !ok || user != tt.user || notVisited != tt.id || maxHops != wantHops || !reflect.DeepEqual(tag, tt.tag) {
				t.Fatalf("parseSelector = %q, %+v, %q, %d, %v", user, tag, notVisited, maxHops, ok)
			}
		})
	}
}

func TestReplaySelectorShape(t *testing.T) {
	tests := []struct {
		name, user, id string
		tag            Tag
		want           string
	}{
		{
			name: "user selector",
			user: "color = 'red'", id: "B",
			tag:  Tag{Path: []string{"B"}, Origin: "replay"},
			want: `(color = 'red') AND BrokernetPath LIKE '%|B|%' ESCAPE '\' AND 'brokernet' <> 'v1;path=B;origin=replay;replay'`,
		},
		{
			name: "no user selector; Replay is set whatever the tag says",
			id:   "ID:h-1:2",
			tag:  Tag{Path: []string{"ID:h-1:2"}, Origin: "o", Replay: true},
			want: `BrokernetPath LIKE '%|ID:h-1:2|%' ESCAPE '\' AND 'brokernet' <> 'v1;path=ID:h-1:2;origin=o;replay'`,
		},
		{
			name: "LIKE metacharacters and quotes are escaped as in the hop filter",
			id:   `a%b_c\d'e`,
			tag:  Tag{Origin: "o;replay"},
			want: `BrokernetPath LIKE '%|a\%25b\_c\\d''e|%' ESCAPE '\' AND 'brokernet' <> 'v1;origin=o%3Breplay;replay'`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ReplaySelector(tt.user, tt.id, 0, tt.tag)
			if got != tt.want {
				t.Fatalf("ReplaySelector =\n%s\nwant\n%s", got, tt.want)
			}
			wantTag := tt.tag
			wantTag.Replay = true
			user, tag, id, hops, ok := parseSelector(ConvertStringPrefix + got)
			if !ok || user != tt.user || id != tt.id || hops != -1 || !reflect.DeepEqual(tag, wantTag) {
				t.Fatalf("parseSelector = %q, %+v, %q, %d, %v", user, tag, id, hops, ok)
			}
		})
	}
	// A hop-filter selector may carry a replay tag too, and says so.
	sel := Selector("", "B", 1, Tag{Path: []string{"B"}, Origin: "o", Replay: true})
	if _, tag, ok := ParseSelector(sel); !ok || !tag.Replay {
		t.Fatalf("ParseSelector(%q) = %+v, %v", sel, tag, ok)
	}
}

// TestReplayFilterComplementsHopFilter checks, with a LIKE evaluator, that
// a replay subscription takes exactly the messages (with a path header)
// that the hop filter for the same broker withholds.
func TestReplayFilterComplementsHopFilter(t *testing.T) {
	for _, id := range []string{"B", "ID:h-1:1", "a%b", "a_b", "a|b"} {
		pattern := likePattern(id)
		for _, path := range [][]string{{"A"}, {id}, {"A", id}, {id, "C"}, {"A", "B", "C"}, {"a%b|"}} {
			v := FormatPath(path)
			replayTakes := likeMatch(pattern, v)  // BrokernetPath LIKE p
			demandTakes := !likeMatch(pattern, v) // BrokernetPath NOT LIKE p
			if replayTakes == demandTakes || replayTakes != slices.Contains(path, id) {
				t.Errorf("id %q, path %q: replay %v, demand %v", id, v, replayTakes, demandTakes)
			}
		}
	}
}

func TestParseSelectorRoundTripsHostileUserSelectors(t *testing.T) {
	tag := Tag{Path: []string{"B"}, Origin: "ID:c:1:1"}
	users := []string{
		"",
		"a = 1",
		" ",
		"(",
		")",
		") AND (",
		"x = 'y' AND 'brokernet' <> 'v1;path=Z;origin=evil'",
		Selector("inner = 1", "Z", 5, Tag{Path: []string{"Z"}, Origin: "z"}),
		Selector("", "B", 1, tag),
		"(BrokernetPath IS NULL OR BrokernetPath NOT LIKE '%|B|%' ESCAPE '\\')",
		"a = 1) AND (BrokernetPath IS NULL OR BrokernetPath NOT LIKE '%|B|%' ESCAPE '\\') AND 'brokernet' <> 'v1;origin=x'",
		ConvertStringPrefix + "a = 1",
		"color = 'red' -- trailing",
		"color = 'red' -- comment\n",
		"name LIKE '%|B|%'",
		"'",
		"''",
		"\x00\xff",
	}
	for _, u := range users {
		for _, hops := range []int{-1, 0, 1, 12} {
			sel := Selector(u, "B", hops, tag)
			for _, in := range []string{sel, ConvertStringPrefix + sel} {
				gotUser, gotTag, ok := ParseSelector(in)
				if !ok || gotUser != u || !reflect.DeepEqual(gotTag, tag) {
					t.Errorf("ParseSelector(%q) = %q, %+v, %v; want %q", in, gotUser, gotTag, ok, u)
				}
			}
		}
		replayTag := Tag{Path: tag.Path, Origin: tag.Origin, Replay: true}
		sel := ReplaySelector(u, "B", 0, tag)
		if gotUser, gotTag, ok := ParseSelector(sel); !ok || gotUser != u || !reflect.DeepEqual(gotTag, replayTag) {
			t.Errorf("ParseSelector(%q) = %q, %+v, %v; want %q", sel, gotUser, gotTag, ok, u)
		}
	}
}

func TestParseSelectorRejects(t *testing.T) {
	good := Selector("a = 1", "B", 1, Tag{Path: []string{"B"}, Origin: "o"})
	replay := ReplaySelector("a = 1", "B", 0, Tag{Path: []string{"B"}, Origin: "o"})
	tests := []struct{ name, sel string }{
		{"empty", ""},
		{"a plain selector", "color = 'red'"},
		{"a prefixed plain selector", ConvertStringPrefix + "color = 'red'"},
		{"truncated", good[:len(good)-1]},
		{"trailing space", good + " "},
		{"missing user parentheses", strings.Replace(good, "(a = 1) AND ", "a = 1 AND ", 1)},
		{"empty user parentheses", "() AND " + good[len("(a = 1) AND "):]},
		{"other version", strings.Replace(good, "'v1;", "'v2;", 1)},
		{"unescaped percent in id", strings.Replace(good, "'%|B|%'", "'%|B%|%'", 1)},
		{"lower-case escape in tag", strings.Replace(Selector("", "B", 1, Tag{Path: []string{";"}}), "%3B", "%3b", 1)},
		{"bad escape in tag", strings.Replace(good, "origin=o", "origin=%zz", 1)},
		{"non-canonical hops", strings.Replace(good, "< 1)", "< 01)", 1)},
		{"negative hops", strings.Replace(good, "< 1)", "< -1)", 1)},
		{"changed keyword case", strings.Replace(good, "NOT LIKE", "not like", 1)},
		{"changed escape character", strings.Replace(good, `ESCAPE '\'`, `ESCAPE '!'`, 1)},
		{"unterminated LIKE", "(BrokernetPath IS NULL OR BrokernetPath NOT LIKE '%|B"},
		{"unterminated tag", strings.TrimSuffix(good, "'")},
		{"missing origin", strings.Replace(good, ";origin=o", "", 1)},
		{"path without origin", strings.Replace(good, ";origin=o", ";other=o", 1)},
		{"a replay selector without the replay flag", strings.Replace(replay, ";replay'", "'", 1)},
		{"a replay selector with a hops clause", strings.Replace(replay, `ESCAPE '\'`, `ESCAPE '\' AND (BrokernetHops IS NULL OR BrokernetHops < 1)`, 1)},
		{"a replay selector without ESCAPE", strings.Replace(replay, ` ESCAPE '\'`, "", 1)},
		{"a replay selector with unbalanced user parentheses", strings.Replace(replay, "(a = 1) AND ", "a = 1) AND ", 1)},
		{"an unknown tag field after replay", strings.Replace(replay, ";replay'", ";replay;x'", 1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			user, tag, ok := ParseSelector(tt.sel)
			if ok || user != tt.sel || !reflect.DeepEqual(tag, Tag{}) {
				t.Fatalf("ParseSelector(%q) = %q, %+v, %v; want it unchanged and not ok", tt.sel, user, tag, ok)
			}
		})
	}
}

func TestPathHeader(t *testing.T) {
	tests := []struct {
		ids  []string
		want string
	}{
		{nil, ""},
		{[]string{"A"}, "|A|"},
		{[]string{"ID:host-1:2", "b.c_d"}, "|ID:host-1:2|b.c_d|"},
		{[]string{""}, "||"},
		{[]string{"a|b", "c%d", "e\nf"}, "|a%7Cb|c%25d|e%0Af|"},
	}
	for _, tt := range tests {
		got := FormatPath(tt.ids)
		if got != tt.want {
			t.Errorf("FormatPath(%q) = %q, want %q", tt.ids, got, tt.want)
		}
		back, err := ParsePath(got)
		if err != nil || !reflect.DeepEqual(back, tt.ids) {
			t.Errorf("ParsePath(%q) = %q, %v; want %q", got, back, err, tt.ids)
		}
	}
	for _, bad := range []string{"|", "A", "|A", "A|", "|%G0|", "|%4|"} {
		if _, err := ParsePath(bad); err == nil {
			t.Errorf("ParsePath(%q) succeeded", bad)
		}
	}
}

func TestAppendPath(t *testing.T) {
	tests := []struct{ v, id, want string }{
		{"", "A", "|A|"},
		{"|A|", "B", "|A|B|"},
		{"|A|", "x|y", "|A|x%7Cy|"},
		{"garbage", "B", "garbage|B|"},
	}
	for _, tt := range tests {
		if got := AppendPath(tt.v, tt.id); got != tt.want {
			t.Errorf("AppendPath(%q, %q) = %q, want %q", tt.v, tt.id, got, tt.want)
		}
	}
}

// likeMatch evaluates an SQL LIKE pattern with escape character '\' the way
// ActiveMQ's LikeExpression does, for checking the hop filter.
func likeMatch(pattern, s string) bool {
	type tok struct {
		any, one bool
		c        byte
	}
	var toks []tok
	for i := 0; i < len(pattern); i++ {
		switch c := pattern[i]; c {
		case '\\':
			i++
			toks = append(toks, tok{c: pattern[i]})
		case '%':
			toks = append(toks, tok{any: true})
		case '_':
			toks = append(toks, tok{one: true})
		default:
			toks = append(toks, tok{c: c})
		}
	}
	var match func(ti, si int) bool
	match = func(ti, si int) bool {
		if ti == len(toks) {
			return si == len(s)
		}
		switch t := toks[ti]; {
		case t.any:
			for k := si; k <= len(s); k++ {
				if match(ti+1, k) {
					return true
				}
			}
			return false
		case si == len(s):
			return false
		case t.one || t.c == s[si]:
			return match(ti+1, si+1)
		}
		return false
	}
	return match(0, 0)
}

// TestHopFilterMatchesPathHeader checks, with a LIKE evaluator, that the
// hop filter's pattern finds exactly the ids that a path header lists.
func TestHopFilterMatchesPathHeader(t *testing.T) {
	ids := []string{"A", "B", "AB", "ID:h-1:1", "ID:h-1:10", "a%b", "a_b", "axb", `a\b`, "a|b", "a", "b", "|", "%", "_", ""}
	for _, id := range ids {
		pattern := likePattern(id)
		for _, other := range ids {
			for _, path := range [][]string{{other}, {"Z", other}, {other, "Z"}, {"Z", other, "Y"}} {
				v := FormatPath(path)
				if got, want := likeMatch(pattern, v), id == other; got != want {
					t.Errorf("LIKE %q on %q = %v, want %v", pattern, v, got, want)
				}
			}
		}
		if likeMatch(pattern, FormatPath([]string{"Z", "Y"})) {
			t.Errorf("LIKE %q matched a path without %q", pattern, id)
		}
	}
}

// FuzzSelectorRoundTrip checks that ParseSelector inverts Selector for any
// user selector, ids and tag, and never panics on arbitrary input.
func FuzzSelectorRoundTrip(f *testing.F) {
	f.Add("color = 'red'", "B", 1, "A\x00B", "ID:x:1:1")
	f.Add("", "ID:h-1:1", -1, "", "")
	f.Add("x = 'y' AND 'brokernet' <> 'v1;origin=z'", "a%_\\'|", 0, "a;b,c=d", "o'%")
	f.Add(Selector("q", "B", 2, Tag{Path: []string{"B"}, Origin: "o"}), "B", 2, "B", "o")
	f.Add(ReplaySelector("q", "B", 0, Tag{Path: []string{"B"}, Origin: "o"}), "B", 3, "B", "o;replay")
	f.Add(ReplaySelector("q", "B", 5, Tag{Path: []string{"B"}, Origin: "o"}), "B", 5, "B", "o;replay")
	f.Fuzz(func(t *testing.T, user, id string, maxHops int, path, origin string) {
		var tag Tag
		if path != "" {
			tag.Path = strings.Split(path, "\x00")
		}
		tag.Origin = origin
		tag.Replay = maxHops%3 == 0
		maxMoves := max(maxHops, 0)
		replay := ReplaySelector(user, id, maxMoves, tag)
		replayTag := tag
		replayTag.Replay = true
		if gotUser, gotTag, ok := ParseSelector(replay); !ok || gotUser != user || !reflect.DeepEqual(gotTag, replayTag) {
			t.Fatalf("ParseSelector(ReplaySelector(%q, %q, %d, %+v)) = %q, %+v, %v", user, id, maxMoves, tag, gotUser, gotTag, ok)
		}
		wantMoves := maxMoves
		if wantMoves == 0 {
			wantMoves = -1
		}
		if _, _, gotID, gotMoves, _ := parseSelector(replay); gotID != id || gotMoves != wantMoves {
			t.Fatalf("replay filter parsed as %q, %d; want %q, %d", gotID, gotMoves, id, wantMoves)
		}
		sel := Selector(user, id, maxHops, tag)
		gotUser, gotTag, ok := ParseSelector(sel)
		if !ok || gotUser != user || !reflect.DeepEqual(gotTag, tag) {
			t.Fatalf("ParseSelector(Selector(%q, %q, %d, %+v)) = %q, %+v, %v", user, id, maxHops, tag, gotUser, gotTag, ok)
		}
		_, _, gotID, gotHops, _ := parseSelector(sel)
		if wantHops := max(maxHops, -1); gotID != id || gotHops != wantHops {
			t.Fatalf("hop filter parsed as %q, %d; want %q, %d", gotID, gotHops, id, wantHops)
		}
		if strings.Count(tag.literal(), "'") != 0 {
			t.Fatalf("tag literal %q contains a quote", tag.literal())
		}
		// Arbitrary input: no panic, and ok only for canonical selectors.
		if u, tg, ok := ParseSelector(user); ok {
			_, _, id2, hops2, _ := parseSelector(user)
			rebuilt := Selector(u, id2, hops2, tg)
			if tg.Replay && rebuilt != strings.TrimPrefix(user, ConvertStringPrefix) {
				rebuilt = ReplaySelector(u, id2, max(hops2, 0), tg)
			}
			if rebuilt != strings.TrimPrefix(user, ConvertStringPrefix) {
				t.Fatalf("ParseSelector accepted non-canonical %q", user)
			}
		} else if u != user {
			t.Fatalf("ParseSelector changed a non-brokernet selector %q to %q", user, u)
		}
	})
}

func TestSelectorForClause(t *testing.T) {
	sel := Selector("", "R", 2, Tag{Path: []string{"B"}, Origin: "o", For: "B"})
	want := `(BrokernetPath IS NULL OR BrokernetPath NOT LIKE '%|R|%' ESCAPE '\') AND (BrokernetHops IS NULL OR BrokernetHops < 2) AND (BrokernetPath IS NULL OR BrokernetFor LIKE '%|B|%' ESCAPE '\') AND 'brokernet' <> 'v1;path=B;origin=o'`
	if sel != want {
		t.Fatalf("Selector =\n%s\nwant\n%s", sel, want)
	}
	user, tag, ok := ParseSelector(ConvertStringPrefix + sel)
	if !ok || user != "" || tag.For != "B" || tag.Origin != "o" {
		t.Fatalf("ParseSelector = %q, %+v, %v", user, tag, ok)
	}
}

func TestWithheldSelectorShape(t *testing.T) {
	for _, tc := range []struct {
		id   string
		hops int
		want string
	}{
		{"A", 3, `BrokernetPath LIKE '%|A|%' ESCAPE '\' OR BrokernetHops >= 3`},
		{"A", -1, `BrokernetPath LIKE '%|A|%' ESCAPE '\'`},
		{"it's_50%", 1, `BrokernetPath LIKE '%|it''s\_50\%25|%' ESCAPE '\' OR BrokernetHops >= 1`},
	} {
		if got := WithheldSelector(tc.id, tc.hops); got != tc.want {
			t.Errorf("WithheldSelector(%q, %d) = %s, want %s", tc.id, tc.hops, got, tc.want)
		}
	}
}

func TestPathHolds(t *testing.T) {
	for _, c := range []struct {
		path, id string
		want     bool
	}{
		{"", "A", false},
		{"|A|", "A", true},
		{"|A|B|", "B", true},
		{"|AB|", "A", false},
		{"|AB|", "B", false},
		{"|BA|A|", "A", true},
		{"|A|", "", false},
		{"|x%7Cy|", "x|y", true},
		{"|x|y|", "x|y", false},
		{"|A", "A", false},
	} {
		if got := PathHolds(c.path, c.id); got != c.want {
			t.Errorf("PathHolds(%q, %q) = %v, want %v", c.path, c.id, got, c.want)
		}
	}
}

// TestReplaySelectorCapsMoves: a replay subscription with a cap takes only
// messages replayed fewer times, and the cap survives the round trip.
func TestReplaySelectorCapsMoves(t *testing.T) {
	tag := Tag{Path: []string{"B"}, Origin: "o"}
	got := ReplaySelector("", "B", 3, tag)
	want := `BrokernetPath LIKE '%|B|%' ESCAPE '\' AND (BrokernetMoves IS NULL OR BrokernetMoves < 3) AND 'brokernet' <> 'v1;path=B;origin=o;replay'`
	if got != want {
		t.Fatalf("ReplaySelector =\n%s\nwant\n%s", got, want)
	}
	user, gotTag, id, moves, ok := parseSelector(ConvertStringPrefix + got)
	if !ok || user != "" || id != "B" || moves != 3 || !gotTag.Replay {
		t.Fatalf("parseSelector = %q, %+v, %q, %d, %v", user, gotTag, id, moves, ok)
	}
	for _, bad := range []string{
		strings.Replace(got, "< 3)", "< 0)", 1),
		strings.Replace(got, "< 3)", "< x)", 1),
		strings.Replace(got, "< 3)", "< 3", 1),
	} {
		if _, _, ok := ParseSelector(bad); ok {
			t.Errorf("ParseSelector accepted %s", bad)
		}
	}
}
