package server_test

import (
	"context"
	"testing"
	"testing/synctest"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/metricstest"
	"github.com/idlegrid/idlegrid/internal/server"
)

// TestServer_jobCancelledWhilePlaced: a job its renter cancels while the
// scheduler stores its placement is refused by the store as moved on. The
// job stays cancelled, its GPUs go to the next job, and the engine is not
// rebuilt from the store, which at 100,000 nodes would hold every
// placement for seconds.
func TestServer_jobCancelledWhilePlaced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := prometheus.NewRegistry()
		gate := &placeGate{entered: make(chan struct{}), released: make(chan struct{})}
		m := mustMarketOn(t, goldForAll, func(s idlegrid.Store) idlegrid.Store { gate.Store = s; return gate },
			func(c *server.Config) { c.Metrics = reg })
		synctest.Wait() // the first build
		gate.held.Store(true)
		j, err := m.srv.SubmitJob(m.renter, testSpec())
		if err != nil {
			t.Fatal(err)
		}
		<-gate.entered // the scheduler stores the placement
		if _, err := m.srv.CancelJob(m.renter, j.ID); err != nil {
			t.Fatal(err)
		}
		gate.held.Store(false)
		gate.released <- struct{}{}
		synctest.Wait()

		wantJobState(t, m, j.ID, idlegrid.JobCancelled)
		submitPlaced(t, m)      // the cancelled job's GPUs are free again
		wantRebuilds(t, reg, 0) // only the job moved on
	})
}

// TestServer_gpuConflictRebuilds: a placement the store refuses for a GPU
// already claimed means the engine holds something the store does not, so
// the scheduler rebuilds it from the store, and then places the job.
func TestServer_gpuConflictRebuilds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := prometheus.NewRegistry()
		refuse := &refuseOnce{}
		m := mustMarketOn(t, goldForAll, func(s idlegrid.Store) idlegrid.Store { refuse.Store = s; return refuse },
			func(c *server.Config) { c.Metrics = reg })
		synctest.Wait()
		submitPlaced(t, m) // once the engine was rebuilt
		wantRebuilds(t, reg, 1)
	})
}

// submitPlaced submits a job and checks that the scheduler placed it once
// the bubble settles.
func submitPlaced(t *testing.T, m *testMarket) {
	t.Helper()
	j, err := m.srv.SubmitJob(m.renter, testSpec())
	if err != nil {
		t.Fatal(err)
	}
	synctest.Wait()
	wantJobState(t, m, j.ID, idlegrid.JobRunning)
}

func wantJobState(t *testing.T, m *testMarket, id string, want idlegrid.JobState) {
	t.Helper()
	if got, err := m.srv.FindJob(m.renter, id); err != nil || got.State != want {
		t.Fatalf("job %s = %+v, %v; want %s", id, got, err, want)
	}
}

func wantRebuilds(t *testing.T, reg prometheus.Gatherer, want float64) {
	t.Helper()
	if n := metricstest.Value(t, reg, "idlegrid_engine_rebuilds_total", nil); n != want {
		t.Errorf("engine rebuilt from the store %v times, want %v", n, want)
	}
}

// refuseOnce is a store that refuses the first batch of placements as
// another job's GPU claims would.
type refuseOnce struct {
	idlegrid.Store
	done bool
}

func (r *refuseOnce) PlaceJobs(ctx context.Context, ps []*idlegrid.Placement) []error {
	if r.done {
		return r.Store.PlaceJobs(ctx, ps)
	}
	r.done = true
	errs := make([]error, len(ps))
	for i, p := range ps {
		errs[i] = idlegrid.Errorf(idlegrid.ECONFLICT, "GPU %s on node %s is already claimed", p.Leases[0].GPUUUIDs[0], p.Leases[0].NodeID)
	}
	return errs
}
