package sqlstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/sqlstore"
)

// followUpTests are the contract tests of the follow-up outbox.
var followUpTests = []struct {
	name string
	test func(t *testing.T, db *sqlstore.DB)
}{
	{"FollowUps", testFollowUps},
	{"FollowUps_WithLeaseEnd", testFollowUpsWithLeaseEnd},
	{"FollowUps_CompletedByReputation", testFollowUpsCompletedByReputation},
	{"FollowUps_WithDispute", testFollowUpsWithDispute},
}

func followUp(id string, due time.Duration) *idlegrid.FollowUp {
	return &idlegrid.FollowUp{ID: id, Kind: "lease_ended", Body: `{"gpu_seconds":60}`, DueAt: at(due), CreatedAt: t0}
}

// wantDue fails t unless the follow-ups due at when are want, in order.
func wantDue(t *testing.T, db *sqlstore.DB, when time.Time, limit int, want ...*idlegrid.FollowUp) {
	t.Helper()
	got, err := db.DueFollowUps(context.Background(), when, limit)
	mustOK(t, err)
	if want == nil {
		want = []*idlegrid.FollowUp{}
	}
	if got == nil {
		got = []*idlegrid.FollowUp{}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("DueFollowUps(%v, %d) (-want +got):\n%s", when, limit, diff)
	}
}

// testFollowUps: follow-ups come due in order of due time, a limited batch
// at a time; a deferred one counts its try and waits; a done one is gone;
// neither minds one that is gone; an ID is pending once.
func testFollowUps(t *testing.T, db *sqlstore.DB) {
	ctx := context.Background()
	a, b, c := followUp("lease:a", 2*time.Minute), followUp("lease:b", time.Minute), followUp("lease:c", time.Hour)
	for _, f := range []*idlegrid.FollowUp{a, b, c} {
		mustOK(t, db.AddFollowUp(ctx, f))
	}
	wantCode(t, db.AddFollowUp(ctx, followUp("lease:a", time.Minute)), idlegrid.ECONFLICT)
	wantCode(t, db.AddFollowUp(ctx, &idlegrid.FollowUp{ID: "lease:d", Kind: "lease_ended"}), idlegrid.EINVALID)
	_, err := db.DueFollowUps(ctx, t0, 0)
	wantCode(t, err, idlegrid.EINVALID)

	wantDue(t, db, at(time.Minute-time.Second), 10)
	wantDue(t, db, at(10*time.Minute), 10, b, a)
	wantDue(t, db, at(10*time.Minute), 1, b)

	mustOK(t, db.DeferFollowUp(ctx, b.ID, at(20*time.Minute)))
	deferred := *b
	deferred.Tries, deferred.DueAt = 1, at(20*time.Minute)
	wantDue(t, db, at(10*time.Minute), 10, a)
	wantDue(t, db, at(20*time.Minute), 10, a, &deferred)

	mustOK(t, db.DoneFollowUp(ctx, a.ID))
	mustOK(t, db.DoneFollowUp(ctx, a.ID))
	mustOK(t, db.DeferFollowUp(ctx, a.ID, at(time.Hour)))
	wantDue(t, db, at(2*time.Hour), 10, &deferred, c)
	mustOK(t, db.AddFollowUp(ctx, followUp("lease:a", 3*time.Hour))) // pending no more
}

// testFollowUpsWithLeaseEnd: a lease's end stores its follow-up in the
// same transaction: with it when it commits, not at all when it does not.
func testFollowUpsWithLeaseEnd(t *testing.T, db *sqlstore.DB) {
	ctx := context.Background()
	r, p := mustAccount(t, db, idlegrid.RoleRenter), mustAccount(t, db, idlegrid.RoleProvider)
	n := mustNode(t, db, p.ID, 2)
	mustTopUp(t, db, r.ID, 10*idlegrid.MicrosPerUnit)
	j := mustJob(t, db, r.ID, 1, 1)
	l := lease(j, n, 0)
	mustPlace(t, db, placement(j, 0, l))
	start(t, db, l)

	f := followUp("lease:"+l.ID, 35*time.Minute)
	end := &idlegrid.LeaseTransition{LeaseID: l.ID, From: []idlegrid.LeaseState{idlegrid.LeaseAssigned},
		To: idlegrid.LeaseCancelled, Reason: "cancelled", At: at(33 * time.Minute), FollowUp: f}
	wantCode(t, db.TransitionLease(ctx, end, nil), idlegrid.ECONFLICT) // it is running, not assigned
	wantDue(t, db, at(time.Hour), 10)

	end.From = []idlegrid.LeaseState{idlegrid.LeaseRunning}
	mustTransition(t, db, end)
	wantDue(t, db, at(time.Hour), 10, f)

	bad := *end
	bad.FollowUp = &idlegrid.FollowUp{ID: "lease:x"}
	wantCode(t, db.TransitionLease(ctx, &bad, nil), idlegrid.EINVALID)
}

