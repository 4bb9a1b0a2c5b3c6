package sqlstore_test

import (
	"context"
	"fmt"
	"strings"
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

// testJobIdempotencyKeys: a renter's idempotency key names one job. A
// second job under it is refused, naming the key, and not stored, whether
// it comes later or in the same commit, and whether or not another row
// of the commit fails; another renter's key of the same text, and jobs
// without keys, are stored.
func testJobIdempotencyKeys(t *testing.T, db *sqlstore.DB) {
	ctx := context.Background()
	r, other := mustAccount(t, db, idlegrid.RoleRenter), mustAccount(t, db, idlegrid.RoleRenter)
	first := newJob(r.ID, 1, 1)
	first.IdempotencyKey = "retry-1"
	mustOK(t, db.CreateJob(ctx, first))
	got, err := db.FindJobByIdempotencyKey(ctx, r.ID, "retry-1")
	if err != nil || got.ID != first.ID || got.IdempotencyKey != "retry-1" {
		t.Fatalf("FindJobByIdempotencyKey: %+v, %v; want %s under its key", got, err, first.ID)
	}
	_, err = db.FindJobByIdempotencyKey(ctx, other.ID, "retry-1")
	wantCode(t, err, idlegrid.ENOTFOUND)
	again := newJob(r.ID, 1, 1)
	again.IdempotencyKey = "retry-1"
	if err := db.CreateJob(ctx, again); idlegrid.ErrorCode(err) != idlegrid.ECONFLICT || !strings.Contains(err.Error(), `"retry-1"`) {
		t.Fatalf("a second job under the key: %v, want a conflict naming it", err)
	}
	_, err = db.FindJob(ctx, again.ID)
	wantCode(t, err, idlegrid.ENOTFOUND)

	for _, withFailure := range []bool{false, true} { // a failing row sends the commit behind savepoints
		key := fmt.Sprintf("together-%v", withFailure)
		var jobs []*idlegrid.Job
		for i := range 12 {
			j := newJob(r.ID, 1, 1)
			switch i % 4 {
			case 0, 1:
				j.IdempotencyKey = key
			case 2:
				j.RenterID, j.IdempotencyKey = other.ID, key
			}
			jobs = append(jobs, j)
		}
		if withFailure {
			jobs = append(jobs, newJob("acct_missing", 1, 1))
		}
		errs := make([]error, len(jobs))
		var wg sync.WaitGroup
		for i, j := range jobs {
			wg.Go(func() { errs[i] = db.CreateJob(ctx, j) })
		}
		wg.Wait()
		stored := map[string]int{} // renter → jobs stored under the key
		for i, j := range jobs {
			switch code := idlegrid.ErrorCode(errs[i]); {
			case j.RenterID == "acct_missing":
				if code != idlegrid.ENOTFOUND {
					t.Errorf("the job of no renter: %v, want not found", errs[i])
				}
			case code == "" && j.IdempotencyKey != "":
				stored[j.RenterID]++
			case code == "":
			case j.IdempotencyKey == "" || code != idlegrid.ECONFLICT:
				t.Errorf("job %d (key %q): %v, want it stored, or a conflict over its key", i, j.IdempotencyKey, errs[i])
			}
		}
		if stored[r.ID] != 1 || stored[other.ID] != 1 {
			t.Errorf("with a failing row %v: jobs stored under the key, by renter: %v, want one each", withFailure, stored)
		}
	}
}
