package sim

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/trace"
)

// Result is a simulation: the world replayed and each run's metrics, the
// engine's first when it ran.
type Result struct {
	World        WorldSummary
	Runs         []*Metrics
	Wall         time.Duration // building the world and every run (not reading the traces: ReadWall)
	ReadWall     time.Duration // reading the traces, when the caller says
	PeakRSSBytes uint64        // the process's peak resident memory; 0 where unknown
}

// WorldSummary says what was replayed.
type WorldSummary struct {
	DemandSource, SupplySource string
	Seed                       uint64
	Start, End                 time.Time
	Nodes, GPUs                int
	Jobs                       int
	OfferedGPUSeconds          int64
	BinSeconds                 int64
	OfferedSeries              []int64 // GPU-seconds offered per bin
	Models                     []ModelSummary
	Regions                    []string // the nodes', sorted
	Notes                      []string
	// DemandReport, SupplyReport and PricesReport say what the reads of
	// the traces and the price tables left out or changed.
	DemandReport, SupplyReport, PricesReport trace.Report
	BuildWall                                time.Duration
}

// ModelSummary is one GPU model of the world, and how it was priced.
type ModelSummary struct {
	Model            string
	Nodes, GPUs      int
	OnDemand, Market idlegrid.Micros // per GPU-hour
	Proxied          bool            // the on-demand price is a stand-in
}

func (w *world) summary() WorldSummary {
	s := WorldSummary{
		DemandSource: w.cfg.Demand.Source, SupplySource: w.cfg.Supply.Source, Seed: w.cfg.Seed,
		Start: at(w.start), End: at(w.end), Nodes: len(w.nodes), Jobs: len(w.jobs),
		OfferedGPUSeconds: w.offered, BinSeconds: w.binSeconds, OfferedSeries: w.offeredBins,
		Notes: w.notes, DemandReport: w.demandReport, SupplyReport: w.supplyReport, PricesReport: w.pricesReport,
	}
	byModel := map[string]*ModelSummary{}
	regions := map[string]bool{}
	for _, n := range w.nodes {
		s.GPUs += n.gpus
		regions[n.region] = true
		m := byModel[n.model]
		if m == nil {
			m = &ModelSummary{Model: n.model, OnDemand: w.onDemand[n.model], Market: w.market[n.model], Proxied: slices.Contains(w.proxied, n.model)}
			byModel[n.model] = m
		}
		m.Nodes++
		m.GPUs += n.gpus
	}
	for _, k := range slices.Sorted(maps.Keys(byModel)) {
		s.Models = append(s.Models, *byModel[k])
	}
	slices.SortStableFunc(s.Models, func(a, b ModelSummary) int { return b.GPUs - a.GPUs })
	s.Regions = slices.Sorted(maps.Keys(regions))
	return s
}

// Run returns the named run's metrics, or nil.
func (r *Result) Run(name string) *Metrics {
	for _, m := range r.Runs {
		if m.Name == name {
			return m
		}
	}
	return nil
}

