package sqlstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/sqlstore"
)

// testRegistryLogins: a renter's registry logins are kept sealed, one per
// registry, replaced in place, listed without their secrets, each
// account's own, and at most MaxRegistryLogins.
func testRegistryLogins(t *testing.T, db *sqlstore.DB) {
	ctx := context.Background()
	r, other := mustAccount(t, db, idlegrid.RoleRenter), mustAccount(t, db, idlegrid.RoleRenter)
	ghcr := &idlegrid.RegistryLogin{AccountID: r.ID, Registry: "ghcr.io", Username: "acme-bot", Sealed: []byte{0, 1, 2, 0xff},
		CreatedAt: t0, UpdatedAt: t0}

	_, err := db.FindRegistryLogin(ctx, r.ID, "ghcr.io")
	wantCode(t, err, idlegrid.ENOTFOUND)
	wantCode(t, db.RemoveRegistryLogin(ctx, r.ID, "ghcr.io"), idlegrid.ENOTFOUND)

	mustOK(t, db.PutRegistryLogin(ctx, ghcr))
	got, err := db.FindRegistryLogin(ctx, r.ID, "ghcr.io")
	mustOK(t, err)
	if diff := cmp.Diff(ghcr, got); diff != "" {
		t.Errorf("FindRegistryLogin (-want +got):\n%s", diff)
	}
	_, err = db.FindRegistryLogin(ctx, other.ID, "ghcr.io")
	wantCode(t, err, idlegrid.ENOTFOUND)

	// Replaced in place: the new username and secret, created when first put.
	again := &idlegrid.RegistryLogin{AccountID: r.ID, Registry: "ghcr.io", Username: "acme-ci", Sealed: []byte("new"),
		CreatedAt: at(time.Hour), UpdatedAt: at(time.Hour)}
	mustOK(t, db.PutRegistryLogin(ctx, again))
	got, err = db.FindRegistryLogin(ctx, r.ID, "ghcr.io")
	mustOK(t, err)
	if want := (idlegrid.RegistryLogin{AccountID: r.ID, Registry: "ghcr.io", Username: "acme-ci", Sealed: []byte("new"),
		CreatedAt: t0, UpdatedAt: at(time.Hour)}); !cmp.Equal(&want, got) {
		t.Errorf("after a second put (-want +got):\n%s", cmp.Diff(&want, got))
	}

	mustOK(t, db.PutRegistryLogin(ctx, &idlegrid.RegistryLogin{AccountID: r.ID, Registry: "docker.io", Username: "acme",
		Sealed: []byte("hub"), CreatedAt: t0, UpdatedAt: t0}))
	list, err := db.ListRegistryLogins(ctx, r.ID)
	mustOK(t, err)
	want := []*idlegrid.RegistryLogin{
		{AccountID: r.ID, Registry: "docker.io", Username: "acme", CreatedAt: t0, UpdatedAt: t0},
		{AccountID: r.ID, Registry: "ghcr.io", Username: "acme-ci", CreatedAt: t0, UpdatedAt: at(time.Hour)},
	}
	if diff := cmp.Diff(want, list); diff != "" {
		t.Errorf("ListRegistryLogins, no secrets (-want +got):\n%s", diff)
	}
	if list, err := db.ListRegistryLogins(ctx, other.ID); err != nil || len(list) != 0 {
		t.Errorf("another account's logins: %v, %v; want none", list, err)
	}

	wantCode(t, db.RemoveRegistryLogin(ctx, other.ID, "ghcr.io"), idlegrid.ENOTFOUND)
	mustOK(t, db.RemoveRegistryLogin(ctx, r.ID, "ghcr.io"))
	_, err = db.FindRegistryLogin(ctx, r.ID, "ghcr.io")
	wantCode(t, err, idlegrid.ENOTFOUND)

	// At most MaxRegistryLogins an account, though one already kept is
	// replaced at the limit.
	for i := range idlegrid.MaxRegistryLogins - 1 {
		mustOK(t, db.PutRegistryLogin(ctx, &idlegrid.RegistryLogin{AccountID: r.ID, Registry: fmt.Sprintf("r%d.example.com", i),
			Username: "u", Sealed: []byte("s"), CreatedAt: t0, UpdatedAt: t0}))
	}
	wantCode(t, db.PutRegistryLogin(ctx, &idlegrid.RegistryLogin{AccountID: r.ID, Registry: "one.too.many",
		Username: "u", Sealed: []byte("s"), CreatedAt: t0, UpdatedAt: t0}), idlegrid.ECONFLICT)
	mustOK(t, db.PutRegistryLogin(ctx, &idlegrid.RegistryLogin{AccountID: r.ID, Registry: "docker.io", Username: "acme2",
		Sealed: []byte("hub2"), CreatedAt: t0, UpdatedAt: at(time.Minute)}))

	for _, bad := range []*idlegrid.RegistryLogin{
		{AccountID: r.ID, Registry: "x.io", Username: "u", Secret: "plain", Sealed: []byte("s"), CreatedAt: t0, UpdatedAt: t0},
		{AccountID: r.ID, Registry: "x.io", Username: "u", CreatedAt: t0, UpdatedAt: t0},
		{AccountID: "acct_missing", Registry: "x.io", Username: "u", Sealed: []byte("s"), CreatedAt: t0, UpdatedAt: t0},
	} {
		if err := db.PutRegistryLogin(ctx, bad); err == nil {
			t.Errorf("PutRegistryLogin(%+v) = nil, want an error", bad)
		}
	}
}
