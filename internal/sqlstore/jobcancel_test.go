package sqlstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/sqlstore"
)

// wantCancelAsked fails t unless the job's renter cancelled it at want.
func wantCancelAsked(t *testing.T, db *sqlstore.DB, jobID string, want time.Time) {
	t.Helper()
	j, err := db.FindJob(context.Background(), jobID)
	mustOK(t, err)
	if j.CancelRequestedAt == nil || !j.CancelRequestedAt.Equal(want) {
		t.Errorf("job %s: cancel asked at %v, want %v", jobID, j.CancelRequestedAt, want)
	}
}

// testCancelJob: a renter's cancel ends a queued job at once; on a running
// one it asks every live lease to stop and holds, however they then end.
func testCancelJob(t *testing.T, db *sqlstore.DB) {
	ctx := context.Background()
	r := mustAccount(t, db, idlegrid.RoleRenter)
	p := mustAccount(t, db, idlegrid.RoleProvider)
	n1, n2 := mustNode(t, db, p.ID, 1), mustNode(t, db, p.ID, 1)
	mustTopUp(t, db, r.ID, 100*idlegrid.MicrosPerUnit)
	const why = idlegrid.RenterCancelReason

	queued := mustJob(t, db, r.ID, 1, 1)
	stopping, err := db.CancelJob(ctx, queued.ID, why, at(time.Hour))
	if mustOK(t, err); len(stopping) != 0 {
		t.Errorf("a queued job's cancel stops %d leases, want none", len(stopping))
	}
	if got := mustJobState(t, db, queued.ID, idlegrid.JobCancelled, why); got.EndedAt == nil || !got.EndedAt.Equal(at(time.Hour)) {
		t.Errorf("ended_at = %v, want %v", got.EndedAt, at(time.Hour))
	}
	wantCancelAsked(t, db, queued.ID, at(time.Hour))
	_, err = db.CancelJob(ctx, queued.ID, why, at(time.Hour))
	wantCode(t, err, idlegrid.ECONFLICT)

	// A gang: one lease runs under a bronze notice, the other has not started.
	j := mustJob(t, db, r.ID, 2, 1)
	l1, l2 := lease(j, n1, 0), lease(j, n2, 0)
	mustPlace(t, db, placement(j, 0, l1, l2))
	start(t, db, l1)
	mustOK(t, db.RequestLeaseStop(ctx, l1.ID, idlegrid.NoticeStopPrefix+"preempted", at(10*time.Minute)))
	stopping, err = db.CancelJob(ctx, j.ID, why, at(20*time.Minute))
	mustOK(t, err)
	if len(stopping) != 2 {
		t.Fatalf("the cancel stops %d leases, want both", len(stopping))
	}
	for _, l := range stopping {
		want := at(20 * time.Minute)
		if l.ID == l1.ID {
			want = at(10 * time.Minute) // the notice's time stands
		}
		if l.StopRequested != why || l.NoticeAt == nil || !l.NoticeAt.Equal(want) {
			t.Errorf("lease %s: stop %q since %v, want %q since %v", l.ID, l.StopRequested, l.NoticeAt, why, want)
		}
	}
	mustJobState(t, db, j.ID, idlegrid.JobRunning, "")
	_, err = db.CancelJob(ctx, j.ID, why, at(30*time.Minute)) // asked again: the first cancel stands
	mustOK(t, err)
	wantCancelAsked(t, db, j.ID, at(20*time.Minute))

	// Its nodes are lost and fail: the job is cancelled, not requeued.
	mustTransition(t, db, &idlegrid.LeaseTransition{LeaseID: l1.ID, From: []idlegrid.LeaseState{idlegrid.LeaseRunning},
		To: idlegrid.LeaseLost, Fault: idlegrid.FaultProvider, Reason: "node went silent", At: at(time.Hour)}, settle(l1, 0))
	mustJobState(t, db, j.ID, idlegrid.JobRunning, "")
	mustTransition(t, db, &idlegrid.LeaseTransition{LeaseID: l2.ID, From: []idlegrid.LeaseState{idlegrid.LeaseAssigned},
		To: idlegrid.LeaseFailed, Fault: idlegrid.FaultProvider, Reason: "image pull failed", At: at(time.Hour)}, settle(l2, 0))
	if got := mustJobState(t, db, j.ID, idlegrid.JobCancelled, why); got.Attempts != 1 || got.EndedAt == nil {
		t.Errorf("job after %d attempts, ended %v; want one attempt, ended", got.Attempts, got.EndedAt)
	}

	_, err = db.CancelJob(ctx, "job_missing", why, t0)
	wantCode(t, err, idlegrid.ENOTFOUND)
	_, err = db.CancelJob(ctx, j.ID, "", t0)
	wantCode(t, err, idlegrid.EINVALID)
}

