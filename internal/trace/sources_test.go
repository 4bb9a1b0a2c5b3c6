package trace_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/trace"
)

func TestReadAlibabaPods(t *testing.T) {
	t.Run("Slice", func(t *testing.T) {
		d, err := trace.ReadAlibabaPods(mustOpen(t, filepath.Join(testdata, "alibaba", trace.AlibabaPodFile)), "pods.csv", trace.AlibabaOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !d.Relative || d.Rows != 63 || len(d.Jobs) != 60 {
			t.Fatalf("relative %v, rows %d, jobs %d; want true, 63, 60", d.Relative, d.Rows, len(d.Jobs))
		}
		wantDropped := map[string]int{"CPU-only pod": 1, "never scheduled in the source trace (run time unknown)": 1, "ran for no time": 1}
		if diff := cmp.Diff(wantDropped, d.Dropped); diff != "" {
			t.Errorf("dropped (-want +got):\n%s", diff)
		}
		// synth-pod-0001,4000,16384,1,1000,,LS,Succeeded,6767,21167,6767
		j := d.Jobs[1]
		want := trace.Job{ID: "synth-pod-0001", Submit: at(6767), DurationSeconds: 14400, GPUs: 1, Tier: idlegrid.TierGold}
		if diff := cmp.Diff(want, j); diff != "" {
			t.Errorf("job 1 (-want +got):\n%s", diff)
		}
		tiers := map[idlegrid.Tier]int{}
		for _, j := range d.Jobs {
			tiers[j.Tier]++
			if j.GPUs < 1 || j.DurationSeconds < 1 {
				t.Errorf("job %s: %d GPUs for %d s", j.ID, j.GPUs, j.DurationSeconds)
			}
		}
		if tiers[idlegrid.TierGold] == 0 || tiers[idlegrid.TierSilver] == 0 || tiers[idlegrid.TierBronze] == 0 {
			t.Errorf("tiers = %v, want all three", tiers)
		}
	})
	t.Run("Mapping", func(t *testing.T) {
		in := "name,num_gpu,gpu_milli,gpu_spec,qos,creation_time,deletion_time,scheduled_time\n" +
			"a,1,500,V100M16|V100M32|V100M32,BE,10,100,20\n" +
			"b,2,1000,,Odd,10,3000000,10\n"
		d, err := trace.ReadAlibabaPods(strings.NewReader(in), "x.csv", trace.AlibabaOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want := []trace.Job{
			{ID: "a", Submit: at(10), DurationSeconds: 80, GPUs: 1, GPUModels: []string{"V100-16GB", "V100-32GB"}, Tier: idlegrid.TierBronze},
			{ID: "b", Submit: at(10), DurationSeconds: idlegrid.MaxJobSeconds, GPUs: 2},
		}
		if diff := cmp.Diff(want, d.Jobs); diff != "" {
			t.Errorf("jobs (-want +got):\n%s", diff)
		}
		wantAdj := map[string]int{
			"shared a GPU (gpu_milli < 1000): given a whole GPU": 1,
			"ran over 30 days: capped at 30 days":                1,
			`qos "Odd" has no tier: silver`:                      1,
		}
		if diff := cmp.Diff(wantAdj, d.Adjusted); diff != "" {
			t.Errorf("adjusted (-want +got):\n%s", diff)
		}
	})
	t.Run("BadRows", func(t *testing.T) {
		in := "name,num_gpu,qos,creation_time,deletion_time,scheduled_time\nok,1,LS,0,10,0\nbad,1,LS,30,40,45\n"
		_, err := trace.ReadAlibabaPods(strings.NewReader(in), "x.csv", trace.AlibabaOptions{})
		if want := "x.csv line 3: deletion_time: 40 is before scheduled_time 45"; idlegrid.ErrorMessage(err) != want {
			t.Fatalf("error = %v, want %q", err, want)
		}
		d, err := trace.ReadAlibabaPods(strings.NewReader(in), "x.csv", trace.AlibabaOptions{Options: trace.Options{BadRows: trace.BadRowsSkip}})
		if err != nil || len(d.Jobs) != 1 || d.Skipped != 1 {
			t.Fatalf("skip: %+v, %v; want one job and one skip", d, err)
		}
	})
	t.Run("ShortRow", func(t *testing.T) {
		// Cut short before scheduled_time, the row is bad, not a pod
		// never scheduled (which has the column, empty).
		in := "name,num_gpu,qos,creation_time,deletion_time,scheduled_time\nok,1,LS,0,10,0\nnever,1,LS,0,10,\ncut,1,LS,30,40\n"
		_, err := trace.ReadAlibabaPods(strings.NewReader(in), "x.csv", trace.AlibabaOptions{})
		if want := "x.csv line 4: the row has 5 fields, the header 6"; idlegrid.ErrorMessage(err) != want {
			t.Fatalf("error = %v, want %q", err, want)
		}
		d, err := trace.ReadAlibabaPods(strings.NewReader(in), "x.csv", trace.AlibabaOptions{Options: trace.Options{BadRows: trace.BadRowsSkip}})
		if err != nil || len(d.Jobs) != 1 || d.Skipped != 1 || d.Dropped["never scheduled in the source trace (run time unknown)"] != 1 {
			t.Fatalf("skip: %+v, %v; want one job, one skip and one pod never scheduled", d, err)
		}
	})
	t.Run("NoTimes", func(t *testing.T) {
		_, err := trace.ReadAlibabaPods(strings.NewReader("name,cpu_milli,memory_mib,num_gpu,gpu_milli\n"), "multigpu50.csv", trace.AlibabaOptions{})
		if err == nil || !strings.Contains(err.Error(), "use openb_pod_list_default.csv") {
			t.Fatalf("error = %v, want a pointer to the default pod list", err)
		}
	})
}

func TestReadAlibabaNodes(t *testing.T) {
	s, err := trace.ReadAlibabaNodes(mustOpen(t, filepath.Join(testdata, "alibaba", trace.AlibabaNodeFile)), "nodes.csv", trace.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Nodes) != 10 || s.Dropped["no GPUs"] != 1 {
		t.Fatalf("%d nodes, dropped %v; want 10 and one without GPUs", len(s.Nodes), s.Dropped)
	}
	mix := trace.ModelMix(s.Nodes)
	want := map[string]int{"G2": 24, "T4": 4, "P100": 2, "V100-16GB": 4, "V100-32GB": 8, "G3": 8, "A10": 1}
	if diff := cmp.Diff(want, mix); diff != "" {
		t.Errorf("mix (-want +got):\n%s", diff)
	}
	if got := trace.SortedModels(mix); !cmp.Equal(got, []string{"G2", "G3", "V100-32GB", "T4", "V100-16GB", "P100", "A10"}) {
		t.Errorf("sorted = %v", got)
	}
	_, err = trace.ReadAlibabaNodes(strings.NewReader("sn,gpu,model\na,2,T4\na,2,T4\n"), "x.csv", trace.Options{})
	if want := "x.csv line 3: sn: node a is listed twice"; idlegrid.ErrorMessage(err) != want {
		t.Errorf("error = %v, want %q", err, want)
	}
}

// series writes a VC series with one row per idle count, a minute apart
// from 2020-05-01 00:00 UTC+8.
func series(total int, idle ...int) string {
	var b strings.Builder
	b.WriteString("time,total_gpu_num,idle_gpu_num,gpu_utilization\n")
	start := time.Date(2020, 5, 1, 0, 0, 0, 0, trace.HeliosZone)
	for i, n := range idle {
		b.WriteString(start.Add(time.Duration(i)*time.Minute).Format(time.DateTime) + "," + strconv.Itoa(total) + "," + strconv.Itoa(n) + ",0.5\n")
	}
	return b.String()
}

func TestHeliosNodes(t *testing.T) {
	// 16 GPUs, 2 nodes of 8. Node 0 is offered while ≥8 are idle, node 1
	// while all 16 are.
	in := series(16, 8, 9, 16, 16, 16, 7, 8, 8, 8, 16, 0)
	s, err := trace.ReadHeliosSeries(strings.NewReader(in), "vcA.csv", "vcA", trace.Options{})
	if err != nil {
		t.Fatal(err)
	}
	nodes, rep := trace.HeliosNodes([]*trace.HeliosSeries{s}, trace.HeliosOptions{MinWindow: 2 * time.Minute})
	m := func(i int) time.Time { return time.Date(2020, 5, 1, 0, i, 0, 0, trace.HeliosZone).UTC() }
	want := []trace.Node{
		{ID: "helios-vcA-0", GPUs: 8, Windows: []trace.Window{{Start: m(0), End: m(5)}, {Start: m(6), End: m(10)}}},
		{ID: "helios-vcA-1", GPUs: 8, Windows: []trace.Window{{Start: m(2), End: m(5)}}},
	}
	if diff := cmp.Diff(want, nodes); diff != "" {
		t.Errorf("nodes (-want +got):\n%s", diff)
	}
	if rep.Dropped["idle span shorter than 2m0s"] != 1 { // node 1 at minute 9
		t.Errorf("dropped = %v, want one short span", rep.Dropped)
	}
	t.Run("Gap", func(t *testing.T) {
		in := "time,total_gpu_num,idle_gpu_num\n2020-05-01 00:00:00,8,8\n2020-05-01 00:01:00,8,8\n2020-05-01 00:05:00,8,8\n"
		s, err := trace.ReadHeliosSeries(strings.NewReader(in), "x.csv", "x", trace.Options{})
		if err != nil {
			t.Fatal(err)
		}
		nodes, _ := trace.HeliosNodes([]*trace.HeliosSeries{s}, trace.HeliosOptions{MinWindow: time.Minute})
		if got := len(nodes[0].Windows); got != 2 {
			t.Fatalf("windows = %v, want two: a missing minute is not offered", nodes[0].Windows)
		}
	})
	for _, tt := range []struct{ name, rows, want string }{
		{"OutOfOrder", "2020-05-01 00:01:00,8,8\n2020-05-01 00:00:00,8,8\n", "x.csv line 3: time: 2020-05-01 00:00:00 is not after the row before (2020-05-01 00:01:00): the series must be in time order"},
		{"IdleOverTotal", "2020-05-01 00:00:00,8,9\n", "x.csv line 2: idle_gpu_num: must be between 0 and 8, got 9"},
		{"BadTime", "May 1st,8,8\n", `x.csv line 2: time: must be a time such as 2020-05-01 00:00:00, got "May 1st"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := trace.ReadHeliosSeries(strings.NewReader("time,total_gpu_num,idle_gpu_num\n"+tt.rows), "x.csv", "x", trace.Options{})
			if idlegrid.ErrorMessage(err) != tt.want {
				t.Fatalf("error = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestReadHeliosDir(t *testing.T) {
	s, err := trace.ReadHeliosDir(os.DirFS(filepath.Join(testdata, "helios", "earth_vc_minutely")), "helios", trace.HeliosOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Relative || len(s.Nodes) == 0 || s.Rows != 3*2880 {
		t.Fatalf("relative %v, %d nodes, %d rows; want absolute nodes from 3×2880 rows", s.Relative, len(s.Nodes), s.Rows)
	}
	start, end := s.Span()
	if min := time.Date(2020, 5, 4, 0, 0, 0, 0, trace.HeliosZone); start.Before(min) || end.After(min.Add(48*time.Hour)) {
		t.Errorf("span %v..%v is outside 4-5 May 2020", start, end)
	}
	for _, n := range s.Nodes {
		if n.GPUs != 8 || !strings.HasPrefix(n.ID, "helios-vc") {
			t.Errorf("node %+v", n)
		}
		for i, w := range n.Windows {
			if w.End.Sub(w.Start) < trace.DefaultHeliosMinWindow || (i > 0 && w.Start.Before(n.Windows[i-1].End)) {
				t.Errorf("node %s window %d: %v..%v", n.ID, i, w.Start, w.End)
			}
		}
	}
	t.Run("Empty", func(t *testing.T) {
		_, err := trace.ReadHeliosDir(fstest.MapFS{"README.md": {}}, "x", trace.HeliosOptions{})
		if idlegrid.ErrorCode(err) != idlegrid.EINVALID {
			t.Fatalf("error = %v, want invalid", err)
		}
	})
	t.Run("NotGzip", func(t *testing.T) {
		_, err := trace.ReadHeliosDir(fstest.MapFS{"vc.csv.gz": {Data: []byte("time,total_gpu_num\n")}}, "x", trace.HeliosOptions{})
		if err == nil || !strings.Contains(err.Error(), "x/vc.csv.gz: not a gzip file") {
			t.Fatalf("error = %v", err)
		}
	})
}

func TestReadPrices(t *testing.T) {
	p, err := trace.ReadPrices(os.DirFS(filepath.Join(testdata, "prices")), "prices", trace.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Rows != 78+6 {
		t.Fatalf("rows = %d, want 84", p.Rows)
	}
	for _, tt := range []struct {
		model         string
		onDemand, mkt idlegrid.Micros
		hasOD, hasMkt bool
	}{
		// T4: 16 offers; no marketplace rows, so the market price is the median spot.
		{"T4", 980_000, 300_000, true, true},
		{"V100-16GB", 2_950_000, 200_000, true, true}, // marketplace: 0.22 and 0.40/2
		{"A10", 0, 300_000, false, true},
		{"RTX4090", 0, 360_000, false, true}, // 0.38 and 1.44/4
		{"G2", 0, 0, false, false},
	} {
		od, ok := p.OnDemand(tt.model)
		if od != tt.onDemand || ok != tt.hasOD {
			t.Errorf("OnDemand(%s) = %s, %v; want %s, %v", tt.model, od, ok, tt.onDemand, tt.hasOD)
		}
		m, ok := p.Market(tt.model)
		if m != tt.mkt || ok != tt.hasMkt {
			t.Errorf("Market(%s) = %s, %v; want %s, %v", tt.model, m, ok, tt.mkt, tt.hasMkt)
		}
	}
	t.Run("NoCloudTable", func(t *testing.T) {
		_, err := trace.ReadPrices(fstest.MapFS{}, "x", trace.Options{})
		if err == nil || !strings.Contains(err.Error(), "no cloud-gpus.csv") {
			t.Fatalf("error = %v", err)
		}
	})
	t.Run("BadRow", func(t *testing.T) {
		in := "Cloud,GPU Type,GPUs,Per-GPU,Spot\nAWS,T4 (16 GB),1,0.53,0.16\nAWS,T4 (16 GB),0,0.53,\n"
		_, _, err := trace.ReadCloudPrices(strings.NewReader(in), "c.csv", trace.Options{})
		if want := "c.csv line 3: gpus: must be between 1 and 64, got 0"; idlegrid.ErrorMessage(err) != want {
			t.Fatalf("error = %v, want %q", err, want)
		}
	})
}

func TestCanonicalModel(t *testing.T) {
	for in, want := range map[string]string{
		"V100 (16 GB)":            "V100-16GB",
		"V100 (32 GB)":            "V100-32GB",
		"A100 (80 GB)":            "A100-80GB",
		"H100 PCIe (80GB)":        "H100-80GB",
		"T4 (16 GB)":              "T4",
		"A6000 (48 GB)":           "RTXA6000",
		"RTX A6000 (48 GB)":       "RTXA6000",
		"Quadro RTX 6000 (24 GB)": "RTX6000",
		"3080Ti (12 GB)":          "RTX3080TI",
		"RTX6000-Ada":             "RTX6000-Ada",
		"RTX4090":                 "RTX4090",
		"G2":                      "G2",
	} {
		if got := trace.CanonicalModel(in, 0); got != want {
			t.Errorf("CanonicalModel(%q) = %q, want %q", in, got, want)
		}
	}
	if got := trace.AlibabaModel("V100M32"); got != "V100-32GB" {
		t.Errorf("AlibabaModel(V100M32) = %q", got)
	}
}

func TestMedianMicros(t *testing.T) {
	for _, tt := range []struct {
		in   []idlegrid.Micros
		want idlegrid.Micros
	}{{nil, 0}, {[]idlegrid.Micros{5}, 5}, {[]idlegrid.Micros{9, 1, 5}, 5}, {[]idlegrid.Micros{4, 1, 3, 2}, 2}} {
		if got := trace.MedianMicros(tt.in); got != tt.want {
			t.Errorf("MedianMicros(%v) = %d, want %d", tt.in, got, tt.want)
		}
	}
}
