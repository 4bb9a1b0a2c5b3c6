package server_test

import (
	"testing"
	"testing/synctest"

	"github.com/google/go-cmp/cmp"
	"github.com/idlegrid/idlegrid"
)

// TestServer_ListAccounts: an admin lists accounts a page at a time, by
// role; a cursor that is no account, or a role that is none, is refused
// naming its field; nobody else lists them.
func TestServer_ListAccounts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustMarket(t)
		all, err := m.srv.ListAccounts(m.admin, idlegrid.AccountFilter{})
		if err != nil || len(all) != 3 {
			t.Fatalf("every account = %d (%v), want the admin, the renter and the provider", len(all), err)
		}
		var paged []*idlegrid.Account
		for after := ""; len(paged) <= len(all); {
			page, err := m.srv.ListAccounts(m.admin, idlegrid.AccountFilter{After: after, Limit: 1})
			if err != nil {
				t.Fatal(err)
			}
			if paged = append(paged, page...); len(page) == 0 {
				break
			}
			after = page[0].ID
		}
		if diff := cmp.Diff(all, paged); diff != "" {
			t.Errorf("a page of one at a time (-all +paged):\n%s", diff)
		}
		if renters, err := m.srv.ListAccounts(m.admin, idlegrid.AccountFilter{Role: idlegrid.RoleRenter}); err != nil || len(renters) != 1 || renters[0].ID != m.renterID {
			t.Errorf("renters = %+v (%v), want %s alone", renters, err, m.renterID)
		}
		for _, tc := range []struct {
			f     idlegrid.AccountFilter
			field string
		}{
			{idlegrid.AccountFilter{After: "acct_missing"}, "after"},
			{idlegrid.AccountFilter{Role: "boss"}, "role"},
			{idlegrid.AccountFilter{Limit: -1}, "limit"},
		} {
			_, err := m.srv.ListAccounts(m.admin, tc.f)
			var e *idlegrid.Error
			if !asError(err, &e) || e.Code != idlegrid.EINVALID || e.Field != tc.field {
				t.Errorf("ListAccounts(%+v) = %v, want EINVALID on %s", tc.f, err, tc.field)
			}
		}
		_, err = m.srv.ListAccounts(m.renter, idlegrid.AccountFilter{})
		wantCode(t, err, idlegrid.EFORBIDDEN)
	})
}

// TestServer_FindAccount: a caller finds its own account, an admin any;
// another's is not found, as if it were not there.
func TestServer_FindAccount(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustMarket(t)
		providerID := idlegrid.CallerFromContext(m.provider).AccountID
		if a, err := m.srv.FindAccount(m.renter, m.renterID); err != nil || a.ID != m.renterID || a.Role != idlegrid.RoleRenter {
			t.Errorf("the renter's own = %+v (%v)", a, err)
		}
		if a, err := m.srv.FindAccount(m.admin, providerID); err != nil || a.ID != providerID {
			t.Errorf("the provider, to an admin = %+v (%v)", a, err)
		}
		_, err := m.srv.FindAccount(m.renter, providerID)
		wantCode(t, err, idlegrid.ENOTFOUND)
		_, err = m.srv.FindAccount(m.admin, "acct_missing")
		wantCode(t, err, idlegrid.ENOTFOUND)
	})
}