// Flat is the result as one flat object of named metrics, for --json:
// world-level names, then each run's under its name ("engine_fill_rate",
// "pay_as_bid_fill_rate"). Money is in micros (…_micros), times in
// seconds, shares as fractions, savings in percent.
func (r *Result) Flat() map[string]any {
	w := &r.World
	out := map[string]any{
		"seed": w.Seed, "span_start": w.Start.Format(time.RFC3339), "span_end": w.End.Format(time.RFC3339),
		"span_hours": w.End.Sub(w.Start).Hours(), "nodes": w.Nodes, "gpus": w.GPUs, "jobs": w.Jobs,
		"offered_gpu_hours": hours(w.OfferedGPUSeconds), "wall_seconds": r.Wall.Seconds(), "read_wall_seconds": r.ReadWall.Seconds(),
		"build_wall_seconds": w.BuildWall.Seconds(), "peak_rss_bytes": r.PeakRSSBytes,
		"demand_rows": w.DemandReport.Rows, "demand_rows_skipped": w.DemandReport.Skipped,
		"supply_rows": w.SupplyReport.Rows, "supply_rows_skipped": w.SupplyReport.Skipped,
		"prices_rows": w.PricesReport.Rows, "prices_rows_skipped": w.PricesReport.Skipped,
	}
	for _, m := range r.Runs {
		p := strings.ReplaceAll(m.Name, "-", "_") + "_"
		s := &m.Summary
		put := func(k string, v any) { out[p+k] = v }
		put("fill_rate", s.FillRate)
		put("paid_fill_rate", s.PaidFillRate)
		put("leased_gpu_hours", hours(m.LeasedGPUSeconds))
		put("useful_gpu_hours", hours(m.UsefulGPUSeconds))
		put("renter_cost_micros", int64(m.RenterCost))
		put("on_demand_cost_micros", int64(m.OnDemandCost))
		if m.OnDemandCost > 0 {
			put("savings_pct", s.SavingsPercent)
		} else {
			put("savings_pct", nil) // no useful work: nothing to compare
		}
		put("provider_earnings_micros", int64(m.ProviderEarnings))
		put("earnings_per_offered_gpu_hour_micros", int64(s.EarningsPerOfferedGPUHour))
		put("fees_micros", int64(m.Fees))
		put("jobs_arrived", m.JobsArrived)
		put("jobs_started", m.JobsStarted)
		put("jobs_completed", m.JobsCompleted)
		put("jobs_never_placed", s.NeverPlaced)
		put("jobs_gave_up_after_requeue", m.GaveUpAfterRequeue)
		put("jobs_waiting_at_end", sum(m.WaitingAtEnd))
		put("leases_running_at_end", m.RunningAtEnd)
		put("placements", m.Placements)
		for t, tier := range idlegrid.Tiers {
			put("started_"+string(tier), s.Started[t])
			put("never_placed_"+string(tier), m.NeverPlacedByTier[t])
			if s.Started[t] > 0 {
				put("wait_p50_s_"+string(tier), s.WaitP50[t])
				put("wait_p95_s_"+string(tier), s.WaitP95[t])
				put("wait_p99_s_"+string(tier), s.WaitP99[t])
			} else { // no wait to measure, as the text's "-"
				put("wait_p50_s_"+string(tier), nil)
				put("wait_p95_s_"+string(tier), nil)
				put("wait_p99_s_"+string(tier), nil)
			}
		}
		put("preemptions", m.Preemptions)
		put("preempted_lost_gpu_hours", hours(m.PreemptedLostGPUSeconds))
		put("window_stops", m.WindowStops)
		put("window_lost_gpu_hours", hours(m.WindowLostGPUSeconds))
		put("failures", m.Failures)
		put("failed_lost_gpu_hours", hours(m.FailedLostGPUSeconds))
		for reason, n := range m.NeverPlaced {
			put("never_placed_"+slug(reason), n)
		}
		if e := &m.Estimates; e.Asked > 0 {
			put("estimates_asked", e.Asked)
			put("estimates_unknown", e.Unknown)
			put("estimates_unknown_started", e.UnknownStarted)
			put("estimates_started", e.Started())
			put("estimate_late_p10_s", s.LateP10)
			put("estimate_late_p50_s", s.LateP50)
			put("estimate_late_p90_s", s.LateP90)
			put("estimate_on_time", s.OnTime)
			put("estimate_near", s.Near)
			for t, tier := range idlegrid.Tiers {
				put("estimate_on_time_"+string(tier), s.OnTimeByTier[t])
				put("estimate_near_"+string(tier), s.NearByTier[t])
				put("estimate_mean_error_s_"+string(tier), s.MeanErrorByTier[t])
			}
		}
		put("place_calls", m.PlaceCalls)
		put("place_skipped", m.Skipped)
		put("place_mean_us", float64(s.PlaceMeanNanos)/1000)
		put("place_p50_us", float64(s.PlaceP50Nanos)/1000)
		put("place_p99_us", float64(s.PlaceP99Nanos)/1000)
		put("wall_seconds", m.Wall.Seconds())
		put("peak_heap_bytes", m.PeakHeapBytes)
	}
	return out
}

func hours(gpuSeconds int64) float64 { return float64(gpuSeconds) / 3600 }

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// slug makes a reason a name: "no node fits: cap below ask" is
// "no_node_fits_cap_below_ask".
func slug(s string) string {
	var b strings.Builder
	under := false
	for _, c := range strings.ToLower(s) {
		if c >= 'a' && c <= 'z' || c >= '0' && c <= '9' {
			b.WriteRune(c)
			under = false
		} else if !under && b.Len() > 0 {
			b.WriteByte('_')
			under = true
		}
	}
	return strings.TrimSuffix(b.String(), "_")
}

