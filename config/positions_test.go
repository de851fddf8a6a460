package config

import (
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
)

func TestScanPositions(t *testing.T) {
	src := strings.Join([]string{
		`# [[networkConnector]] in a comment is no header`, // 1
		`title = """`,                         // 2
		`[[networkConnector]]`,                // 3: inside a multi-line string
		`name = "not a key"`,                  // 4
		`"""`,                                 // 5
		`lit = '''`,                           // 6
		`[x] '''`,                             // 7
		`[[networkConnector]]  # first`,       // 8
		`name = "a" # [[networkConnector]]`,   // 9
		`list = [ # comment [`,                // 10
		`  "x]", 'y,', # ]`,                   // 11
		`  [1, 2],`,                           // 12
		`  "z" ]`,                             // 13
		`"quoted key" = 1`,                    // 14
		`dotted . key = 2`,                    // 15
		`  [networkConnector.gossip]`,         // 16
		`  bind = "b"`,                        // 17
		`[[networkConnector]]`,                // 18
		`when = 1979-05-27 07:32:00Z`,         // 19
		`inline = { a = 1, b = { c = "}" } }`, // 20
		`esc = "a\"b = c"`,                    // 21
		`[[networkConnector.sub]]`,            // 22
		`k = 1`,                               // 23
		`[[networkConnector.sub]]`,            // 24
		`k = 2`,                               // 25
	}, "\r\n")
	var m map[string]any
	if _, err := toml.Decode(src, &m); err != nil {
		t.Fatalf("the test's TOML is not valid: %v", err)
	}
	p := scanPositions("\ufeff" + src)
	nc := func(i int, keys ...string) []string {
		return append([]string{"networkConnector", index(i)}, keys...)
	}
	for _, c := range []struct {
		path []string
		want pos
	}{
		{[]string{"title"}, pos{2, 1}},
		{[]string{"lit"}, pos{6, 1}},
		{[]string{"networkConnector"}, pos{8, 1}},
		{nc(0), pos{8, 1}},
		{nc(0, "name"), pos{9, 1}},
		{nc(0, "list"), pos{10, 1}},
		{nc(0, "list", index(0)), pos{11, 3}},
		{nc(0, "list", index(1)), pos{11, 9}},
		{nc(0, "list", index(2)), pos{12, 3}},
		{nc(0, "list", index(2), index(1)), pos{12, 7}},
		{nc(0, "list", index(3)), pos{13, 3}},
		{nc(0, "quoted key"), pos{14, 1}},
		{nc(0, "dotted"), pos{15, 1}},
		{nc(0, "dotted", "key"), pos{15, 1}},
		{nc(0, "gossip"), pos{16, 3}},
		{nc(0, "gossip", "bind"), pos{17, 3}},
		{nc(1), pos{18, 1}},
		{nc(1, "when"), pos{19, 1}},
		{nc(1, "inline", "a"), pos{20, 12}},
		{nc(1, "inline", "b", "c"), pos{20, 25}},
		{nc(1, "esc"), pos{21, 1}},
		{nc(1, "sub", index(0), "k"), pos{23, 1}},
		{nc(1, "sub", index(1)), pos{24, 1}},
		{nc(1, "sub", index(1), "k"), pos{25, 1}},
		{nc(1, "unknown", "deeper"), pos{18, 1}}, // falls back to the nearest ancestor
		{nc(0, "title"), pos{8, 1}},
	} {
		if got := p.find(c.path); got != c.want {
			t.Errorf("%q: got %v, want %v", strings.Join(c.path, "/"), got, c.want)
		}
	}
	if _, ok := p.at[strings.Join(nc(2), pathSep)]; ok {
		t.Errorf("a header inside a string was counted")
	}
}

func TestScanPositionsSurvivesGarbage(t *testing.T) {
	for _, src := range []string{"", "[", "[[", "a", "a =", `a = "`, `a = """`, "a = [", "a = {", "= 1", "]]", "a = [1,,", "a = {b", "'", `"\`} {
		scanPositions(src) // must not panic or hang
	}
}