// testFollowUpsWithDispute: a dispute upheld, as it opens or as it is
// resolved, stores its follow-up in the same transaction: with it when it
// commits, not at all when it does not; only an upheld one has one.
func testFollowUpsWithDispute(t *testing.T, db *sqlstore.DB) {
	ctx := context.Background()
	p := mustAccount(t, db, idlegrid.RoleProvider)
	dispute := func(lease string, state idlegrid.DisputeState) *idlegrid.Dispute {
		d := &idlegrid.Dispute{ID: id("dispute"), Offence: "forged_receipt", State: state, ProviderID: p.ID,
			LeaseID: lease, Evidence: "receipt 3 is not signed by the node", CreatedAt: t0}
		if state == idlegrid.DisputeUpheld {
			d.Resolution, d.ResolvedBy, d.ResolvedAt = "proven", "market", &d.CreatedAt
		}
		return d
	}
	held := func(d *idlegrid.Dispute) *idlegrid.FollowUp {
		return &idlegrid.FollowUp{ID: "hold:" + d.ID, Kind: "provider_held", Body: "{}", DueAt: at(2 * time.Minute), CreatedAt: t0}
	}

	upheld := dispute("lease_a", idlegrid.DisputeUpheld)
	mustOK(t, db.OpenDispute(ctx, upheld, nil, held(upheld)))
	again := dispute("lease_a", idlegrid.DisputeUpheld) // the same offence on the same lease
	wantCode(t, db.OpenDispute(ctx, again, nil, held(again)), idlegrid.ECONFLICT)
	open := dispute("lease_b", idlegrid.DisputeOpen)
	wantField(t, db.OpenDispute(ctx, open, nil, held(open)), "follow_up")
	wantDue(t, db, at(time.Hour), 10, held(upheld))

	mustOK(t, db.OpenDispute(ctx, open, nil, nil))
	resolve := func(to idlegrid.DisputeState) error {
		_, err := db.ResolveDispute(ctx, idlegrid.DisputeResolution{DisputeID: open.ID, To: to, Resolution: "logs agree",
			By: "acct_admin", At: at(time.Minute), FollowUp: held(open)})
		return err
	}
	wantField(t, resolve(idlegrid.DisputeDismissed), "follow_up")
	mustOK(t, resolve(idlegrid.DisputeUpheld))
	wantCode(t, resolve(idlegrid.DisputeUpheld), idlegrid.ECONFLICT) // resolved already: stores nothing again
	wantDue(t, db, at(time.Hour), 10, held(upheld), held(open))
}

// testFollowUpsCompletedByReputation: a reputation save that completes a
// follow-up removes it in its transaction; a second such save finds it
// gone, says so, and saves nothing.
func testFollowUpsCompletedByReputation(t *testing.T, db *sqlstore.DB) {
	ctx := context.Background()
	p := mustAccount(t, db, idlegrid.RoleProvider)
	n := mustNode(t, db, p.ID, 1)
	f := followUp("lease:lease_x", time.Minute)
	mustOK(t, db.AddFollowUp(ctx, f))
	first := nodeReputation(n, 0.8, 1, time.Hour)
	first.GPUSecondsServed = 120
	mustOK(t, db.SaveReputation(ctx, &idlegrid.ReputationUpdate{Reputation: first, Completes: f.ID}))
	wantDue(t, db, at(time.Hour), 10)

	again := *first
	again.GPUSecondsServed = 240
	err := db.SaveReputation(ctx, &idlegrid.ReputationUpdate{Reputation: &again, Completes: f.ID})
	var e *idlegrid.Error
	if !errors.As(err, &e) || e.Code != idlegrid.ENOTFOUND || e.Field != "reputation.completes" {
		t.Fatalf("a second save completing the same follow-up: %v, want ENOTFOUND on reputation.completes", err)
	}
	got, err := db.FindReputation(ctx, idlegrid.SubjectNode, n.ID)
	mustOK(t, err)
	if got.GPUSecondsServed != 120 {
		t.Errorf("served %d GPU-seconds, want 120: the second save changed nothing", got.GPUSecondsServed)
	}
}
