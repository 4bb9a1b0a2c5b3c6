package trace_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/trace"
)

// testdata is the repository's trace slices.
var testdata = filepath.Join("..", "..", "testdata", "traces")

func mustOpen(tb testing.TB, path string) *os.File {
	tb.Helper()
	f, err := os.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { f.Close() })
	return f
}

func at(secs int64) time.Time { return trace.Epoch.Add(time.Duration(secs) * time.Second) }

func TestReadDemandCSV(t *testing.T) {
	t.Run("Example", func(t *testing.T) {
		d, err := trace.ReadDemandCSV(mustOpen(t, filepath.Join(testdata, "generic", "demand.csv")), "demand.csv", trace.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if !d.Relative || d.Rows != 6 || d.Skipped != 0 {
			t.Fatalf("relative %v, rows %d, skipped %d; want true, 6, 0", d.Relative, d.Rows, d.Skipped)
		}
		want := []trace.Job{
			{ID: "train-1", Submit: at(0), DurationSeconds: 7200, GPUs: 4, GPUModels: []string{"A100-80GB", "V100-32GB"}, Tier: idlegrid.TierGold, MaxPrice: 2_500_000},
			{ID: "eval-1", Submit: at(600), DurationSeconds: 900, GPUs: 1, Tier: idlegrid.TierBronze, MaxPrice: 300_000},
			{ID: "sweep-1", Submit: at(1800), DurationSeconds: 2700, GPUs: 1, GPUModels: []string{"A10", "T4"}, Tier: idlegrid.TierBronze, CheckpointEverySeconds: 600},
			{ID: "infer-1", Submit: at(3600), DurationSeconds: 10800, GPUs: 2, Tier: idlegrid.TierSilver, MaxPrice: 1_200_000, Region: "eu-west"},
			{ID: "train-2", Submit: at(7200), DurationSeconds: 28800, GPUs: 8, GPUModels: []string{"V100-32GB"}, Tier: idlegrid.TierSilver},
			{ID: "eval-2", Submit: at(9000), DurationSeconds: 1200, GPUs: 1, Tier: idlegrid.TierBronze, MaxPrice: 250_000, Region: "us-east"},
		}
		if diff := cmp.Diff(want, d.Jobs); diff != "" {
			t.Errorf("jobs (-want +got):\n%s", diff)
		}
	})
	t.Run("Instants", func(t *testing.T) {
		in := "gpus,duration,submit\n1,60,2025-03-10T12:00:00Z\n2,120,2025-03-10T11:00:00+01:00\n"
		d, err := trace.ReadDemandCSV(strings.NewReader(in), "x.csv", trace.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if d.Relative || len(d.Jobs) != 2 || d.Jobs[0].ID != "line-3" || !d.Jobs[0].Submit.Equal(time.Date(2025, 3, 10, 10, 0, 0, 0, time.UTC)) {
			t.Fatalf("got %+v, want two absolute jobs sorted by submit, line-3 first at 10:00 UTC", d)
		}
	})
	for _, tt := range []struct {
		name, row, want string
	}{
		{"MissingGPUs", "0,60,,", `x.csv line 3: gpus: must be a whole number, got ""`},
		{"TooManyGPUs", "0,60,17,", "x.csv line 3: gpus: must be between 1 and 16, got 17"},
		{"BadDuration", "0,soon,1,", `x.csv line 3: duration: must be whole seconds (e.g. 5400) or a duration (e.g. 90m), got "soon"`},
		{"LongDuration", "0,800h,1,", `x.csv line 3: duration: must be between 1s and 720h (30 days), got "800h"`},
		{"BadSubmit", "yesterday,60,1,", `x.csv line 3: submit: must be seconds from the start of the trace (e.g. 3600) or an RFC 3339 time (e.g. 2025-03-10T12:00:00Z), got "yesterday"`},
		{"MixedTimes", "2025-03-10T12:00:00Z,60,1,", `x.csv line 3: submit: mixes seconds and RFC 3339 times in one file; use one kind, got "2025-03-10T12:00:00Z"`},
		{"BadTier", "0,60,1,platinum", `x.csv line 3: tier: must be gold, silver or bronze, got "platinum"`},
		{"BadCheckpointEvery", "0,60,1,bronze,often", `x.csv line 3: checkpoint_every: must be whole seconds (e.g. 5400) or a duration (e.g. 90m), got "often"`},
		{"BadCSV", `0,60,"1`, `x.csv line 3: not valid CSV: extraneous or missing " in quoted-field`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			in := "submit,duration,gpus,tier,checkpoint_every\n0,60,1,,\n" + tt.row + "\n"
			_, err := trace.ReadDemandCSV(strings.NewReader(in), "x.csv", trace.Options{})
			if got := idlegrid.ErrorMessage(err); got != tt.want || idlegrid.ErrorCode(err) != idlegrid.EINVALID {
				t.Fatalf("error = %q (%s), want %q (invalid)", got, idlegrid.ErrorCode(err), tt.want)
			}
			d, err := trace.ReadDemandCSV(strings.NewReader(in), "x.csv", trace.Options{BadRows: trace.BadRowsSkip})
			if err != nil {
				t.Fatalf("skip: %v", err)
			}
			if len(d.Jobs) != 1 || d.Skipped != 1 || len(d.SkipNotes) != 1 || d.SkipNotes[0] != tt.want {
				t.Fatalf("skip: %d jobs, %d skipped %q; want 1, 1 [%q]", len(d.Jobs), d.Skipped, d.SkipNotes, tt.want)
			}
		})
	}
	t.Run("MissingColumn", func(t *testing.T) {
		_, err := trace.ReadDemandCSV(strings.NewReader("submit,gpus\n0,1\n"), "x.csv", trace.Options{BadRows: trace.BadRowsSkip})
		if want := "x.csv line 1: missing column(s) duration; the header has submit,gpus"; idlegrid.ErrorMessage(err) != want {
			t.Fatalf("error = %v, want %q even when skipping rows", err, want)
		}
	})
	// gpu_model is the supply's column: in the demand it would be
	// ignored, and every job would run on any model.
	t.Run("SupplysModelColumn", func(t *testing.T) {
		_, err := trace.ReadDemandCSV(strings.NewReader("submit,duration,gpus,gpu_model\n0,60,1,H100\n"), "x.csv", trace.Options{BadRows: trace.BadRowsSkip})
		if want := "x.csv line 1: gpu_model: the demand's column is gpu_models, the models a job accepts separated by '|' (gpu_model is the supply's)"; idlegrid.ErrorMessage(err) != want {
			t.Fatalf("error = %v, want %q", err, want)
		}
	})
	t.Run("Empty", func(t *testing.T) {
		_, err := trace.ReadDemandCSV(strings.NewReader(""), "x.csv", trace.Options{})
		if idlegrid.ErrorCode(err) != idlegrid.EINVALID || !strings.Contains(err.Error(), "empty file") {
			t.Fatalf("error = %v, want an empty-file error", err)
		}
	})
}

func TestReadSupplyCSV(t *testing.T) {
	t.Run("Example", func(t *testing.T) {
		s, err := trace.ReadSupplyCSV(mustOpen(t, filepath.Join(testdata, "generic", "supply.csv")), "supply.csv", trace.Options{})
		if err != nil {
			t.Fatal(err)
		}
		want := []trace.Node{
			{ID: "lab-a", GPUModel: "V100-32GB", GPUs: 8, Region: "eu-west", Windows: []trace.Window{
				{Start: at(0), End: at(28800), Ask: 300_000}, {Start: at(36000), End: at(86400), Ask: 250_000}}},
			{ID: "desk-1", GPUModel: "RTX4090", GPUs: 1, Region: "eu-west", Windows: []trace.Window{{Start: at(3600), End: at(18000), Ask: 350_000}}},
			{ID: "desk-2", GPUModel: "T4", GPUs: 1, Region: "us-east", Windows: []trace.Window{{Start: at(0), End: at(86400)}}},
			{ID: "rack-9", GPUModel: "A100-80GB", GPUs: 4, Region: "us-east", Windows: []trace.Window{{Start: at(7200), End: at(43200), Ask: 1_100_000}}},
		}
		if diff := cmp.Diff(want, s.Nodes); diff != "" {
			t.Errorf("nodes (-want +got):\n%s", diff)
		}
		start, end := s.Span()
		if !start.Equal(at(0)) || !end.Equal(at(86400)) {
			t.Errorf("span = %v..%v, want 0..86400", start, end)
		}
		if got := s.Nodes[0].OfferedGPUSeconds(); got != 8*(28800+50400) {
			t.Errorf("offered = %d GPU-s, want %d", got, 8*(28800+50400))
		}
	})
	const head = "node,gpu_model,gpus,region,window_start,window_end,ask\nn1,T4,2,eu-west,0,100,\n"
	for _, tt := range []struct {
		name, row, want string
	}{
		{"EndBeforeStart", "n2,T4,1,,100,50,", "x.csv line 3: window_end: must be after window_start"},
		{"ModelChanges", "n1,V100,2,eu-west,200,300,", "x.csv line 3: gpu_model: node n1 was T4 on an earlier row, now V100-16GB"},
		{"GPUsChange", "n1,T4,4,eu-west,200,300,", "x.csv line 3: gpus: node n1 had 2 GPUs on an earlier row, now 4"},
		{"Overlap", "n1,T4,2,eu-west,50,300,", "x.csv line 3: window_start: node n1: window 50 to 300 overlaps the window on line 2"},
		{"BadRegion", "n2,T4,1,EU West,0,50,", `x.csv line 3: region: must be lower-case letters, digits and '-', e.g. eu-west, got "EU West"`},
		{"BadAsk", "n2,T4,1,,0,50,cheap", `x.csv line 3: ask: not a decimal amount: "cheap"; write a decimal amount such as 1.25`},
		{"NoModel", "n2,,1,,0,50,", "x.csv line 3: gpu_model: required, e.g. RTX4090"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := trace.ReadSupplyCSV(strings.NewReader(head+tt.row+"\n"), "x.csv", trace.Options{})
			if got := idlegrid.ErrorMessage(err); got != tt.want {
				t.Fatalf("error = %q, want %q", got, tt.want)
			}
			s, err := trace.ReadSupplyCSV(strings.NewReader(head+tt.row+"\n"), "x.csv", trace.Options{BadRows: trace.BadRowsSkip})
			if err != nil {
				t.Fatalf("skip: %v", err)
			}
			if len(s.Nodes) != 1 || len(s.Nodes[0].Windows) != 1 || s.Skipped != 1 || s.SkipNotes[0] != tt.want {
				t.Fatalf("skip: %+v, want n1 with one window and one skip %q", s, tt.want)
			}
		})
	}
}

