package selector_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/brokernet/brokernet/internal/testkit/stomptest"
	"github.com/brokernet/brokernet/internal/testkit/testbroker"
	"github.com/brokernet/brokernet/selector"
)

var good = []string{
	"region = 'eu'",
	"region <> 'it''s'",
	"amount > 100 AND (tier = 'gold' OR tier = 'silver')",
	"NOT (a = 1)",
	"a IS NULL OR b IS NOT NULL",
	"name LIKE 'ord%' ESCAPE '\\'",
	"name NOT LIKE '_x'",
	"n BETWEEN 1 AND 10",
	"n NOT BETWEEN -1.5e3 AND 0x1F",
	"region IN ('eu', 'us')",
	"region NOT IN ('(', ')')",
	"a * 2 + b / 3 - c % 4 >= 7",
	"JMSPriority > 4 and JMSType = 'x'",
	"flag = TRUE",
	"$x_1 = 010",
	"price < .5",
	"n = 10L",
}

var bad = []struct{ sel, want string }{
	{"", "empty selector"},
	{"region = 'eu", "at 10: string has no closing quote"},
	{"region =", "at 9: selector ends where a value is wanted"},
	{"(a = 1", `at 7: want ")", found end of selector`},
	{"a = 1)", `at 6: unexpected ")"`},
	{"a = 1 b = 2", `at 7: unexpected "b"`},
	{"a IN (1, 2)", "at 7: want a string, found \"1\""},
	{"a LIKE b", `at 8: want a string, found "b"`},
	{"n BETWEEN 1 OR 2", `at 13: want "AND", found "OR"`},
	{"a IS 1", `at 6: want "NULL", found "1"`},
	{"a = 1 AND", "at 10: selector ends where a value is wanted"},
	{"a == 1", `at 4: want a value, found "="`},
	{"a = #", "at 5: unexpected character '#'"},
	{"a = 12abc", `at 5: bad number "12a"`},
}

func TestCheck(t *testing.T) {
	for _, s := range good {
		if err := selector.Check(s); err != nil {
			t.Errorf("Check(%q): %v", s, err)
		}
	}
	for _, tc := range bad {
		err := selector.Check(tc.sel)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Check(%q) = %v, want %q", tc.sel, err, tc.want)
		}
	}
}

// TestCheckAgreesWithActiveMQ subscribes with each selector on a real
// ActiveMQ 5.17: it accepts every one Check accepts and refuses every one
// Check refuses.
func TestCheckAgreesWithActiveMQ(t *testing.T) {
	if testing.Short() {
		t.Skip("needs an ActiveMQ broker")
	}
	t.Parallel()
	testbroker.Require(t)
	b := testbroker.StartActiveMQ(t, testbroker.Options{})
	subscribe := func(sel string) error {
		c := stomptest.Dial(t, b.StompURI())
		defer c.Close(context.Background())
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return c.Subscribe(ctx, "s", "/queue/selector.check", "auto", "selector", sel)
	}
	for _, s := range good {
		if err := subscribe(s); err != nil {
			t.Errorf("ActiveMQ refuses %q, which Check accepts: %v", s, err)
		}
	}
	for _, tc := range bad {
		if tc.sel == "" {
			continue // no selector header at all is no selector
		}
		if err := subscribe(tc.sel); err == nil {
			t.Errorf("ActiveMQ accepts %q, which Check refuses (%v)", tc.sel, selector.Check(tc.sel))
		} else {
			t.Logf("ActiveMQ refuses %q: %s", tc.sel, firstLine(err))
		}
	}
}

func firstLine(err error) string {
	s, _, _ := strings.Cut(fmt.Sprint(err), "\n")
	return s
}
