package sqlstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/sqlstore"
)

// wantConflictOn fails tb unless err is ECONFLICT naming field, with a
// message that holds each of says.
func wantConflictOn(tb testing.TB, err error, field string, says ...string) {
	tb.Helper()
	var e *idlegrid.Error
	if !errors.As(err, &e) || e.Code != idlegrid.ECONFLICT || e.Field != field {
		tb.Fatalf("error = %v, want a conflict naming %s", err, field)
	}
	for _, s := range says {
		if !strings.Contains(e.Message, s) {
			tb.Errorf("conflict %q does not say %q", e.Message, s)
		}
	}
}

// testAccountNames: a name is unique among the accounts of a role, the
// conflict naming name and the account that holds it; another role may
// share it. An account and its first key are stored together or not at
// all, so a key that cannot be stored leaves no account holding a name.
func testAccountNames(t *testing.T, db *sqlstore.DB) {
	ctx := context.Background()
	mustOK(t, db.CreateAccount(ctx, &idlegrid.Account{ID: "acct_acme", Name: "acme", Role: idlegrid.RoleRenter, CreatedAt: t0}))
	err := db.CreateAccount(ctx, &idlegrid.Account{ID: "acct_acme2", Name: "acme", Role: idlegrid.RoleRenter, CreatedAt: at(time.Second)})
	wantConflictOn(t, err, "name", "acct_acme", `"acme"`, "another name")
	if _, err := db.FindAccount(ctx, "acct_acme2"); idlegrid.ErrorCode(err) != idlegrid.ENOTFOUND {
		t.Errorf("the second renter acme: %v, want none stored", err)
	}
	mustOK(t, db.CreateAccount(ctx, &idlegrid.Account{ID: "acct_acme_gpus", Name: "acme", Role: idlegrid.RoleProvider, CreatedAt: t0}))
	wantCode(t, db.CreateAccount(ctx, &idlegrid.Account{ID: "acct_acme", Name: "other", Role: idlegrid.RoleAdmin, CreatedAt: t0}), idlegrid.ECONFLICT)

	t.Run("WithKey", func(t *testing.T) {
		a := &idlegrid.Account{ID: "acct_keyed", Name: "keyed", Role: idlegrid.RoleRenter, CreatedAt: t0}
		k := &idlegrid.APIKey{ID: "key_keyed", AccountID: a.ID, Name: "default", Prefix: "igk_k", Hash: "h_keyed", CreatedAt: t0}
		mustOK(t, db.CreateAccountWithKey(ctx, a, k))
		if _, got, err := db.FindAPIKey(ctx, "h_keyed"); err != nil || got.ID != a.ID {
			t.Fatalf("the first key's account: %+v, %v; want %s", got, err, a.ID)
		}
		b := &idlegrid.Account{ID: "acct_unkeyed", Name: "unkeyed", Role: idlegrid.RoleRenter, CreatedAt: t0}
		taken := &idlegrid.APIKey{ID: "key_keyed", AccountID: b.ID, Name: "default", Prefix: "igk_u", Hash: "h_other", CreatedAt: t0}
		wantCode(t, db.CreateAccountWithKey(ctx, b, taken), idlegrid.ECONFLICT)
		if _, err := db.FindAccount(ctx, b.ID); idlegrid.ErrorCode(err) != idlegrid.ENOTFOUND {
			t.Errorf("an account whose key could not be stored: %v, want none", err)
		}
		mustOK(t, db.CreateAccount(ctx, &idlegrid.Account{ID: "acct_unkeyed2", Name: "unkeyed", Role: idlegrid.RoleRenter, CreatedAt: t0}))
		wantField(t, db.CreateAccountWithKey(ctx, &idlegrid.Account{ID: "acct_x", Name: "x", Role: idlegrid.RoleRenter, CreatedAt: t0},
			&idlegrid.APIKey{ID: "key_x", AccountID: "acct_y", Hash: "h_x", CreatedAt: t0}), "api_key.account_id")
	})
}

