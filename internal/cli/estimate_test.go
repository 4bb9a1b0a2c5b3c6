package cli

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idlegrid/idlegrid"
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
