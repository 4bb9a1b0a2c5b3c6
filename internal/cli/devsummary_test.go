package cli

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/client"
	"github.com/idlegrid/idlegrid/internal/httpapi/wire"
)

// TestMarketWatch_lookCutShort: a look cut short (the dev market stopping)
// while it reads a placed job's lease notes nothing of the job, so that the
// next look, the final one, notes its placement and then its end.
func TestMarketWatch_lookCutShort(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/leases" || r.URL.Query().Get("job_id") != "job_1" {
			http.NotFound(w, r)
			return
		}
		json.NewEncoder(w).Encode(wire.Leases{Leases: []*idlegrid.Lease{{ID: "lease_1", JobID: "job_1", NodeID: "node_1",
			Attempt: 1, Tier: idlegrid.TierSilver, GPUUUIDs: []string{"gpu-0"}, PriceMicrosPerGPUHour: 1_500_000}}})
	}))
	defer srv.Close()
	w := newMarketWatch(client.New(srv.URL, "igk_test"))
	w.nodes["node_1"] = "gpu-box"
	ctx := context.Background()
	w.see(ctx, &idlegrid.Job{ID: "job_1", JobSpec: idlegrid.JobSpec{Name: "train"}, State: idlegrid.JobQueued})

	done := &idlegrid.Job{ID: "job_1", JobSpec: idlegrid.JobSpec{Name: "train"}, State: idlegrid.JobSucceeded, ChargedMicros: 2_000}
	cut, cancel := context.WithCancel(ctx)
	cancel()
	w.see(cut, done)
	if ev := w.recent(); len(ev) != 0 {
		t.Fatalf("a look cut short noted %q", ev)
	}
	w.see(ctx, done)
	ev := w.recent()
	if len(ev) != 2 || !strings.Contains(ev[0], "job_1 (train) placed on gpu-box at $1.500000/GPU-h (silver, 1 GPU)") ||
		!strings.Contains(ev[1], "job_1 (train) succeeded, charged $0.002000") {
		t.Fatalf("events after the next look: %q", ev)
	}
}
