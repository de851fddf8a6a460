package bench

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// fakeRun is one completed run of a path with plausible figures; tests set
// what they look at.
func fakeRun(mode, path string, round int, rate float64) *result {
	r := &result{mode: mode, path: path, round: round, n: 1000, rate: rate,
		p50: 100 * time.Millisecond, p99: 200 * time.Millisecond,
		steadyN: 1000, sp50: time.Millisecond, sp99: 10 * time.Millisecond}
	if r.bridged() {
		r.bridgeMsgs = 1000
		r.bridgeCPU = 1000 * 20 * time.Microsecond
		r.bridgeRSS = 20 * 1024
	}
	return r
}

func lineWith(t *testing.T, vs []verdict, prefix string) verdict {
	t.Helper()
	for _, v := range vs {
		if strings.HasPrefix(v.line, prefix) {
			return v
		}
	}
	var lines []string
	for _, v := range vs {
		lines = append(lines, v.line)
	}
	t.Fatalf("no line starting %q in:\n%s", prefix, strings.Join(lines, "\n"))
	return verdict{}
}

func TestSpreadOf(t *testing.T) {
	cases := []struct {
		name string
		vals []float64
		want spread
	}{
		{"of nothing is empty", nil, spread{}},
		{"of one value is that value", []float64{7}, spread{7, 7, 7, 1}},
		{"of an odd count takes the middle value", []float64{3, 1, 2}, spread{2, 1, 3, 3}},
		{"of an even count takes the mean of the two middle values", []float64{4, 1, 3, 2}, spread{2.5, 1, 4, 4}},
		{"ignores the input order", []float64{5, 5, 1, 9, 5}, spread{5, 1, 9, 5}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := append([]float64(nil), c.vals...)
			if got := spreadOf(c.vals); got != c.want {
				t.Errorf("spreadOf(%v) = %+v, want %+v", c.vals, got, c.want)
			}
			for i := range in {
				if in[i] != c.vals[i] {
					t.Fatalf("spreadOf reordered its input: %v, was %v", c.vals, in)
				}
			}
		})
	}
}

func TestSpreadDescribe(t *testing.T) {
	s := spread{median: 0.83, min: 0.71, max: 0.95, n: 3}
	if got, want := s.describe(fmtRatio, 3), "median 0.83 (0.71–0.95 over 3 rounds)"; got != want {
		t.Errorf("all rounds counted: %q, want %q", got, want)
	}
	s.n = 2
	if got, want := s.describe(fmtRatio, 3), "median 0.83 (0.71–0.95 over 2 of 3 rounds)"; got != want {
		t.Errorf("one round failed: %q, want %q", got, want)
	}
	if got, want := (spread{0.83, 0.83, 0.83, 1}).describe(fmtRatio, 1), "0.83"; got != want {
		t.Errorf("single run: %q, want %q (as single-run tables always wrote it)", got, want)
	}
	if got, want := (spread{}).cell(fmtRate), "-"; got != want {
		t.Errorf("empty cell %q, want %q", got, want)
	}
	if got, want := (spread{4201, 3463, 4214, 3}).cell(fmtRate), "4201 (3463–4214)"; got != want {
		t.Errorf("cell %q, want %q", got, want)
	}
}

// threeRounds is native and brokernet, non-persistent, over three rounds in
// which the machine's speed drifts: brokernet/native per round 0.83, 0.95,
// 0.71. The ratio of the medians (5680/8000 = 0.71) would miss the target;
// the median of the per-round ratios (0.83) passes it.
func threeRounds() []*result {
	nat := []float64{10000, 5000, 8000}
	bn := []float64{8300, 4750, 5680}
	var rs []*result
	for i := range 3 {
		rs = append(rs, fakeRun(modeNonPersistent, "native", i+1, nat[i]), fakeRun(modeNonPersistent, "brokernet", i+1, bn[i]))
	}
	return rs
}

