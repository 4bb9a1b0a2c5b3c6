package cli

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/httpapi/wire"
)

// traceData is the repository's trace slices, laid out as ../shared/data is.
var traceData = filepath.Join("..", "..", "testdata", "traces")

// traceArgs point sim and estimate at the slices.
func traceArgs() []string {
	return []string{
		"--demand", "alibaba:" + filepath.Join(traceData, "alibaba"),
		"--supply", "helios:" + filepath.Join(traceData, "helios"),
		"--prices", filepath.Join(traceData, "prices"),
	}
}

// noData is an environment whose default trace folder does not exist.
var noData = map[string]string{"IDLEGRID_TRACE_DATA": filepath.Join("testdata", "no-such-folder")}

func mustSimJSON(tb testing.TB, r result) map[string]any {
	tb.Helper()
	if r.code != 0 {
		tb.Fatalf("got %s, want exit 0", r)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(r.out), &m); err != nil {
		tb.Fatalf("stdout is not one JSON object: %v\n%s", err, r)
	}
	return m
}

func TestSim_Run(t *testing.T) {
	t.Run("JSON", func(t *testing.T) {
		m := mustSimJSON(t, run(t, noData, append([]string{"sim", "--json", "--quiet"}, traceArgs()...)...))
		for _, k := range []string{"nodes", "jobs", "offered_gpu_hours", "engine_fill_rate", "fifo_fill_rate", "cheapest_fill_rate",
			"pay_as_bid_fill_rate", "engine_savings_pct", "engine_earnings_per_offered_gpu_hour_micros", "engine_wait_p95_s_gold",
			"engine_preemptions", "engine_jobs_never_placed", "engine_place_p99_us", "peak_rss_bytes"} {
			if _, ok := m[k]; !ok {
				t.Errorf("no %q in %v", k, m)
			}
		}
		if m["jobs"].(float64) != 60 || m["engine_jobs_arrived"].(float64) != 60 {
			t.Errorf("jobs = %v, arrived %v; want the slice's 60", m["jobs"], m["engine_jobs_arrived"])
		}
	})
	t.Run("TextAndPlots", func(t *testing.T) {
		dir := t.TempDir()
		r := run(t, noData, append([]string{"sim", "--out", dir, "--runs", "engine,pay-as-bid", "--seed", "3"}, traceArgs()...)...)
		if r.code != 0 {
			t.Fatalf("got %s", r)
		}
		for _, want := range []string{"fill rate", "renter savings", "pay-as-bid", "plots and metrics written to " + dir} {
			if !strings.Contains(r.out, want) {
				t.Errorf("stdout lacks %q:\n%s", want, r.out)
			}
		}
		if strings.Contains(r.out, "fifo") {
			t.Errorf("--runs engine,pay-as-bid ran fifo:\n%s", r.out)
		}
		for _, f := range []string{"utilisation.svg", "prices.svg", "queue.svg", "metrics.json", "summary.txt"} {
			if fi, err := os.Stat(filepath.Join(dir, f)); err != nil || fi.Size() == 0 {
				t.Errorf("%s: %v", f, err)
			}
		}
		// Not a terminal: one progress line per run, as it ends.
		if n := strings.Count(r.err, "100% "); n != 2 {
			t.Errorf("stderr has %d finished runs, want 2:\n%s", n, r.err)
		}
	})
	t.Run("Resample", func(t *testing.T) {
		m := mustSimJSON(t, run(t, noData, append([]string{"sim", "--json", "--quiet", "--nodes", "30", "--jobs", "500", "--runs", "engine"}, traceArgs()...)...))
		if m["nodes"].(float64) != 30 || m["jobs"].(float64) != 500 {
			t.Errorf("nodes %v, jobs %v; want 30 and 500", m["nodes"], m["jobs"])
		}
	})
}

