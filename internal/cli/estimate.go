package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/httpapi/wire"
	"github.com/idlegrid/idlegrid/internal/sim"
	"github.com/idlegrid/idlegrid/internal/trace"
)

// estimateCommand is "idlegrid estimate": what a provider would earn, or a
// renter pay, before they commit: from the live market when a server is
// given, from a replay of the traces otherwise.
type estimateCommand struct{ env *env }

// estimate is the parsed question.
type estimate struct {
	gpus       int
	model      string // canonical; "" for a renter who takes any model
	region     string
	tz         string
	schedule   idlegrid.Schedule
	windowText []string
	ask        idlegrid.Micros
	// renter
	tier            idlegrid.Tier // "" shows every tier alike
	cap             idlegrid.Micros
	duration        int64
	checkpointEvery int64 // seconds; 0: the job cannot resume
	models          []string
	feeBPS          int64
	rel             float64
}

// renterFlags are the flags that describe a renter's job, beside a job file.
type renterFlags struct {
	path, gpus, tier          string
	models                    []string
	cap                       idlegrid.Micros
	duration, checkpointEvery int64
}

func (c *estimateCommand) Run(ctx context.Context, args []string) error {
	fs := c.env.flags("estimate", help{
		usage: "idlegrid estimate --provider --gpus NxMODEL --region R --windows W --ask PRICE [--addr URL]\n\tidlegrid estimate --renter (--job job.yaml | --gpus N[xMODEL] --duration D [--tier T] [--max-price P]) [--addr URL]",
		about: `Estimate, before you commit, what the market would do for you.

A provider learns the expected fill rate (the share of its offered GPU-hours
that leases would hold) and monthly earnings for its GPUs, windows and ask.
A renter learns, per tier, the expected price, cost and time to start of a
job.

With --addr (or IDLEGRID_ADDR) the estimate reads the live market (GET
/v1/market: supply, demand, fill and recent clearing prices per GPU model
and region). Without, it replays the traces (as 'idlegrid sim' does, with
the engine only) with your node added to the supply, or your job sent into
the market every --probe-every. Either way it states its assumptions.

Windows: always, nights (22:00-08:00 every day), evenings (18:00-23:00
Mon-Fri), weekends (all Saturday and Sunday), workdays (09:00-17:00
Mon-Fri), or DAYS/HH:MM-HH:MM such as mon-fri/18:00-08:00 or sat+sun/10:00-18:00,
comma-separated, in --tz (default: the region's usual zone).`,
		examples: `idlegrid estimate --provider --gpus 1xRTX4090 --region eu-west --windows nights,weekends --ask 0.40
		idlegrid estimate --provider --gpus 8xV100-32GB --region us-east --windows always --ask 0.30 --addr http://127.0.0.1:7070
		idlegrid estimate --renter --job job.yaml
		idlegrid estimate --renter --gpus 2xV100-32GB --duration 4h --max-price 1.50`,
	})
	r := c.env.remoteFlags(fs)
	tf := c.env.traceFlags(fs)
	var (
		provider, renter, asJSON bool
		gpus, windows, jobPath   string
		q                        estimate
		ask, maxPrice            priceFlag
		duration, checkpoint     durationFlag
		models                   stringList
		seed                     uint64
		jobs, seeds              int
		probeEvery               = spanFlag{d: 6 * time.Hour}
		tier                     string
	)
	fs.BoolVar(&provider, "provider", false, "estimate a provider's fill rate and earnings")
	fs.BoolVar(&renter, "renter", false, "estimate a renter's price, cost and time to start per tier")
	fs.StringVar(&gpus, "gpus", "", "provider: NxMODEL, e.g. 1xRTX4090; renter: N or NxMODEL (GPUs on one node)")
	fs.StringVar(&q.region, "region", "", "provider: the node's region, e.g. eu-west; renter: a required region")
	fs.StringVar(&windows, "windows", "always", "provider: when the GPUs are offered (see above)")
	fs.StringVar(&q.tz, "tz", "", "provider: time zone of --windows (default: the region's, e.g. Europe/Paris for eu-west)")
	fs.Var(&ask, "ask", "provider: your silver floor per GPU-hour, e.g. 0.40 (gold 125%, bronze 60% of it)")
	fs.Float64Var(&q.rel, "reliability", 0.99, "provider, with traces: the share of leases your node completes")
	fs.StringVar(&jobPath, "job", "", "renter: a job file, YAML or JSON, as 'idlegrid job submit -f' takes")
	fs.Var(&models, "gpu-model", "renter: an acceptable GPU model (repeat or comma-separate; default any)")
	fs.StringVar(&tier, "tier", "", "renter: the tier you mean to use (every tier is shown)")
	fs.Var(&maxPrice, "max-price", "renter: your cap per GPU-hour (default: from cloud on-demand prices, per tier)")
	fs.Var(&duration, "duration", "renter: the job's run time, e.g. 4h")
	fs.Var(&checkpoint, "checkpoint-every", "renter: how often the job saves work it can resume from, e.g. 30m (default never)")
	fs.Uint64Var(&seed, "seed", 1, "with traces: the first replay's seed")
	fs.IntVar(&seeds, "replays", 5, "with traces: how many replays, each with the next seed, the estimate pools")
	fs.IntVar(&jobs, "jobs", 0, "with traces: resample the demand to N jobs (0: as in the trace)")
	fs.Var(&probeEvery, "probe-every", "renter, with traces: how often the job is sent into the market")
	fs.Int64Var(&q.feeBPS, "fee-bps", sim.DefaultFeeBasisPoints, "the platform's fee in basis points")
	fs.BoolVar(&asJSON, "json", false, "print one flat JSON object")
	_, err := fs.parseArgs(args, 0, 0, "no arguments")
	if err != nil {
		return err
	}
	if provider == renter {
		return usagef("give --provider or --renter\n  run 'idlegrid estimate --help' for examples")
	} else if err := checkReplayFlags(jobs, seeds, probeEvery.d, q.feeBPS); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	live := firstNonEmpty(r.addr, c.env.addr, c.env.getenv("IDLEGRID_ADDR")) != ""
	var out estimateResult
	if provider {
		if err := q.parseProvider(gpus, windows, ask.m); err != nil {
			return err
		}
		if live {
			out, err = c.providerLive(ctx, r, &q)
		} else {
			out, err = c.providerTrace(ctx, tf, &q, seed, seeds, jobs)
		}
	} else {
		f := renterFlags{path: jobPath, gpus: gpus, tier: tier, models: models, cap: maxPrice.m,
			duration: duration.secs, checkpointEvery: checkpoint.secs}
		if err := q.parseRenter(c.env, f, set); err != nil {
			return err
		}
		if live {
			out, err = c.renterLive(ctx, r, &q)
		} else {
			out, err = c.renterTrace(ctx, tf, &q, seed, seeds, jobs, probeEvery.d)
		}
	}
	if err != nil {
		return err
	}
	out.flat["assumptions"] = out.assumptions
	if asJSON {
		return printJSON(c.env.Out, out.flat)
	}
	out.write(c.env.Out)
	return nil
}

