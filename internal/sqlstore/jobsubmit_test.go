package sqlstore_test

import (
	"context"
	"sync"
	"testing"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/sqlstore"
)

// testConcurrentCreateJob submits many jobs at once, as many HTTP handlers
// would, some of them bad: each caller gets its own job's outcome, and
// every good job is stored exactly once.
func testConcurrentCreateJob(t *testing.T, db *sqlstore.DB) {
	ctx := context.Background()
	r := mustAccount(t, db, idlegrid.RoleRenter)
	existing := mustJob(t, db, r.ID, 1, 1)
	twinID := id("job")
	var jobs []*idlegrid.Job
	var want []string // error code per job; the twins are judged together below
	for i := 0; i < 40; i++ {
		j := newJob(r.ID, 1, 1)
		code := ""
		switch i % 10 {
		case 3:
			j.RenterID, code = "acct_missing", idlegrid.ENOTFOUND
		case 6:
			j.ID, code = existing.ID, idlegrid.ECONFLICT
		case 9:
			j.ID, code = twinID, "twin"
		}
		jobs, want = append(jobs, j), append(want, code)
	}
	errs := make([]error, len(jobs))
	var wg sync.WaitGroup
	for i, j := range jobs {
		wg.Go(func() { errs[i] = db.CreateJob(ctx, j) })
	}
	wg.Wait()

	good, twinsStored := 0, 0
	for i, err := range errs {
		switch got := idlegrid.ErrorCode(err); {
		case want[i] == "twin" && got == "":
			twinsStored++
		case want[i] == "twin" && got == idlegrid.ECONFLICT:
		case got != want[i]:
			t.Errorf("job %d: error %q (%v), want %q", i, got, err, want[i])
		case got == "":
			good++
		}
	}
	if twinsStored != 1 {
		t.Errorf("%d of the jobs sharing one ID were stored, want 1", twinsStored)
	}
	stored, err := db.ListJobs(ctx, idlegrid.JobFilter{RenterID: r.ID, Limit: 1000})
	mustOK(t, err)
	if got, want := len(stored), good+twinsStored+1; got != want { // +1: existing
		t.Errorf("%d jobs stored, want %d", got, want)
	}
	for i, j := range jobs {
		if errs[i] != nil {
			continue
		}
		got, err := db.FindJob(ctx, j.ID)
		if err != nil || got.RenterID != j.RenterID || got.Image != j.Image {
			t.Errorf("job %d: stored %+v (%v), want it as submitted", i, got, err)
		}
	}
}