// Of two overlapping windows, the row later in the file is the bad one,
// even when its window starts first.
func TestReadSupplyCSV_overlapBlamesTheLaterRow(t *testing.T) {
	const csv = "node,gpu_model,gpus,window_start,window_end\n" +
		"n1,T4,2,0,100\nn1,T4,2,200,300\nn1,T4,2,150,250\nn1,T4,2,100,150\n"
	const want = "x.csv line 4: window_start: node n1: window 150 to 250 overlaps the window on line 3"
	_, err := trace.ReadSupplyCSV(strings.NewReader(csv), "x.csv", trace.Options{})
	if got := idlegrid.ErrorMessage(err); got != want {
		t.Errorf("error = %q, want %q", got, want)
	}
	s, err := trace.ReadSupplyCSV(strings.NewReader(csv), "x.csv", trace.Options{BadRows: trace.BadRowsSkip})
	if err != nil {
		t.Fatal(err)
	}
	kept := []trace.Window{{Start: at(0), End: at(100)}, {Start: at(100), End: at(150)}, {Start: at(200), End: at(300)}}
	if diff := cmp.Diff(kept, s.Nodes[0].Windows); diff != "" || s.Skipped != 1 || s.SkipNotes[0] != want {
		t.Errorf("skip: windows (-want +got):\n%s\nskipped %d %q, want 1 %q", diff, s.Skipped, s.SkipNotes, want)
	}
}

func TestParseBadRows(t *testing.T) {
	for in, want := range map[string]trace.BadRows{"fail": trace.BadRowsFail, "": trace.BadRowsFail, "skip": trace.BadRowsSkip} {
		if got, err := trace.ParseBadRows(in); err != nil || got != want {
			t.Errorf("ParseBadRows(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := trace.ParseBadRows("ignore"); idlegrid.ErrorMessage(err) != `bad-rows: must be fail or skip, got "ignore"` {
		t.Errorf("error = %v", err)
	}
}
