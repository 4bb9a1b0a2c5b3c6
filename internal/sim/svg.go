package sim

import (
	"fmt"
	"html"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/idlegrid/idlegrid"
)

// The plots are SVG written by hand: a line chart over time with a legend,
// readable in any browser and small enough to commit.

// series is one line of a chart. NaN values are gaps.
type series struct {
	name   string
	color  string
	values []float64
	fill   bool // an area down to zero, under the lines
	dashed bool
}

type chart struct {
	title  string
	start  time.Time
	panels []*panel
}

// panel is one plot of a chart; the panels share the time axis.
type panel struct {
	subtitle, yLabel string
	step             time.Duration // between values
	series           []series
	yFormat          func(float64) string
	yMax             float64 // 0: from the data
}

// palette is Tableau 10, distinguishable in colour and in greyscale order.
var palette = []string{"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"}

const (
	svgW                           = 980
	padL, padR, padT, padB         = 78, 220, 64, 56
	plotW, panelH, panelGap        = svgW - padL - padR, 300, 44
	fontFamily                     = "system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif"
	axisColor, gridColor, textFill = "#444", "#e4e4e4", "#222"
)

func (c *chart) write(w io.Writer) error {
	h := padT + padB + len(c.panels)*panelH + (len(c.panels)-1)*panelGap
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="%s">`+"\n", svgW, h, svgW, h, fontFamily)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="#fff"/>`+"\n", svgW, h)
	fmt.Fprintf(&b, `<text x="%d" y="26" font-size="17" font-weight="600" fill="%s">%s</text>`+"\n", padL, textFill, html.EscapeString(c.title))
	for i, p := range c.panels {
		p.draw(&b, c.start, padT+i*(panelH+panelGap))
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="12" text-anchor="middle" fill="%s">time (UTC), %s</text>`+"\n",
		padL+plotW/2, h-12, textFill, c.start.Format("2006"))
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// draw draws the panel with its top at top.
func (p *panel) draw(b *strings.Builder, start time.Time, top int) {
	n := 0
	high := 0.0
	for _, s := range p.series {
		n = max(n, len(s.values))
		for _, v := range s.values {
			if !math.IsNaN(v) {
				high = max(high, v)
			}
		}
	}
	yMax, yStep := niceScale(high)
	if p.yMax > 0 {
		yMax, yStep = niceScale(p.yMax)
	}
	end := start.Add(time.Duration(n) * p.step)
	x := func(i float64) float64 { return padL + plotW*i/math.Max(float64(n), 1) }
	y := func(v float64) float64 { return float64(top) + panelH - panelH*min(v, yMax)/yMax }
	if p.subtitle != "" {
		fmt.Fprintf(b, `<text x="%d" y="%d" font-size="13" fill="%s">%s</text>`+"\n", padL, top-8, textFill, html.EscapeString(p.subtitle))
	}
	for v := 0.0; v <= yMax+yStep/2; v += yStep {
		fmt.Fprintf(b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="%s"/>`+"\n", padL, padL+plotW, y(v), y(v), gridColor)
		fmt.Fprintf(b, `<text x="%d" y="%.1f" font-size="12" text-anchor="end" fill="%s">%s</text>`+"\n", padL-8, y(v)+4, textFill, p.yFormat(v))
	}
	fmt.Fprintf(b, `<text transform="translate(18 %d) rotate(-90)" font-size="13" text-anchor="middle" fill="%s">%s</text>`+"\n",
		top+panelH/2, textFill, html.EscapeString(p.yLabel))
	tick, layout := timeTicks(end.Sub(start))
	for t := start.Truncate(tick); !t.After(end); t = t.Add(tick) {
		if t.Before(start) {
			continue
		}
		px := x(float64(t.Sub(start)) / float64(p.step))
		fmt.Fprintf(b, `<line x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="%s"/>`+"\n", px, px, top, top+panelH, gridColor)
		fmt.Fprintf(b, `<text x="%.1f" y="%d" font-size="12" text-anchor="middle" fill="%s">%s</text>`+"\n", px, top+panelH+18, textFill, t.Format(layout))
	}
	for k, s := range p.series {
		if s.fill {
			writeArea(b, s, x, y, colorOf(s, k))
		}
	}
	for k, s := range p.series {
		if !s.fill {
			writeLine(b, s, x, y, colorOf(s, k))
		}
	}
	fmt.Fprintf(b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="%s"/>`+"\n", padL, top, plotW, panelH, axisColor)
	for k, s := range p.series {
		ly := top + 8 + 22*k
		col := colorOf(s, k)
		if s.fill {
			fmt.Fprintf(b, `<rect x="%d" y="%d" width="22" height="12" fill="%s" fill-opacity="0.35" stroke="%s"/>`+"\n", padL+plotW+16, ly-6, col, col)
		} else {
			fmt.Fprintf(b, `<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="%s" stroke-width="2.5"%s/>`+"\n", padL+plotW+16, padL+plotW+38, ly, ly, col, dash(s))
		}
		fmt.Fprintf(b, `<text x="%d" y="%d" font-size="13" fill="%s">%s</text>`+"\n", padL+plotW+46, ly+4, textFill, html.EscapeString(s.name))
	}
}

func colorOf(s series, k int) string {
	if s.color != "" {
		return s.color
	}
	return palette[k%len(palette)]
}

func dash(s series) string {
	if s.dashed {
		return ` stroke-dasharray="6 4"`
	}
	return ""
}

// writeLine draws a series as polylines, broken at gaps; each value sits
// in the middle of its bin.
func writeLine(b *strings.Builder, s series, x, y func(float64) float64, col string) {
	var pts [][2]float64
	flush := func() {
		switch {
		case len(pts) == 1:
			fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="2.5" fill="%s"/>`+"\n", pts[0][0], pts[0][1], col)
		case len(pts) > 1:
			fmt.Fprintf(b, `<polyline fill="none" stroke="%s" stroke-width="2" stroke-linejoin="round"%s points="`, col, dash(s))
			for i, p := range pts {
				if i > 0 {
					b.WriteByte(' ')
				}
				fmt.Fprintf(b, "%.1f,%.1f", p[0], p[1])
			}
			b.WriteString("\"/>\n")
		}
		pts = pts[:0]
	}
	for i, v := range s.values {
		if math.IsNaN(v) {
			flush()
			continue
		}
		pts = append(pts, [2]float64{x(float64(i) + 0.5), y(v)})
	}
	flush()
}