// WriteText writes the result for people: what was replayed, then every
// run side by side, then why jobs were never placed, then the notes.
func (r *Result) WriteText(out io.Writer) error {
	w := &r.World
	fmt.Fprintf(out, "replayed %s (demand) against %s (supply), seed %d\n", w.DemandSource, w.SupplySource, w.Seed)
	fmt.Fprintf(out, "span %s to %s (%s); %d nodes with %d GPUs; %d jobs; %s GPU-hours offered\n",
		w.Start.Format("2006-01-02 15:04"), w.End.Format("2006-01-02 15:04 MST"), fmtHours(w.End.Sub(w.Start).Hours()),
		w.Nodes, w.GPUs, w.Jobs, grouped(int64(hours(w.OfferedGPUSeconds))))
	fmt.Fprint(out, "models:")
	for i, m := range w.Models {
		sep := ","
		if i == 0 {
			sep = ""
		}
		proxy := ""
		if m.Proxied {
			proxy = " (proxy)"
		}
		fmt.Fprintf(out, "%s %s %d GPUs (on-demand %s%s, market %s)", sep, m.Model, m.GPUs, dollars(m.OnDemand), proxy, dollars(m.Market))
	}
	fmt.Fprint(out, "\n\n")
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := []string{""}
	for _, m := range r.Runs {
		head = append(head, m.Name)
	}
	row(tw, head...)
	line := func(label string, f func(m *Metrics) string) {
		cells := []string{label}
		for _, m := range r.Runs {
			cells = append(cells, f(m))
		}
		row(tw, cells...)
	}
	line("fill rate (GPU-h leased ÷ offered)", func(m *Metrics) string { return pct(m.Summary.FillRate) })
	line("paid fill rate (GPU-h charged ÷ offered)", func(m *Metrics) string { return pct(m.Summary.PaidFillRate) })
	line("useful work (leased, less work lost)", func(m *Metrics) string { return fmtHours(hours(m.UsefulGPUSeconds)) })
	line("renter cost", func(m *Metrics) string { return dollars(m.RenterCost) })
	line("same work at cloud on-demand", func(m *Metrics) string { return dollars(m.OnDemandCost) })
	line("renter savings", func(m *Metrics) string {
		if m.OnDemandCost == 0 {
			return "-"
		}
		return fmt.Sprintf("%.1f%%", m.Summary.SavingsPercent)
	})
	line("provider earnings", func(m *Metrics) string { return dollars(m.ProviderEarnings) })
	line("earnings per offered GPU-hour", func(m *Metrics) string { return rate(m.Summary.EarningsPerOfferedGPUHour) })
	line("jobs started / arrived", func(m *Metrics) string { return fmt.Sprintf("%d / %d", m.JobsStarted, m.JobsArrived) })
	line("jobs completed", func(m *Metrics) string { return grouped(int64(m.JobsCompleted)) })
	for t, tier := range idlegrid.Tiers {
		line("wait p50/p95/p99 "+string(tier), func(m *Metrics) string {
			s := &m.Summary
			if s.Started[t] == 0 {
				return "-"
			}
			return fmt.Sprintf("%s/%s/%s", dur(s.WaitP50[t]), dur(s.WaitP95[t]), dur(s.WaitP99[t]))
		})
	}
	line("preemptions (GPU-h lost)", func(m *Metrics) string {
		return fmt.Sprintf("%d (%s)", m.Preemptions, fmtHours(hours(m.PreemptedLostGPUSeconds)))
	})
	line("window-end stops (GPU-h lost)", func(m *Metrics) string {
		return fmt.Sprintf("%d (%s)", m.WindowStops, fmtHours(hours(m.WindowLostGPUSeconds)))
	})
	line("node failures (GPU-h lost)", func(m *Metrics) string {
		return fmt.Sprintf("%d (%s)", m.Failures, fmtHours(hours(m.FailedLostGPUSeconds)))
	})
	line("jobs never placed", func(m *Metrics) string { return grouped(int64(m.Summary.NeverPlaced)) })
	line("never placed gold/silver/bronze", func(m *Metrics) string {
		t := &m.NeverPlacedByTier
		return fmt.Sprintf("%s/%s/%s", grouped(int64(t[0])), grouped(int64(t[1])), grouped(int64(t[2])))
	})
	line("gave up after a requeue", func(m *Metrics) string { return grouped(int64(m.GaveUpAfterRequeue)) })
	line("still waiting at the end", func(m *Metrics) string { return grouped(int64(sum(m.WaitingAtEnd))) })
	estimateLines(line)
	line("decisions (skipped as dominated)", func(m *Metrics) string {
		return fmt.Sprintf("%s (%s)", grouped(int64(m.PlaceCalls)), grouped(int64(m.Skipped)))
	})
	line("time per decision mean/p50/p99", func(m *Metrics) string {
		s := &m.Summary
		return fmt.Sprintf("%s/%s/%s", micro(s.PlaceMeanNanos), micro(int64(s.PlaceP50Nanos)), micro(int64(s.PlaceP99Nanos)))
	})
	line("wall time", func(m *Metrics) string { return m.Wall.Round(time.Millisecond).String() })
	line("peak Go heap", func(m *Metrics) string { return mib(m.PeakHeapBytes) })
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, m := range r.Runs {
		if len(m.NeverPlaced) == 0 {
			continue
		}
		fmt.Fprintf(out, "\nnever placed by %s, by the market's last reason:\n", m.Name)
		reasons := slices.Sorted(maps.Keys(m.NeverPlaced))
		slices.SortStableFunc(reasons, func(a, b string) int { return m.NeverPlaced[b] - m.NeverPlaced[a] })
		for _, k := range reasons {
			fmt.Fprintf(out, "  %6d  %s\n", m.NeverPlaced[k], k)
		}
	}
	fmt.Fprintln(out, "\nruns:")
	for _, m := range r.Runs {
		fmt.Fprintf(out, "  %-10s %s\n", m.Name, m.Title)
	}
	writeReport(out, "demand trace", w.DemandReport)
	writeReport(out, "supply trace", w.SupplyReport)
	writeReport(out, "price tables", w.PricesReport)
	if len(w.Notes) > 0 {
		fmt.Fprintln(out, "\nnotes:")
		for _, n := range w.Notes {
			fmt.Fprintf(out, "  - %s\n", n)
		}
	}
	fmt.Fprintf(out, "\n")
	if r.ReadWall > 0 {
		fmt.Fprintf(out, "traces read in %s; ", r.ReadWall.Round(time.Millisecond))
	}
	fmt.Fprintf(out, "world built in %s; built and replayed in %s", w.BuildWall.Round(time.Millisecond), r.Wall.Round(time.Millisecond))
	if r.PeakRSSBytes > 0 {
		fmt.Fprintf(out, ", peak memory %s", mib(r.PeakRSSBytes))
	}
	fmt.Fprintln(out)
	return nil
}

