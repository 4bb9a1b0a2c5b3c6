package sqlstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/sqlstore"
)

func testVerifications(t *testing.T, db *sqlstore.DB) {
	ctx := context.Background()
	r := mustAccount(t, db, idlegrid.RoleRenter)
	v := &idlegrid.Verification{
		ID: id("verif"), RenterID: r.ID, State: idlegrid.VerificationRerunning,
		Original:  idlegrid.Run{JobID: "job_a", LeaseID: "lease_a", ProviderID: "prov_1", Digest: "sha256:aa"},
		Rerun:     idlegrid.Run{JobID: "job_b"},
		CreatedAt: t0, UpdatedAt: t0,
	}
	mustOK(t, db.CreateVerification(ctx, v, nil))
	again := *v
	again.ID = id("verif")
	wantCode(t, db.CreateVerification(ctx, &again, nil), idlegrid.ECONFLICT)
	for field, edit := range map[string]func(*idlegrid.Verification){
		"verification":              func(b *idlegrid.Verification) { b.RenterID = "" },
		"verification.original":     func(b *idlegrid.Verification) { b.Original.Digest = "" },
		"verification.rerun.job_id": func(b *idlegrid.Verification) { b.Rerun.JobID = "" },
		"verification.created_at":   func(b *idlegrid.Verification) { b.UpdatedAt = time.Time{} },
	} {
		bad := *v
		bad.ID, bad.Original.LeaseID = id("verif"), "lease_other" // else only the lease's conflict
		edit(&bad)
		wantField(t, db.CreateVerification(ctx, &bad, nil), field)
	}
	if vs, err := db.ListVerifications(ctx, idlegrid.VerificationFilter{RenterID: r.ID}); err != nil || len(vs) != 1 {
		t.Errorf("verifications after the refused ones: %d (%v), want the one stored", len(vs), err)
	}

	got, err := db.FindVerificationByJob(ctx, "job_b")
	mustOK(t, err)
	if got.ID != v.ID || got.Original.Digest != "sha256:aa" || got.State != idlegrid.VerificationRerunning {
		t.Errorf("FindVerificationByJob = %+v", got)
	}
	_, err = db.FindVerificationByJob(ctx, "job_a") // the original is not a re-run
	wantCode(t, err, idlegrid.ENOTFOUND)

	// The re-run disagrees: a tie-break on a third provider.
	v.Rerun = idlegrid.Run{JobID: "job_b", LeaseID: "lease_b", ProviderID: "prov_2", Digest: "sha256:bb"}
	v.Tiebreak = &idlegrid.Run{JobID: "job_c"}
	v.State, v.UpdatedAt = idlegrid.VerificationTiebreaking, t0.Add(time.Hour)
	mustOK(t, db.UpdateVerification(ctx, v, idlegrid.VerificationRerunning, nil))
	wantCode(t, db.UpdateVerification(ctx, v, idlegrid.VerificationRerunning, nil), idlegrid.ECONFLICT)
	got, err = db.FindVerificationByJob(ctx, "job_c")
	mustOK(t, err)
	if got.State != idlegrid.VerificationTiebreaking || got.Rerun.Digest != "sha256:bb" {
		t.Errorf("after the update: %+v", got)
	}
	t.Run("with its run, or not at all", func(t *testing.T) {
		run := &idlegrid.Job{ID: id("job"), RenterID: r.ID, State: idlegrid.JobQueued, CreatedAt: t0,
			JobSpec: idlegrid.JobSpec{Name: "rerun", Image: "ghcr.io/a/b:1", GPUs: 1, Nodes: 1, Tier: idlegrid.TierBronze}}
		w := &idlegrid.Verification{ID: id("verif"), RenterID: r.ID, State: idlegrid.VerificationRerunning,
			Original:  idlegrid.Run{JobID: "job_x", LeaseID: "lease_x", ProviderID: "prov_1", Digest: "sha256:aa"},
			Rerun:     idlegrid.Run{JobID: run.ID},
			CreatedAt: t0, UpdatedAt: t0}
		mustOK(t, db.CreateVerification(ctx, w, run))
		if j, err := db.FindJob(ctx, run.ID); err != nil || j.State != idlegrid.JobQueued {
			t.Errorf("the re-run = %+v (%v), want it queued with its verification", j, err)
		}
		// A run that cannot be stored takes its verification with it.
		lost := *w
		lost.ID, lost.Original.LeaseID, lost.Original.JobID = id("verif"), "lease_y", "job_y"
		wantCode(t, db.CreateVerification(ctx, &lost, run), idlegrid.ECONFLICT)
		if vs, err := db.ListVerifications(ctx, idlegrid.VerificationFilter{ProviderID: "prov_1"}); err != nil || len(vs) != 2 {
			t.Errorf("verifications of prov_1 = %d (%v), want 2: the one whose run failed was not stored", len(vs), err)
		}
	})
	for _, tt := range []struct {
		f    idlegrid.VerificationFilter
		want int
	}{
		{idlegrid.VerificationFilter{ProviderID: "prov_1"}, 2},
		{idlegrid.VerificationFilter{ProviderID: "prov_2"}, 1},
		{idlegrid.VerificationFilter{ProviderID: "prov_3"}, 0},
		{idlegrid.VerificationFilter{RenterID: r.ID}, 2},
		{idlegrid.VerificationFilter{States: []idlegrid.VerificationState{idlegrid.VerificationTiebreaking}}, 1},
		{idlegrid.VerificationFilter{States: []idlegrid.VerificationState{idlegrid.VerificationRerunning, idlegrid.VerificationTiebreaking}}, 2},
		{idlegrid.VerificationFilter{ProviderID: "prov_2", States: []idlegrid.VerificationState{idlegrid.VerificationRerunning}}, 0},
		{idlegrid.VerificationFilter{States: []idlegrid.VerificationState{idlegrid.VerificationMatched}}, 0},
	} {
		vs, err := db.ListVerifications(ctx, tt.f)
		mustOK(t, err)
		if len(vs) != tt.want {
			t.Errorf("ListVerifications(%+v) = %d, want %d", tt.f, len(vs), tt.want)
		}
	}
}
