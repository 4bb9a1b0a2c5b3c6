package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSimInference(t *testing.T) {
	const code, conv = "code:../infersim/testdata/code_head.csv", "conv:../infersim/testdata/conv_head.csv"
	t.Run("JSON", func(t *testing.T) {
		r := run(t, nil, "sim", "inference", "--traces", code+","+conv, "--requests", "12", "--speedup", "1000", "--service-speedup", "1000",
			"--fault-scale", "0", "--json", "--quiet")
		if r.code != 0 {
			t.Fatalf("got %s, want exit 0", r)
		}
		var rep struct {
			Requests      int            `json:"requests"`
			Served        int            `json:"served"`
			Errors        map[string]int `json:"errors"`
			ChargedMicros int64          `json:"charged_micros"`
			UsageCharged  int64          `json:"usage_charged_micros"`
			Services      []struct {
				Service string `json:"service"`
			} `json:"services"`
			Providers []struct {
				Faults map[string]int `json:"faults"`
			} `json:"providers"`
		}
		if err := json.Unmarshal([]byte(r.out), &rep); err != nil {
			t.Fatalf("stdout is not JSON: %v\n%s", err, r)
		}
		if rep.Requests != 12 || rep.Served != 12 || rep.ChargedMicros <= 0 || rep.ChargedMicros != rep.UsageCharged || len(rep.Providers) != 6 {
			t.Fatalf("report = %+v, want 12 requests all served by the 6 providers, charged as the usage records say", rep)
		}
		for _, p := range rep.Providers {
			if len(p.Faults) != 0 {
				t.Errorf("faults %v drawn with --fault-scale 0", p.Faults)
			}
		}
	})
	t.Run("BadRow", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "bad.csv")
		if err := os.WriteFile(path, []byte("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.9799600,12,many\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		r := run(t, nil, "sim", "inference", "--traces", "mine:"+path)
		if r.code != 1 || !strings.Contains(r.err, "trace.mine:2.GeneratedTokens") {
			t.Fatalf("got %s, want exit 1 naming line 2's GeneratedTokens", r)
		}
	})
	t.Run("NoTrace", func(t *testing.T) {
		r := run(t, nil, "sim", "inference", "--trace-dir", t.TempDir())
		if r.code != 1 || !strings.Contains(r.err, "AzureLLMInferenceTrace_code.csv") {
			t.Fatalf("got %s, want exit 1 naming the missing file", r)
		}
	})
	t.Run("BadSpeedup", func(t *testing.T) {
		if r := run(t, nil, "sim", "inference", "--speedup", "0"); r.code != 2 {
			t.Fatalf("got %s, want exit 2", r)
		}
	})
	t.Run("Help", func(t *testing.T) {
		r := run(t, nil, "sim", "inference", "--help")
		if r.code != 0 || !strings.Contains(r.out, "--speedup") {
			t.Fatalf("got %s, want help listing --speedup", r)
		}
	})
}
