package httpapi_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/client"
	"github.com/idlegrid/idlegrid/internal/audit"
	"github.com/idlegrid/idlegrid/internal/httpapi"
)

// TestAPI_audit fetches heads, proofs and entries over HTTP and checks
// them as `idlegrid audit verify` does; a caller's mistakes are 4xx.
func TestAPI_audit(t *testing.T) {
	f := mustOpen(t, httpapi.Options{})
	ctx := context.Background()
	renter, acct, secret := f.mustAccount(t, "ren", idlegrid.RoleRenter)
	for _, key := range []string{"a", "b", "c"} {
		if _, err := f.Admin.TopUp(ctx, acct.ID, idlegrid.MicrosPerUnit, key); err != nil {
			t.Fatal(err)
		}
	}
	first, err := renter.AuditHead(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Admin.TopUp(ctx, acct.ID, idlegrid.MicrosPerUnit, "d"); err != nil {
		t.Fatal(err)
	}
	heads, entries, err := renter.AllAuditEntries(ctx, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	proof, err := renter.AuditConsistency(ctx, first.Head.Size, heads[0].Size)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := audit.ParsePublicKey(first.LogKey)
	if err != nil {
		t.Fatal(err)
	}
	r := audit.Check(pub, &audit.Evidence{Heads: append(heads, first.Head), Entries: entries,
		Consistency: []audit.ConsistencyProof{*proof}})
	if !r.OK() || r.EntriesIncluded != 4 || r.ExtensionsShown != 1 {
		t.Errorf("Check = %+v, want 4 entries included and one extension, no problems", r)
	}
	if _, err := client.New(f.URL, secret).AuditEntries(ctx, client.AuditEntriesQuery{AccountID: "acct_other"}); idlegrid.ErrorCode(err) != idlegrid.ENOTFOUND {
		t.Errorf("another account's entries: %v, want ENOTFOUND", err)
	}

	for _, tt := range []struct {
		path, field string
		status      int
	}{
		{"/v1/audit/consistency?from=1", "to", http.StatusBadRequest},
		{"/v1/audit/consistency?from=x&to=2", "from", http.StatusBadRequest},
		{"/v1/audit/consistency?from=3&to=2", "from", http.StatusBadRequest},
		{"/v1/audit/consistency?from=1&to=999", "to", http.StatusBadRequest},
		{"/v1/audit/entries?tree_size=0", "tree_size", http.StatusBadRequest},
		{"/v1/audit/entries?tree_size=999", "tree_size", http.StatusBadRequest},
		{"/v1/audit/entries?limit=100000", "limit", http.StatusBadRequest},
		{"/v1/audit/head?size=1", "size", http.StatusBadRequest},
	} {
		a := mustDo(t, request(t, http.MethodGet, f.URL+tt.path, secret, ""))
		if a.Status != tt.status || a.Err(t).Field != tt.field {
			t.Errorf("GET %s: %d %s, want %d on %s", tt.path, a.Status, a.Body, tt.status, tt.field)
		}
	}
	if a := mustDo(t, request(t, http.MethodGet, f.URL+"/v1/audit/head", "", "")); a.Status != http.StatusUnauthorized {
		t.Errorf("GET /v1/audit/head without a key: %d, want 401", a.Status)
	}
}
