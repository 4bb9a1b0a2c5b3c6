package sqlstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/sqlstore"
)

func testKeyRouting(t *testing.T, db *sqlstore.DB) {
	ctx := context.Background()
	r, other := mustAccount(t, db, idlegrid.RoleRenter), mustAccount(t, db, idlegrid.RoleRenter)
	k := &idlegrid.APIKey{ID: id("key"), AccountID: r.ID, Name: "ci", Prefix: "igk_x", Hash: id("hash"), CreatedAt: t0}
	mustOK(t, db.CreateAPIKey(ctx, k))
	no, price := false, idlegrid.Micros(1_500_000)
	want := &idlegrid.KeyRouting{KeyID: k.ID, AccountID: r.ID, UpdatedAt: t0, Routing: idlegrid.Routing{
		Sort: idlegrid.RoutingSortPrice, Region: []string{"eu-west"}, DataResidency: []string{"EU"},
		Only: []string{"prov_a", "node_b"}, Ignore: []string{"node_c"}, AllowFallbacks: &no, Sticky: &no,
		MaxPrice: &idlegrid.RoutingMaxPrice{Prompt: &price},
	}}

	t.Run("none", func(t *testing.T) {
		_, err := db.FindKeyRouting(ctx, k.ID)
		wantCode(t, err, idlegrid.ENOTFOUND)
		wantCode(t, db.RemoveKeyRouting(ctx, r.ID, k.ID), idlegrid.ENOTFOUND)
	})
	t.Run("set and find", func(t *testing.T) {
		mustOK(t, db.SetKeyRouting(ctx, want))
		got, err := db.FindKeyRouting(ctx, k.ID)
		mustOK(t, err)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("FindKeyRouting (-want +got):\n%s", diff)
		}
	})
	t.Run("replace", func(t *testing.T) {
		next := &idlegrid.KeyRouting{KeyID: k.ID, AccountID: r.ID, UpdatedAt: at(time.Second),
			Routing: idlegrid.Routing{Sort: idlegrid.RoutingSortLatency}}
		mustOK(t, db.SetKeyRouting(ctx, next))
		got, err := db.FindKeyRouting(ctx, k.ID)
		mustOK(t, err)
		if diff := cmp.Diff(next, got); diff != "" {
			t.Errorf("FindKeyRouting after replacing (-want +got):\n%s", diff)
		}
	})
	t.Run("only the owner", func(t *testing.T) {
		wantCode(t, db.SetKeyRouting(ctx, &idlegrid.KeyRouting{KeyID: k.ID, AccountID: other.ID, UpdatedAt: t0}), idlegrid.ENOTFOUND)
		wantCode(t, db.SetKeyRouting(ctx, &idlegrid.KeyRouting{KeyID: "key_missing", AccountID: r.ID, UpdatedAt: t0}), idlegrid.ENOTFOUND)
		wantCode(t, db.RemoveKeyRouting(ctx, other.ID, k.ID), idlegrid.ENOTFOUND)
	})
	t.Run("invalid", func(t *testing.T) {
		err := db.SetKeyRouting(ctx, &idlegrid.KeyRouting{KeyID: k.ID, AccountID: r.ID, UpdatedAt: t0,
			Routing: idlegrid.Routing{Sort: "cheapest"}})
		if e, ok := err.(*idlegrid.Error); !ok || e.Code != idlegrid.EINVALID || e.Field != "routing.sort" {
			t.Errorf("SetKeyRouting(sort cheapest) = %v, want EINVALID on routing.sort", err)
		}
	})
	t.Run("remove", func(t *testing.T) {
		mustOK(t, db.RemoveKeyRouting(ctx, r.ID, k.ID))
		_, err := db.FindKeyRouting(ctx, k.ID)
		wantCode(t, err, idlegrid.ENOTFOUND)
	})
	t.Run("revoked key", func(t *testing.T) {
		mustOK(t, db.RevokeAPIKey(ctx, r.ID, k.ID, at(time.Minute)))
		wantCode(t, db.SetKeyRouting(ctx, want), idlegrid.ENOTFOUND)
	})
}