func TestSim_BadRows(t *testing.T) {
	dir := t.TempDir()
	demand := filepath.Join(dir, "jobs.csv")
	mustWriteFile(t, demand, "submit,duration,gpus,tier\n0,1h,1,gold\n600,90m,0,silver\n1200,30m,2,bronze\n")
	supply := filepath.Join(dir, "nodes.csv")
	mustWriteFile(t, supply, "node,gpu_model,gpus,window_start,window_end,ask\nn1,T4,4,0,86400,0.30\n")
	args := []string{"sim", "--demand", "csv:" + demand, "--supply", "csv:" + supply, "--prices", filepath.Join(traceData, "prices"), "--quiet"}
	r := run(t, noData, args...)
	if want := demand + " line 3: gpus: must be between 1 and 16, got 0"; r.code != 1 || !strings.Contains(r.err, want) {
		t.Fatalf("got %s\nwant exit 1 naming the line: %q", r, want)
	}
	m := mustSimJSON(t, run(t, noData, append(args, "--bad-rows", "skip", "--json")...))
	if m["demand_rows_skipped"].(float64) != 1 || m["jobs"].(float64) != 2 {
		t.Errorf("skipped %v, jobs %v; want 1 and 2", m["demand_rows_skipped"], m["jobs"])
	}
	// A flag's value refused is a mistake in the command line: exit 2.
	if r := run(t, noData, append(args, "--bad-rows", "maybe")...); r.code != 2 || !strings.Contains(r.err, "--bad-rows: must be fail or skip") {
		t.Errorf("--bad-rows maybe: %s", r)
	}
}

func TestSim_NoData(t *testing.T) {
	r := run(t, noData, "sim")
	for _, want := range []string{"no demand trace at", "github.com/alibaba/clusterdata", "HeliosArtifact", "docs/traces.md"} {
		if r.code != 1 || !strings.Contains(r.err, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r)
		}
	}
	if r := run(t, noData, "sim", "--demand", "kaggle:x.csv"); r.code != 2 || !strings.Contains(r.err, `unknown kind "kaggle"`) {
		t.Errorf("bad kind: %s", r)
	}
}

func mustWriteFile(tb testing.TB, path, data string) {
	tb.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		tb.Fatal(err)
	}
}

func TestEstimate_Trace(t *testing.T) {
	t.Run("Provider", func(t *testing.T) {
		r := run(t, noData, append([]string{"estimate", "--provider", "--gpus", "8xV100-32GB", "--region", "eu-west",
			"--windows", "nights,weekends", "--ask", "0.30"}, traceArgs()...)...)
		for _, want := range []string{"8 x V100-32GB in eu-west", "nights,weekends", "expected fill rate", "expected monthly earnings", "assumptions:", "Europe/Paris"} {
			if r.code != 0 || !strings.Contains(r.out, want) {
				t.Errorf("stdout lacks %q:\n%s", want, r)
			}
		}
		m := mustSimJSON(t, run(t, noData, append([]string{"estimate", "--provider", "--gpus", "8xV100-32GB", "--region", "eu-west",
			"--windows", "always", "--ask", "0.05", "--json"}, traceArgs()...)...))
		if f := m["fill_rate"].(float64); f <= 0 || f > 1 || m["fill_rate_min"].(float64) > f || m["fill_rate_max"].(float64) < f {
			t.Errorf("a cheap node always on: fill %v (%v to %v), want some, within its range", f, m["fill_rate_min"], m["fill_rate_max"])
		}
		if m["replays"].(float64) != 5 {
			t.Errorf("replays = %v, want 5", m["replays"])
		}
	})
	t.Run("Renter", func(t *testing.T) {
		job := filepath.Join(t.TempDir(), "job.yaml")
		mustWriteFile(t, job, "image: ghcr.io/acme/train:1\ngpus: 1\ntier: bronze\nduration: 1h\ncheckpoint_every: 30m\n")
		r := run(t, noData, append([]string{"estimate", "--renter", "--job", job, "--probe-every", "3h"}, traceArgs()...)...)
		for _, want := range []string{"your job: 1 GPU(s) of any model in any region for 1h0m0s, checkpoints every 30m0s", "TIER", "bronze (yours)", "TIME TO START", "assumptions:"} {
			if r.code != 0 || !strings.Contains(r.out, want) {
				t.Errorf("stdout lacks %q:\n%s", want, r)
			}
		}
		m := mustSimJSON(t, run(t, noData, append([]string{"estimate", "--renter", "--gpus", "1", "--duration", "30m", "--json", "--probe-every", "3h"}, traceArgs()...)...))
		if m["silver_sent"].(float64) != 5*16 { // 48 h, one every 3 h, in each of 5 replays
			t.Errorf("silver probes sent = %v, want 80", m["silver_sent"])
		}
		m = mustSimJSON(t, run(t, noData, append([]string{"estimate", "--renter", "--gpus", "1", "--duration", "30m", "--json", "--probe-every", "3h", "--replays", "1"}, traceArgs()...)...))
		if m["silver_sent"].(float64) != 16 {
			t.Errorf("one replay: silver probes sent = %v, want 16", m["silver_sent"])
		}
	})
	for _, tt := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"NeitherSide", []string{"estimate"}, 2, "give --provider or --renter"},
		{"NoModel", []string{"estimate", "--provider", "--gpus", "2", "--region", "eu-west", "--ask", "1"}, 2, "--gpus: name the model too"},
		{"BadWindows", []string{"estimate", "--provider", "--gpus", "1xT4", "--region", "eu-west", "--ask", "1", "--windows", "lunch"}, 2, `--windows: unknown window "lunch"`},
		{"BadDays", []string{"estimate", "--provider", "--gpus", "1xT4", "--region", "eu-west", "--ask", "1", "--windows", "mon-fry/10:00-12:00"}, 2, "--windows: unknown days"},
		{"NoDuration", []string{"estimate", "--renter", "--gpus", "1"}, 2, "--duration: required"},
		{"BadCheckpoint", []string{"estimate", "--renter", "--gpus", "1", "--duration", "1h", "--checkpoint-every", "soon"}, 2, "must be a duration such as 90m"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if r := run(t, noData, tt.args...); r.code != tt.code || !strings.Contains(r.err, tt.want) {
				t.Errorf("got %s\nwant exit %d and %q", r, tt.code, tt.want)
			}
		})
	}
}

