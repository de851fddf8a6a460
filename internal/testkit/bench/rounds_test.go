package bench

// Summarising the rounds of BenchmarkForwarding. On this 2-core machine one run
// of a path spreads more than the effects the bench is meant to show
// (bench/RESULTS.md: the OpenWire path gave 3,264–5,366 msg/s in three runs of
// the same code), so with -bench.repeat=N every mode×path runs N times, in
// interleaved rounds, and each figure is reported as its median and range over
// the rounds; the targets are judged on the medians. Everything here is pure
// (results in, numbers and lines out) and tested without a broker
// (rounds_unit_test.go).

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// spread is the median and range of one figure over the rounds that gave it.
type spread struct {
	median, min, max float64
	n                int // values: rounds that counted and measured the figure
}

// spreadOf summarises vals; with an even count the median is the mean of the
// two middle values.
func spreadOf(vals []float64) spread {
	if len(vals) == 0 {
		return spread{}
	}
	s := slices.Clone(vals)
	slices.Sort(s)
	mid := len(s) / 2
	m := s[mid]
	if len(s)%2 == 0 {
		m = (s[mid-1] + s[mid]) / 2
	}
	return spread{median: m, min: s[0], max: s[len(s)-1], n: len(s)}
}

// describe writes s for a target line: with one round as the bare figure (the
// format of single-run tables), else as its median and range, saying how many
// rounds it rests on when some did not count.
func (s spread) describe(f func(float64) string, rounds int) string {
	if rounds == 1 {
		return f(s.median)
	}
	over := fmt.Sprintf("%d rounds", s.n)
	if s.n != rounds {
		over = fmt.Sprintf("%d of %d rounds", s.n, rounds)
	}
	return fmt.Sprintf("median %s (%s–%s over %s)", f(s.median), f(s.min), f(s.max), over)
}

// cell writes s for the summary table: median (min–max), or "-" if no round
// measured it.
func (s spread) cell(f func(float64) string) string {
	switch s.n {
	case 0:
		return "-"
	case 1:
		return f(s.median)
	}
	return fmt.Sprintf("%s (%s–%s)", f(s.median), f(s.min), f(s.max))
}

func fmtRate(v float64) string   { return fmt.Sprintf("%.0f", v) }
func fmtRatio(v float64) string  { return fmt.Sprintf("%.2f", v) }
func fmtTimes(v float64) string  { return fmt.Sprintf("%.2fx", v) }
func fmtDurNs(v float64) string  { return fmtDur(time.Duration(v)) }
func fmtMicros(v float64) string { return fmt.Sprintf("%.1fµs", v) }
func fmtMiB(v float64) string    { return fmt.Sprintf("%.1fMiB", v) }

// counted reports whether r's figures enter the medians. A run that failed
// (did not complete, lost or duplicated messages, the bridge died or exited
// badly) is shown in the per-run table, its losses are summed, but its
// figures are not: they may describe half a run.
func (r *result) counted() bool { return r.failed == "" && r.rate > 0 }

// label is r's path as the per-run tables show it: with the round when there
// are several, e.g. "brokernet #2".
func (r *result) label(rounds int) string {
	if rounds > 1 {
		return fmt.Sprintf("%s #%d", r.path, r.round)
	}
	return r.path
}

// rowRounds is one mode×path of a table with its run of each round.
type rowRounds struct {
	mode, path string
	runs       []*result // in round order
}

// groupRounds gathers the runs of each mode×path, rows in the order they first
// appear, runs in round order.
func groupRounds(results []*result) []*rowRounds {
	var rows []*rowRounds
	for _, r := range results {
		i := slices.IndexFunc(rows, func(g *rowRounds) bool { return g.mode == r.mode && g.path == r.path })
		if i < 0 {
			rows = append(rows, &rowRounds{mode: r.mode, path: r.path})
			i = len(rows) - 1
		}
		rows[i].runs = append(rows[i].runs, r)
	}
	for _, g := range rows {
		slices.SortStableFunc(g.runs, func(a, b *result) int { return a.round - b.round })
	}
	return rows
}

func findRow(rows []*rowRounds, mode, path string) *rowRounds {
	for _, g := range rows {
		if g.mode == mode && g.path == path {
			return g
		}
	}
	return nil
}

// failedRuns counts g's runs that do not count.
func (g *rowRounds) failedRuns() int {
	n := 0
	for _, r := range g.runs {
		if !r.counted() {
			n++
		}
	}
	return n
}

// figure is the spread of f over g's counted runs; f says whether the run
// measured the figure at all (bridge CPU only exists on bridged paths).
func (g *rowRounds) figure(f func(*result) (float64, bool)) spread {
	var vals []float64
	for _, r := range g.runs {
		if !r.counted() {
			continue
		}
		if v, ok := f(r); ok {
			vals = append(vals, v)
		}
	}
	return spreadOf(vals)
}

