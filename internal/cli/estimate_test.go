package cli

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/httpapi/wire"
)

func TestEstimate_parse(t *testing.T) {
	for in, want := range map[string]struct {
		n     int
		model string
	}{"1xRTX4090": {1, "RTX4090"}, "8 x V100 (32 GB)": {8, "V100-32GB"}, "2": {2, ""}, "4×A100-80GB": {4, "A100-80GB"}} {
		n, model, err := parseGPUs(in)
		if err != nil || n != want.n || model != want.model {
			t.Errorf("parseGPUs(%q) = %d, %q, %v; want %d, %q", in, n, model, err, want.n, want.model)
		}
	}
	for _, in := range []string{"", "x4090", "0xT4", "99xT4"} {
		if _, _, err := parseGPUs(in); idlegrid.ErrorCode(err) != idlegrid.EINVALID {
			t.Errorf("parseGPUs(%q): error %v, want invalid", in, err)
		}
	}
	s, err := parseWindows("nights,weekends,fri-mon/12:00-13:00", "Europe/Paris")
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Weekly) != 3 || len(s.Weekly[2].Days) != 4 || s.Weekly[2].Days[0] != "fri" || s.Weekly[2].Days[3] != "mon" {
		t.Errorf("windows = %+v", s.Weekly)
	}
	for spec, want := range map[string]float64{"always": 168, "workdays": 40, "nights": 70, "weekends": 48, "nights,weekends": 48 + 8 + 4*10 + 2 /* the weekend, then Monday to 08:00, four whole nights, Friday to midnight */} {
		s, err := parseWindows(spec, "")
		if err != nil {
			t.Fatal(err)
		}
		if got := weeklyHours(s); got != want {
			t.Errorf("weeklyHours(%s) = %v, want %v", spec, got, want)
		}
	}
	if _, err := parseWindows("mon-fri/25:00-08:00", ""); idlegrid.ErrorCode(err) != idlegrid.EINVALID {
		t.Errorf("bad hour: %v", err)
	}
	for in, want := range map[idlegrid.Micros]string{400_000: "$0.400", 999_600: "$1.00", 12_345_678: "$12.35", 1_500: "$0.002"} {
		if got := trimMoney(in); got != want {
			t.Errorf("trimMoney(%d) = %q, want %q", in, got, want)
		}
	}
}

// TestEstimate_renterCountsInWords: counts of one read as one ("1 GPU",
// "1 cell"), not "1 GPUs".
func TestEstimate_renterCountsInWords(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`[{"gpu_model":"RTX4090","region":"eu-west","supply_gpus":2,"free_gpus":1,"queued_jobs":1,"queued_gpus":1}]`))
	}))
	defer ts.Close()
	r := run(t, map[string]string{"IDLEGRID_ADDR": ts.URL, "IDLEGRID_KEY": "k"}, "estimate", "--renter", "--gpus", "1", "--duration", "1h")
	for _, want := range []string{"1 cell, 1 GPU free, 1 GPU of demand queued", "a job needing 1 GPU on one node"} {
		if r.code != 0 || !strings.Contains(r.out, want) {
			t.Errorf("estimate --renter --gpus 1: %s\nwant %q", r, want)
		}
	}
}

// TestEstimate_renterTierOrder: a tier priced by suggested asks is not
// quoted below what a cheaper tier cleared at, in the table and in --json.
func TestEstimate_renterTierOrder(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`[{"gpu_model":"RTX4090","region":"eu-west","supply_gpus":4,"free_gpus":4,
			"prices":[{"tier":"bronze","price_micros_per_gpu_hour":400000,"gpus":1},{"tier":"gold","price_micros_per_gpu_hour":600000,"gpus":1}],
			"suggested_ask_micros_per_gpu_hour":{"gold":450000,"silver":378000,"bronze":300000}}]`))
	}))
	defer ts.Close()
	env := map[string]string{"IDLEGRID_ADDR": ts.URL, "IDLEGRID_KEY": "k"}
	r := run(t, env, "estimate", "--renter", "--gpus", "1", "--duration", "1h")
	if want := "silver  $0.400         suggested asks, raised to bronze's recent price"; r.code != 0 || !strings.Contains(r.out, want) {
		t.Errorf("estimate --renter: %s\nwant %q", r, want)
	}
	r = run(t, env, "estimate", "--renter", "--gpus", "1", "--duration", "1h", "--json")
	if want := `"silver_price_micros": 400000`; !strings.Contains(r.out, want) {
		t.Errorf("estimate --renter --json: %s\nwant %q", r, want)
	}
}

func TestLiveQuotes(t *testing.T) {
	cell := func(suggested map[idlegrid.Tier]idlegrid.Micros, cleared ...wire.PricePoint) wire.MarketStat {
		return wire.MarketStat{Prices: cleared, SuggestedAsk: suggested}
	}
	cleared := func(tier idlegrid.Tier, p idlegrid.Micros) wire.PricePoint {
		return wire.PricePoint{Tier: tier, PriceMicrosPerGPUHour: p}
	}
	for _, tt := range []struct {
		name  string
		cells []wire.MarketStat
		want  []liveQuote // gold, silver, bronze
	}{
		{"suggested silver under cleared bronze", []wire.MarketStat{cell(map[idlegrid.Tier]idlegrid.Micros{idlegrid.TierSilver: 378_000}, cleared(idlegrid.TierBronze, 400_000))},
			[]liveQuote{{from: "-"}, {400_000, "suggested asks, raised to bronze's recent price", false}, {400_000, "median of 1 recent prices", true}}},
		{"suggested gold under cleared silver", []wire.MarketStat{cell(map[idlegrid.Tier]idlegrid.Micros{idlegrid.TierGold: 500_000, idlegrid.TierBronze: 200_000}, cleared(idlegrid.TierSilver, 700_000))},
			[]liveQuote{{700_000, "suggested asks, raised to silver's recent price", false}, {700_000, "median of 1 recent prices", true}, {200_000, "suggested asks (nothing cleared yet)", false}}},
		{"in order already", []wire.MarketStat{cell(map[idlegrid.Tier]idlegrid.Micros{idlegrid.TierSilver: 500_000}, cleared(idlegrid.TierBronze, 400_000))},
			[]liveQuote{{from: "-"}, {500_000, "suggested asks (nothing cleared yet)", false}, {400_000, "median of 1 recent prices", true}}},
		{"cleared prices stand as they cleared", []wire.MarketStat{cell(nil, cleared(idlegrid.TierSilver, 300_000), cleared(idlegrid.TierBronze, 400_000))},
			[]liveQuote{{from: "-"}, {300_000, "median of 1 recent prices", true}, {400_000, "median of 1 recent prices", true}}},
	} {
		if got := liveQuotes(tt.cells); !slices.Equal(got, tt.want) {
			t.Errorf("%s: liveQuotes = %+v, want %+v", tt.name, got, tt.want)
		}
	}
}