// Every probe job sent is counted once: started, gave up, or still queued
// when the replay ended; NEVER STARTED counts the last two.
func TestEstimate_TraceProbesAddUp(t *testing.T) {
	args := append([]string{"estimate", "--renter", "--gpus", "1xH100", "--duration", "30m", "--probe-every", "3h", "--replays", "1"}, traceArgs()...)
	m := mustSimJSON(t, run(t, noData, append(args, "--json")...))
	for _, tier := range []string{"gold", "silver", "bronze"} {
		sent, started, gaveUp, waiting := m[tier+"_sent"], m[tier+"_started"], m[tier+"_gave_up"], m[tier+"_waiting_at_end"]
		if sent != 16.0 || started != 0.0 || gaveUp != 8.0 || waiting != 8.0 {
			t.Errorf("%s: sent %v, started %v, gave up %v, still queued %v; want 16, 0, 8, 8 (no node has an H100; 24 h of patience in 48 h)",
				tier, sent, started, gaveUp, waiting)
		}
	}
	r := run(t, noData, args...)
	if want := "0 of 16  -                      -                  -         16 (8 still queued at the end)"; r.code != 0 || !strings.Contains(r.out, want) {
		t.Errorf("got %s\nwant a row ending %q", r, want)
	}
	if want := "note: no node in the replayed supply has a GPU of model H100-80GB, so the job never starts; its models: "; !strings.Contains(r.out, want) {
		t.Errorf("got %s\nwant it to say why no probe started: %q", r, want)
	}
}