// ratio is the spread of f(num)/f(den) taken per round: the two runs of one
// round ran minutes apart on the same machine state, the runs of different
// rounds need not have. Rounds where either run did not count or did not
// measure the figure, or f(den) is not positive, are left out.
func ratio(num, den *rowRounds, f func(*result) (float64, bool)) spread {
	var vals []float64
	for _, n := range num.runs {
		nv, ok := f(n)
		if !n.counted() || !ok {
			continue
		}
		for _, d := range den.runs {
			if dv, ok := f(d); d.round == n.round && d.counted() && ok && dv > 0 {
				vals = append(vals, nv/dv)
			}
		}
	}
	return spreadOf(vals)
}

func always(f func(*result) float64) func(*result) (float64, bool) {
	return func(r *result) (float64, bool) { return f(r), true }
}

func rateOf(r *result) float64 { return r.rate }
func sp50Of(r *result) float64 { return float64(r.sp50) }
func sp99Of(r *result) float64 { return float64(r.sp99) }

// bridgeCPUOf is the bridge's whole-life CPU per forwarded message, in µs.
func bridgeCPUOf(r *result) (float64, bool) {
	return float64(r.bridgeCPUPerMsg()) / 1e3, r.bridged() && r.bridgeMsgs > 0
}

func bridgeRSSOf(r *result) (float64, bool) {
	return float64(r.bridgeRSS) / 1024, r.bridged() && r.bridgeMsgs > 0
}

// pacedOf returns f for runs whose paced phase measured latencies.
func pacedOf(f func(*result) float64) func(*result) (float64, bool) {
	return func(r *result) (float64, bool) { return f(r), r.steadyN > 0 && r.sp50 > 0 }
}

// minimalOf returns f of the go-stomp pair's faster full-speed phase, for runs
// where the pair ran.
func minimalOf(f func(*result, *minimalRun) float64) func(*result) (float64, bool) {
	return func(r *result) (float64, bool) {
		m := r.bestMinimal()
		if m == nil || m.rate <= 0 {
			return 0, false
		}
		return f(r, m), true
	}
}

// verdict is one target line and whether it passed.
type verdict struct {
	line string
	pass bool
}

// Targets of issue 10, judged on the medians.
const (
	targetP50Paced      = 2 * time.Millisecond
	targetP99VsNative   = 1.5
	targetBridgeCPU     = 30.0 // µs per message
	targetRatioNPMin    = 0.8
	targetRatioPersiMin = 1.5
)

// judgeTargets judges issue 10's targets for the bridged paths against native
// on the medians of rows (one table: one broker setting, every round), and
// the zero-loss target on every run of every round. rate is the paced phase's
// msg/s, for the labels.
func judgeTargets(rows []*rowRounds, rounds int, rate float64) []verdict {
	var out []verdict
	noData := func(what string, g ...*rowRounds) verdict {
		failed := 0
		for _, x := range g {
			failed += x.failedRuns()
		}
		return verdict{line: fmt.Sprintf("target %s: MISS, no round measured it (%d failed runs)", what, failed)}
	}
	targets := []struct {
		mode string
		min  float64
	}{{modeNonPersistent, targetRatioNPMin}, {modePersistent, targetRatioPersiMin}}
	for _, path := range []string{"brokernet", "brokernet-openwire"} {
		for _, t := range targets {
			bn, nat := findRow(rows, t.mode, path), findRow(rows, t.mode, "native")
			if bn == nil || nat == nil {
				continue
			}
			what := fmt.Sprintf("%s %s/native >= %.1f", t.mode, path, t.min)
			s := ratio(bn, nat, always(rateOf))
			if s.n == 0 {
				out = append(out, noData(what, bn, nat))
				continue
			}
			pass := s.median >= t.min
			out = append(out, verdict{fmt.Sprintf("target %s: %s %s", what, s.describe(fmtRatio, rounds), passMiss(pass)), pass})
		}
		bn := findRow(rows, modeNonPersistent, path)
		if bn == nil {
			continue
		}
		what := fmt.Sprintf("non-persistent %s p50 at %.0f msg/s < 2ms", path, rate)
		if s := bn.figure(pacedOf(sp50Of)); s.n == 0 {
			out = append(out, noData(what, bn))
		} else {
			pass := s.median < float64(targetP50Paced)
			out = append(out, verdict{fmt.Sprintf("target %s: %s %s", what, s.describe(fmtDurNs, rounds), passMiss(pass)), pass})
		}
		if nat := findRow(rows, modeNonPersistent, "native"); nat != nil {
			what := fmt.Sprintf("non-persistent %s p99 at %.0f msg/s <= 1.5x native", path, rate)
			s := ratio(bn, nat, pacedOf(sp99Of))
			if s.n == 0 {
				out = append(out, noData(what, bn, nat))
			} else {
				pass := s.median <= targetP99VsNative
				natS, bnS := nat.figure(pacedOf(sp99Of)), bn.figure(pacedOf(sp99Of))
				var line string
				if rounds == 1 {
					line = fmt.Sprintf("target %s (%s): %s, %.2fx %s", what, fmtDurNs(natS.median), fmtDurNs(bnS.median), s.median, passMiss(pass))
				} else {
					line = fmt.Sprintf("target %s: %s; p99 median %s, native %s %s", what, s.describe(fmtTimes, rounds), fmtDurNs(bnS.median), fmtDurNs(natS.median), passMiss(pass))
				}
				out = append(out, verdict{line, pass})
			}
		}
		if slices.ContainsFunc(bn.runs, func(r *result) bool { return r.bridged() }) {
			what := fmt.Sprintf("non-persistent %s bridge CPU <= 30µs/msg (whole life)", path)
			if s := bn.figure(bridgeCPUOf); s.n == 0 {
				out = append(out, noData(what, bn))
			} else {
				pass := s.median <= targetBridgeCPU
				out = append(out, verdict{fmt.Sprintf("target %s: %s %s", what, s.describe(fmtMicros, rounds), passMiss(pass)), pass})
			}
		}
	}
	out = append(out, judgeLoss(rows, rounds))
	return out
}

