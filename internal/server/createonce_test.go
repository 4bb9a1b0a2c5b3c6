package server_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/trustpolicy"
)

// wantConflictOn fails t unless err is ECONFLICT naming field, with a
// message that holds each of says and none of hides.
func wantConflictOn(t *testing.T, err error, field string, says []string, hides ...string) {
	t.Helper()
	var e *idlegrid.Error
	if !errors.As(err, &e) || e.Code != idlegrid.ECONFLICT || e.Field != field {
		t.Fatalf("error = %v, want a conflict naming %s", err, field)
	}
	for _, s := range says {
		if !strings.Contains(e.Message, s) {
			t.Errorf("conflict %q does not say %q", e.Message, s)
		}
	}
	for _, h := range hides {
		if strings.Contains(e.Message, h) {
			t.Errorf("conflict %q shows %q", e.Message, h)
		}
	}
}

// TestServer_CreateAccountOnce: a creation sent again under its key
// answers with the first account, and a new key for it that works beside
// the first, even when the two arrive together; the key with another
// name or role is refused naming it. A name is unique within a role,
// with or without a key, the conflict naming name; another role may share
// it.
func TestServer_CreateAccountOnce(t *testing.T) {
	m := mustMarket(t)
	ctx := context.Background()
	first, firstKey, firstSecret, replayed, err := m.srv.CreateAccountOnce(m.admin, "onboard", idlegrid.RoleRenter, "onboard-2026-12")
	if err != nil || replayed {
		t.Fatalf("the first creation: %+v, replayed %v, %v", first, replayed, err)
	}
	again, againKey, againSecret, replayed, err := m.srv.CreateAccountOnce(m.admin, "onboard", idlegrid.RoleRenter, "onboard-2026-12")
	if err != nil || !replayed || again.ID != first.ID {
		t.Fatalf("sent again: %+v, replayed %v, %v; want %s, replayed", again, replayed, err, first.ID)
	}
	if againKey.ID == firstKey.ID || againSecret == "" || againSecret == firstSecret || againKey.AccountID != first.ID {
		t.Errorf("the key sent again: %+v (secret %q), want a new key of %s", againKey, againSecret, first.ID)
	}
	for _, secret := range []string{firstSecret, againSecret} {
		if c, err := m.srv.AuthenticateKey(ctx, secret); err != nil || c.AccountID != first.ID {
			t.Errorf("authenticate %.12s…: %+v, %v; want %s", secret, c, err, first.ID)
		}
	}

	// Sent together, eight times, under a new key: one account.
	ids := make([]string, 8)
	var wg sync.WaitGroup
	for i := range ids {
		wg.Go(func() {
			if a, _, _, _, err := m.srv.CreateAccountOnce(m.admin, "burst", idlegrid.RoleProvider, "burst"); err != nil {
				t.Errorf("creation %d: %v", i, err)
			} else {
				ids[i] = a.ID
			}
		})
	}
	wg.Wait()
	for _, id := range ids {
		if id != ids[0] {
			t.Fatalf("eight creations under one key made accounts %v, want one", ids)
		}
	}

	_, _, _, _, err = m.srv.CreateAccountOnce(m.admin, "onboard", idlegrid.RoleProvider, "onboard-2026-12")
	wantConflictOn(t, err, "idempotency_key", []string{`"onboard-2026-12"`, first.ID, "new key"})
	_, _, _, _, err = m.srv.CreateAccountOnce(m.admin, "onboard-2", idlegrid.RoleRenter, "onboard-2026-12")
	wantConflictOn(t, err, "idempotency_key", []string{first.ID})
	if _, _, _, _, err := m.srv.CreateAccountOnce(m.admin, "x", idlegrid.RoleRenter, strings.Repeat("k", 201)); idlegrid.ErrorCode(err) != idlegrid.EINVALID {
		t.Errorf("a key of 201 characters: %v, want invalid", err)
	}

	_, _, _, err = m.srv.CreateAccount(m.admin, "onboard", idlegrid.RoleRenter)
	wantConflictOn(t, err, "name", []string{first.ID, `"onboard"`, "another name"})
	_, _, _, _, err = m.srv.CreateAccountOnce(m.admin, "onboard", idlegrid.RoleRenter, "onboard-retyped")
	wantConflictOn(t, err, "name", []string{first.ID})
	if _, _, _, err := m.srv.CreateAccount(m.admin, "onboard", idlegrid.RoleProvider); err != nil {
		t.Errorf("a provider named as a renter is: %v, want it made", err)
	}
	renters, err := m.srv.ListAccounts(m.admin, idlegrid.AccountFilter{Role: idlegrid.RoleRenter})
	if err != nil {
		t.Fatal(err)
	}
	named := 0
	for _, a := range renters {
		if a.Name == "onboard" {
			named++
		}
	}
	if named != 1 {
		t.Errorf("renters named onboard: %d, want 1", named)
	}
	if _, _, _, _, err := m.srv.CreateAccountOnce(m.renter, "sneaky", idlegrid.RoleAdmin, "k"); idlegrid.ErrorCode(err) != idlegrid.EFORBIDDEN {
		t.Errorf("a renter creating an account: %v, want forbidden", err)
	}
}

