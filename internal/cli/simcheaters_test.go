package cli

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestSimCheaters(t *testing.T) {
	t.Run("JSON", func(t *testing.T) {
		r := run(t, nil, "sim", "cheaters", "--providers", "6", "--leases", "2", "--behaviours", "lies-gpu", "--json", "--quiet")
		if r.code != 0 {
			t.Fatalf("got %s, want exit 0", r)
		}
		var rep struct {
			Providers  int `json:"providers"`
			Behaviours []struct {
				Behaviour string `json:"behaviour"`
				Providers int    `json:"providers"`
				Flagged   int    `json:"flagged"`
			} `json:"behaviours"`
		}
		if err := json.Unmarshal([]byte(r.out), &rep); err != nil {
			t.Fatalf("stdout is not JSON: %v\n%s", err, r)
		}
		if rep.Providers != 6 || len(rep.Behaviours) != 2 || rep.Behaviours[1].Behaviour != "lies-gpu" || rep.Behaviours[1].Flagged != 3 {
			t.Fatalf("report = %+v, want 6 providers, honest and 3 lies-gpu all flagged", rep)
		}
	})
	t.Run("UnknownBehaviour", func(t *testing.T) {
		r := run(t, nil, "sim", "cheaters", "--behaviours", "steals-gpus")
		if r.code == 0 || !strings.Contains(r.err, "steals-gpus") {
			t.Fatalf("got %s, want an error naming the behaviour", r)
		}
	})
	t.Run("Help", func(t *testing.T) {
		r := run(t, nil, "sim", "cheaters", "--help")
		if r.code != 0 || !strings.Contains(r.out, "--flag-score") {
			t.Fatalf("got %s, want help listing --flag-score", r)
		}
	})
}