// checkReplayFlags refuses what the replay would otherwise bend silently:
// negative jobs, fewer than one replay, probes more often than a second (the
// replay counts whole seconds), and a fee the server would refuse.
func checkReplayFlags(jobs, replays int, probeEvery time.Duration, feeBPS int64) error {
	switch {
	case jobs < 0:
		return usagef("--jobs must not be negative (0: as in the trace), got %d", jobs)
	case replays < 1:
		return usagef("--replays must be at least 1, got %d", replays)
	case probeEvery < time.Second:
		return usagef("--probe-every must be at least 1s, got %s", probeEvery)
	}
	return checkFee(feeBPS)
}

// estimateResult is what an estimate prints: lines for people, a flat
// object for --json, and the assumptions behind both.
type estimateResult struct {
	lines       []string
	assumptions []string
	flat        map[string]any
}

func (e *estimateResult) linef(format string, args ...any) {
	e.lines = append(e.lines, fmt.Sprintf(format, args...))
}

func (e *estimateResult) assume(format string, args ...any) {
	e.assumptions = append(e.assumptions, fmt.Sprintf(format, args...))
}

func (e *estimateResult) write(w io.Writer) {
	for _, l := range e.lines {
		fmt.Fprintln(w, l)
	}
	fmt.Fprintln(w, "\nassumptions:")
	for _, a := range e.assumptions {
		fmt.Fprintf(w, "  - %s\n", a)
	}
}

// skippedRows says, as sim's report does, how many bad rows of each input
// --bad-rows skip left out, and the first few.
func (e *estimateResult) skippedRows(w *sim.WorldSummary) {
	for _, in := range []struct {
		key, what string
		rep       trace.Report
	}{{"demand", "demand trace", w.DemandReport}, {"supply", "supply trace", w.SupplyReport}, {"prices", "price tables", w.PricesReport}} {
		e.flat[in.key+"_rows_skipped"] = in.rep.Skipped
		if in.rep.Skipped > 0 {
			rows := "rows"
			if in.rep.Skipped == 1 {
				rows = "row"
			}
			e.assume("%d bad %s of the %s skipped (--bad-rows skip), e.g. %s", in.rep.Skipped, rows, in.what, strings.Join(in.rep.SkipNotes, "; "))
		}
	}
}

// table adds a table's lines, indented.
func (e *estimateResult) table(headers []string, fill func(t *table)) {
	var b strings.Builder
	t := newTable(&b, headers...)
	fill(t)
	t.flush()
	for _, l := range strings.Split(strings.TrimRight(b.String(), "\n"), "\n") {
		e.lines = append(e.lines, "  "+l)
	}
}

var gpusRE = regexp.MustCompile(`^(\d+)\s*(?:[xX×]\s*(\S.*))?$`)

// parseGPUs reads "8xV100-32GB" or "2".
func parseGPUs(v string) (int, string, error) {
	m := gpusRE.FindStringSubmatch(strings.TrimSpace(v))
	if m == nil {
		return 0, "", idlegrid.Invalid("--gpus", "must be N or NxMODEL, e.g. 1xRTX4090, got %q", v)
	}
	n, err := strconv.Atoi(m[1])
	if err != nil || n < 1 || n > 64 {
		return 0, "", idlegrid.Invalid("--gpus", "must be between 1 and 64, got %q", m[1])
	}
	model := ""
	if m[2] != "" {
		model = trace.CanonicalModel(m[2], 0)
	}
	return n, model, nil
}

// regionZones are the usual time zones of regions, for windows.
var regionZones = map[string]string{
	"eu-west": "Europe/Paris", "eu-north": "Europe/Stockholm", "eu-central": "Europe/Berlin",
	"us-east": "America/New_York", "us-west": "America/Los_Angeles", "us-central": "America/Chicago",
	"ap-east": "Asia/Hong_Kong", "ap-south": "Asia/Kolkata", "ap-northeast": "Asia/Tokyo", "ap-southeast": "Asia/Singapore",
}

var allDays = []string{"mon", "tue", "wed", "thu", "fri", "sat", "sun"}