func writeArea(b *strings.Builder, s series, x, y func(float64) float64, col string) {
	if len(s.values) == 0 {
		return
	}
	pts := []string{fmt.Sprintf("%.1f,%.1f", x(0), y(0))}
	for i, v := range s.values {
		if math.IsNaN(v) {
			v = 0
		}
		pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(float64(i)), y(v)), fmt.Sprintf("%.1f,%.1f", x(float64(i+1)), y(v)))
	}
	pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(float64(len(s.values))), y(0)))
	fmt.Fprintf(b, `<polygon fill="%s" fill-opacity="0.35" stroke="%s" stroke-width="1" points="%s"/>`+"\n", col, col, strings.Join(pts, " "))
}

// niceScale returns an axis maximum at or above top and a step of 1, 2 or
// 5 times a power of ten, for four to eight gridlines.
func niceScale(top float64) (yMax, step float64) {
	if top <= 0 {
		return 1, 0.25
	}
	raw := top / 5
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if step = m * mag; step >= raw {
			break
		}
	}
	return math.Ceil(top/step) * step, step
}

// timeTicks picks a tick interval for a span, and how to label ticks.
func timeTicks(span time.Duration) (time.Duration, string) {
	for _, t := range []struct {
		d      time.Duration
		layout string
	}{
		{time.Hour, "Jan 2 15:04"}, {3 * time.Hour, "Jan 2 15:04"}, {6 * time.Hour, "Jan 2 15:04"},
		{12 * time.Hour, "Jan 2 15:04"}, {24 * time.Hour, "Jan 2"}, {2 * 24 * time.Hour, "Jan 2"},
		{4 * 24 * time.Hour, "Jan 2"}, {7 * 24 * time.Hour, "Jan 2"}, {14 * 24 * time.Hour, "Jan 2"},
	} {
		if span/t.d <= 8 {
			return t.d, t.layout
		}
	}
	return 30 * 24 * time.Hour, "Jan 2006"
}

// WritePlots writes utilisation.svg, prices.svg and queue.svg into dir
// and returns their paths.
func (r *Result) WritePlots(dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	charts := map[string]*chart{
		"utilisation.svg": r.utilisationChart(),
		"prices.svg":      r.priceChart(),
		"queue.svg":       r.queueChart(),
	}
	var paths []string
	for _, name := range slices.Sorted(maps.Keys(charts)) {
		p := filepath.Join(dir, name)
		f, err := os.Create(p)
		if err != nil {
			return paths, err
		}
		err = charts[name].write(f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return paths, err
		}
		paths = append(paths, p)
	}
	return paths, nil
}