// testAccountNamesMigration: a market whose accounts share names within a
// role from before names were unique upgrades, keeping them all; the
// oldest of each holds the name.
func testAccountNamesMigration(t *testing.T, db *sqlstore.DB) {
	ctx := context.Background()
	us := func(d time.Duration) int64 { return at(d).UnixMicro() }
	mustOK(t, sqlstore.RemigrateWith(ctx, db, 36, `INSERT INTO accounts (id, name, role, created_at) VALUES
		('acct_old3', 'acme', 'renter', $1), ('acct_old2', 'acme', 'renter', $1), ('acct_old1', 'acme', 'renter', $2),
		('acct_oldp', 'acme', 'provider', $3), ('acct_solo', 'solo', 'renter', $3)`,
		us(time.Second), us(0), us(time.Minute)))
	got, err := db.ListAccounts(ctx, idlegrid.AccountFilter{})
	mustOK(t, err)
	var ids []string
	for _, a := range got {
		ids = append(ids, a.ID)
	}
	if want := []string{"acct_old1", "acct_old2", "acct_old3", "acct_oldp", "acct_solo"}; !cmp.Equal(ids, want) {
		t.Errorf("accounts after the upgrade: %v, want %v", ids, want)
	}
	wantConflictOn(t, db.CreateAccount(ctx, &idlegrid.Account{ID: "acct_new", Name: "acme", Role: idlegrid.RoleRenter, CreatedAt: at(time.Hour)}),
		"name", "acct_old1")
	wantConflictOn(t, db.CreateAccount(ctx, &idlegrid.Account{ID: "acct_new", Name: "acme", Role: idlegrid.RoleProvider, CreatedAt: at(time.Hour)}),
		"name", "acct_oldp")
	wantConflictOn(t, db.CreateAccount(ctx, &idlegrid.Account{ID: "acct_new", Name: "solo", Role: idlegrid.RoleRenter, CreatedAt: at(time.Hour)}),
		"name", "acct_solo")
	mustOK(t, db.CreateAccount(ctx, &idlegrid.Account{ID: "acct_new", Name: "acme", Role: idlegrid.RoleAdmin, CreatedAt: at(time.Hour)}))
}

// testAccountIdempotencyKeys: an account keeps the key it was created
// with, which finds it; the key made one account, and a second under it
// is refused naming idempotency_key, before the name it may also hold.
func testAccountIdempotencyKeys(t *testing.T, db *sqlstore.DB) {
	ctx := context.Background()
	a := &idlegrid.Account{ID: "acct_i1", Name: "idem", Role: idlegrid.RoleRenter, IdempotencyKey: "onboard-idem", CreatedAt: t0}
	mustOK(t, db.CreateAccount(ctx, a))
	got, err := db.FindAccountByIdempotencyKey(ctx, "onboard-idem")
	mustOK(t, err)
	if diff := cmp.Diff(a, got); diff != "" {
		t.Errorf("FindAccountByIdempotencyKey (-want +got):\n%s", diff)
	}
	_, err = db.FindAccountByIdempotencyKey(ctx, "onboard-other")
	wantCode(t, err, idlegrid.ENOTFOUND)

	again := &idlegrid.Account{ID: "acct_i2", Name: "idem", Role: idlegrid.RoleRenter, IdempotencyKey: "onboard-idem", CreatedAt: at(time.Second)}
	wantConflictOn(t, db.CreateAccount(ctx, again), "idempotency_key", `"onboard-idem"`, "acct_i1")
	other := &idlegrid.Account{ID: "acct_i3", Name: "other", Role: idlegrid.RoleAdmin, IdempotencyKey: "onboard-idem", CreatedAt: at(time.Second)}
	wantConflictOn(t, db.CreateAccount(ctx, other), "idempotency_key", "acct_i1")
	for _, id := range []string{"acct_k1", "acct_k2"} { // no key: none to share
		mustOK(t, db.CreateAccount(ctx, &idlegrid.Account{ID: id, Name: id, Role: idlegrid.RoleRenter, CreatedAt: t0}))
	}

	// Sent together, eight times under one key: one is stored, and each
	// other is told that the key made it, not that its name is taken.
	errs := make([]error, 8)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Go(func() {
			errs[i] = db.CreateAccount(ctx, &idlegrid.Account{ID: fmt.Sprintf("acct_t%d", i), Name: "together",
				Role: idlegrid.RoleProvider, IdempotencyKey: "together", CreatedAt: t0})
		})
	}
	wg.Wait()
	wantOneStored(t, errs, "creations")
}