// windowPresets are the named windows --windows takes.
var windowPresets = map[string]idlegrid.WeeklyWindow{
	"nights":   {Days: allDays, Start: "22:00", End: "08:00"},
	"evenings": {Days: allDays[:5], Start: "18:00", End: "23:00"},
	"weekends": {Days: allDays[5:], Start: "00:00", End: "00:00"},
	"workdays": {Days: allDays[:5], Start: "09:00", End: "17:00"},
}

// parseWindows reads --windows into a schedule in zone tz (--tz, or the
// region's). What is wrong is named as the flag, --windows or --tz.
func parseWindows(v, tz string) (idlegrid.Schedule, error) {
	s := idlegrid.Schedule{Mode: idlegrid.ScheduleWindows, TimeZone: tz}
	var written []string // each weekly window as the flag wrote it
	for _, part := range strings.Split(v, ",") {
		part = strings.ToLower(strings.TrimSpace(part))
		if part == "always" {
			always := idlegrid.Schedule{Mode: idlegrid.ScheduleAlways, TimeZone: tz}
			return always, windowFlagFaults(always.Validate("windows"), nil)
		}
		written = append(written, part)
		if w, ok := windowPresets[part]; ok {
			s.Weekly = append(s.Weekly, w)
			continue
		}
		days, span, ok := strings.Cut(part, "/")
		start, end, ok2 := strings.Cut(span, "-")
		if !ok || !ok2 {
			return s, idlegrid.Invalid("--windows", "unknown window %q; use always, nights, evenings, weekends, workdays or DAYS/HH:MM-HH:MM such as mon-fri/18:00-08:00", part)
		}
		ds, err := parseDays(days)
		if err != nil {
			return s, err
		}
		s.Weekly = append(s.Weekly, idlegrid.WeeklyWindow{Days: ds, Start: start, End: end})
	}
	return s, windowFlagFaults(s.Validate("windows"), written)
}

var weeklyFieldRE = regexp.MustCompile(`^windows\.weekly\[(\d+)\]\.(\w+)$`)

// windowFlagFaults names the schedule's faults err finds as the flags
// that wrote them: a window's as --windows, with the window as written
// ("mon-fri/25:00-08:00": start must be …), the time zone's as --tz.
func windowFlagFaults(err error, written []string) error {
	var ie *idlegrid.Error
	if !errors.As(err, &ie) {
		return err
	}
	ps := ie.All()
	for i, p := range ps {
		named := *p
		switch m := weeklyFieldRE.FindStringSubmatch(p.Field); {
		case p.Field == "windows.time_zone":
			named.Field = "--tz"
		case m != nil:
			n, _ := strconv.Atoi(m[1])
			named.Field = "--windows"
			if n < len(written) {
				named.Message = fmt.Sprintf("%q: %s %s", written[n], m[2], p.Message)
			}
		default:
			named.Field = "--windows"
		}
		ps[i] = &named
	}
	return idlegrid.Problems(ps)
}

// parseDays reads "mon-fri", "sat+sun" or "tue".
func parseDays(v string) ([]string, error) {
	if from, to, ok := strings.Cut(v, "-"); ok {
		i, j := slices.Index(allDays, from), slices.Index(allDays, to)
		if i < 0 || j < 0 {
			return nil, idlegrid.Invalid("--windows", "unknown days %q; use e.g. mon-fri", v)
		}
		var out []string
		for k := i; ; k = (k + 1) % 7 {
			out = append(out, allDays[k])
			if k == j {
				return out, nil
			}
		}
	}
	return strings.Split(v, "+"), nil
}

func (q *estimate) parseProvider(gpus, windows string, ask idlegrid.Micros) error {
	var err error
	if gpus == "" {
		return usagef("--provider needs --gpus NxMODEL, e.g. --gpus 1xRTX4090")
	}
	if q.gpus, q.model, err = parseGPUs(gpus); err != nil {
		return err
	} else if q.model == "" {
		return idlegrid.Invalid("--gpus", "name the model too, e.g. %dxRTX4090", q.gpus)
	}
	if q.region == "" {
		return usagef("--provider needs --region, e.g. --region eu-west")
	}
	if ask <= 0 {
		return usagef("--provider needs --ask, your silver floor per GPU-hour, e.g. --ask 0.40")
	}
	q.ask = ask
	if q.tz == "" {
		q.tz = regionZones[q.region]
	}
	if q.schedule, err = parseWindows(windows, q.tz); err != nil {
		return err
	}
	q.windowText = []string{windows}
	if q.rel <= 0 || q.rel > 1 {
		return idlegrid.Invalid("--reliability", "must be above 0 and at most 1, got %g", q.rel)
	}
	return nil
}

// weeklyHours is how many hours a week a schedule offers, from a week of
// its windows.
func weeklyHours(s idlegrid.Schedule) float64 {
	start := trace.Epoch // a Monday
	var h float64
	for _, w := range sim.ScheduleWindows(s, start, start.Add(7*24*time.Hour)) {
		h += w.End.Sub(w.Start).Hours()
	}
	return h
}

// daysPerMonth is the month the estimates speak of.
const daysPerMonth = 30

// replays runs the engine over the traces once per seed, from seed on:
// one replay is one draw of the nodes' models, regions, asks and
// reliability, so an estimate averages several.
func replays(ctx context.Context, cfg sim.Config, seed uint64, n int) ([]*sim.Result, error) {
	var out []*sim.Result
	for i := range n {
		cfg.Seed = seed + uint64(i)
		res, err := sim.Run(ctx, cfg)
		if err != nil {
			return nil, err
		}
		out = append(out, res)
	}
	return out, nil
}

