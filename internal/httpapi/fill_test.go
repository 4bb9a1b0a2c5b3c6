package httpapi_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/httpapi"
)

// TestAPI_providerFill reads a provider's fill history through the client
// and checks what the route refuses.
func TestAPI_providerFill(t *testing.T) {
	f := mustOpen(t, httpapi.Options{})
	ctx := context.Background()
	_, _, renterSecret := f.mustAccount(t, "ren", idlegrid.RoleRenter)
	provider, providerAcct, providerSecret := f.mustAccount(t, "prov", idlegrid.RoleProvider)
	f.mustNode(t, provider, "rig1")
	f.Clock.Advance(time.Hour)

	h, err := provider.ProviderFill(ctx, providerAcct.ID, 3)
	if err != nil {
		t.Fatal(err)
	}
	if h.ProviderID != providerAcct.ID || len(h.Days) != 3 {
		t.Fatalf("history = %s with %d days, want %s with 3", h.ProviderID, len(h.Days), providerAcct.ID)
	}
	var offered float64
	for _, d := range h.Days {
		offered += d.OfferedGPUHours
	}
	// The node joined an hour ago, its one GPU always offered; nothing
	// leased. A second may be lost where the hour spans midnight, as each
	// day counts whole seconds.
	if offered < 1-1.0/3600 || offered > 1 || h.Days[2].LeasedGPUHours != 0 || h.Days[2].Fill != 0 {
		t.Errorf("days = %+v, want 1 GPU-hour offered in all, nothing leased", h.Days)
	}
	if def, err := f.Admin.ProviderFill(ctx, providerAcct.ID, 0); err != nil || len(def.Days) != idlegrid.DefaultFillDays {
		t.Errorf("admin, default days: %v, err %v; want %d days", def, err, idlegrid.DefaultFillDays)
	}

	url := f.URL + "/v1/providers/" + providerAcct.ID + "/fill"
	tests := []struct {
		name       string
		secret     string
		query      string
		wantStatus int
		wantField  string
	}{
		{"days not a number", providerSecret, "?days=two", http.StatusBadRequest, "days"},
		{"no days", providerSecret, "?days=0", http.StatusBadRequest, "days"},
		{"too many days", providerSecret, "?days=91", http.StatusBadRequest, "days"},
		{"days twice", providerSecret, "?days=1&days=2", http.StatusBadRequest, "days"},
		{"unknown parameter", providerSecret, "?from=2026-01-01", http.StatusBadRequest, "from"},
		{"renter", renterSecret, "", http.StatusForbidden, ""},
		{"anonymous", "", "", http.StatusUnauthorized, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := mustDo(t, request(t, "GET", url+tt.query, tt.secret, ""))
			if a.Status != tt.wantStatus {
				t.Fatalf("status = %d (%s), want %d", a.Status, a.Body, tt.wantStatus)
			}
			if e := a.Err(t); e.Field != tt.wantField {
				t.Errorf("field = %q (%s), want %q", e.Field, e.Message, tt.wantField)
			}
		})
	}
}