// A renter estimate for a model or region the replayed supply lacks says
// so, with what it has; one the supply has says nothing of the kind.
func TestEstimate_TraceOutsideSupply(t *testing.T) {
	base := append([]string{"estimate", "--renter", "--duration", "30m", "--probe-every", "6h", "--replays", "1", "--json"}, traceArgs()...)
	m := mustSimJSON(t, run(t, noData, append(base, "--gpus", "1", "--region", "mars-1")...))
	notes, _ := m["notes"].([]any)
	if len(notes) != 1 || !strings.Contains(notes[0].(string), "no node in the replayed supply is in region mars-1") ||
		!strings.Contains(notes[0].(string), "its regions: ") {
		t.Errorf("notes = %v, want one naming region mars-1 and the supply's regions", m["notes"])
	}
	m = mustSimJSON(t, run(t, noData, append(base, "--gpus", "1xV100-32GB")...))
	if notes, _ := m["notes"].([]any); len(notes) != 0 || m["silver_started"].(float64) == 0 {
		t.Errorf("a model the supply has: notes %v, %v started; want none and some", m["notes"], m["silver_started"])
	}
}

// TestEstimate_Live reads a market from a server that answers GET
// /v1/market as the real one does.
func TestEstimate_Live(t *testing.T) {
	now := time.Date(2025, 3, 10, 12, 0, 0, 0, time.UTC)
	stats := []wire.MarketStat{
		{GPUModel: "RTX4090", Region: "eu-west", SupplyGPUs: 10, FreeGPUs: 6, QueuedGPUs: 0, FillRate: 0.4,
			Prices: []wire.PricePoint{
				{At: now, Tier: idlegrid.TierSilver, PriceMicrosPerGPUHour: 300_000, GPUs: 1},
				{At: now, Tier: idlegrid.TierSilver, PriceMicrosPerGPUHour: 500_000, GPUs: 1},
				{At: now, Tier: idlegrid.TierSilver, PriceMicrosPerGPUHour: 600_000, GPUs: 1},
				{At: now, Tier: idlegrid.TierBronze, PriceMicrosPerGPUHour: 200_000, GPUs: 1},
			},
			SuggestedAsk: map[idlegrid.Tier]idlegrid.Micros{idlegrid.TierGold: 700_000, idlegrid.TierSilver: 500_000, idlegrid.TierBronze: 250_000}},
		{GPUModel: "A100-80GB", Region: "us-east", SupplyGPUs: 8, FreeGPUs: 0, QueuedGPUs: 4, FillRate: 1},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/market" || r.Header.Get("Authorization") != "Bearer k" {
			http.Error(w, `{"error":{"code":"not_found","message":"no"}}`, http.StatusNotFound)
			return
		}
		json.NewEncoder(w).Encode(stats)
	}))
	defer srv.Close()
	t.Run("Provider", func(t *testing.T) {
		r := run(t, noData, "estimate", "--provider", "--gpus", "2xRTX4090", "--region", "eu-west", "--windows", "always",
			"--ask", "0.40", "--addr", srv.URL, "--key", "k", "--json")
		m := mustSimJSON(t, r)
		// Fill 40% × the 3 of 4 prices a 0.40 ask would have won (0.50, 0.60 silver; 0.20 bronze ≥ 0.24? no; 0.30 < 0.40).
		if got := m["fill_rate"].(float64); got < 0.199 || got > 0.201 {
			t.Errorf("fill = %v, want 0.4 × 2/4 = 0.2", got)
		}
		if got := m["expected_price_micros"].(float64); got != 500_000 {
			t.Errorf("price = %v, want the median of 0.50 and 0.60 (the lower), 500000", got)
		}
		// 2 GPUs × 720 h × 0.2 × $0.50 × 90% = $129.60
		if got := m["monthly_earnings_micros"].(float64); got != 129_600_000 {
			t.Errorf("monthly = %v, want 129600000", got)
		}
		if m["mode"] != "live" {
			t.Errorf("mode = %v", m["mode"])
		}
	})
	t.Run("ProviderNoSuchModel", func(t *testing.T) {
		r := run(t, noData, "estimate", "--provider", "--gpus", "1xH100", "--region", "eu-west", "--ask", "2", "--addr", srv.URL, "--key", "k")
		if r.code != 0 || !strings.Contains(r.out, "the live market has no H100-80GB yet") {
			t.Errorf("got %s", r)
		}
	})
	t.Run("Renter", func(t *testing.T) {
		r := run(t, noData, "estimate", "--renter", "--gpus", "1xRTX4090", "--duration", "2h", "--addr", srv.URL, "--key", "k")
		for _, want := range []string{"silver", "$0.500", "median of 3 recent prices", "$1.00", "likely now", "gold", "suggested asks", "assumptions:"} {
			if r.code != 0 || !strings.Contains(r.out, want) {
				t.Errorf("stdout lacks %q:\n%s", want, r)
			}
		}
		m := mustSimJSON(t, run(t, noData, "estimate", "--renter", "--gpus", "1xA100-80GB", "--duration", "1h", "--addr", srv.URL, "--key", "k", "--json"))
		if m["silver_start"] != "unknown: no matching supply" {
			t.Errorf("A100 with no prices: start %v", m["silver_start"])
		}
	})
	t.Run("NoKey", func(t *testing.T) {
		if r := run(t, noData, "estimate", "--renter", "--gpus", "1", "--duration", "1h", "--addr", srv.URL); r.code != 1 || !strings.Contains(r.err, "no API key") {
			t.Errorf("got %s", r)
		}
	})
}

