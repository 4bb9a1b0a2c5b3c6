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
	mustOK(t, db.CreateVerification(ctx, v))
	again := *v
	again.ID = id("verif")
	wantCode(t, db.CreateVerification(ctx, &again), idlegrid.ECONFLICT)
	bad := *v
	bad.ID, bad.Original.Digest = id("verif"), ""
	wantCode(t, db.CreateVerification(ctx, &bad), idlegrid.EINVALID)

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
	mustOK(t, db.UpdateVerification(ctx, v, idlegrid.VerificationRerunning))
	wantCode(t, db.UpdateVerification(ctx, v, idlegrid.VerificationRerunning), idlegrid.ECONFLICT)
	got, err = db.FindVerificationByJob(ctx, "job_c")
	mustOK(t, err)
	if got.State != idlegrid.VerificationTiebreaking || got.Rerun.Digest != "sha256:bb" {
		t.Errorf("after the update: %+v", got)
	}
	for _, tt := range []struct {
		f    idlegrid.VerificationFilter
		want int
	}{
		{idlegrid.VerificationFilter{ProviderID: "prov_1"}, 1},
		{idlegrid.VerificationFilter{ProviderID: "prov_2"}, 1},
		{idlegrid.VerificationFilter{ProviderID: "prov_3"}, 0},
		{idlegrid.VerificationFilter{RenterID: r.ID}, 1},
	} {
		vs, err := db.ListVerifications(ctx, tt.f)
		mustOK(t, err)
		if len(vs) != tt.want {
			t.Errorf("ListVerifications(%+v) = %d, want %d", tt.f, len(vs), tt.want)
		}
	}
}