// estimateLines writes the rows on the engine's estimated starts: how many
// jobs that waited got one, how late they started against it, and the
// share on time, of all tiers and per tier; "-" for runs without them.
func estimateLines(line func(label string, f func(m *Metrics) string)) {
	estimates := func(f func(m *Metrics) string) func(m *Metrics) string {
		return func(m *Metrics) string {
			if m.Estimates.Asked == 0 {
				return "-"
			}
			return f(m)
		}
	}
	line("waited: estimated start given / none", estimates(func(m *Metrics) string {
		e := &m.Estimates
		return fmt.Sprintf("%s / %s", grouped(int64(e.Asked-e.Unknown)), grouped(int64(e.Unknown)))
	}))
	line("started vs estimate p10/p50/p90", estimates(func(m *Metrics) string {
		if m.Estimates.Started() == 0 {
			return "-"
		}
		s := &m.Summary
		return fmt.Sprintf("%s/%s/%s", signedDur(s.LateP10), signedDur(s.LateP50), signedDur(s.LateP90))
	}))
	line("started by the estimate (+5m), g/s/b", estimates(func(m *Metrics) string {
		return byTier(m, pct(m.Summary.OnTime)+", ", func(t int) string { return fmt.Sprintf("%.0f%%", 100*m.Summary.OnTimeByTier[t]) })
	}))
	line("started within ±15m of it, g/s/b", estimates(func(m *Metrics) string {
		return byTier(m, pct(m.Summary.Near)+", ", func(t int) string { return fmt.Sprintf("%.0f%%", 100*m.Summary.NearByTier[t]) })
	}))
	line("started off it by, mean g/s/b", estimates(func(m *Metrics) string {
		return byTier(m, "", func(t int) string { return dur(m.Summary.MeanErrorByTier[t]) })
	}))
}