func (c *estimateCommand) providerTrace(ctx context.Context, tf *traceFlags, q *estimate, seed uint64, seeds, jobs int) (estimateResult, error) {
	out := estimateResult{flat: map[string]any{"mode": "trace"}}
	cfg, err := tf.load()
	if err != nil {
		return out, err
	}
	cfg.Runs, cfg.Jobs, cfg.FeeBasisPoints = []string{sim.RunEngine}, jobs, replayFee(q.feeBPS)
	cfg.ExtraNodes = []sim.ExtraNode{{
		Node:     trace.Node{ID: "your-node", GPUModel: q.model, GPUs: q.gpus, Region: q.region},
		Schedule: q.schedule, Ask: q.ask, Reliability: q.rel,
	}}
	results, err := replays(ctx, cfg, seed, seeds)
	if err != nil {
		return out, err
	}
	var fills []float64
	var earned []idlegrid.Micros
	var offered, leased, earnedAll int64
	for _, res := range results {
		w := res.Run(sim.RunEngine).Watched
		fill := 0.0
		if w.OfferedGPUSeconds > 0 {
			fill = float64(w.LeasedGPUSeconds) / float64(w.OfferedGPUSeconds)
		}
		fills = append(fills, fill)
		earned = append(earned, w.Earned)
		offered, leased, earnedAll = offered+w.OfferedGPUSeconds, leased+w.LeasedGPUSeconds, earnedAll+int64(w.Earned)
	}
	res := results[0]
	spanDays := res.World.End.Sub(res.World.Start).Hours() / 24
	monthly := func(m idlegrid.Micros) idlegrid.Micros { return idlegrid.Micros(float64(m) * daysPerMonth / spanDays) }
	fill := 0.0
	if offered > 0 {
		fill = float64(leased) / float64(offered)
	}
	mean := monthly(idlegrid.Micros(earnedAll / int64(len(results))))
	offeredMonthly := float64(offered) / float64(len(results)) / 3600 * daysPerMonth / spanDays
	out.linef("%d x %s in %s, offered %s, ask %s/GPU-h (silver; gold %s, bronze %s)",
		q.gpus, q.model, q.region, q.windowsText(), trimMoney(q.ask), trimMoney(q.ask*125/100), trimMoney(q.ask*60/100))
	out.linef("replayed %s against %s, %.0f days, %d times (seeds %d to %d), with your node added:",
		res.World.DemandSource, res.World.SupplySource, spanDays, len(results), seed, seed+uint64(len(results))-1)
	out.linef("  expected fill rate:        %.1f%% (%.1f%% to %.1f%% across the replays)", 100*fill, 100*slices.Min(fills), 100*slices.Max(fills))
	out.linef("  expected monthly earnings: %s (%s to %s), after the platform's %s fee, for %.0f GPU-hours offered a month",
		trimMoney(mean), trimMoney(monthly(slices.Min(earned))), trimMoney(monthly(slices.Max(earned))), bps(q.feeBPS), offeredMonthly)
	if leased > 0 {
		out.linef("  earned per GPU-hour leased: %s", trimMoney(idlegrid.Micros(earnedAll*3600/leased)))
	}
	var prices []idlegrid.Micros
	for _, r := range results {
		if p, ok := medianSeries(r.Run(sim.RunEngine).PriceSeries[q.model]); ok {
			prices = append(prices, p)
		}
	}
	if len(prices) > 0 {
		out.linef("  the market's median clearing price for %s: %s/GPU-h", q.model, trimMoney(trace.MedianMicros(prices)))
	}
	out.flat["fill_rate"], out.flat["fill_rate_min"], out.flat["fill_rate_max"] = fill, slices.Min(fills), slices.Max(fills)
	out.flat["monthly_earnings_micros"] = int64(mean)
	out.flat["monthly_earnings_min_micros"], out.flat["monthly_earnings_max_micros"] = int64(monthly(slices.Min(earned))), int64(monthly(slices.Max(earned)))
	out.flat["offered_gpu_hours_per_month"], out.flat["span_days"], out.flat["replays"] = offeredMonthly, spanDays, len(results)
	out.assume("demand is the trace's (%d jobs over %.0f days), replayed through idlegrid's engine against the trace's %d other nodes", res.World.Jobs, spanDays, res.World.Nodes-1)
	out.assume("each replay draws the other nodes' models, regions, asks and reliability anew; the range is over %d replays", len(results))
	out.assume("your node is a newcomer (record 0.9 to the market) that completes %.0f%% of its leases", 100*q.rel)
	out.assume("windows are read in %s; a month is %d days; the platform keeps %s of each charge", zoneName(q.tz), daysPerMonth, bps(q.feeBPS))
	out.assume("the trace's jobs accept any region, so the region changes the time zone of your windows, not who rents")
	out.skippedRows(&res.World)
	for _, n := range res.World.Notes {
		out.assume("%s", n)
	}
	return out, nil
}

