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
	// One stored, before registries were lower-cased, as its renter wrote
	// it is removed by its name as it is written now.
	mustOK(t, db.PutRegistryLogin(ctx, &idlegrid.RegistryLogin{AccountID: r.ID, Registry: "Registry.Example.COM",
		Username: "u", Sealed: []byte("s"), CreatedAt: t0, UpdatedAt: t0}))
	mustOK(t, db.RemoveRegistryLogin(ctx, r.ID, "registry.example.com"))

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

// testRegistryLoginsIdle: a login is active from when it was last set or
// used; one idle since the cutoff is neither found nor listed as active
// (though still kept, until deleted), and the deletion takes at most its
// limit, the longest idle first, and spares one set or used since.
func testRegistryLoginsIdle(t *testing.T, db *sqlstore.DB) {
	ctx := context.Background()
	r := mustAccount(t, db, idlegrid.RoleRenter)
	put := func(registry string, when time.Time) {
		t.Helper()
		mustOK(t, db.PutRegistryLogin(ctx, &idlegrid.RegistryLogin{AccountID: r.ID, Registry: registry, Username: "u",
			Sealed: []byte("s-" + registry), CreatedAt: t0, UpdatedAt: when}))
	}
	active := func(since time.Time) []string {
		t.Helper()
		logins, err := db.ListActiveRegistryLogins(ctx, r.ID, since)
		mustOK(t, err)
		var regs []string
		for _, l := range logins {
			regs = append(regs, l.Registry)
		}
		return regs
	}
	put("ghcr.io", t0)
	put("quay.io", t0)
	put("nvcr.io", at(time.Minute))

	l, activeAt, err := db.FindActiveRegistryLogin(ctx, r.ID, "ghcr.io", t0)
	mustOK(t, err)
	if string(l.Sealed) != "s-ghcr.io" || !activeAt.Equal(t0) {
		t.Errorf("FindActiveRegistryLogin = %+v active at %v, want ghcr.io's, sealed, active at %v", l, activeAt, t0)
	}
	_, _, err = db.FindActiveRegistryLogin(ctx, r.ID, "ghcr.io", at(time.Hour))
	wantCode(t, err, idlegrid.ENOTFOUND)

	// A use an hour and a half in; one recorded late, for earlier, moves nothing back.
	mustOK(t, db.TouchRegistryLogin(ctx, r.ID, "ghcr.io", at(90*time.Minute)))
	mustOK(t, db.TouchRegistryLogin(ctx, r.ID, "ghcr.io", at(80*time.Minute)))
	mustOK(t, db.TouchRegistryLogin(ctx, r.ID, "gone.example.com", at(time.Hour)))
	if _, activeAt, err := db.FindActiveRegistryLogin(ctx, r.ID, "ghcr.io", at(time.Hour)); err != nil || !activeAt.Equal(at(90*time.Minute)) {
		t.Errorf("after its use, ghcr.io is active at %v (%v), want %v", activeAt, err, at(90*time.Minute))
	}
	// Set again: active from then, however long ago it was created.
	put("quay.io", at(2*time.Hour))
	if got, want := active(at(time.Hour)), []string{"ghcr.io", "quay.io"}; !cmp.Equal(got, want) {
		t.Errorf("active an hour in: %v, want %v", got, want)
	}
	if got, err := db.ListRegistryLogins(ctx, r.ID); err != nil || len(got) != 3 {
		t.Errorf("ListRegistryLogins = %d logins (%v), want all 3, idle or not", len(got), err)
	}

	// Deleting: nvcr.io alone is idle an hour in.
	n, err := db.DeleteIdleRegistryLogins(ctx, at(time.Hour), 10)
	if err != nil || n != 1 {
		t.Fatalf("DeleteIdleRegistryLogins(an hour in) = %d, %v; want nvcr.io's", n, err)
	}
	_, err = db.FindRegistryLogin(ctx, r.ID, "nvcr.io")
	wantCode(t, err, idlegrid.ENOTFOUND)
	// Three hours in, both are idle: ghcr.io (used at 1h30) first.
	if n, err := db.DeleteIdleRegistryLogins(ctx, at(3*time.Hour), 1); err != nil || n != 1 {
		t.Fatalf("DeleteIdleRegistryLogins(limit 1) = %d, %v; want 1", n, err)
	}
	_, err = db.FindRegistryLogin(ctx, r.ID, "ghcr.io")
	wantCode(t, err, idlegrid.ENOTFOUND)
	if _, err := db.FindRegistryLogin(ctx, r.ID, "quay.io"); err != nil {
		t.Errorf("quay.io, idle for less long, after a sweep of one: %v", err)
	}
	if n, err := db.DeleteIdleRegistryLogins(ctx, at(3*time.Hour), 1); err != nil || n != 1 {
		t.Errorf("DeleteIdleRegistryLogins(limit 1), again = %d, %v; want quay.io's", n, err)
	}
	if n, err := db.DeleteIdleRegistryLogins(ctx, at(3*time.Hour), 1); err != nil || n != 0 {
		t.Errorf("DeleteIdleRegistryLogins with none left = %d, %v; want 0", n, err)
	}
	for _, limit := range []int{0, sqlstore.MaxExpiryBatch + 1} {
		_, err := db.DeleteIdleRegistryLogins(ctx, at(time.Hour), limit)
		wantField(t, err, "limit")
	}
}

// testRegistryLoginsIdleMigration: a login kept before logins expired is
// active from the upgrade (its uses were not recorded), not idle since
// when it was last set, nor since 1970.
func testRegistryLoginsIdleMigration(t *testing.T, db *sqlstore.DB) {
	ctx := context.Background()
	r := mustAccount(t, db, idlegrid.RoleRenter)
	mustOK(t, db.PutRegistryLogin(ctx, &idlegrid.RegistryLogin{AccountID: r.ID, Registry: "ghcr.io", Username: "u",
		Sealed: []byte("s"), CreatedAt: t0, UpdatedAt: at(10 * time.Hour)}))
	upgraded := time.Now()
	mustOK(t, sqlstore.Remigrate(ctx, db, 33))
	// Its uses were not recorded: it counts as active from the upgrade, not
	// from when it was last set, or a login in daily use would expire at once.
	if _, activeAt, err := db.FindActiveRegistryLogin(ctx, r.ID, "ghcr.io", upgraded.Add(-time.Second)); err != nil || activeAt.Before(upgraded.Truncate(time.Microsecond)) {
		t.Errorf("after the migration, the login is active at %v (%v), want from the upgrade, %v", activeAt, err, upgraded)
	}
}