// judgeLoss is the zero-loss target over every run of every round, failed
// ones included: a loss in any round is a loss.
func judgeLoss(rows []*rowRounds, rounds int) verdict {
	var bad []string
	for _, g := range rows {
		for _, r := range g.runs {
			name := r.mode + "/" + r.label(rounds)
			switch {
			case r.rate == 0:
				bad = append(bad, name+"(did not complete)")
			case r.lost > 0 || r.dups > 0 || r.bad > 0 || r.foreign > 0:
				bad = append(bad, fmt.Sprintf("%s(lost %d dup %d)", name, r.lost, r.dups))
			}
			if r.minLost > 0 || r.minDups > 0 || r.minBad > 0 || r.minForeign > 0 {
				bad = append(bad, fmt.Sprintf("%s go-stomp pair(lost %d dup %d)", name, r.minLost, r.minDups))
			}
		}
	}
	if len(bad) == 0 {
		return verdict{"target zero loss, no duplicates (all paths): PASS", true}
	}
	return verdict{"target zero loss, no duplicates: MISS *** " + strings.Join(bad, ", ") + " ***", false}
}

// generatorChecks compares the harness with the go-stomp pair on each row that
// ran the pair: the harness's faster full-speed phase over the pair's faster
// phase of the same run (pair, harness, harness, pair: like with like), per
// round, judged on the median (generatorMinRatio).
func generatorChecks(rows []*rowRounds, rounds int) []verdict {
	var out []verdict
	for _, g := range rows {
		wanted := slices.ContainsFunc(g.runs, func(r *result) bool { return r.minimalWanted })
		if !wanted {
			continue
		}
		if i := slices.IndexFunc(g.runs, func(r *result) bool { return r.minimalSkippedReason != "" }); i >= 0 {
			out = append(out, verdict{fmt.Sprintf("generator check %s/%s: go-stomp pair not run (%s)", g.mode, g.path, g.runs[i].minimalSkippedReason), true})
			continue
		}
		s := g.figure(minimalOf(func(r *result, m *minimalRun) float64 { rate, _ := r.bestHarness(); return rate / m.rate }))
		if s.n == 0 {
			var why []string
			for _, r := range g.runs {
				why = append(why, firstNonEmpty(r.minFailed, r.failed, "path did not complete"))
			}
			out = append(out, verdict{line: fmt.Sprintf("generator check %s/%s: MISS, no comparison (%s)", g.mode, g.path, strings.Join(slices.Compact(why), "; "))})
			continue
		}
		pass := s.median >= generatorMinRatio
		if rounds == 1 {
			// The single run's figures, as the table has always shown them.
			r := g.runs[slices.IndexFunc(g.runs, func(r *result) bool { return r.counted() && r.bestMinimal() != nil })]
			m := r.bestMinimal()
			rate, hs := r.bestHarness()
			var each []string
			for _, x := range r.minRuns {
				each = append(each, fmt.Sprintf("%s %.0f", x.when, x.rate))
			}
			out = append(out, verdict{fmt.Sprintf("generator check %s/%s: harness %.0f msg/s (runs %.0f, %.0f), go-stomp pair %.0f msg/s (%s), ratio %.2f (>= %.2f): %s; bench CPU %s vs %s µs/msg, brokers %s vs %s µs/msg",
				r.mode, r.path, rate, r.rate, r.rateAgain, m.rate, strings.Join(each, ", "), s.median, generatorMinRatio, passMiss(pass),
				perMsg(hs.cpu.Bench, hs.n), perMsg(m.stats.cpu.Bench, m.stats.n),
				perMsg(hs.cpu.BrokerA+hs.cpu.BrokerB, hs.n), perMsg(m.stats.cpu.BrokerA+m.stats.cpu.BrokerB, m.stats.n)), pass})
			continue
		}
		harness := g.figure(minimalOf(func(r *result, _ *minimalRun) float64 { rate, _ := r.bestHarness(); return rate }))
		pair := g.figure(minimalOf(func(_ *result, m *minimalRun) float64 { return m.rate }))
		benchCPU := g.figure(minimalOf(func(r *result, _ *minimalRun) float64 {
			_, hs := r.bestHarness()
			return usPerMsg(hs.cpu.Bench, hs.n)
		}))
		pairCPU := g.figure(minimalOf(func(_ *result, m *minimalRun) float64 { return usPerMsg(m.stats.cpu.Bench, m.stats.n) }))
		brokers := g.figure(minimalOf(func(r *result, _ *minimalRun) float64 {
			_, hs := r.bestHarness()
			return usPerMsg(hs.cpu.BrokerA+hs.cpu.BrokerB, hs.n)
		}))
		pairBrokers := g.figure(minimalOf(func(_ *result, m *minimalRun) float64 {
			return usPerMsg(m.stats.cpu.BrokerA+m.stats.cpu.BrokerB, m.stats.n)
		}))
		out = append(out, verdict{fmt.Sprintf("generator check %s/%s: harness/go-stomp pair ratio %s (>= %.2f): %s; harness median %.0f msg/s, go-stomp pair median %.0f msg/s (each side's faster run: pair, harness, harness, pair); bench CPU median %.0f vs %.0f µs/msg, brokers %.0f vs %.0f µs/msg",
			g.mode, g.path, s.describe(fmtRatio, rounds), generatorMinRatio, passMiss(pass),
			harness.median, pair.median, benchCPU.median, pairCPU.median, brokers.median, pairBrokers.median), pass})
	}
	return out
}