func (c *estimateCommand) providerLive(ctx context.Context, r *remote, q *estimate) (estimateResult, error) {
	out := estimateResult{flat: map[string]any{"mode": "live"}}
	cl, err := r.client()
	if err != nil {
		return out, err
	}
	stats, err := cl.Market(ctx)
	if err != nil {
		return out, err
	}
	cells, where := cellsFor(stats, []string{q.model}, q.region, true)
	hours := weeklyHours(q.schedule) * daysPerMonth / 7
	out.linef("%d x %s in %s, offered %s (%.0f h a month), ask %s/GPU-h (silver; gold %s, bronze %s)",
		q.gpus, q.model, q.region, q.windowsText(), hours, trimMoney(q.ask), trimMoney(q.ask*125/100), trimMoney(q.ask*60/100))
	if len(cells) == 0 {
		out.linef("the live market has no %s yet: nothing to estimate from", q.model)
		out.flat["fill_rate"], out.flat["monthly_earnings_micros"] = nil, nil
		out.assume("estimates need the market to have seen the model; try again later, or without --addr for a trace replay")
		return out, nil
	}
	supply, free, queued, filled := 0, 0, 0, 0.0
	var prices, won []idlegrid.Micros
	for _, s := range cells {
		supply, free, queued = supply+s.SupplyGPUs, free+s.FreeGPUs, queued+s.QueuedGPUs
		filled += s.FillRate * float64(s.SupplyGPUs)
		for _, p := range s.Prices {
			prices = append(prices, p.PriceMicrosPerGPUHour)
			if p.PriceMicrosPerGPUHour >= tierFloor(q.ask, p.Tier) {
				won = append(won, p.PriceMicrosPerGPUHour)
			}
		}
	}
	fill := 0.0
	if supply > 0 {
		fill = filled / float64(supply)
	}
	accept := 1.0
	if len(prices) > 0 {
		accept = float64(len(won)) / float64(len(prices))
	}
	price := q.ask
	if len(won) > 0 {
		price = trace.MedianMicros(won)
	}
	expected := fill * accept
	if queued > free && supply > 0 {
		expected = min(1, expected+float64(queued-free)/float64(supply)*accept)
	}
	gross := float64(price) * float64(q.gpus) * hours * expected
	monthly := idlegrid.Micros(gross * float64(10000-q.feeBPS) / 10000)
	out.linef("the live market for %s %s: %d GPUs offered now, %d free, %d GPUs of demand queued, fill %.0f%%; %d recent clearing prices",
		q.model, where, supply, free, queued, 100*fill, len(prices))
	out.linef("  your ask would have won %.0f%% of them (those at or above your floor for their tier)", 100*accept)
	out.linef("  expected fill rate:        %.1f%%", 100*expected)
	out.linef("  expected price:            %s/GPU-h (median of the prices your ask would have won)", trimMoney(price))
	out.linef("  expected monthly earnings: %s (after the platform's %s fee)", trimMoney(monthly), bps(q.feeBPS))
	out.flat["fill_rate"], out.flat["monthly_earnings_micros"] = expected, int64(monthly)
	out.flat["expected_price_micros"], out.flat["offered_gpu_hours_per_month"] = int64(price), hours*float64(q.gpus)
	out.assume("recent conditions hold for the month: your GPUs fill as the %s %s market does now (fill %.0f%%), times the share of recent clearing prices your ask would have won", q.model, where, 100*fill)
	out.assume("queued demand beyond the free GPUs adds its share of the supply, times the share of prices your ask would have won, to your fill")
	out.assume("you are paid at least your ask: the median of the recent prices you would have won (second-score prices sit above the winner's ask)")
	out.assume("windows are read in %s; a month is %d days; the platform keeps %s of each charge", zoneName(q.tz), daysPerMonth, bps(q.feeBPS))
	return out, nil
}

func tierFloor(silver idlegrid.Micros, t idlegrid.Tier) idlegrid.Micros {
	switch t {
	case idlegrid.TierGold:
		return silver * 125 / 100
	case idlegrid.TierBronze:
		return silver * 60 / 100
	}
	return silver
}

// cellsFor is the market cells for models (any when empty) in region (any
// when empty); a provider falls back to other regions when its own has
// none. where says which were used.
func cellsFor(stats []wire.MarketStat, models []string, region string, fallback bool) ([]wire.MarketStat, string) {
	pick := func(inRegion bool) []wire.MarketStat {
		var out []wire.MarketStat
		for _, s := range stats {
			okModel := len(models) == 0 || slices.ContainsFunc(models, func(m string) bool { return strings.EqualFold(m, s.GPUModel) })
			if okModel && (!inRegion || region == "" || s.Region == region) {
				out = append(out, s)
			}
		}
		return out
	}
	if cells := pick(true); len(cells) > 0 || !fallback {
		if region == "" {
			return cells, "in every region"
		}
		return cells, "in " + region
	}
	return pick(false), "in every region (none in " + region + " yet)"
}

