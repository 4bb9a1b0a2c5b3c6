package trace_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/trace"
)

// Every parser is fuzzed the same way: with BadRowsFail it returns a
// result or an invalid-input error, never a panic or another kind of
// error; with BadRowsSkip only the header can stop it; and whatever it
// returns keeps the invariants the simulator relies on.

// addFile seeds the corpus with the first lines of a file: long seeds
// slow the fuzzer down a thousandfold and find nothing more.
func addFile(f *testing.F, path string) {
	f.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		f.Fatal(err)
	}
	lines := strings.SplitAfter(string(data), "\n")
	f.Add(strings.Join(lines[:min(len(lines), 6)], ""))
}

// checkErr checks a read's error: nil or invalid input, and with
// BadRowsSkip only about the file as a whole or its header.
func checkErr(t *testing.T, err error, mode trace.BadRows) {
	t.Helper()
	if err == nil {
		return
	}
	if idlegrid.ErrorCode(err) != idlegrid.EINVALID {
		t.Fatalf("error %v is not invalid input", err)
	}
	if mode == trace.BadRowsSkip && !strings.Contains(err.Error(), "line 1") && !strings.Contains(err.Error(), "empty file") {
		t.Fatalf("skipping bad rows, yet the read failed on a row: %v", err)
	}
}

func bothModes(f func(trace.BadRows)) {
	f(trace.BadRowsFail)
	f(trace.BadRowsSkip)
}

func checkJobs(t *testing.T, jobs []trace.Job) {
	t.Helper()
	for i, j := range jobs {
		switch {
		case j.GPUs < 1 || j.GPUs > idlegrid.MaxGPUsPerNode:
			t.Fatalf("job %s: %d GPUs", j.ID, j.GPUs)
		case j.DurationSeconds < 1 || j.DurationSeconds > idlegrid.MaxJobSeconds:
			t.Fatalf("job %s: %d s", j.ID, j.DurationSeconds)
		case j.Tier != "" && !j.Tier.Valid():
			t.Fatalf("job %s: tier %q", j.ID, j.Tier)
		case j.MaxPrice < 0:
			t.Fatalf("job %s: cap %d", j.ID, j.MaxPrice)
		case i > 0 && j.Submit.Before(jobs[i-1].Submit):
			t.Fatalf("jobs out of order at %d", i)
		}
		for _, m := range j.GPUModels {
			if m == "" {
				t.Fatalf("job %s: empty model in %q", j.ID, j.GPUModels)
			}
		}
	}
}

func checkNodes(t *testing.T, nodes []trace.Node) {
	t.Helper()
	for _, n := range nodes {
		if n.GPUs < 1 || n.GPUs > 64 || n.ID == "" {
			t.Fatalf("node %+v", n)
		}
		for i, w := range n.Windows {
			if !w.End.After(w.Start) || (i > 0 && w.Start.Before(n.Windows[i-1].End)) || w.Ask < 0 {
				t.Fatalf("node %s: bad window %d in %v", n.ID, i, n.Windows)
			}
		}
	}
}

func FuzzReadDemandCSV(f *testing.F) {
	addFile(f, filepath.Join(testdata, "generic", "demand.csv"))
	f.Add("submit,duration,gpus\n0,60,1\n")
	f.Add("submit,duration,gpus,tier,max_price\n2025-01-01T00:00:00Z,1h,2,gold,1.5\n5,60,1,,\n")
	f.Add("submit,duration,gpus\n\"0,60,1\n")
	f.Fuzz(func(t *testing.T, in string) {
		bothModes(func(mode trace.BadRows) {
			d, err := trace.ReadDemandCSV(strings.NewReader(in), "f.csv", trace.Options{BadRows: mode})
			checkErr(t, err, mode)
			if err == nil {
				checkJobs(t, d.Jobs)
			}
		})
	})
}