func TestTargetsJudgeRatiosPerRound(t *testing.T) {
	vs := judgeTargets(groupRounds(threeRounds()), 3, 2000)
	v := lineWith(t, vs, "target non-persistent brokernet/native")
	if want := "target non-persistent brokernet/native >= 0.8: median 0.83 (0.71–0.95 over 3 rounds) PASS"; v.line != want || !v.pass {
		t.Errorf("got %q (pass %v), want %q", v.line, v.pass, want)
	}
}

func TestTargetsLeaveFailedRoundsOut(t *testing.T) {
	rs := threeRounds()
	// Round 2's brokernet run failed after its full-speed phase, with a rate
	// that would drag the median: it is shown, not counted.
	rs[3].failed, rs[3].rate, rs[3].lost = "FAILED (see the log above)", 100, 7
	rows := groupRounds(rs)
	vs := judgeTargets(rows, 3, 2000)
	v := lineWith(t, vs, "target non-persistent brokernet/native")
	if want := "target non-persistent brokernet/native >= 0.8: median 0.77 (0.71–0.83 over 2 of 3 rounds) MISS"; v.line != want || v.pass {
		t.Errorf("got %q (pass %v), want %q", v.line, v.pass, want)
	}
	loss := lineWith(t, vs, "target zero loss")
	if want := "target zero loss, no duplicates: MISS *** non-persistent/brokernet #2(lost 7 dup 0) ***"; loss.line != want || loss.pass {
		t.Errorf("got %q, want %q", loss.line, want)
	}
	if s := findRow(rows, modeNonPersistent, "brokernet").figure(always(rateOf)); s != (spread{(8300 + 5680) / 2.0, 5680, 8300, 2}) {
		t.Errorf("brokernet rate spread %+v: the failed round must not count", s)
	}

	var buf bytes.Buffer
	printSummary(&buf, rows, 3, "@2k")
	out := buf.String()
	for _, want := range []string{"2/3 (1 failed)", "6990 (5680–8300)", "8000 (5000–10000)"} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(out, "brokernet  ") || !strings.Contains(out, " 7 ") {
		t.Errorf("summary should show brokernet with the failed round's 7 lost summed:\n%s", out)
	}
}

func TestTargetsWithEveryRoundFailedMiss(t *testing.T) {
	rs := threeRounds()
	for _, r := range rs {
		if r.path == "brokernet" {
			r.failed, r.rate = "warm-up: only 0 of 1000 messages arrived", 0
		}
	}
	vs := judgeTargets(groupRounds(rs), 3, 2000)
	for _, prefix := range []string{
		"target non-persistent brokernet/native",
		"target non-persistent brokernet p50",
		"target non-persistent brokernet p99",
		"target non-persistent brokernet bridge CPU",
	} {
		v := lineWith(t, vs, prefix)
		if v.pass || !strings.Contains(v.line, "MISS, no round measured it") {
			t.Errorf("%q: want a MISS for want of data", v.line)
		}
	}
	if v := lineWith(t, vs, "target zero loss"); v.pass || !strings.Contains(v.line, "non-persistent/brokernet #3(did not complete)") {
		t.Errorf("%q: want every incomplete run named", v.line)
	}
}