func (q *estimate) parseRenter(e *env, f renterFlags, set map[string]bool) error {
	var spec idlegrid.JobSpec
	if f.path != "" {
		var err error
		if spec, err = readJobFile(e, f.path); err != nil {
			return err
		}
	}
	if set["gpus"] {
		n, model, err := parseGPUs(f.gpus)
		if err != nil {
			return err
		}
		spec.GPUs = n
		if model != "" {
			spec.GPUModels = []string{model}
		}
	}
	if set["gpu-model"] {
		spec.GPUModels = f.models
	}
	if set["tier"] {
		spec.Tier = idlegrid.Tier(f.tier)
	}
	if set["max-price"] {
		if f.cap <= 0 {
			return idlegrid.Invalid("--max-price", "must be above 0, e.g. --max-price 1.50; leave it out for caps from cloud on-demand prices")
		}
		spec.MaxPriceMicrosPerGPUHour = f.cap
	}
	if set["duration"] {
		spec.DurationSeconds = f.duration
	}
	if set["checkpoint-every"] {
		spec.CheckpointEverySeconds = f.checkpointEvery
	}
	if set["region"] {
		spec.Region = q.region
	}
	if spec.GPUs == 0 {
		spec.GPUs = 1
	}
	switch {
	case spec.GPUs < 1 || spec.GPUs > idlegrid.MaxGPUsPerNode:
		return idlegrid.Invalid("job.gpus", "must be between 1 and %d", idlegrid.MaxGPUsPerNode)
	case spec.DurationSeconds <= 0 && f.path == "":
		return idlegrid.Invalid("--duration", "required: give the job's run time, e.g. --duration 4h, or a job file with --job")
	case spec.DurationSeconds <= 0:
		return idlegrid.Invalid("job.duration", "required: give --duration 4h or duration in the job file")
	case spec.DurationSeconds > idlegrid.MaxJobSeconds:
		return idlegrid.Invalid("job.duration", "at most 30 days")
	case spec.Tier != "" && !spec.Tier.Valid():
		return idlegrid.Invalid("job.tier", "must be gold, silver or bronze, got %q", spec.Tier)
	case spec.Nodes > 1:
		return idlegrid.Invalid("job.nodes", "estimates are for one-node jobs")
	case spec.CheckpointEverySeconds < 0 || spec.CheckpointEverySeconds > idlegrid.MaxJobSeconds:
		return idlegrid.Invalid("job.checkpoint_every", "must be between 0 (never) and 30 days")
	}
	q.gpus, q.duration, q.tier, q.cap, q.region = spec.GPUs, spec.DurationSeconds, spec.Tier, spec.MaxPriceMicrosPerGPUHour, spec.Region
	q.checkpointEvery = spec.CheckpointEverySeconds
	for _, m := range spec.GPUModels {
		q.models = append(q.models, trace.CanonicalModel(m, 0))
	}
	return nil
}

func (q *estimate) jobText() string {
	models := "any model"
	if len(q.models) > 0 {
		models = strings.Join(q.models, " or ")
	}
	region := "any region"
	if q.region != "" {
		region = q.region
	}
	cap := "caps from cloud on-demand prices (gold 100%, silver 80%, bronze 50%)"
	if q.cap > 0 {
		cap = "cap " + trimMoney(q.cap) + "/GPU-h"
	}
	checkpoints := "no checkpoints"
	if q.checkpointEvery > 0 {
		checkpoints = "checkpoints every " + seconds(q.checkpointEvery)
	}
	return fmt.Sprintf("%d GPU(s) of %s in %s for %s, %s, %s", q.gpus, models, region, seconds(q.duration), checkpoints, cap)
}

func (c *estimateCommand) renterTrace(ctx context.Context, tf *traceFlags, q *estimate, seed uint64, seeds, jobs int, every time.Duration) (estimateResult, error) {
	out := estimateResult{flat: map[string]any{"mode": "trace"}}
	cfg, err := tf.load()
	if err != nil {
		return out, err
	}
	cfg.Runs, cfg.Jobs, cfg.FeeBasisPoints = []string{sim.RunEngine}, jobs, replayFee(q.feeBPS)
	for _, t := range idlegrid.Tiers {
		cfg.Probes = append(cfg.Probes, sim.Probe{Every: every, Job: trace.Job{
			ID: "your-job-" + string(t), GPUs: q.gpus, GPUModels: q.models, Tier: t,
			MaxPrice: q.cap, DurationSeconds: q.duration, Region: q.region, CheckpointEverySeconds: q.checkpointEvery,
		}})
	}
	results, err := replays(ctx, cfg, seed, seeds)
	if err != nil {
		return out, err
	}
	res := results[0]
	m := pooledProbes(results)
	spanDays := res.World.End.Sub(res.World.Start).Hours() / 24
	out.linef("your job: %s", q.jobText())
	out.linef("replayed %s against %s, %.0f days, %d times (seeds %d to %d), sending your job in every %s in each tier:",
		res.World.DemandSource, res.World.SupplySource, spanDays, len(results), seed, seed+uint64(len(results))-1, every)
	out.table([]string{"TIER", "STARTED", "TIME TO START p50/p90", "PRICE $/GPU-h p50", "COST p50", "NEVER STARTED"}, func(t *table) {
		c.probeRows(t, &out, m, q)
	})
	if od := onDemandOf(res.World.Models, q.models); od > 0 {
		out.linef("the same job at cloud on-demand prices: %s (%s/GPU-h)", trimMoney(idlegrid.CostOf(od, int64(q.gpus)*q.duration)), trimMoney(od))
	}
	notes := q.outsideSupply(results)
	for _, n := range notes {
		out.linef("note: %s", n)
	}
	out.flat["notes"] = notes
	out.assume("demand and supply are the traces' (%d jobs, %d nodes over %.0f days); your job joins them every %s in each tier, so it also competes with itself a little", res.World.Jobs-m.Probes[0].Sent/len(results)*3, res.World.Nodes, spanDays, every)
	out.assume("each replay draws the nodes' models, regions, asks and reliability anew; the figures pool %d replays", len(results))
	out.assume("a job that cannot start within the patience of %s gives up (NEVER STARTED, with those still queued when the replay ends)", sim.DefaultPatience)
	out.assume("cost is what completed runs were charged, lost runs included; prices are the engine's locked prices")
	out.skippedRows(&res.World)
	for _, n := range res.World.Notes {
		out.assume("%s", n)
	}
	return out, nil
}

