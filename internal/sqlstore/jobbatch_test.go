package sqlstore

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/pgtest"
)

func TestDB_storeJobs(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) {
		testStoreJobs(t, filepath.Join(t.TempDir(), "jobs.db"))
	})
	t.Run("postgres", func(t *testing.T) {
		testStoreJobs(t, pgtest.NewDSN(t))
	})
}

var batchT0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func batchJob(id, renterID string) *idlegrid.Job {
	return &idlegrid.Job{ID: id, RenterID: renterID, State: idlegrid.JobQueued, Reason: "waiting",
		CreatedAt: batchT0, UpdatedAt: batchT0,
		JobSpec: idlegrid.JobSpec{Kind: idlegrid.KindTraining, Image: "img", GPUs: 1, Tier: idlegrid.TierSilver,
			MaxPriceMicrosPerGPUHour: idlegrid.MicrosPerUnit, DurationSeconds: 3600}}
}

// takeOnce is a take that hands out rows, as pending submissions, once.
func takeOnce(t *testing.T, jobs ...*idlegrid.Job) (func() []*pending[jobRow], []*pending[jobRow]) {
	var batch []*pending[jobRow]
	for _, j := range jobs {
		spec, err := jsonArg(j.JobSpec)
		if err != nil {
			t.Fatal(err)
		}
		p := &pending[jobRow]{item: newJobRow(j, spec), done: make(chan error, 1)}
		p.state.Store(taken)
		batch = append(batch, p)
	}
	taken := false
	return func() []*pending[jobRow] {
		if taken {
			t.Error("take called twice for one commit")
			return nil
		}
		taken = true
		return batch
	}, batch
}

// testStoreJobs commits batches of submissions the way the group commit's
// leader does, and checks that each job is judged alone: a missing renter
// or a taken ID fails only its own job, even when it breaks the batch's
// multi-row statement, and a transaction that fails whole stores nothing.
func testStoreJobs(t *testing.T, dsn string) {
	ctx := context.Background()
	db, err := Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	renter := &idlegrid.Account{ID: idlegrid.NewID("acct"), Name: "r", Role: idlegrid.RoleRenter, CreatedAt: batchT0}
	if err := db.CreateAccount(ctx, renter); err != nil {
		t.Fatal(err)
	}
	existing := batchJob(idlegrid.NewID("job"), renter.ID)
	if err := db.CreateJob(ctx, existing); err != nil {
		t.Fatal(err)
	}
	twin := idlegrid.NewID("job")
	tests := []struct {
		name string
		jobs []*idlegrid.Job
		want []string // error code per job, "" for stored
	}{
		{"AllGood", []*idlegrid.Job{
			batchJob(idlegrid.NewID("job"), renter.ID), batchJob(idlegrid.NewID("job"), renter.ID),
		}, []string{"", ""}},
		{"TakenIDs", []*idlegrid.Job{
			batchJob(twin, renter.ID), batchJob(existing.ID, renter.ID), batchJob(twin, renter.ID),
			batchJob(idlegrid.NewID("job"), renter.ID),
		}, []string{"", idlegrid.ECONFLICT, idlegrid.ECONFLICT, ""}},
		{"MissingRenter", []*idlegrid.Job{ // breaks the multi-row insert: the rest are stored alone
			batchJob(idlegrid.NewID("job"), renter.ID), batchJob(idlegrid.NewID("job"), "acct_missing"),
			batchJob(existing.ID, renter.ID), batchJob(idlegrid.NewID("job"), renter.ID),
		}, []string{"", idlegrid.ENOTFOUND, idlegrid.ECONFLICT, ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			take, batch := takeOnce(t, tt.jobs...)
			db.storeJobs(ctx, take)
			for i, p := range batch {
				err := <-p.done
				if got := idlegrid.ErrorCode(err); got != tt.want[i] {
					t.Errorf("job %d: error %q (%v), want %q", i, got, err, tt.want[i])
				}
				if tt.want[i] != "" {
					continue
				}
				got, err := db.FindJob(ctx, tt.jobs[i].ID)
				if err != nil {
					t.Errorf("job %d was not stored: %v", i, err)
				} else if got.RenterID != tt.jobs[i].RenterID || got.State != idlegrid.JobQueued {
					t.Errorf("job %d stored as %s of %s, want queued of %s", i, got.State, got.RenterID, tt.jobs[i].RenterID)
				}
			}
		})
	}
	t.Run("TransactionFails", func(t *testing.T) {
		a, b := batchJob(idlegrid.NewID("job"), renter.ID), batchJob(idlegrid.NewID("job"), renter.ID)
		take, batch := takeOnce(t, a, b)
		cancelled, cancel := context.WithCancel(ctx)
		cancel()
		db.storeJobs(cancelled, take)
		for i, p := range batch {
			if err := <-p.done; err == nil {
				t.Errorf("job %d: no error from a transaction that could not begin", i)
			}
		}
		for _, j := range []*idlegrid.Job{a, b} {
			if _, err := db.FindJob(ctx, j.ID); idlegrid.ErrorCode(err) != idlegrid.ENOTFOUND {
				t.Errorf("job %s: FindJob error %v, want ENOTFOUND: a failed batch stores nothing", j.ID, err)
			}
		}
	})
}