func TestTargetsPassOrMissOnTheMedian(t *testing.T) {
	rs := threeRounds()
	// p50 at the paced rate: 1.5, 2.5, 1.9 ms → median 1.9 ms < 2 ms, PASS,
	// though one round missed. p99: brokernet 30, 12, 16 ms against native
	// 10 ms each round → 3.0x, 1.2x, 1.6x, median 1.6x > 1.5x, MISS. Bridge
	// CPU 25, 40, 35 µs → median 35 µs, MISS.
	p50 := []time.Duration{1500 * time.Microsecond, 2500 * time.Microsecond, 1900 * time.Microsecond}
	p99 := []time.Duration{30 * time.Millisecond, 12 * time.Millisecond, 16 * time.Millisecond}
	cpu := []time.Duration{25, 40, 35}
	for _, r := range rs {
		if r.path == "brokernet" {
			r.sp50, r.sp99 = p50[r.round-1], p99[r.round-1]
			r.bridgeCPU = time.Duration(r.bridgeMsgs) * cpu[r.round-1] * time.Microsecond
		}
	}
	vs := judgeTargets(groupRounds(rs), 3, 2000)
	for _, c := range []struct {
		line string
		pass bool
	}{
		{"target non-persistent brokernet p50 at 2000 msg/s < 2ms: median 1.90ms (1.50ms–2.50ms over 3 rounds) PASS", true},
		{"target non-persistent brokernet p99 at 2000 msg/s <= 1.5x native: median 1.60x (1.20x–3.00x over 3 rounds); p99 median 16.0ms, native 10.0ms MISS", false},
		{"target non-persistent brokernet bridge CPU <= 30µs/msg (whole life): median 35.0µs (25.0µs–40.0µs over 3 rounds) MISS", false},
		{"target zero loss, no duplicates (all paths): PASS", true},
	} {
		v := lineWith(t, vs, c.line[:strings.Index(c.line, ":")])
		if v.line != c.line || v.pass != c.pass {
			t.Errorf("got  %q (pass %v)\nwant %q (pass %v)", v.line, v.pass, c.line, c.pass)
		}
	}
}

