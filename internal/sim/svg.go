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
	title, yLabel string
	start         time.Time
	step          time.Duration // between values
	series        []series
	yFormat       func(float64) string
}

// palette is Tableau 10, distinguishable in colour and in greyscale order.
var palette = []string{"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"}

const (
	svgW, svgH                     = 980, 440
	padL, padR, padT, padB         = 78, 220, 48, 56
	plotW, plotH                   = svgW - padL - padR, svgH - padT - padB
	fontFamily                     = "system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif"
	axisColor, gridColor, textFill = "#444", "#e4e4e4", "#222"
)

func (c *chart) write(w io.Writer) error {
	n := 0
	top := 0.0
	for _, s := range c.series {
		n = max(n, len(s.values))
		for _, v := range s.values {
			if !math.IsNaN(v) {
				top = max(top, v)
			}
		}
	}
	yMax, yStep := niceScale(top)
	end := c.start.Add(time.Duration(n) * c.step)
	x := func(i float64) float64 { return padL + plotW*i/math.Max(float64(n), 1) }
	y := func(v float64) float64 { return padT + plotH - plotH*v/yMax }

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="%s">`+"\n", svgW, svgH, svgW, svgH, fontFamily)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="#fff"/>`+"\n", svgW, svgH)
	fmt.Fprintf(&b, `<text x="%d" y="28" font-size="17" font-weight="600" fill="%s">%s</text>`+"\n", padL, textFill, html.EscapeString(c.title))
	// y grid and labels
	for v := 0.0; v <= yMax+yStep/2; v += yStep {
		fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="%s"/>`+"\n", padL, padL+plotW, y(v), y(v), gridColor)
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" font-size="12" text-anchor="end" fill="%s">%s</text>`+"\n", padL-8, y(v)+4, textFill, c.yFormat(v))
	}
	fmt.Fprintf(&b, `<text transform="translate(18 %d) rotate(-90)" font-size="13" text-anchor="middle" fill="%s">%s</text>`+"\n",
		padT+plotH/2, textFill, html.EscapeString(c.yLabel))
	// x ticks
	tick, layout := timeTicks(end.Sub(c.start))
	for t := c.start.Truncate(tick); !t.After(end); t = t.Add(tick) {
		if t.Before(c.start) {
			continue
		}
		px := x(float64(t.Sub(c.start)) / float64(c.step))
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="%s"/>`+"\n", px, px, padT, padT+plotH, gridColor)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" font-size="12" text-anchor="middle" fill="%s">%s</text>`+"\n", px, padT+plotH+18, textFill, t.Format(layout))
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="12" text-anchor="middle" fill="%s">%s (UTC)</text>`+"\n",
		padL+plotW/2, svgH-12, textFill, c.start.Format("2006"))
	// series: areas first, then lines
	for k, s := range c.series {
		if s.fill {
			writeArea(&b, s, x, y, colorOf(s, k))
		}
	}
	for k, s := range c.series {
		if !s.fill {
			writeLine(&b, s, x, y, colorOf(s, k))
		}
	}
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="%s"/>`+"\n", padL, padT, plotW, plotH, axisColor)
	// legend
	for k, s := range c.series {
		ly := padT + 8 + 22*k
		col := colorOf(s, k)
		if s.fill {
			fmt.Fprintf(&b, `<rect x="%d" y="%d" width="22" height="12" fill="%s" fill-opacity="0.35" stroke="%s"/>`+"\n", padL+plotW+16, ly-6, col, col)
		} else {
			fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="%s" stroke-width="2.5"%s/>`+"\n", padL+plotW+16, padL+plotW+38, ly, ly, col, dash(s))
		}
		fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="13" fill="%s">%s</text>`+"\n", padL+plotW+46, ly+4, textFill, html.EscapeString(s.name))
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
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

func (r *Result) baseChart(title, yLabel string) *chart {
	return &chart{title: title, yLabel: yLabel, start: r.World.Start, step: time.Duration(r.World.BinSeconds) * time.Second,
		yFormat: func(v float64) string { return trimFloat(v) }}
}

// utilisationChart: GPUs offered (area) and leased by each run, averaged
// over each bin.
func (r *Result) utilisationChart() *chart {
	c := r.baseChart("GPUs offered and leased", "GPUs (average over each bin)")
	bin := float64(r.World.BinSeconds)
	perBin := func(xs []int64) []float64 {
		out := make([]float64, len(xs))
		for i, v := range xs {
			out[i] = float64(v) / bin
		}
		return out
	}
	c.series = append(c.series, series{name: "offered", color: "#bab0ac", values: perBin(r.World.OfferedSeries), fill: true})
	for k, m := range r.Runs {
		c.series = append(c.series, series{name: "leased: " + m.Name, color: palette[k%len(palette)], values: perBin(m.UsedSeries), dashed: k > 0})
	}
	return c
}

// priceChart: the engine's median clearing price per GPU model in each bin
// (the first run's, when the engine did not run).
func (r *Result) priceChart() *chart {
	m := r.Run(RunEngine)
	if m == nil && len(r.Runs) > 0 {
		m = r.Runs[0]
	}
	name := ""
	if m != nil {
		name = m.Name
	}
	c := r.baseChart("Clearing prices per GPU model ("+name+")", "$ per GPU-hour (median in each bin)")
	c.yFormat = func(v float64) string { return "$" + trimFloat(v) }
	if m == nil {
		return c
	}
	for _, model := range slices.Sorted(maps.Keys(m.PriceSeries)) {
		ps := m.PriceSeries[model]
		vals := make([]float64, len(ps))
		for i, p := range ps {
			vals[i] = math.NaN()
			if p > 0 {
				vals[i] = float64(p) / float64(idlegrid.MicrosPerUnit)
			}
		}
		c.series = append(c.series, series{name: model, values: vals})
	}
	return c
}

// queueChart: jobs waiting per tier, for the engine (solid) and the
// pay-as-bid baseline (dashed) when they ran.
func (r *Result) queueChart() *chart {
	c := r.baseChart("Jobs queued per tier", "jobs waiting (end of each bin)")
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
			c.series = append(c.series, series{name: string(tier) + ": " + name, color: colors[tier], values: vals, dashed: k > 0})
		}
	}
	return c
}

func trimFloat(v float64) string {
	s := fmt.Sprintf("%.2f", v)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	if v >= 1000 {
		return grouped(int64(v))
	}
	return s
}