// TestServer_OpenDisputeOnce: a dispute's opening sent again under its
// key answers with the first dispute, as it is now, even when the two
// arrive together; the key with another request is refused naming it.
func TestServer_OpenDisputeOnce(t *testing.T) {
	m := mustMarketWith(t, trustpolicy.Default())
	mustBond(t, m, 100)
	d := idlegrid.Dispute{Offence: "fake_hardware", ProviderID: callerID(m.provider), HarmMicros: idlegrid.MicrosPerUnit,
		Evidence: "the node's GPUs answered as a smaller model"}
	first, replayed, err := m.srv.OpenDisputeOnce(m.admin, d, "case-7")
	if err != nil || replayed || first.State != idlegrid.DisputeOpen {
		t.Fatalf("the first opening: %+v, replayed %v, %v", first, replayed, err)
	}
	again, replayed, err := m.srv.OpenDisputeOnce(m.admin, d, "case-7")
	if err != nil || !replayed || again.ID != first.ID {
		t.Fatalf("sent again: %+v, replayed %v, %v; want %s, replayed", again, replayed, err, first.ID)
	}

	ids := make([]string, 8)
	var wg sync.WaitGroup
	burst := d
	burst.Evidence = "the node's GPUs answered as a smaller model, twice"
	for i := range ids {
		wg.Go(func() {
			if got, _, err := m.srv.OpenDisputeOnce(m.admin, burst, "case-8"); err != nil {
				t.Errorf("opening %d: %v", i, err)
			} else {
				ids[i] = got.ID
			}
		})
	}
	wg.Wait()
	for _, id := range ids {
		if id != ids[0] {
			t.Fatalf("eight openings under one key opened disputes %v, want one", ids)
		}
	}

	other := d
	other.HarmMicros = 2 * idlegrid.MicrosPerUnit
	_, _, err = m.srv.OpenDisputeOnce(m.admin, other, "case-7")
	wantConflictOn(t, err, "idempotency_key", []string{`"case-7"`, first.ID, "new key"})

	if _, err := m.srv.ResolveDispute(m.admin, first.ID, idlegrid.DisputeDismissed, "the renter's own script"); err != nil {
		t.Fatal(err)
	}
	late, replayed, err := m.srv.OpenDisputeOnce(m.admin, d, "case-7")
	if err != nil || !replayed || late.ID != first.ID || late.State != idlegrid.DisputeDismissed {
		t.Errorf("sent again after it was dismissed: %+v, replayed %v, %v; want %s as it is now", late, replayed, err, first.ID)
	}
	all, err := m.srv.ListDisputes(m.admin, idlegrid.DisputeFilter{})
	if err != nil || len(all) != 2 {
		t.Errorf("disputes: %d (%v), want 2, one a key", len(all), err)
	}
	if _, _, err := m.srv.OpenDisputeOnce(m.admin, d, string(make([]byte, 300))); idlegrid.ErrorCode(err) != idlegrid.EINVALID {
		t.Errorf("a key of 300 NULs: %v, want invalid", err)
	}
}

// TestServer_idempotencyKeyOfAnotherRequest: a top-up or a bond whose key
// was used for another amount is refused naming idempotency_key and the
// key the caller gave, not the ledger's key it is kept under.
func TestServer_idempotencyKeyOfAnotherRequest(t *testing.T) {
	m := mustMarketWith(t, trustpolicy.Default())
	if _, err := m.srv.TopUp(m.admin, m.renterID, 5*idlegrid.MicrosPerUnit, "invoice-9"); err != nil {
		t.Fatal(err)
	}
	_, err := m.srv.TopUp(m.admin, m.renterID, 6*idlegrid.MicrosPerUnit, "invoice-9")
	wantConflictOn(t, err, "idempotency_key", []string{`"invoice-9"`, "top-up", m.renterID}, "topup:")

	mustBond(t, m, 100) // under deposit-1
	_, err = m.srv.PostBond(m.admin, callerID(m.provider), 7*idlegrid.MicrosPerUnit, "deposit-1")
	wantConflictOn(t, err, "idempotency_key", []string{`"deposit-1"`, "bond"}, "bond:")
	if _, err := m.srv.ReleaseBond(m.provider, idlegrid.MicrosPerUnit, "release-1"); err != nil {
		t.Fatal(err)
	}
	_, err = m.srv.ReleaseBond(m.provider, 2*idlegrid.MicrosPerUnit, "release-1")
	wantConflictOn(t, err, "idempotency_key", []string{`"release-1"`, "release"}, "release:")
}