// testDisputeIdempotencyKeys: a dispute keeps the operator's key and the
// digest of its request, which find it; a second dispute under the key
// is refused naming idempotency_key, before the lease's offence it may
// also hold.
func testDisputeIdempotencyKeys(t *testing.T, db *sqlstore.DB) {
	ctx := context.Background()
	p := mustAccount(t, db, idlegrid.RoleProvider)
	d := &idlegrid.Dispute{ID: "dispute_k1", Offence: "broken_notice", State: idlegrid.DisputeOpen, ProviderID: p.ID,
		LeaseID: "lease_k", Evidence: "killed without notice", CreatedAt: t0,
		IdempotencyKey: "case-41", RequestSHA256: "digest-41"}
	mustOK(t, db.OpenDispute(ctx, d, nil, nil))
	got, err := db.FindDisputeByIdempotencyKey(ctx, "case-41")
	mustOK(t, err)
	if diff := cmp.Diff(d, got); diff != "" {
		t.Errorf("FindDisputeByIdempotencyKey (-want +got):\n%s", diff)
	}
	if got, err := db.FindDispute(ctx, d.ID); err != nil || got.IdempotencyKey != "case-41" || got.RequestSHA256 != "digest-41" {
		t.Errorf("FindDispute: %+v, %v; want its key and digest", got, err)
	}
	_, err = db.FindDisputeByIdempotencyKey(ctx, "case-42")
	wantCode(t, err, idlegrid.ENOTFOUND)

	again := *d
	again.ID = "dispute_k2"
	wantConflictOn(t, db.OpenDispute(ctx, &again, nil, nil), "idempotency_key", `"case-41"`, "dispute_k1")
	elsewhere := again
	elsewhere.ID, elsewhere.LeaseID = "dispute_k3", ""
	wantConflictOn(t, db.OpenDispute(ctx, &elsewhere, nil, nil), "idempotency_key", "dispute_k1")
	sameLease := again
	sameLease.ID, sameLease.IdempotencyKey = "dispute_k4", "case-43"
	err = db.OpenDispute(ctx, &sameLease, nil, nil)
	if e, ok := err.(*idlegrid.Error); !ok || e.Code != idlegrid.ECONFLICT || e.Field != "" || !strings.Contains(e.Message, "lease_k") {
		t.Errorf("another key on the lease's offence: %v, want the lease's conflict", err)
	}
	for _, id := range []string{"dispute_n1", "dispute_n2"} { // no key: none to share
		n := &idlegrid.Dispute{ID: id, Offence: "fake_hardware", State: idlegrid.DisputeOpen, ProviderID: p.ID, Evidence: "x", CreatedAt: t0}
		mustOK(t, db.OpenDispute(ctx, n, nil, nil))
	}

	// Sent together, eight times under one key: one is stored, and each
	// other is told that the key opened it, not that its lease has one.
	errs := make([]error, 8)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Go(func() {
			errs[i] = db.OpenDispute(ctx, &idlegrid.Dispute{ID: fmt.Sprintf("dispute_t%d", i), Offence: "broken_notice",
				State: idlegrid.DisputeOpen, ProviderID: p.ID, LeaseID: "lease_t", Evidence: "x", CreatedAt: t0,
				IdempotencyKey: "together", RequestSHA256: "digest"}, nil, nil)
		})
	}
	wg.Wait()
	wantOneStored(t, errs, "openings")
}

// wantOneStored checks that of requests sent together under the key
// "together" (what), one was stored and the others refused naming it.
func wantOneStored(t *testing.T, errs []error, what string) {
	t.Helper()
	stored := 0
	for _, err := range errs {
		if err == nil {
			stored++
		} else {
			wantConflictOn(t, err, "idempotency_key", `"together"`)
		}
	}
	if stored != 1 {
		t.Errorf("%d %s under one key stored %d, want 1", len(errs), what, stored)
	}
}
