package sqlstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/sqlstore"
)

// expiryTests are the contract tests of what the store keeps only for a
// while: submissions' idempotency keys and idle registry logins.
var expiryTests = []struct {
	name string
	test func(t *testing.T, db *sqlstore.DB)
}{
	{"ForgetJobIdempotencyKeys", testForgetJobIdempotencyKeys},
	{"ForgetJobIdempotencyKeys_Batches", testForgetJobIdempotencyKeysBatches},
	{"RegistryLogins_Idle", testRegistryLoginsIdle},
	{"RegistryLogins_IdleMigration", testRegistryLoginsIdleMigration},
}

// mustKeyedJob stores a job of renter submitted with key, ended (cancelled
// while queued) at ended unless that is zero.
func mustKeyedJob(t *testing.T, db *sqlstore.DB, renterID, key string, ended time.Time) *idlegrid.Job {
	t.Helper()
	ctx := context.Background()
	j := newJob(renterID, 1, 1)
	j.IdempotencyKey = key
	mustOK(t, db.CreateJob(ctx, j))
	if !ended.IsZero() {
		mustOK(t, db.CancelQueuedJob(ctx, j.ID, "cancelled by the renter", ended))
	}
	return j
}

// wantJobKey fails t unless the job shows key.
func wantJobKey(t *testing.T, db *sqlstore.DB, jobID, key string) {
	t.Helper()
	j, err := db.FindJob(context.Background(), jobID)
	mustOK(t, err)
	if j.IdempotencyKey != key {
		t.Errorf("job %s shows idempotency key %q, want %q", jobID, j.IdempotencyKey, key)
	}
}