// outsideSupply says why the job could never start in the replays: no
// node of any replay has a model it accepts, or is in its region. Each
// names what the supply has and what to try.
func (q *estimate) outsideSupply(results []*sim.Result) []string {
	var models, regions []string
	for _, r := range results {
		for _, m := range r.World.Models {
			models = append(models, m.Model)
		}
		regions = append(regions, r.World.Regions...)
	}
	slices.Sort(models)
	slices.Sort(regions)
	models, regions = slices.Compact(models), slices.Compact(regions)
	var notes []string
	accepted := func(have string) bool {
		return slices.ContainsFunc(q.models, func(m string) bool { return strings.EqualFold(m, have) })
	}
	if len(q.models) > 0 && !slices.ContainsFunc(models, accepted) {
		notes = append(notes, fmt.Sprintf("no node in the replayed supply has a GPU of model %s, so the job never starts; its models: %s. "+
			"Accept one of them (--gpu-model), give the Helios supply's nodes your model (--supply-models %s:1), or ask the live market (--addr)",
			strings.Join(q.models, " or "), strings.Join(models, ", "), q.models[0]))
	}
	if q.region != "" && !slices.Contains(regions, q.region) {
		notes = append(notes, fmt.Sprintf("no node in the replayed supply is in region %s, so the job never starts; its regions: %s. "+
			"Name one of them (--region), leave --region out for any, or ask the live market (--addr)",
			q.region, strings.Join(regions, ", ")))
	}
	return notes
}

func (c *estimateCommand) renterLive(ctx context.Context, r *remote, q *estimate) (estimateResult, error) {
	out := estimateResult{flat: map[string]any{"mode": "live"}}
	cl, err := r.client()
	if err != nil {
		return out, err
	}
	stats, err := cl.Market(ctx)
	if err != nil {
		return out, err
	}
	cells, where := cellsFor(stats, q.models, q.region, false)
	out.linef("your job: %s", q.jobText())
	free, queued := 0, 0
	for _, s := range cells {
		free, queued = free+s.FreeGPUs, queued+s.QueuedGPUs
	}
	out.linef("the live market %s for the models you accept: %s, %s free, %s of demand queued", where, counted(len(cells), "cell"), counted(free, "GPU"), counted(queued, "GPU"))
	out.table([]string{"TIER", "PRICE $/GPU-h", "FROM", "COST", "TIME TO START"}, func(t *table) {
		liveRows(t, &out, cells, q, free, queued)
	})
	out.assume("prices are the market's recent clearing prices for the models and region you accept; the auction pays the runner-up's price, so yours may differ")
	out.assume("free GPUs are counted across nodes: a job needing %s on one node may still wait if no single node has them", counted(q.gpus, "GPU"))
	out.assume("cost is the price times %d GPU(s) times %s, the whole run; you pay only for what runs", q.gpus, seconds(q.duration))
	return out, nil
}

// pooledProbes adds up the probe jobs of several replays.
func pooledProbes(results []*sim.Result) *sim.Metrics {
	m := &sim.Metrics{}
	for _, r := range results {
		for t, p := range r.Run(sim.RunEngine).Probes {
			q := &m.Probes[t]
			q.Sent, q.Started, q.Completed, q.GaveUp = q.Sent+p.Sent, q.Started+p.Started, q.Completed+p.Completed, q.GaveUp+p.GaveUp
			q.Waiting += p.Waiting
			q.Waits, q.Prices, q.Costs = append(q.Waits, p.Waits...), append(q.Prices, p.Prices...), append(q.Costs, p.Costs...)
		}
	}
	return m
}

// probeRows adds a row per tier of what became of the probe jobs.
func (c *estimateCommand) probeRows(t *table, out *estimateResult, m *sim.Metrics, q *estimate) {
	for k, tier := range idlegrid.Tiers {
		p := &m.Probes[k]
		mark := string(tier)
		if tier == q.tier {
			mark += " (yours)"
		}
		price, cost := "-", "-"
		if len(p.Prices) > 0 {
			price = trimMoney(trace.MedianMicros(slices.Clone(p.Prices)))
		}
		if len(p.Costs) > 0 {
			cost = trimMoney(trace.MedianMicros(slices.Clone(p.Costs)))
		}
		never := strconv.Itoa(p.GaveUp + p.Waiting)
		if p.Waiting > 0 {
			never += fmt.Sprintf(" (%d still queued at the end)", p.Waiting)
		}
		t.row(mark, fmt.Sprintf("%d of %d", p.Started, p.Sent), waitText(p.Waits), price, cost, never)
		key := string(tier) + "_"
		out.flat[key+"sent"], out.flat[key+"started"], out.flat[key+"gave_up"] = p.Sent, p.Started, p.GaveUp
		out.flat[key+"waiting_at_end"] = p.Waiting
		out.flat[key+"wait_p50_s"], out.flat[key+"wait_p90_s"] = pct32(p.Waits, 50), pct32(p.Waits, 90)
		if len(p.Costs) > 0 {
			out.flat[key+"cost_p50_micros"] = int64(trace.MedianMicros(slices.Clone(p.Costs)))
		}
		if len(p.Prices) > 0 {
			out.flat[key+"price_p50_micros"] = int64(trace.MedianMicros(slices.Clone(p.Prices)))
		}
	}
}

// liveQuote is one tier's price in a live estimate, and where it is from.
type liveQuote struct {
	price   idlegrid.Micros
	from    string
	cleared bool // from recent clearing prices, not suggested asks
}

