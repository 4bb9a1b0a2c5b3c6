package sim_test

import (
	"context"
	"encoding/xml"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/sim"
	"github.com/idlegrid/idlegrid/internal/trace"
)

var testdata = filepath.Join("..", "..", "testdata", "traces")

// mustTraces reads the repository's trace slices: synthetic Alibaba pods
// and nodes, two days of three Helios VCs, and the price tables.
func mustTraces(tb testing.TB) sim.Config {
	tb.Helper()
	d, err := trace.ReadAlibabaPods(mustOpen(tb, filepath.Join(testdata, "alibaba", trace.AlibabaPodFile)), "pods", trace.AlibabaOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	an, err := trace.ReadAlibabaNodes(mustOpen(tb, filepath.Join(testdata, "alibaba", trace.AlibabaNodeFile)), "nodes", trace.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	s, err := trace.ReadHeliosDir(os.DirFS(filepath.Join(testdata, "helios", "earth_vc_minutely")), "helios", trace.HeliosOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	return sim.Config{Demand: d, Supply: s, Prices: mustPrices(tb), ModelMix: trace.ModelMix(an.Nodes), Seed: 1}
}

func mustOpen(tb testing.TB, path string) io.Reader {
	tb.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	return strings.NewReader(string(data))
}

func mustPrices(tb testing.TB) *trace.Prices {
	tb.Helper()
	p, err := trace.ReadPrices(os.DirFS(filepath.Join(testdata, "prices")), "prices", trace.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

func mustRun(tb testing.TB, cfg sim.Config) *sim.Result {
	tb.Helper()
	res, err := sim.Run(context.Background(), cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return res
}

// mustCSV reads generic demand and supply CSVs.
func mustCSV(tb testing.TB, demand, supply string) sim.Config {
	tb.Helper()
	d, err := trace.ReadDemandCSV(strings.NewReader(demand), "demand.csv", trace.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	s, err := trace.ReadSupplyCSV(strings.NewReader(supply), "supply.csv", trace.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	return sim.Config{Demand: d, Supply: s, Prices: mustPrices(tb), Seed: 1, Reliability: 1}
}

func TestRun_invariants(t *testing.T) {
	for _, tt := range []struct {
		name string
		edit func(*sim.Config)
	}{
		{"Traces", func(*sim.Config) {}},
		{"Checkpoints", func(c *sim.Config) { c.CheckpointEvery = 10 * time.Minute }},
		{"Loaded", func(c *sim.Config) { c.Jobs, c.Patience = 2000, 2*time.Hour }},
		{"Resampled", func(c *sim.Config) { c.Nodes, c.Jobs, c.Seed = 40, 600, 7 }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := mustTraces(t)
			tt.edit(&cfg)
			res := mustRun(t, cfg)
			if got := len(res.Runs); got != len(sim.DefaultRuns) {
				t.Fatalf("%d runs, want %d", got, len(sim.DefaultRuns))
			}
			if cfg.Nodes > 0 && res.World.Nodes != cfg.Nodes {
				t.Errorf("nodes = %d, want %d", res.World.Nodes, cfg.Nodes)
			}
			if cfg.Jobs > 0 && res.World.Jobs != cfg.Jobs {
				t.Errorf("jobs = %d, want %d", res.World.Jobs, cfg.Jobs)
			}
			for _, m := range res.Runs {
				checkInvariants(t, res, m)
			}
		})
	}
}

// checkInvariants checks what must hold of any run.
func checkInvariants(t *testing.T, res *sim.Result, m *sim.Metrics) {
	t.Helper()
	s := &m.Summary
	switch {
	case m.OfferedGPUSeconds != res.World.OfferedGPUSeconds:
		t.Errorf("%s: offered %d, world %d", m.Name, m.OfferedGPUSeconds, res.World.OfferedGPUSeconds)
	case m.LeasedGPUSeconds > m.OfferedGPUSeconds || s.FillRate > 1:
		t.Errorf("%s: leased %d of %d offered", m.Name, m.LeasedGPUSeconds, m.OfferedGPUSeconds)
	case m.UsefulGPUSeconds > m.LeasedGPUSeconds || m.PaidGPUSeconds > m.LeasedGPUSeconds:
		t.Errorf("%s: useful %d, paid %d, leased %d", m.Name, m.UsefulGPUSeconds, m.PaidGPUSeconds, m.LeasedGPUSeconds)
	case m.RenterCost != m.ProviderEarnings+m.Fees || m.Fees < 0 || m.Fees > m.RenterCost/5:
		t.Errorf("%s: cost %s, earnings %s, fees %s", m.Name, m.RenterCost, m.ProviderEarnings, m.Fees)
	case m.JobsStarted > m.JobsArrived || m.JobsCompleted > m.JobsStarted:
		t.Errorf("%s: %d arrived, %d started, %d completed", m.Name, m.JobsArrived, m.JobsStarted, m.JobsCompleted)
	case m.PlaceCalls == 0 || s.PlaceP99Nanos < s.PlaceP50Nanos:
		t.Errorf("%s: %d decisions, p50 %d p99 %d", m.Name, m.PlaceCalls, s.PlaceP50Nanos, s.PlaceP99Nanos)
	}
	// Every job that arrived ended one way.
	waiting := 0
	for _, n := range m.WaitingAtEnd {
		waiting += n
	}
	if got := m.JobsCompleted + s.NeverPlaced + m.GaveUpAfterRequeue + waiting + m.RunningAtEnd; got != m.JobsArrived {
		t.Errorf("%s: completed %d + never placed %d + gave up %d + waiting %d + running %d = %d, want the %d that arrived",
			m.Name, m.JobsCompleted, s.NeverPlaced, m.GaveUpAfterRequeue, waiting, m.RunningAtEnd, got, m.JobsArrived)
	}
	started := 0
	for tier, ws := range m.Waits {
		started += len(ws)
		for _, w := range ws {
			if w < 0 || w > int32(res.World.End.Sub(res.World.Start)/time.Second) {
				t.Fatalf("%s: %s wait %d s", m.Name, idlegrid.Tiers[tier], w)
			}
		}
	}
	if started != m.JobsStarted {
		t.Errorf("%s: %d waits for %d started jobs", m.Name, started, m.JobsStarted)
	}
	if m.Name != sim.RunEngine && (m.Preemptions != 0 || m.WindowStops != 0) {
		t.Errorf("%s: a baseline stopped %d leases for preemption and %d at window ends", m.Name, m.Preemptions, m.WindowStops)
	}
	var used int64
	for _, u := range m.UsedSeries {
		used += u
	}
	if used != m.LeasedGPUSeconds {
		t.Errorf("%s: the utilisation series sums to %d GPU-s, leases to %d", m.Name, used, m.LeasedGPUSeconds)
	}
}

func TestRun_deterministic(t *testing.T) {
	a, b := mustRun(t, mustTraces(t)), mustRun(t, mustTraces(t))
	fa, fb := a.Flat(), b.Flat()
	for k, v := range fa {
		if strings.Contains(k, "wall") || strings.Contains(k, "_us") || strings.Contains(k, "heap") || strings.Contains(k, "rss") {
			continue
		}
		if fb[k] != v {
			t.Errorf("%s: %v, then %v", k, v, fb[k])
		}
	}
	par := mustTraces(t)
	par.Parallel = 4
	var calls atomic.Int64
	par.Progress = func(sim.Progress) { calls.Add(1) }
	fp := mustRun(t, par).Flat()
	for k, v := range fa {
		if !strings.Contains(k, "wall") && !strings.Contains(k, "_us") && !strings.Contains(k, "heap") && !strings.Contains(k, "rss") && fp[k] != v {
			t.Errorf("in parallel, %s: %v, sequentially %v", k, fp[k], v)
		}
	}
	if calls.Load() < 4 {
		t.Errorf("progress called %d times, want at least once per run", calls.Load())
	}
	cfg := mustTraces(t)
	cfg.Seed = 2
	if c := mustRun(t, cfg).Flat(); c["engine_renter_cost_micros"] == fa["engine_renter_cost_micros"] && c["engine_failures"] == fa["engine_failures"] {
		t.Errorf("seed 2 replayed exactly as seed 1: the seed draws nothing")
	}
}

// A bronze lease holds the only GPU; a gold job arrives. The engine
// preempts the bronze lease with notice; the baselines make gold wait.
func TestRun_preemption(t *testing.T) {
	const supply = "node,gpu_model,gpus,region,window_start,window_end,ask\nn1,V100-32GB,1,eu-west,0,100000,0.50\n"
	const demand = "id,submit,duration,gpus,tier,max_price\nbatch,0,20000,1,bronze,1.00\nurgent,1000,3600,1,gold,3.00\n"
	for _, tt := range []struct {
		name       string
		checkpoint time.Duration
		lost       int64
	}{
		{"NoCheckpoints", 0, 1120},                    // ran 1000 s, then 120 s of notice
		{"Checkpoints", 10 * time.Minute, 1120 - 600}, // saved at 600 s
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := mustCSV(t, demand, supply)
			cfg.CheckpointEvery = tt.checkpoint
			res := mustRun(t, cfg)
			e := res.Run(sim.RunEngine)
			if e.Preemptions != 1 || e.PreemptedLostGPUSeconds != tt.lost {
				t.Errorf("engine: %d preemptions losing %d GPU-s, want 1 losing %d", e.Preemptions, e.PreemptedLostGPUSeconds, tt.lost)
			}
			if got := e.Waits[0]; len(got) != 1 || got[0] != 120 {
				t.Errorf("engine: gold waits %v s, want [120]: the notice", got)
			}
			if e.JobsCompleted != 2 {
				t.Errorf("engine: %d jobs completed, want both", e.JobsCompleted)
			}
			// useful work: both jobs whole; the bronze job's lost run is paid but not useful
			if want := int64(20000 + 3600); e.UsefulGPUSeconds != want || e.LeasedGPUSeconds != want+tt.lost {
				t.Errorf("engine: useful %d, leased %d; want %d and %d", e.UsefulGPUSeconds, e.LeasedGPUSeconds, want, want+tt.lost)
			}
			for _, name := range []string{sim.RunFIFO, sim.RunCheapest, sim.RunPayAsBid} {
				b := res.Run(name)
				if got := b.Waits[0]; len(got) != 1 || got[0] != 19000 {
					t.Errorf("%s: gold waits %v s, want [19000]: until the bronze job ends", name, got)
				}
				if b.Preemptions != 0 {
					t.Errorf("%s: %d preemptions", name, b.Preemptions)
				}
			}
		})
	}
}

// Second-score pricing against pay-as-bid: two nodes; the engine pays the
// winner the runner-up's score, the baselines pay the ask.
func TestRun_prices(t *testing.T) {
	const supply = "node,gpu_model,gpus,region,window_start,window_end,ask\n" +
		"cheap,V100-32GB,1,eu-west,0,10000,0.40\ndear,V100-32GB,1,eu-west,0,10000,0.90\n"
	const demand = "submit,duration,gpus,tier,max_price\n0,3600,1,silver,2.00\n"
	res := mustRun(t, mustCSV(t, demand, supply))
	// Both records are 20 of 20, so both score by their ask.
	want := map[string]idlegrid.Micros{sim.RunEngine: 900_000, sim.RunFIFO: 400_000, sim.RunCheapest: 400_000, sim.RunPayAsBid: 400_000}
	for name, price := range want {
		m := res.Run(name)
		if m.RenterCost != price {
			t.Errorf("%s: renter paid %s for one GPU-hour, want %s", name, m.RenterCost, price)
		}
	}
	if got := res.Run(sim.RunEngine).ProviderEarnings; got != 810_000 {
		t.Errorf("engine: provider earned %s, want $0.81 (10%% fee)", got)
	}
}

func TestRun_neverPlaced(t *testing.T) {
	const supply = "node,gpu_model,gpus,region,window_start,window_end\nn1,T4,1,eu-west,0,100000\n"
	const demand = "submit,duration,gpus,gpu_models,tier\n0,600,1,A100-80GB,silver\n10,600,1,T4,silver\n"
	cfg := mustCSV(t, demand, supply)
	cfg.Patience = time.Hour
	res := mustRun(t, cfg)
	for _, m := range res.Runs {
		if m.NeverPlaced["no node fits: gpu model"] != 1 || m.JobsCompleted != 1 {
			t.Errorf("%s: never placed %v, completed %d; want the A100 job never placed for its model, the T4 job done", m.Name, m.NeverPlaced, m.JobsCompleted)
		}
	}
}

func TestRun_failures(t *testing.T) {
	cfg := mustTraces(t)
	cfg.Reliability = 0.5
	res := mustRun(t, cfg)
	for _, m := range res.Runs {
		if m.Failures == 0 || m.FailedLostGPUSeconds == 0 {
			t.Errorf("%s: %d failures at reliability 0.5", m.Name, m.Failures)
		}
	}
	cfg.Reliability = 1
	for _, m := range mustRun(t, cfg).Runs {
		if m.Failures != 0 {
			t.Errorf("%s: %d failures at reliability 1", m.Name, m.Failures)
		}
	}
}

func TestRun_errors(t *testing.T) {
	cfg := mustTraces(t)
	cfg.Runs = []string{"round-robin"}
	if _, err := sim.Run(context.Background(), cfg); idlegrid.ErrorCode(err) != idlegrid.EINVALID {
		t.Errorf("unknown run: error %v, want invalid", err)
	}
	cfg = mustTraces(t)
	cfg.Align = sim.AlignNone // the synthetic pods count from 2024; the Helios days are in 2020
	if _, err := sim.Run(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "no job is submitted within the replay span") {
		t.Errorf("unaligned: error %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	cfg = mustTraces(t)
	cfg.Jobs = 20000
	if _, err := sim.Run(ctx, cfg); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: error %v", err)
	}
}

func TestResult_WritePlots(t *testing.T) {
	res := mustRun(t, mustTraces(t))
	paths, err := res.WritePlots(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	titles := map[string]string{
		"prices.svg": "Clearing prices per GPU model", "queue.svg": "Jobs queued per tier", "utilisation.svg": "GPUs offered and leased",
	}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := xml.Unmarshal(data, new(struct{})); err != nil {
			t.Errorf("%s is not well-formed XML: %v", p, err)
		}
		if want := titles[filepath.Base(p)]; !strings.Contains(string(data), want) {
			t.Errorf("%s lacks its title %q", p, want)
		}
		delete(titles, filepath.Base(p))
	}
	if len(titles) > 0 {
		t.Errorf("missing plots: %v", titles)
	}
}

func TestResult_WriteText(t *testing.T) {
	var b strings.Builder
	if err := mustRun(t, mustTraces(t)).WriteText(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"fill rate", "renter savings", "earnings per offered GPU-hour", "wait p50/p95/p99 gold",
		"preemptions", "jobs never placed", "time per decision", "engine", "fifo", "cheapest", "pay-as-bid", "notes:"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, b.String())
		}
	}
}

func TestReasonCategory(t *testing.T) {
	for in, want := range map[string]string{
		"no node fits: 3 cap below ask, 2 window too short":                                                                "no node fits: cap below ask",
		"no node fits: 3 cap below ask; the cheapest that matches asks $2.000000/GPU-h now, above the cap $1.500000/GPU-h": "no node fits: cap below ask",
		"no room now: of the 5 nodes that match ...":                                                                       "no room: no matching node free, open long enough and within the cap",
		"waiting for its reservation: 2 GPUs on n1 from x":                                                                 "holding a reservation that had not started",
		"": "never tried",
	} {
		if got := sim.ReasonCategory(in); got != want {
			t.Errorf("ReasonCategory(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestScheduleWindows(t *testing.T) {
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Skip("no time zone data:", err)
	}
	start := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC) // a Monday
	nights := idlegrid.Schedule{Mode: idlegrid.ScheduleWindows, TimeZone: "Europe/Paris", Weekly: []idlegrid.WeeklyWindow{
		{Days: []string{"mon", "tue", "wed", "thu", "fri", "sat", "sun"}, Start: "22:00", End: "08:00"}}}
	ws := sim.ScheduleWindows(nights, start, start.Add(7*24*time.Hour))
	// Monday 00:00 UTC is 01:00 in Paris, inside Sunday night's window.
	if len(ws) != 8 || !ws[0].Start.Equal(start) || !ws[0].End.Equal(time.Date(2024, 1, 1, 8, 0, 0, 0, paris)) {
		t.Fatalf("windows = %v, want 8, the first from the start to 08:00 Paris", ws)
	}
	var hours float64
	for _, w := range ws {
		hours += w.End.Sub(w.Start).Hours()
	}
	if hours != 70 {
		t.Errorf("%v hours, want 70 (10 a night)", hours)
	}
	always := sim.ScheduleWindows(idlegrid.Schedule{Mode: idlegrid.ScheduleAlways}, start, start.Add(60*24*time.Hour))
	if len(always) != 1 || !always[0].End.Equal(start.Add(60*24*time.Hour)) {
		t.Errorf("always = %v, want one window over the whole span", always)
	}
}

// TestRun_bronzeWindows checks that the engine starts bronze that cannot
// resume only in a window that covers its run, and lets bronze that
// checkpoints take a shorter one first, to be stopped at its end and
// resumed. The baselines never use a short window.
func TestRun_bronzeWindows(t *testing.T) {
	const supply = "node,gpu_model,gpus,region,window_start,window_end\nn1,T4,1,eu-west,0,1800\nn2,T4,1,eu-west,3600,100000\n"
	const demand = "submit,duration,gpus,gpu_models,tier\n0,7200,1,T4,bronze\n"
	const saysItself = "submit,duration,gpus,gpu_models,tier,checkpoint_every\n0,7200,1,T4,bronze,10m\n"
	for _, tc := range []struct {
		demand     string
		every      time.Duration
		stops      int
		waitAtMost int32
	}{
		{demand, 0, 0, 3600},               // it waits for n2
		{demand, 10 * time.Minute, 1, 0},   // it starts on n1 at once
		{saysItself, 0, 1, 0},              // the job's own interval
		{saysItself, 10 * time.Hour, 1, 0}, // ... wins over the replay's
	} {
		cfg := mustCSV(t, tc.demand, supply)
		cfg.CheckpointEvery = tc.every
		for _, m := range mustRun(t, cfg).Runs {
			stops, waitAtMost := 0, int32(3600)
			if m.Name == "engine" {
				stops, waitAtMost = tc.stops, tc.waitAtMost
			}
			if m.WindowStops != stops || m.JobsCompleted != 1 || len(m.Waits[2]) != 1 || m.Waits[2][0] > waitAtMost {
				t.Errorf("%q, checkpoint every %v, %s: %d window-end stops, %d completed, bronze waits %v; want %d stops, 1 completed, a wait of at most %ds",
					tc.demand, tc.every, m.Name, m.WindowStops, m.JobsCompleted, m.Waits[2], stops, waitAtMost)
			}
		}
	}
}

// The engine's estimated start, asked when a job first waits, is held up
// against its actual start: on one GPU, a bronze job that waits for the
// running one, and a shorter bronze job behind it that waits for both,
// start when estimated.
func TestRun_estimates(t *testing.T) {
	const supply = "node,gpu_model,gpus,region,window_start,window_end\nn1,T4,1,eu-west,0,100000\n"
	const demand = "submit,duration,gpus,gpu_models,tier\n0,3600,1,T4,silver\n60,1800,1,T4,bronze\n120,600,1,T4,bronze\n"
	for _, m := range mustRun(t, mustCSV(t, demand, supply)).Runs {
		e := &m.Estimates
		if m.Name != "engine" {
			if e.Asked != 0 {
				t.Errorf("%s: %d estimates asked; only the engine estimates", m.Name, e.Asked)
			}
			continue
		}
		s := &m.Summary
		if e.Asked != 2 || e.Unknown != 0 || !slices.Equal(e.Late[2], []int32{0, 0}) || s.OnTimeByTier[2] != 1 || s.NearByTier[2] != 1 || s.MeanErrorByTier[2] != 0 {
			t.Errorf("engine: asked %d, unknown %d, late %v, on time %.2f, near %.2f, off by %ds; want 2 asked, both started when estimated",
				e.Asked, e.Unknown, e.Late, s.OnTime, s.NearByTier[2], s.MeanErrorByTier[2])
		}
	}
}

// A bronze job that checkpoints may start in a window too short for its
// run, so a pass must not skip it as dominated by a twin that cannot
// resume and failed to start: here b starts on n1 at once, while a waits
// for n2.
func TestRun_dominanceKeepsCheckpoints(t *testing.T) {
	const supply = "node,gpu_model,gpus,region,window_start,window_end\nn1,T4,1,eu-west,0,1800\nn2,T4,1,eu-west,3600,100000\n"
	const demand = "id,submit,duration,gpus,gpu_models,tier,checkpoint_every\na,0,7200,1,T4,bronze,\nb,0,7200,1,T4,bronze,10m\n"
	cfg := mustCSV(t, demand, supply)
	cfg.Runs = []string{sim.RunEngine}
	e := mustRun(t, cfg).Run(sim.RunEngine)
	waits := slices.Sorted(slices.Values(e.Waits[2]))
	if !slices.Equal(waits, []int32{0, 3600}) || e.WindowStops != 1 {
		t.Errorf("bronze waits %v s, %d window-end stops; want [0 3600]: b starts on n1 at once and is stopped at its end, a waits for n2", waits, e.WindowStops)
	}
}

// A job is asked for its estimated start when it first waits, even when
// the pass skips it as dominated: c, the twin of b, is asked on arrival,
// before the gold job g arrives to go ahead of both, so both bronze jobs
// start 1800 s after their estimates. Asked only when first really tried
// (once b had started), c would look on time.
func TestRun_estimateWhenFirstWaiting(t *testing.T) {
	const supply = "node,gpu_model,gpus,region,window_start,window_end\nn1,T4,1,eu-west,0,100000\n"
	const demand = "id,submit,duration,gpus,gpu_models,tier\na,0,3600,1,T4,silver\nb,60,1800,1,T4,bronze\nc,60,1800,1,T4,bronze\ng,120,1800,1,T4,gold\n"
	cfg := mustCSV(t, demand, supply)
	cfg.Runs = []string{sim.RunEngine}
	e := mustRun(t, cfg).Run(sim.RunEngine)
	if got := e.Estimates; got.Asked != 3 || !slices.Equal(got.Late[2], []int32{1800, 1800}) {
		t.Errorf("asked %d, bronze late %v s; want 3 asked (b, c, g), both bronze jobs 1800 s late", got.Asked, got.Late[2])
	}
}

// A job skipped as dominated by one the engine had no estimate for in
// the same pass has none either, and is counted so without a second
// Explain: no window is long enough for either job here.
func TestRun_noEstimateForDominated(t *testing.T) {
	const supply = "node,gpu_model,gpus,region,window_start,window_end\nn1,T4,1,eu-west,0,3600\n"
	const demand = "id,submit,duration,gpus,gpu_models,tier\nx,0,7200,1,T4,silver\ny,0,9000,1,T4,silver\n"
	cfg := mustCSV(t, demand, supply)
	cfg.Runs = []string{sim.RunEngine}
	e := mustRun(t, cfg).Run(sim.RunEngine)
	if got := e.Estimates; got.Asked != 2 || got.Unknown != 2 || e.Skipped == 0 {
		t.Errorf("asked %d, unknown %d, skipped %d; want both asked, neither estimated, y skipped", got.Asked, got.Unknown, e.Skipped)
	}
}

// The estimator's probe jobs add up: each one sent started, gave up
// without starting, or was still waiting when the replay ended.
func TestRun_probesAddUp(t *testing.T) {
	cfg := mustCSV(t, "submit,duration,gpus\n0,600,1\n",
		"node,gpu_model,gpus,region,window_start,window_end\na,T4,1,eu-west,0,345600\n")
	cfg.Runs = []string{sim.RunEngine}
	cfg.Probes = []sim.Probe{{Every: 6 * time.Hour, Job: trace.Job{GPUs: 2, DurationSeconds: 600, Tier: idlegrid.TierSilver}}}
	p := mustRun(t, cfg).Run(sim.RunEngine).Probes[idlegrid.TierSilver.Rank()]
	if p.Sent != 16 || p.Started != 0 {
		t.Fatalf("probes %+v, want 16 sent, none started", p)
	}
	if p.GaveUp+p.Waiting != p.Sent || p.Waiting != 4 {
		t.Errorf("%d sent: %d gave up, %d still waiting at the end; want 12 and 4", p.Sent, p.GaveUp, p.Waiting)
	}
}

// With no work done there is nothing to save on: savings are unknown, not
// 0%, in the text and in --json.
func TestResult_noSavingsWithoutWork(t *testing.T) {
	cfg := mustCSV(t, "submit,duration,gpus,gpu_models\n0,3600,1,H100\n",
		"node,gpu_model,gpus,region,window_start,window_end\na,T4,1,eu-west,0,86400\n")
	cfg.Runs = []string{sim.RunEngine}
	res := mustRun(t, cfg)
	for _, k := range []string{"engine_savings_pct", "engine_wait_p50_s_silver", "engine_wait_p99_s_gold"} {
		if v, ok := res.Flat()[k]; !ok || v != nil {
			t.Errorf("%s = %v (%v), want null", k, v, ok)
		}
	}
	var b strings.Builder
	if err := res.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(b.String(), "\n") {
		if strings.Contains(line, "renter savings") && !strings.HasSuffix(strings.TrimSpace(line), " -") {
			t.Errorf("savings with no work done: %q, want -", line)
		}
	}
}