// testCancelJobRequeued: a job requeued before the renter's cancel is
// read is cancelled queued, and is not placed again.
func testCancelJobRequeued(t *testing.T, db *sqlstore.DB) {
	ctx := context.Background()
	r := mustAccount(t, db, idlegrid.RoleRenter)
	p := mustAccount(t, db, idlegrid.RoleProvider)
	n := mustNode(t, db, p.ID, 1)
	mustTopUp(t, db, r.ID, 100*idlegrid.MicrosPerUnit)
	j := mustJob(t, db, r.ID, 1, 1)
	l := lease(j, n, 0)
	mustPlace(t, db, placement(j, 0, l))
	mustTransition(t, db, &idlegrid.LeaseTransition{LeaseID: l.ID, From: []idlegrid.LeaseState{idlegrid.LeaseAssigned},
		To: idlegrid.LeaseLost, Fault: idlegrid.FaultProvider, Reason: "node went silent", At: at(time.Hour)}, settle(l, 0))
	mustJobState(t, db, j.ID, idlegrid.JobQueued, "requeued")
	stopping, err := db.CancelJob(ctx, j.ID, idlegrid.RenterCancelReason, at(time.Hour))
	if mustOK(t, err); len(stopping) != 0 {
		t.Errorf("the cancel stops %d leases, want none", len(stopping))
	}
	mustJobState(t, db, j.ID, idlegrid.JobCancelled, idlegrid.RenterCancelReason)
	wantCode(t, db.PlaceJob(ctx, placement(j, 1, lease(j, n, 0))), idlegrid.ECONFLICT)
}

// testCancelJobMigration: the migration that keeps the renter's cancel on
// the job finds the running jobs cancelled before it, by their leases'
// stop, from when that stop was asked.
func testCancelJobMigration(t *testing.T, db *sqlstore.DB) {
	ctx := context.Background()
	r := mustAccount(t, db, idlegrid.RoleRenter)
	p := mustAccount(t, db, idlegrid.RoleProvider)
	n1, n2 := mustNode(t, db, p.ID, 1), mustNode(t, db, p.ID, 1)
	mustTopUp(t, db, r.ID, 100*idlegrid.MicrosPerUnit)
	cancelled, limited := mustJob(t, db, r.ID, 1, 1), mustJob(t, db, r.ID, 1, 1)
	lc, ll := lease(cancelled, n1, 0), lease(limited, n2, 0)
	mustPlace(t, db, placement(cancelled, 0, lc))
	mustPlace(t, db, placement(limited, 0, ll))
	mustOK(t, db.RequestLeaseStop(ctx, lc.ID, idlegrid.RenterCancelReason, at(time.Hour)))
	mustOK(t, db.RequestLeaseStop(ctx, ll.ID, "time limit of 3600s reached", at(time.Hour)))

	mustOK(t, sqlstore.Remigrate(ctx, db, 31))
	wantCancelAsked(t, db, cancelled.ID, at(time.Hour))
	if j, err := db.FindJob(ctx, limited.ID); err != nil || j.CancelRequestedAt != nil {
		t.Errorf("a job stopped at its time limit: cancel asked at %v (%v), want none", j.CancelRequestedAt, err)
	}
	mustTransition(t, db, &idlegrid.LeaseTransition{LeaseID: lc.ID, From: []idlegrid.LeaseState{idlegrid.LeaseAssigned},
		To: idlegrid.LeaseLost, Fault: idlegrid.FaultProvider, Reason: "node went silent", At: at(2 * time.Hour)}, settle(lc, 0))
	mustJobState(t, db, cancelled.ID, idlegrid.JobCancelled, idlegrid.RenterCancelReason)
}