func FuzzReadSupplyCSV(f *testing.F) {
	addFile(f, filepath.Join(testdata, "generic", "supply.csv"))
	f.Add("node,gpu_model,gpus,window_start,window_end\na,T4,1,0,10\na,T4,1,5,20\n")
	f.Add("node,gpu_model,gpus,window_start,window_end,ask\na,T4,1,2025-01-01T00:00:00Z,2025-01-02T00:00:00Z,0.3\n")
	f.Fuzz(func(t *testing.T, in string) {
		bothModes(func(mode trace.BadRows) {
			s, err := trace.ReadSupplyCSV(strings.NewReader(in), "f.csv", trace.Options{BadRows: mode})
			checkErr(t, err, mode)
			if err == nil {
				checkNodes(t, s.Nodes)
			}
		})
	})
}

func FuzzReadAlibabaPods(f *testing.F) {
	addFile(f, filepath.Join(testdata, "alibaba", trace.AlibabaPodFile))
	f.Add("name,num_gpu,gpu_milli,gpu_spec,qos,creation_time,deletion_time,scheduled_time\na,1,500,T4|G2,BE,0,10,1\n")
	f.Fuzz(func(t *testing.T, in string) {
		bothModes(func(mode trace.BadRows) {
			d, err := trace.ReadAlibabaPods(strings.NewReader(in), "f.csv", trace.AlibabaOptions{Options: trace.Options{BadRows: mode}})
			checkErr(t, err, mode)
			if err == nil {
				checkJobs(t, d.Jobs)
			}
		})
	})
}

func FuzzReadAlibabaNodes(f *testing.F) {
	addFile(f, filepath.Join(testdata, "alibaba", trace.AlibabaNodeFile))
	f.Fuzz(func(t *testing.T, in string) {
		bothModes(func(mode trace.BadRows) {
			s, err := trace.ReadAlibabaNodes(strings.NewReader(in), "f.csv", trace.Options{BadRows: mode})
			checkErr(t, err, mode)
			if err == nil {
				checkNodes(t, s.Nodes)
				for _, n := range s.Nodes {
					if n.GPUModel == "" {
						t.Fatalf("node %s has GPUs but no model", n.ID)
					}
				}
			}
		})
	})
}

func FuzzReadHeliosSeries(f *testing.F) {
	f.Add(series(16, 8, 9, 16, 16, 16, 7, 8, 8, 8, 16, 0))
	f.Add("time,total_gpu_num,idle_gpu_num\n2020-05-01 00:00:00,8,8\n2020-05-01 00:05:00,8,3\n")
	f.Fuzz(func(t *testing.T, in string) {
		bothModes(func(mode trace.BadRows) {
			s, err := trace.ReadHeliosSeries(strings.NewReader(in), "f.csv", "vc", trace.Options{BadRows: mode})
			checkErr(t, err, mode)
			if err != nil {
				return
			}
			for i, smp := range s.Samples {
				if smp.Idle > smp.Total || smp.Idle < 0 || (i > 0 && !smp.At.After(s.Samples[i-1].At)) {
					t.Fatalf("sample %d: %+v", i, smp)
				}
			}
			nodes, _ := trace.HeliosNodes([]*trace.HeliosSeries{s}, trace.HeliosOptions{NodeGPUs: 2, MinWindow: time.Minute})
			checkNodes(t, nodes)
		})
	})
}

func FuzzReadCloudPrices(f *testing.F) {
	addFile(f, filepath.Join(testdata, "prices", trace.CloudPriceFile))
	f.Fuzz(func(t *testing.T, in string) {
		bothModes(func(mode trace.BadRows) {
			offers, _, err := trace.ReadCloudPrices(strings.NewReader(in), "f.csv", trace.Options{BadRows: mode})
			checkErr(t, err, mode)
			checkOffers(t, offers)
		})
	})
}

func FuzzReadVastPrices(f *testing.F) {
	addFile(f, filepath.Join(testdata, "prices", trace.VastPriceFile))
	f.Fuzz(func(t *testing.T, in string) {
		bothModes(func(mode trace.BadRows) {
			offers, _, err := trace.ReadVastPrices(strings.NewReader(in), "f.csv", trace.Options{BadRows: mode})
			checkErr(t, err, mode)
			checkOffers(t, offers)
		})
	})
}

func checkOffers(t *testing.T, offers []trace.PriceOffer) {
	t.Helper()
	for _, o := range offers {
		if o.GPUs < 1 || o.PerGPU < 0 || o.SpotPerGPU < 0 || o.Model == "" {
			t.Fatalf("offer %+v", o)
		}
	}
}
