package fake_test

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/gpu/fake"
)

func mustDetect(tb testing.TB, spec, seed string) []idlegrid.GPU {
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