// byTier is all, then each tier's figure, g/s/b, with "-" for a tier with no
// estimated job that started; "-" alone when there is none at all.
func byTier(m *Metrics, all string, tier func(t int) string) string {
	if m.Estimates.Started() == 0 {
		return "-"
	}
	tiers := make([]string, len(m.Estimates.Late))
	for t, l := range m.Estimates.Late {
		tiers[t] = "-"
		if len(l) > 0 {
			tiers[t] = tier(t)
		}
	}
	return all + strings.Join(tiers, "/")
}

// writeReport says what the read of what (the demand trace, ...) skipped,
// left out or changed, when it did.
func writeReport(out io.Writer, what string, rep trace.Report) {
	if rep.Skipped == 0 && len(rep.Dropped) == 0 && len(rep.Adjusted) == 0 {
		return
	}
	fmt.Fprintf(out, "\n%s: %d rows", what, rep.Rows)
	if rep.Skipped > 0 {
		fmt.Fprintf(out, ", %d bad rows skipped (e.g. %s)", rep.Skipped, strings.Join(rep.SkipNotes, "; "))
	}
	fmt.Fprintln(out)
	for _, k := range slices.Sorted(maps.Keys(rep.Dropped)) {
		fmt.Fprintf(out, "  %6d  left out: %s\n", rep.Dropped[k], k)
	}
	for _, k := range slices.Sorted(maps.Keys(rep.Adjusted)) {
		fmt.Fprintf(out, "  %6d  %s\n", rep.Adjusted[k], k)
	}
}

func row(w io.Writer, cells ...string) {
	fmt.Fprintln(w, strings.Join(cells, "\t")+"\t")
}

func pct(f float64) string { return fmt.Sprintf("%.1f%%", 100*f) }

// dollars shows money rounded to the cent, "$1,234.56".
func dollars(m idlegrid.Micros) string {
	sign := ""
	if m < 0 {
		sign, m = "-", -m
	}
	cents := (int64(m) + 5000) / 10000
	return fmt.Sprintf("%s$%s.%02d", sign, grouped(cents/100), cents%100)
}

// rate shows a price per GPU-hour: to the cent from a dollar up, to a
// hundredth of a cent below, rounded half up from the micros as dollars
// rounds (never through a float, which rounds $0.00015 down and $0.00025
// up).
func rate(m idlegrid.Micros) string {
	sign, mag := "", m
	if m < 0 {
		sign, mag = "-", -m
	}
	if hundredths := (int64(mag) + 50) / 100; hundredths < 10_000 { // below $1 once rounded
		return fmt.Sprintf("%s$0.%04d", sign, hundredths)
	}
	return dollars(m)
}

func grouped(n int64) string {
	s := fmt.Sprint(n)
	if n < 0 {
		return "-" + grouped(-n)
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func fmtHours(h float64) string {
	if h >= 100 {
		return grouped(int64(h+0.5)) + " h"
	}
	return fmt.Sprintf("%.1f h", h)
}

// dur shows seconds as "0s", "45s", "12m", "3.5h", "2.1d".
func dur(s int32) string {
	switch {
	case s < 60:
		return fmt.Sprintf("%ds", s)
	case s < 3600:
		return fmt.Sprintf("%dm", s/60)
	case s < 86400:
		return fmt.Sprintf("%.1fh", float64(s)/3600)
	}
	return fmt.Sprintf("%.1fd", float64(s)/86400)
}

// signedDur is dur with a sign: "+2m" late, "-1.5h" early, "0s" on time.
func signedDur(s int32) string {
	switch {
	case s > 0:
		return "+" + dur(s)
	case s < 0:
		return "-" + dur(-max(s, -1<<31+1))
	}
	return "0s"
}

func micro(ns int64) string {
	if ns >= 1_000_000 {
		return fmt.Sprintf("%.1fms", float64(ns)/1e6)
	}
	return fmt.Sprintf("%.1fµs", float64(ns)/1000)
}

func mib(b uint64) string { return fmt.Sprintf("%d MiB", b>>20) }