// --fee-bps 0 is no fee, as in 'idlegrid sim', not the replay's default
// 10%: a provider keeps every charge.
func TestEstimate_FeeZero(t *testing.T) {
	earnings := func(fee string) float64 {
		m := mustSimJSON(t, run(t, noData, append([]string{"estimate", "--provider", "--gpus", "8xV100-32GB", "--region", "eu-west",
			"--windows", "always", "--ask", "0.05", "--replays", "1", "--fee-bps", fee, "--json"}, traceArgs()...)...))
		return m["monthly_earnings_micros"].(float64)
	}
	none, tenth := earnings("0"), earnings("1000")
	if tenth <= 0 || none < tenth/0.9*0.999 || none > tenth/0.9*1.001 {
		t.Errorf("monthly earnings %v with no fee, %v with 10%%; want the first 10/9 of the second", none, tenth)
	}
}

// mustBadPrices writes the slice's price tables with one bad row added
// to the cloud table, line 80.
func mustBadPrices(tb testing.TB) string {
	tb.Helper()
	dir := tb.TempDir()
	cloud, err := os.ReadFile(filepath.Join(traceData, "prices", "cloud-gpus.csv"))
	if err != nil {
		tb.Fatal(err)
	}
	if n := strings.Count(string(cloud), "\n"); n != 79 {
		tb.Fatalf("the slice's cloud table has %d lines, want 79", n)
	}
	mustWriteFile(tb, filepath.Join(dir, "cloud-gpus.csv"), string(cloud)+"Nimbus,T4 (16 GB),Turing,1,16,4,16,0.50,cheap,,n1\n")
	return dir
}

// Bad rows of the price tables are skipped as the traces' are: counted,
// and the first shown, in the text and in --json.
func TestSim_BadPriceRows(t *testing.T) {
	args := []string{"sim", "--demand", "alibaba:" + filepath.Join(traceData, "alibaba"), "--supply", "helios:" + filepath.Join(traceData, "helios"),
		"--prices", mustBadPrices(t), "--quiet", "--runs", "engine"}
	if r := run(t, noData, args...); r.code != 1 || !strings.Contains(r.err, "cloud-gpus.csv line 80: per-gpu") {
		t.Fatalf("got %s\nwant exit 1 naming line 80", r)
	}
	r := run(t, noData, append(args, "--bad-rows", "skip")...)
	if want := "price tables: 79 rows, 1 bad rows skipped (e.g. "; r.code != 0 || !strings.Contains(r.out, want) || !strings.Contains(r.out, "cloud-gpus.csv line 80: per-gpu") {
		t.Errorf("got %s\nwant %q naming line 80", r, want)
	}
	m := mustSimJSON(t, run(t, noData, append(args, "--bad-rows", "skip", "--json")...))
	if m["prices_rows_skipped"] != 1.0 || m["prices_rows"] != 79.0 {
		t.Errorf("prices_rows_skipped %v, prices_rows %v; want 1 and 79", m["prices_rows_skipped"], m["prices_rows"])
	}
	est := []string{"estimate", "--provider", "--gpus", "1xV100-32GB", "--region", "eu-west", "--ask", "0.30", "--replays", "1",
		"--demand", "alibaba:" + filepath.Join(traceData, "alibaba"), "--supply", "helios:" + filepath.Join(traceData, "helios"),
		"--prices", mustBadPrices(t), "--bad-rows", "skip"}
	if r := run(t, noData, est...); r.code != 0 || !strings.Contains(r.out, "1 bad row of the price tables skipped") {
		t.Errorf("estimate: got %s\nwant the skipped row among the assumptions", r)
	}
	m = mustSimJSON(t, run(t, noData, append(est, "--json")...))
	if m["prices_rows_skipped"] != 1.0 || m["demand_rows_skipped"] != 0.0 {
		t.Errorf("estimate: prices_rows_skipped %v, demand_rows_skipped %v; want 1 and 0", m["prices_rows_skipped"], m["demand_rows_skipped"])
	}
}