// printSummary writes the summary table of rows over rounds: per mode×path the
// median (min–max) of each figure over the rounds that counted, losses summed
// over all rounds.
func printSummary(w io.Writer, rows []*rowRounds, rounds int, rateCol string) {
	fmt.Fprintf(w, "summary over %d interleaved rounds: median (min–max) over the rounds that counted; a failed run is not counted; lost/dup summed over all rounds\n", rounds)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join([]string{"mode", "path", "rounds", "msgs/s", "p50(full)", "p99(full)", "p50" + rateCol, "p99" + rateCol, "lost", "dup", "bridgeCPU/msg", "bridgeRSS"}, "\t"))
	for _, g := range rows {
		lost, dups := 0, 0
		for _, r := range g.runs {
			lost += r.lost
			dups += r.dups
		}
		counted := len(g.runs) - g.failedRuns()
		n := fmt.Sprintf("%d/%d", counted, len(g.runs))
		if counted < len(g.runs) {
			n += fmt.Sprintf(" (%d failed)", len(g.runs)-counted)
		}
		fmt.Fprintln(tw, strings.Join([]string{g.mode, g.path, n,
			g.figure(always(rateOf)).cell(fmtRate),
			g.figure(always(func(r *result) float64 { return float64(r.p50) })).cell(fmtDurNs),
			g.figure(always(func(r *result) float64 { return float64(r.p99) })).cell(fmtDurNs),
			g.figure(pacedOf(sp50Of)).cell(fmtDurNs),
			g.figure(pacedOf(sp99Of)).cell(fmtDurNs),
			fmt.Sprint(lost), fmt.Sprint(dups),
			g.figure(bridgeCPUOf).cell(fmtMicros),
			g.figure(bridgeRSSOf).cell(fmtMiB)}, "\t"))
		if pair := g.figure(minimalOf(func(_ *result, m *minimalRun) float64 { return m.rate })); pair.n > 0 {
			minLost, minDups := 0, 0
			for _, r := range g.runs {
				minLost += r.minLost
				minDups += r.minDups
			}
			fmt.Fprintln(tw, strings.Join([]string{g.mode, g.path + " (go-stomp, faster)", fmt.Sprintf("%d/%d", pair.n, len(g.runs)),
				pair.cell(fmtRate),
				g.figure(minimalOf(func(_ *result, m *minimalRun) float64 { return float64(m.p50) })).cell(fmtDurNs),
				g.figure(minimalOf(func(_ *result, m *minimalRun) float64 { return float64(m.p99) })).cell(fmtDurNs),
				"-", "-", fmt.Sprint(minLost), fmt.Sprint(minDups), "-", "-"}, "\t"))
		}
	}
	tw.Flush()
}