// A single round reads as the bench always wrote it.
func TestTargetsOfOneRoundKeepTheSingleRunFormat(t *testing.T) {
	rs := []*result{fakeRun(modeNonPersistent, "native", 1, 10000), fakeRun(modeNonPersistent, "brokernet", 1, 8300)}
	rs[0].sp99 = 20 * time.Millisecond
	rs[1].sp99 = 25 * time.Millisecond
	var lines []string
	for _, v := range judgeTargets(groupRounds(rs), 1, 2000) {
		lines = append(lines, v.line)
	}
	want := []string{
		"target non-persistent brokernet/native >= 0.8: 0.83 PASS",
		"target non-persistent brokernet p50 at 2000 msg/s < 2ms: 1.00ms PASS",
		"target non-persistent brokernet p99 at 2000 msg/s <= 1.5x native (20.0ms): 25.0ms, 1.25x PASS",
		"target non-persistent brokernet bridge CPU <= 30µs/msg (whole life): 20.0µs PASS",
		"target zero loss, no duplicates (all paths): PASS",
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	if got := rs[1].label(1); got != "brokernet" {
		t.Errorf("label of a single run %q, want the bare path", got)
	}
}

func TestGeneratorCheckRatioPerRound(t *testing.T) {
	var rs []*result
	harness := []float64{9000, 6000, 8800}
	pair := [][2]float64{{9500, 10000}, {9000, 8000}, {9000, 9100}} // faster: 10000, 9000, 9100
	for i := range 3 {
		r := fakeRun(modeNonPersistent, "direct", i+1, harness[i])
		r.minimalWanted = true
		r.minRuns = []minimalRun{{when: "before", rate: pair[i][0]}, {when: "after", rate: pair[i][1]}}
		rs = append(rs, r)
	}
	// The harness's faster run counts: round 2's second run, 8500.
	rs[1].rateAgain = 8500
	rs[0].rateAgain = 100
	p := fakeRun(modePersistent, "direct", 1, 3000)
	p.minimalWanted, p.minimalSkippedReason = true, "non-persistent mode only"
	rs = append(rs, p)
	vs := generatorChecks(groupRounds(rs), 3)
	// Per round 0.90, 0.94, 0.97: median 0.94 < 0.95.
	v := lineWith(t, vs, "generator check non-persistent/direct")
	if want := "generator check non-persistent/direct: harness/go-stomp pair ratio median 0.94 (0.90–0.97 over 3 rounds) (>= 0.95): MISS; harness median 8800 msg/s, go-stomp pair median 9100 msg/s"; !strings.HasPrefix(v.line, want) || v.pass {
		t.Errorf("got  %q (pass %v)\nwant %q...", v.line, v.pass, want)
	}
	if v := lineWith(t, vs, "generator check persistent/direct"); v.line != "generator check persistent/direct: go-stomp pair not run (non-persistent mode only)" {
		t.Errorf("got %q", v.line)
	}

	// The pair failed in every round: no comparison, said once.
	for _, r := range rs[:3] {
		r.minRuns, r.minFailed, r.failed = nil, "dialing: refused", "FAILED (see the log above)"
	}
	v = lineWith(t, generatorChecks(groupRounds(rs), 3), "generator check non-persistent/direct")
	if want := "generator check non-persistent/direct: MISS, no comparison (dialing: refused)"; v.line != want || v.pass {
		t.Errorf("got %q, want %q", v.line, want)
	}
}

func TestGroupRoundsKeepsRowOrderAndSortsRounds(t *testing.T) {
	rs := []*result{
		fakeRun(modeNonPersistent, "direct", 2, 1), fakeRun(modeNonPersistent, "native", 2, 1),
		fakeRun(modeNonPersistent, "direct", 1, 1), fakeRun(modePersistent, "direct", 1, 1),
	}
	rows := groupRounds(rs)
	var got []string
	for _, g := range rows {
		for _, r := range g.runs {
			got = append(got, r.mode+"/"+r.label(2))
		}
	}
	want := "non-persistent/direct #1,non-persistent/direct #2,non-persistent/native #2,persistent/direct #1"
	if strings.Join(got, ",") != want {
		t.Errorf("got %s, want %s", strings.Join(got, ","), want)
	}
}

func TestPrintTableLabelsRoundsAndSummarises(t *testing.T) {
	rs := threeRounds()
	for _, r := range rs {
		r.settings = defaultSettings
	}
	rs[3].failed, rs[3].rate = "warm-up: only 10 of 1000 messages arrived", 0
	var buf bytes.Buffer
	printTable(&buf, rs, 3)
	out := buf.String()
	for _, want := range []string{
		"3 interleaved rounds",
		"non-persistent  brokernet #2                 warm-up: only 10 of 1000 messages arrived",
		"non-persistent  native #3 ",
		"summary over 3 interleaved rounds",
		"target non-persistent brokernet/native >= 0.8: median 0.77 (0.71–0.83 over 2 of 3 rounds) MISS",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if t.Failed() || testing.Verbose() {
		t.Logf("output:\n%s", out)
	}

	buf.Reset()
	printTable(&buf, rs[:2], 1)
	if out := buf.String(); strings.Contains(out, "summary") || strings.Contains(out, "#1") {
		t.Errorf("a single round should print neither a summary nor round labels:\n%s", out)
	}
}

func TestPrintRabbitTableLabelsRoundsAndSummarises(t *testing.T) {
	var rs []*result
	for round := 1; round <= 2; round++ {
		rs = append(rs, fakeRun(modeNonPersistent, "federation", round, 3000), fakeRun(modeNonPersistent, "brokernet-amqp", round, 2000+float64(round)*1000))
	}
	var buf bytes.Buffer
	printRabbitTable(&buf, rs, 2, "title", "brokers")
	out := buf.String()
	for _, want := range []string{"brokernet-amqp #2", "summary over 2 interleaved rounds", "3500 (3000–4000)", "target zero loss, no duplicates (all paths): PASS"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	buf.Reset()
	printRabbitTable(&buf, rs[:2], 1, "title", "brokers")
	if out := buf.String(); strings.Contains(out, "summary") || strings.Contains(out, "#1") || strings.Contains(out, "target") {
		t.Errorf("a single round should print the table alone:\n%s", out)
	}
}
