package fake_test

import (
	"context"
	"errors"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/gpu"
	"github.com/idlegrid/idlegrid/internal/gpu/fake"
)

func mustDetect(tb testing.TB, spec, seed string) []gpu.Device {
	tb.Helper()
	d, err := fake.Parse(spec, seed)
	if err != nil {
		tb.Fatalf("Parse(%q): %v", spec, err)
	}
	gpus, err := d.Detect(context.Background())
	if err != nil {
		tb.Fatalf("Detect: %v", err)
	}
	return gpus
}

var uuidRE = regexp.MustCompile(`^GPU-fake-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

func TestParse(t *testing.T) {
	tests := []struct {
		spec string
		want []string // model:vram per GPU
	}{
		{"2xRTX4090", []string{"RTX4090:24564", "RTX4090:24564"}},
		{"1xH100-80GB,4xT4", []string{"H100-80GB:81920", "T4:15360", "T4:15360", "T4:15360", "T4:15360"}},
		{"a100-40gb", []string{"A100-40GB:40960"}},
		{" 1X l40s , 1xA10G,1xL4,1xRTX3090,1xA100-80GB ", []string{"L40S:46068", "A10G:23028", "L4:23034", "RTX3090:24576", "A100-80GB:81920"}},
		{"64xT4", nil},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			gpus := mustDetect(t, tt.spec, "node-a")
			if tt.want == nil {
				if len(gpus) != 64 {
					t.Fatalf("got %d GPUs, want 64", len(gpus))
				}
				return
			}
			var got []string
			for _, g := range gpus {
				got = append(got, g.Model+":"+strconv.Itoa(g.VRAMMB))
				if !uuidRE.MatchString(g.UUID) {
					t.Errorf("UUID %q does not look like GPU-fake-xxxxxxxx-…", g.UUID)
				}
			}
			if strings.Join(got, " ") != strings.Join(tt.want, " ") {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestParse_Errors(t *testing.T) {
	tests := []struct {
		spec string
		want []string // substrings of the error
	}{
		{"", []string{"fake_gpus", "empty"}},
		{"2xRTX5090", []string{`"2xRTX5090"`, `unknown model "RTX5090"`, "known models: H100-80GB", "T4"}},
		{"1xT4,,1xT4", []string{`unknown model ""`}},
		{"0xT4", []string{`"0xT4"`, "count must be between 1 and 64"}},
		{"65xT4", []string{"count must be between 1 and 64"}},
		{"40xT4,40xL4", []string{"at most 64 GPUs"}},
		{"2x", []string{`unknown model ""`}},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			_, err := fake.Parse(tt.spec, "seed")
			if err == nil {
				t.Fatal("got nil error")
			}
			if got := idlegrid.ErrorCode(err); got != idlegrid.EINVALID {
				t.Errorf("code = %q, want %q", got, idlegrid.EINVALID)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestDetector_UUIDs(t *testing.T) {
	t.Run("StableForSeed", func(t *testing.T) {
		a, b := mustDetect(t, "2xRTX4090", "node-a"), mustDetect(t, "2xRTX4090", "node-a")
		for i := range a {
			if a[i].UUID != b[i].UUID {
				t.Errorf("GPU %d: UUID %q then %q", i, a[i].UUID, b[i].UUID)
			}
		}
	})
	t.Run("DifferBySeedAndIndex", func(t *testing.T) {
		seen := map[string]bool{}
		for _, seed := range []string{"node-a", "node-b"} {
			for _, g := range mustDetect(t, "4xT4,2xL4", seed) {
				if seen[g.UUID] {
					t.Errorf("UUID %q repeats", g.UUID)
				}
				seen[g.UUID] = true
			}
		}
	})
	t.Run("DetectReturnsCopy", func(t *testing.T) {
		d, err := fake.Parse("1xT4", "s")
		if err != nil {
			t.Fatal(err)
		}
		first, _ := d.Detect(context.Background())
		first[0].Model = "changed"
		second, _ := d.Detect(context.Background())
		if got, want := second[0].Model, "T4"; got != want {
			t.Errorf("model = %q, want %q", got, want)
		}
	})
	t.Run("CancelledContext", func(t *testing.T) {
		d, _ := fake.Parse("1xT4", "s")
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := d.Detect(ctx); err == nil {
			t.Error("got nil error for a cancelled context")
		}
	})
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"2xRTX4090", "1xH100-80GB,4xT4", "x", "99xT4", "1xT4,"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		d, err := fake.Parse(spec, "seed")
		if err != nil {
			return
		}
		gpus, _ := d.Detect(context.Background())
		if len(gpus) < 1 || len(gpus) > fake.MaxGPUs {
			t.Fatalf("Parse(%q) gave %d GPUs", spec, len(gpus))
		}
		for _, g := range gpus {
			if _, ok := fake.Lookup(g.Model); !ok || g.VRAMMB <= 0 {
				t.Fatalf("Parse(%q) gave GPU %+v", spec, g)
			}
		}
	})
}

func TestDetector_Telemetry(t *testing.T) {
	gpus := mustDetect(t, "1xH100-80GB,1xT4", "node-a")
	for i, g := range gpus {
		m, _ := fake.Lookup(g.Model)
		if g.Index != i || g.Name != m.Product || g.Driver != fake.Driver || g.CUDA != fake.CUDA || g.ComputeCap != m.ComputeCap {
			t.Errorf("GPU %d = %+v, want index, product name, driver, CUDA and compute capability of %s", i, g, m.Name)
		}
		if g.PowerLimitW != m.PowerLimitW || g.PowerDrawW <= 0 || g.PowerDrawW >= g.PowerLimitW {
			t.Errorf("GPU %d power = %d of %d W, want an idle draw under the limit %d W", i, g.PowerDrawW, g.PowerLimitW, m.PowerLimitW)
		}
		if g.TempC != fake.IdleTempC || g.UtilPct != 0 || len(g.Processes) != 0 || g.Fault() != "" {
			t.Errorf("GPU %d = %+v, want idle and healthy", i, g)
		}
	}
	if a, b := gpus[0].PCIBusID, gpus[1].PCIBusID; a == b || !strings.HasPrefix(a, "00000000:") {
		t.Errorf("PCI bus IDs %q and %q, want distinct IDs like 00000000:10:00.0", a, b)
	}
}

func TestDetector_Knobs(t *testing.T) {
	mustFake := func(t *testing.T) (*fake.Detector, []gpu.Device) {
		t.Helper()
		d, err := fake.Parse("2xRTX4090", "s")
		if err != nil {
			t.Fatal(err)
		}
		gpus, _ := d.Detect(context.Background())
		return d, gpus
	}
	t.Run("UtilTempProcesses", func(t *testing.T) {
		d, gpus := mustFake(t)
		u := gpus[1].UUID
		d.SetUtil(u, 97)
		d.SetTemp(u, 81)
		d.SetProcesses(u, gpu.Process{PID: 4242, Name: "/usr/bin/game", UsedMB: 9000})
		got, _ := d.Detect(context.Background())
		if g := got[1]; g.UtilPct != 97 || g.TempC != 81 || len(g.Processes) != 1 || g.Processes[0].PID != 4242 || g.MemUsedMB < 9000 {
			t.Errorf("GPU 1 = %+v, want the knobs' values", g)
		}
		if g := got[0]; g.UtilPct != 0 || len(g.Processes) != 0 {
			t.Errorf("GPU 0 = %+v, want it untouched", g)
		}
		got[1].Processes[0].PID = 1
		again, _ := d.Detect(context.Background())
		if again[1].Processes[0].PID != 4242 {
			t.Error("Detect shares its process list with the caller")
		}
	})
	t.Run("Display", func(t *testing.T) {
		d, gpus := mustFake(t)
		u := gpus[0].UUID
		d.SetProcesses(u, append(fake.Display(900), gpu.Process{PID: 77, Name: "python", UsedMB: 4000, Kind: gpu.ProcessCompute})...)
		got, _ := d.Detect(context.Background())
		g := got[0]
		var graphicsMB int
		var kinds []gpu.ProcessKind
		for _, p := range g.Processes {
			kinds = append(kinds, p.Kind)
			if p.GraphicsOnly() {
				graphicsMB += p.UsedMB
			}
		}
		want := []gpu.ProcessKind{gpu.ProcessGraphics, gpu.ProcessGraphics, gpu.ProcessCompute}
		if !slices.Equal(kinds, want) || graphicsMB != 900 || g.MemUsedMB != 1+900+4000 {
			t.Errorf("GPU 0 processes %+v, %d MB used; want the display's two graphics processes holding 900 MB, then the compute one", g.Processes, g.MemUsedMB)
		}
	})
	t.Run("Xid", func(t *testing.T) {
		d, gpus := mustFake(t)
		d.AddXid(gpus[0].UUID, 13) // a program's fault: still healthy
		got, _ := d.Detect(context.Background())
		if f := got[0].Fault(); f != "" {
			t.Errorf("after Xid 13, Fault = %q, want healthy", f)
		}
		d.AddXid(gpus[0].UUID, 79)
		got, _ = d.Detect(context.Background())
		if f := got[0].Fault(); f != "Xid 79" {
			t.Errorf("after Xid 79, Fault = %q, want %q", f, "Xid 79")
		}
	})
	t.Run("RemoveRestore", func(t *testing.T) {
		d, gpus := mustFake(t)
		d.Remove(gpus[0].UUID)
		got, _ := d.Detect(context.Background())
		if len(got) != 1 || got[0].UUID != gpus[1].UUID {
			t.Errorf("after Remove, Detect = %v, want only GPU 1", got)
		}
		d.Restore(gpus[0].UUID)
		if got, _ := d.Detect(context.Background()); len(got) != 2 {
			t.Errorf("after Restore, %d GPUs, want 2", len(got))
		}
	})
	t.Run("UnknownUUID", func(t *testing.T) {
		d, _ := mustFake(t)
		if err := d.SetUtil("GPU-nope", 1); err == nil {
			t.Error("SetUtil of an unknown GPU: got nil error")
		}
	})
	t.Run("PowerLimits", func(t *testing.T) {
		d, gpus := mustFake(t)
		if w, err := d.SetPowerLimit(context.Background(), gpus[0].UUID, 300); err != nil || w != 300 {
			t.Fatalf("SetPowerLimit = %d, %v; want 300", w, err)
		}
		if w, _ := d.SetPowerLimit(context.Background(), gpus[1].UUID, 10); w != 150 {
			t.Errorf("SetPowerLimit(10 W) applied %d W, want the minimum 150 W", w)
		}
		d.SetPowerLimit(context.Background(), gpus[1].UUID, 450)
		d.FailPowerLimits(errors.New("Insufficient Permissions"))
		if _, err := d.SetPowerLimit(context.Background(), gpus[1].UUID, 300); err == nil {
			t.Error("SetPowerLimit after FailPowerLimits: got nil error")
		}
		got, _ := d.Detect(context.Background())
		if got[0].PowerLimitW != 300 || got[1].PowerLimitW != 450 {
			t.Errorf("limits = %d, %d W; want 300 and the default 450", got[0].PowerLimitW, got[1].PowerLimitW)
		}
		want := []fake.PowerLimit{{gpus[0].UUID, 300}, {gpus[1].UUID, 150}, {gpus[1].UUID, 450}}
		if l := d.PowerLimits(); len(l) != 3 || l[0] != want[0] || l[1] != want[1] || l[2] != want[2] {
			t.Errorf("PowerLimits = %v, want %v", l, want)
		}
	})
}
