package main

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/brokernet/brokernet/internal/testkit/netsim"
)

var palette = []color.Color{
	color.RGBA{0x1f, 0x77, 0xb4, 0xff}, color.RGBA{0xd6, 0x27, 0x28, 0xff},
	color.RGBA{0x2c, 0xa0, 0x2c, 0xff}, color.RGBA{0x94, 0x67, 0xbd, 0xff},
}

// series is one line of a plot.
type series struct {
	name   string
	pts    plotter.XYs
	dashed bool
	color  int
}

func linePlot(path, title, xlabel, ylabel string, logX, logY bool, ss []series) error {
	p := plot.New()
	p.Title.Text, p.X.Label.Text, p.Y.Label.Text = title, xlabel, ylabel
	if logX {
		p.X.Scale, p.X.Tick.Marker = plot.LogScale{}, ticks125{}
	}
	if logY {
		p.Y.Scale, p.Y.Tick.Marker = plot.LogScale{}, ticks125{}
	}
	p.Legend.Top, p.Legend.Left = true, true
	p.Add(plotter.NewGrid())
	for _, s := range ss {
		if len(s.pts) == 0 {
			continue
		}
		l, pts, err := plotter.NewLinePoints(s.pts)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		c := palette[s.color%len(palette)]
		l.Color, pts.Color = c, c
		l.Width = vg.Points(1.5)
		pts.Shape = draw.CircleGlyph{}
		if s.dashed {
			l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		}
		p.Add(l, pts)
		p.Legend.Add(s.name, l, pts)
	}
	return p.Save(6*vg.Inch, 4*vg.Inch, path)
}

// byN returns, per topology, the points (N, f) of the results keep selects.
func byN(rs []netsim.Result, keep func(netsim.Config) bool, f func(netsim.Result) float64, suffix string, dashed bool) []series {
	var out []series
	for i, tp := range topos {
		s := series{name: tp.name + suffix, dashed: dashed, color: i}
		for _, r := range rs {
			if topoName(r.Config) == tp.name && keep(r.Config) && r.Err == nil && f(r) > 0 {
				s.pts = append(s.pts, plotter.XY{X: float64(r.Config.Brokers), Y: f(r)})
			}
		}
		out = append(out, s)
	}
	return out
}

func (o options) plots(dir string, sw sweeps) error {
	ttl3 := func(c netsim.Config) bool { return c.NetworkTTL == 3 && c.Suppress }
	build := func(c netsim.Config) bool { return variantName(c) == "ttl 3" }
	msOf := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

	subs := append(
		byN(sw.single, ttl3, func(r netsim.Result) float64 { return float64(r.Appear.Subs) }, ": one consumer", false),
		byN(sw.load, build, func(r netsim.Result) float64 { return float64(r.Background.Subs) / float64(r.Config.Brokers) }, ": build, per broker", true)...)
	if err := linePlot(filepath.Join(dir, "sim-subs.png"), "Demand subscriptions (networkTTL 3, suppression)",
		"brokers N", "subscriptions", true, true, subs); err != nil {
		return err
	}
	adv := append(
		byN(sw.single, ttl3, func(r netsim.Result) float64 { return float64(r.Appear.Delivered) }, ": one consumer", false),
		byN(sw.load, build, func(r netsim.Result) float64 { return float64(r.Background.Delivered) }, ": build", true)...)
	if err := linePlot(filepath.Join(dir, "sim-advisories.png"), "Advisories delivered (networkTTL 3, suppression)",
		"brokers N", "advisories", true, true, adv); err != nil {
		return err
	}
	conv := append(
		byN(sw.single, ttl3, func(r netsim.Result) float64 { return msOf(r.Appear.Converged) }, ": appear", false),
		byN(sw.single, ttl3, func(r netsim.Result) float64 { return msOf(r.Leave.Converged) }, ": leave", true)...)
	if err := linePlot(filepath.Join(dir, "sim-converge.png"), "Time to converge, one consumer (networkTTL 3)",
		"brokers N", "simulated ms", true, false, conv); err != nil {
		return err
	}
	nmax := 0
	for _, n := range o.n {
		nmax = max(nmax, n)
	}
	var ttl []series
	for i, tp := range topos {
		for _, suppress := range []bool{true, false} {
			name := tp.name
			if !suppress {
				name += ", no suppression"
			}
			s := series{name: name, dashed: !suppress, color: i}
			for _, r := range sw.single {
				c := r.Config
				n := o.ttlN(tp)
				if topoName(c) == tp.name && c.Suppress == suppress && c.Brokers == n && r.Err == nil && r.Appear.Subs > 0 {
					s.pts = append(s.pts, plotter.XY{X: float64(c.NetworkTTL), Y: float64(r.Appear.Subs)})
				}
			}
			ttl = append(ttl, s)
		}
	}
	return linePlot(filepath.Join(dir, "sim-ttl.png"), fmt.Sprintf("One consumer's demand subscriptions by networkTTL (N = %d; mesh %d)", nmax, o.ttlN(topos[3])),
		"networkTTL", "subscriptions", false, true, ttl)
}

