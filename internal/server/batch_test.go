package server_test

import (
	"context"
	"testing"
	"testing/synctest"

	"github.com/idlegrid/idlegrid"
)

// TestServer_PlacementConflict checks that a placement the store refuses,
// here because another coordinator took its GPUs behind the engine's back,
// costs only itself: the engine is rebuilt from the store and the job is
// placed where it can run, once.
func TestServer_PlacementConflict(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustMarket(t)
		synctest.Wait()
		ctx := context.Background()
		spec := testSpec()
		spec.Normalize()
		x := &idlegrid.Job{ID: idlegrid.NewID("job"), RenterID: m.renterID, JobSpec: spec,
			State: idlegrid.JobQueued, CreatedAt: m.srv.Now()}
		if err := m.store.CreateJob(ctx, x); err != nil {
			t.Fatal(err)
		}
		cheapest, err := m.store.FindNode(ctx, m.nodeID)
		if err != nil {
			t.Fatal(err)
		}
		behind := &idlegrid.Lease{ID: idlegrid.NewID("lease"), JobID: x.ID, NodeID: cheapest.ID, Tier: spec.Tier,
			PriceMicrosPerGPUHour: 400_000, LimitSeconds: spec.DurationSeconds, Reason: "placed elsewhere"}
		for _, g := range cheapest.GPUs {
			behind.GPUUUIDs = append(behind.GPUUUIDs, g.UUID)
		}
		if err := m.store.PlaceJob(ctx, &idlegrid.Placement{JobID: x.ID, Leases: []*idlegrid.Lease{behind}, At: m.srv.Now()}); err != nil {
			t.Fatal(err)
		}

		j, err := m.srv.SubmitJob(m.renter, testSpec()) // the engine still sees barn-1, the cheapest, free
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		got, err := m.srv.FindJob(m.renter, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		leases, err := m.store.ListLeases(ctx, idlegrid.LeaseFilter{JobID: j.ID})
		if err != nil {
			t.Fatal(err)
		}
		if got.State != idlegrid.JobRunning || got.Attempts != 1 || len(leases) != 1 || leases[0].NodeID == cheapest.ID {
			t.Fatalf("job = %s attempt %d (%s) with %d leases, want running once on barn-2", got.State, got.Attempts, got.Reason, len(leases))
		}
		mustLedgerBalanced(t, m.store)
	})
}
