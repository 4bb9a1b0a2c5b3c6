package httpapi_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/httpapi"
	"github.com/idlegrid/idlegrid/internal/httpapi/wire"
)

func TestAPI_bondsAndDisputes(t *testing.T) {
	f := mustOpen(t, httpapi.Options{})
	ctx := context.Background()
	renter, renterAcct, _ := f.mustAccount(t, "ren", idlegrid.RoleRenter)
	provider, providerAcct, providerSecret := f.mustAccount(t, "prov", idlegrid.RoleProvider)
	other, _, _ := f.mustAccount(t, "other", idlegrid.RoleProvider)

	a := mustDo(t, request(t, http.MethodPost, f.URL+"/v1/bonds", providerSecret, `{"amount_micros":1}`))
	if a.Status != http.StatusBadRequest || a.Err(t).Field != wire.HeaderIdempotencyKey {
		t.Fatalf("bond without an idempotency key: %d %s", a.Status, a.Body)
	}
	if b, err := f.Admin.PostBond(ctx, providerAcct.ID, 100*idlegrid.MicrosPerUnit, "deposit"); err != nil || b.Bond != 100*idlegrid.MicrosPerUnit {
		t.Fatalf("admin deposit: %+v, %v; want a bond of 100", b, err)
	}
	d, err := f.Admin.OpenDispute(ctx, idlegrid.Dispute{Offence: "broken_notice", ProviderID: providerAcct.ID,
		RenterID: renterAcct.ID, HarmMicros: 3 * idlegrid.MicrosPerUnit, Evidence: "the renter's logs show a kill with no notice"})
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]interface {
		ListDisputes(context.Context, idlegrid.DisputeFilter) ([]*idlegrid.Dispute, error)
	}{"provider": provider, "renter": renter, "admin": f.Admin} {
		if ds, err := c.ListDisputes(ctx, idlegrid.DisputeFilter{}); err != nil || len(ds) != 1 || ds[0].ID != d.ID {
			t.Errorf("%s lists %v (%v), want the one dispute", name, ds, err)
		}
	}
	if ds, err := other.ListDisputes(ctx, idlegrid.DisputeFilter{}); err != nil || len(ds) != 0 {
		t.Errorf("another provider lists %v (%v), want none", ds, err)
	}
	if _, err := other.FindDispute(ctx, d.ID); idlegrid.ErrorCode(err) != idlegrid.ENOTFOUND {
		t.Errorf("another provider finds the dispute: %v, want ENOTFOUND", err)
	}
	if _, err := provider.ReleaseBond(ctx, 1, "early"); idlegrid.ErrorCode(err) != idlegrid.ECONFLICT {
		t.Errorf("release while disputed: %v, want ECONFLICT", err)
	}
	if _, err := provider.UpholdDispute(ctx, d.ID, "no"); idlegrid.ErrorCode(err) != idlegrid.EFORBIDDEN {
		t.Errorf("provider upholds: %v, want EFORBIDDEN", err)
	}
	if _, err := f.Admin.UpholdDispute(ctx, d.ID, ""); idlegrid.ErrorCode(err) != idlegrid.EINVALID {
		t.Errorf("uphold without a reason: %v, want EINVALID", err)
	}
	up, err := f.Admin.UpholdDispute(ctx, d.ID, "the node's own log agrees")
	if err != nil {
		t.Fatal(err)
	} else if up.PenaltyMicros != 3*idlegrid.MicrosPerUnit || up.PenaltyTo != "renter" {
		t.Errorf("upheld %+v, want the 3 of harm to the renter", up)
	}
	if b, _ := renter.Balance(ctx, ""); b.Available != 3*idlegrid.MicrosPerUnit {
		t.Errorf("renter available = %s, want 3", b.Available)
	}
	if _, err := f.Admin.DismissDispute(ctx, d.ID, "again"); idlegrid.ErrorCode(err) != idlegrid.ECONFLICT {
		t.Errorf("dismiss an upheld dispute: %v, want ECONFLICT", err)
	}
	if b, err := provider.ReleaseBond(ctx, 7*idlegrid.MicrosPerUnit, "after"); err != nil || b.Bond != 90*idlegrid.MicrosPerUnit {
		t.Errorf("release after: %+v, %v; want a bond of 90", b, err)
	}
	bad := mustDo(t, request(t, http.MethodGet, f.URL+"/v1/disputes?state=maybe", providerSecret, ""))
	if bad.Status != http.StatusBadRequest || bad.Err(t).Field != "state" {
		t.Errorf("bad state filter: %d %s", bad.Status, bad.Body)
	}
}