// daemonPlot draws RSS and goroutines against connectors from the CSV that
// make scale-daemon writes, if it is there.
func daemonPlot(dir string) error {
	b, err := os.ReadFile(filepath.Join(dir, "daemon.csv"))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	recs, err := csv.NewReader(bytes.NewReader(b)).ReadAll()
	if err != nil {
		return fmt.Errorf("daemon.csv: %w", err)
	}
	var rss, gor series
	rss.name, gor.name, gor.color, gor.dashed = "RSS (MiB)", "goroutines ÷ 10", 1, true
	for _, r := range recs[1:] {
		if len(r) < 4 {
			return fmt.Errorf("daemon.csv: short row %v", r)
		}
		k, err1 := strconv.ParseFloat(r[0], 64)
		kib, err2 := strconv.ParseFloat(r[2], 64)
		g, err3 := strconv.ParseFloat(r[3], 64)
		if err := errors.Join(err1, err2, err3); err != nil {
			return fmt.Errorf("daemon.csv: %w", err)
		}
		rss.pts = append(rss.pts, plotter.XY{X: k, Y: kib / 1024})
		gor.pts = append(gor.pts, plotter.XY{X: k, Y: g / 10})
	}
	return linePlot(filepath.Join(dir, "daemon-rss.png"), "One brokernet run process: cost by bridges (make scale-daemon)",
		"connectors (one bridge each)", "MiB / goroutines ÷ 10", false, false, []series{rss, gor})
}

// ticks125 labels a log axis at 1, 2 and 5 times the powers of ten, as
// plot.LogTicks labels only the powers themselves.
type ticks125 struct{}

func (ticks125) Ticks(lo, hi float64) []plot.Tick {
	var out []plot.Tick
	for p := math.Pow(10, math.Floor(math.Log10(lo))); p <= hi; p *= 10 {
		for _, m := range []float64{1, 2, 5} {
			if v := p * m; v >= lo && v <= hi {
				out = append(out, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'f', -1, 64)})
			}
		}
	}
	return out
}

// readSweeps rebuilds, from the CSV a previous run wrote, what the plots need.
func readSweeps(path string) (sweeps, error) {
	var sw sweeps
	b, err := os.ReadFile(path)
	if err != nil {
		return sw, err
	}
	recs, err := csv.NewReader(bytes.NewReader(b)).ReadAll()
	if err != nil || len(recs) < 2 {
		return sw, fmt.Errorf("%s: %v (%d rows)", path, err, len(recs))
	}
	col := map[string]int{}
	for i, h := range recs[0] {
		col[h] = i
	}
	for _, rec := range recs[1:] {
		f := func(name string) float64 { v, _ := strconv.ParseFloat(rec[col[name]], 64); return v }
		ms := func(name string) time.Duration { return time.Duration(f(name) * float64(time.Millisecond)) }
		tp, degree, err := netsim.ParseTopology(rec[col["topology"]])
		if err != nil {
			return sw, err
		}
		var r netsim.Result
		r.Config = netsim.DefaultConfig()
		r.Config.Topology, r.Config.Degree, r.Config.Brokers, r.Config.NetworkTTL = tp, degree, int(f("n")), int(f("ttl"))
		r.Config.Suppress, r.Config.Conduit = rec[col["suppress"]] == "true", rec[col["conduit"]] == "true"
		if e := rec[col["error"]]; e != "" {
			r.Err = errors.New(e)
		}
		r.Appear.Subs, r.Appear.Delivered, r.Appear.Converged = int(f("appear_subs")), int64(f("appear_delivered")), ms("appear_ms")
		r.Leave.Converged = ms("leave_ms")
		r.Background.Subs, r.Background.Delivered = int(f("build_subs")), int64(f("build_delivered"))
		if rec[col["sweep"]] == "single" {
			sw.single = append(sw.single, r)
		} else {
			sw.load = append(sw.load, r)
		}
	}
	return sw, nil
}