// liveQuotes prices each tier from the live market's cells: the median of
// its recent clearing prices, or else of its suggested asks. A tier priced
// by suggested asks is priced at least at what a cheaper tier cleared at:
// nodes ask no less for a tier that stops them less, so a silver job would
// not clear below bronze's going price.
func liveQuotes(cells []wire.MarketStat) []liveQuote {
	quotes := make([]liveQuote, len(idlegrid.Tiers))
	for k, tier := range idlegrid.Tiers {
		var ps, asks []idlegrid.Micros
		for _, s := range cells {
			for _, p := range s.Prices {
				if p.Tier == tier {
					ps = append(ps, p.PriceMicrosPerGPUHour)
				}
			}
			if a, ok := s.SuggestedAsk[tier]; ok {
				asks = append(asks, a)
			}
		}
		q := &quotes[k]
		switch {
		case len(ps) > 0:
			q.price, q.from, q.cleared = trace.MedianMicros(ps), fmt.Sprintf("median of %d recent prices", len(ps)), true
		case len(asks) > 0:
			q.price, q.from = trace.MedianMicros(asks), "suggested asks (nothing cleared yet)"
		default:
			q.from = "-"
		}
	}
	var floor idlegrid.Micros
	var floorTier idlegrid.Tier
	for k := len(quotes) - 1; k >= 0; k-- { // from the cheapest tier up
		switch q := &quotes[k]; {
		case q.cleared && q.price > floor:
			floor, floorTier = q.price, idlegrid.Tiers[k]
		case !q.cleared && q.price > 0 && q.price < floor:
			q.price, q.from = floor, fmt.Sprintf("suggested asks, raised to %s's recent price", floorTier)
		}
	}
	return quotes
}

// liveRows adds a row per tier from the live market's cells.
func liveRows(t *table, out *estimateResult, cells []wire.MarketStat, q *estimate, free, queued int) {
	quotes := liveQuotes(cells)
	for k, tier := range idlegrid.Tiers {
		price, from := quotes[k].price, quotes[k].from
		start := "unknown: no matching supply"
		switch {
		case price == 0:
		case q.cap > 0 && price > q.cap:
			start = "unlikely: the cap is below the going price"
		case free >= q.gpus && queued < free:
			start = "likely now"
		case len(cells) > 0:
			start = fmt.Sprintf("after the %d GPUs of demand queued ahead", queued)
		}
		mark := string(tier)
		if tier == q.tier {
			mark += " (yours)"
		}
		cost := "-"
		if price > 0 {
			cost = trimMoney(idlegrid.CostOf(price, int64(q.gpus)*q.duration))
			out.flat[string(tier)+"_price_micros"] = int64(price)
			out.flat[string(tier)+"_cost_micros"] = int64(idlegrid.CostOf(price, int64(q.gpus)*q.duration))
		}
		out.flat[string(tier)+"_start"] = start
		t.row(mark, trimMoneyOr(price), from, cost, start)
	}
}

// onDemandOf is the median on-demand price of the accepted models among
// the world's (all of them when any).
func onDemandOf(models []sim.ModelSummary, accepted []string) idlegrid.Micros {
	var ps []idlegrid.Micros
	for _, m := range models {
		if len(accepted) == 0 || slices.ContainsFunc(accepted, func(a string) bool { return strings.EqualFold(a, m.Model) }) {
			ps = append(ps, m.OnDemand)
		}
	}
	return trace.MedianMicros(ps)
}

func medianSeries(ps []idlegrid.Micros) (idlegrid.Micros, bool) {
	var xs []idlegrid.Micros
	for _, p := range ps {
		if p > 0 {
			xs = append(xs, p)
		}
	}
	if len(xs) == 0 {
		return 0, false
	}
	return trace.MedianMicros(xs), true
}

func waitText(ws []int32) string {
	if len(ws) == 0 {
		return "-"
	}
	return seconds(int64(pct32(ws, 50))) + " / " + seconds(int64(pct32(ws, 90)))
}

func pct32(ws []int32, p int) int32 {
	if len(ws) == 0 {
		return 0
	}
	s := slices.Clone(ws)
	slices.Sort(s)
	return s[min(len(s)-1, (len(s)*p+99)/100-1)]
}

// windowsText says when the GPUs are offered, as the user wrote it and as
// windows.
func (q *estimate) windowsText() string {
	if q.schedule.Mode == idlegrid.ScheduleAlways {
		return "always"
	}
	var ws []string
	for _, w := range q.schedule.Weekly {
		days := strings.Join(w.Days, "+")
		switch days {
		case strings.Join(allDays, "+"):
			days = "daily"
		case strings.Join(allDays[:5], "+"):
			days = "mon-fri"
		}
		ws = append(ws, fmt.Sprintf("%s %s-%s", days, w.Start, w.End))
	}
	return fmt.Sprintf("%s (%s, %s)", strings.Join(q.windowText, ","), strings.Join(ws, "; "), zoneName(q.tz))
}

func zoneName(tz string) string {
	if tz == "" {
		return "UTC"
	}
	return tz
}

func bps(b int64) string { return strconv.FormatFloat(float64(b)/100, 'f', -1, 64) + "%" }

// trimMoney shows money to the cent, or to a tenth of a cent below a
// dollar: "$412.70", "$0.405".
func trimMoney(m idlegrid.Micros) string {
	if m < 0 {
		return "-" + trimMoney(-m)
	}
	if milli := (int64(m) + 500) / 1000; milli < 1000 {
		return fmt.Sprintf("$0.%03d", milli)
	}
	cents := (int64(m) + 5000) / 10000
	return fmt.Sprintf("$%d.%02d", cents/100, cents%100)
}

func trimMoneyOr(m idlegrid.Micros) string {
	if m == 0 {
		return "-"
	}
	return trimMoney(m)
}

// counted is n and noun, plural but for one: "1 GPU", "3 cells".
func counted[N int | int64](n N, noun string) string {
	if n == 1 {
		return fmt.Sprintf("1 %s", noun)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