// testForgetJobIdempotencyKeys: a submission's key is freed only once its
// job has ended before the cutoff; a freed key may name a new job; the
// keys of transfers and payouts, and the ledger, are never touched, even
// where they spell the same key.
func testForgetJobIdempotencyKeys(t *testing.T, db *sqlstore.DB) {
	ctx := context.Background()
	r, other := mustAccount(t, db, idlegrid.RoleRenter), mustAccount(t, db, idlegrid.RoleRenter)
	ended := mustKeyedJob(t, db, r.ID, "k", t0)
	theirs := mustKeyedJob(t, db, other.ID, "k", at(2*time.Hour))
	live := mustKeyedJob(t, db, r.ID, "k-live", time.Time{})
	mustKeyedJob(t, db, r.ID, "", t0)

	// Money under the same key: a top-up and a payout.
	topUp := topUp(r.ID, 5*idlegrid.MicrosPerUnit)
	topUp.IdempotencyKey = "k"
	_, err := db.PostTransfer(ctx, topUp)
	mustOK(t, err)
	prov := mustAccount(t, db, idlegrid.RoleProvider)
	mustPayable(t, db, prov.ID, 10*idlegrid.MicrosPerUnit)
	p, x := newPayout(t, prov.ID, 4*idlegrid.MicrosPerUnit, "k")
	_, err = db.CreatePayout(ctx, p, x)
	mustOK(t, err)
	transfers, err := db.ListTransfers(ctx, idlegrid.TransferFilter{})
	mustOK(t, err)
	payouts, err := db.ListPayouts(ctx, idlegrid.PayoutFilter{})
	mustOK(t, err)

	// One key at a time: kept while its job is live or ended since.
	mustOK(t, db.ForgetJobIdempotencyKey(ctx, r.ID, "k-live", at(1000*time.Hour)))
	wantJobKey(t, db, live.ID, "k-live")
	mustOK(t, db.ForgetJobIdempotencyKey(ctx, other.ID, "k", at(time.Hour)))
	wantJobKey(t, db, theirs.ID, "k")
	mustOK(t, db.ForgetJobIdempotencyKey(ctx, r.ID, "no-such-key", at(time.Hour)))
	wantField(t, db.ForgetJobIdempotencyKey(ctx, r.ID, "", at(time.Hour)), "job.idempotency_key")

	n, err := db.ForgetJobIdempotencyKeys(ctx, at(time.Hour), 10)
	if err != nil || n != 1 {
		t.Fatalf("ForgetJobIdempotencyKeys(an hour in) = %d, %v; want the one job that ended before", n, err)
	}
	wantJobKey(t, db, ended.ID, "")
	wantJobKey(t, db, theirs.ID, "k")
	wantJobKey(t, db, live.ID, "k-live")
	_, err = db.FindJobByIdempotencyKey(ctx, r.ID, "k")
	wantCode(t, err, idlegrid.ENOTFOUND)
	again := mustKeyedJob(t, db, r.ID, "k", time.Time{})
	if got, err := db.FindJobByIdempotencyKey(ctx, r.ID, "k"); err != nil || got.ID != again.ID {
		t.Errorf("the freed key names %+v (%v), want the new job %s", got, err, again.ID)
	}

	if n, err := db.ForgetJobIdempotencyKeys(ctx, at(1000*time.Hour), 10); err != nil || n != 1 {
		t.Errorf("ForgetJobIdempotencyKeys(later) = %d, %v; want the other renter's ended job only", n, err)
	}
	wantJobKey(t, db, theirs.ID, "")
	wantJobKey(t, db, again.ID, "k")

	// The ledger is as it was, and its keys still hold.
	if got, err := db.ListTransfers(ctx, idlegrid.TransferFilter{}); err != nil || !cmp.Equal(transfers, got) {
		t.Errorf("transfers changed by the sweep (%v) (-before +after):\n%s", err, cmp.Diff(transfers, got))
	}
	if got, err := db.ListPayouts(ctx, idlegrid.PayoutFilter{}); err != nil || !cmp.Equal(payouts, got) {
		t.Errorf("payouts changed by the sweep (%v) (-before +after):\n%s", err, cmp.Diff(payouts, got))
	}
	retried := *topUp
	retried.ID = ""
	if stored, err := db.PostTransfer(ctx, &retried); err != nil || stored.ID != topUp.ID {
		t.Errorf("a top-up retried after the sweep: %+v, %v; want the stored %s", stored, err, topUp.ID)
	}
	p2, x2 := newPayout(t, prov.ID, 4*idlegrid.MicrosPerUnit, "k")
	if stored, err := db.CreatePayout(ctx, p2, x2); err != nil || stored.ID != p.ID {
		t.Errorf("a payout retried after the sweep: %+v, %v; want the stored %s", stored, err, p.ID)
	}
	if b := mustBalance(t, db, r.ID); b.Available != 5*idlegrid.MicrosPerUnit {
		t.Errorf("renter's available %s after a retried top-up, want $5", b.Available)
	}
	checkLedger(t, db)

	for _, limit := range []int{0, sqlstore.MaxExpiryBatch + 1} {
		_, err := db.ForgetJobIdempotencyKeys(ctx, at(time.Hour), limit)
		wantField(t, err, "limit")
	}
}

// testForgetJobIdempotencyKeysBatches: a sweep frees at most its limit,
// the keys of the jobs that ended first first, and says when it is done.
func testForgetJobIdempotencyKeysBatches(t *testing.T, db *sqlstore.DB) {
	ctx := context.Background()
	r := mustAccount(t, db, idlegrid.RoleRenter)
	var jobs []*idlegrid.Job
	for i := range 5 {
		jobs = append(jobs, mustKeyedJob(t, db, r.ID, id("key"), at(time.Duration(5-i)*time.Minute)))
	}
	// Ended last to first: jobs[4] at 1m, jobs[0] at 5m.
	freed := 0
	for _, want := range []int{2, 2, 1, 0} {
		n, err := db.ForgetJobIdempotencyKeys(ctx, at(time.Hour), 2)
		if err != nil || n != want {
			t.Fatalf("ForgetJobIdempotencyKeys(limit 2) = %d, %v; want %d", n, err, want)
		}
		freed += n
		for i, j := range jobs {
			key := j.IdempotencyKey
			if i >= len(jobs)-freed { // among the first to end
				key = ""
			}
			wantJobKey(t, db, j.ID, key)
		}
	}
}