// Flags the replay would otherwise bend silently are refused, naming the
// flag, with exit 2.
func TestSim_flagErrors(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--fee-bps", "-1"}, "--fee-bps must be between 0 and 10000, got -1"},
		{[]string{"--fee-bps", "10001"}, "--fee-bps must be between 0 and 10000, got 10001"},
		{[]string{"--runs", "engine,fifo,engine"}, "--runs names engine twice; name each run once"},
		{[]string{"--runs", "engine,foo"}, `--runs: unknown run "foo"; use engine, fifo, cheapest, pay-as-bid`},
		{[]string{"--parallel", "0"}, "--parallel must be at least 1, got 0"},
		{[]string{"--helios-node-gpus", "0"}, "--helios-node-gpus must be between 1 and 64, got 0"},
		{[]string{"--helios-node-gpus", "-8"}, "--helios-node-gpus must be between 1 and 64, got -8"},
	} {
		args := append(append([]string{"sim", "--quiet"}, traceArgs()...), tt.args...)
		if r := run(t, noData, args...); r.code != 2 || !strings.Contains(r.err, tt.want) {
			t.Errorf("%v: got %s\nwant exit 2 and %q", tt.args, r, tt.want)
		}
	}
}

func TestEstimate_flagErrors(t *testing.T) {
	provider := []string{"estimate", "--provider", "--gpus", "1xT4", "--region", "eu-west", "--ask", "0.30"}
	renter := []string{"estimate", "--renter", "--gpus", "1", "--duration", "1h"}
	job := filepath.Join(t.TempDir(), "job.yaml")
	mustWriteFile(t, job, "image: ghcr.io/acme/train:1\ngpus: 1\nduration: 1h\nmax_price: 2.00\n")
	for _, tt := range []struct {
		args []string
		want string
	}{
		{append(provider, "--fee-bps", "20000"), "--fee-bps must be between 0 and 10000, got 20000"},
		{append(renter, "--fee-bps", "-5"), "--fee-bps must be between 0 and 10000, got -5"},
		{append(renter, "--max-price", "-1"), "--max-price: must be above 0"},
		{append(renter, "--max-price", "0"), "--max-price: must be above 0"},
		{[]string{"estimate", "--renter", "--job", job, "--max-price", "0"}, "--max-price: must be above 0"},
		{append(renter, "--probe-every", "500ms"), "--probe-every must be at least 1s, got 500ms"},
		{append(provider, "--jobs", "-5"), "--jobs must not be negative (0: as in the trace), got -5"},
		{append(provider, "--replays", "-3"), "--replays must be at least 1, got -3"},
		{append(renter, "--replays", "0"), "--replays must be at least 1, got 0"},
		{append(provider, "--helios-node-gpus", "0"), "--helios-node-gpus must be between 1 and 64, got 0"},
	} {
		args := append(slices.Clone(tt.args), traceArgs()...)
		if r := run(t, noData, args...); r.code != 2 || !strings.Contains(r.err, tt.want) {
			t.Errorf("%v: got %s\nwant exit 2 and %q", tt.args, r, tt.want)
		}
	}
}