func (r *Result) panel(yLabel string, step time.Duration) *panel {
	return &panel{yLabel: yLabel, step: step, yFormat: trimFloat}
}

func (r *Result) bin() time.Duration { return time.Duration(r.World.BinSeconds) * time.Second }

// utilisationChart: GPUs offered (area) and leased by each run, averaged
// over each bin; below, the share of the offered GPUs leased.
func (r *Result) utilisationChart() *chart {
	bin := float64(r.World.BinSeconds)
	perBin := func(xs []int64) []float64 {
		out := make([]float64, len(xs))
		for i, v := range xs {
			out[i] = float64(v) / bin
		}
		return out
	}
	gpus := r.panel("GPUs (average over each bin)", r.bin())
	gpus.subtitle = "GPUs offered and leased"
	gpus.series = append(gpus.series, series{name: "offered", color: "#bab0ac", values: perBin(r.World.OfferedSeries), fill: true})
	share := r.panel("leased ÷ offered", r.bin())
	share.subtitle = "Utilisation: the share of offered GPUs leased"
	share.yFormat = func(v float64) string { return trimFloat(100*v) + "%" }
	for k, m := range r.Runs {
		col := palette[k%len(palette)]
		gpus.series = append(gpus.series, series{name: m.Name, color: col, values: perBin(m.UsedSeries), dashed: k > 0})
		u := make([]float64, len(m.UsedSeries))
		for i, v := range m.UsedSeries {
			u[i] = math.NaN()
			if o := r.World.OfferedSeries[i]; o > 0 {
				u[i] = float64(v) / float64(o)
			}
		}
		share.series = append(share.series, series{name: m.Name, color: col, values: u, dashed: k > 0})
	}
	return &chart{title: "Utilisation", start: r.World.Start, panels: []*panel{gpus, share}}
}

// priceChart: the engine's median clearing price per GPU model in each
// price bin (the first run's, when the engine did not run).
func (r *Result) priceChart() *chart {
	m := r.Run(RunEngine)
	if m == nil && len(r.Runs) > 0 {
		m = r.Runs[0]
	}
	name := ""
	if m != nil {
		name = m.Name
	}
	p := r.panel("$ per GPU-hour (median in each bin)", r.bin())
	p.yFormat = func(v float64) string { return "$" + trimFloat(v) }
	c := &chart{title: "Clearing prices per GPU model (" + name + ")", start: r.World.Start, panels: []*panel{p}}
	if m == nil {
		return c
	}
	p.step = time.Duration(m.PriceBinSeconds) * time.Second
	for _, model := range slices.Sorted(maps.Keys(m.PriceSeries)) {
		ps := m.PriceSeries[model]
		vals := make([]float64, len(ps))
		for i, v := range ps {
			vals[i] = math.NaN()
			if v > 0 {
				vals[i] = float64(v) / float64(idlegrid.MicrosPerUnit)
			}
		}
		p.series = append(p.series, series{name: model, values: vals})
	}
	return c
}

// queueChart: jobs waiting per tier, for the engine (solid) and the
// pay-as-bid baseline (dashed) when they ran.
func (r *Result) queueChart() *chart {
	p := r.panel("jobs waiting (end of each bin)", r.bin())
	colors := map[idlegrid.Tier]string{idlegrid.TierGold: "#d4a017", idlegrid.TierSilver: "#7f8c8d", idlegrid.TierBronze: "#a0522d"}
	for k, name := range []string{RunEngine, RunPayAsBid} {
		m := r.Run(name)
		if m == nil {
			continue
		}
		for t, tier := range idlegrid.Tiers {
			vals := make([]float64, len(m.QueueSeries[t]))
			for i, v := range m.QueueSeries[t] {
				vals[i] = float64(v)
			}
			p.series = append(p.series, series{name: string(tier) + ": " + name, color: colors[tier], values: vals, dashed: k > 0})
		}
	}
	return &chart{title: "Jobs queued per tier", start: r.World.Start, panels: []*panel{p}}
}

func trimFloat(v float64) string {
	s := fmt.Sprintf("%.2f", v)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	if v >= 1000 {
		return grouped(int64(v))
	}
	return s
}
