package httpapi_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/httpapi"
	"github.com/idlegrid/idlegrid/internal/httpapi/wire"
)

// TestAPI_registryLogins: a renter puts, lists and removes its registry
// logins; no answer carries the password, and each mistake names its
// field.
func TestAPI_registryLogins(t *testing.T) {
	f := mustOpen(t, httpapi.Options{})
	_, renterAcct, secret := f.mustAccount(t, "ren", idlegrid.RoleRenter)
	_, _, otherSecret := f.mustAccount(t, "other", idlegrid.RoleRenter)
	_, _, providerSecret := f.mustAccount(t, "prov", idlegrid.RoleProvider)
	const password = "ghp_do-not-echo-me"
	url := f.URL + "/v1/registry-logins"

	a := mustDo(t, request(t, http.MethodPut, url+"/ghcr.io", secret, `{"username":"acme-bot","password":"`+password+`"}`))
	var got idlegrid.RegistryLogin
	if a.Status != http.StatusOK || json.Unmarshal(a.Body, &got) != nil || got.Registry != "ghcr.io" || got.Username != "acme-bot" {
		t.Fatalf("PUT: %d %s", a.Status, a.Body)
	}
	a = mustDo(t, request(t, http.MethodGet, url, secret, ""))
	var list wire.RegistryLogins
	if a.Status != http.StatusOK || json.Unmarshal(a.Body, &list) != nil || len(list.Logins) != 1 || list.Logins[0].Username != "acme-bot" {
		t.Fatalf("GET: %d %s", a.Status, a.Body)
	}
	for _, body := range []string{string(a.Body), string(mustDo(t, request(t, http.MethodPut, url+"/ghcr.io", secret,
		`{"username":"acme-bot","password":"`+password+`"}`)).Body)} {
		if strings.Contains(body, password) || strings.Contains(body, "sealed") || strings.Contains(body, "secret") {
			t.Errorf("an answer carries the secret: %s", body)
		}
	}
	if a := mustDo(t, request(t, http.MethodGet, url, otherSecret, "")); a.Status != http.StatusOK || strings.Contains(string(a.Body), "ghcr.io") {
		t.Errorf("another renter's list: %d %s, want its own, empty", a.Status, a.Body)
	}

	for _, tt := range []struct{ path, body, field string }{
		{"/ghcr.io", `{"username":"","password":"x"}`, "username"},
		{"/ghcr.io", `{"username":"u"}`, "password"},
		{"/not-a-registry", `{"username":"u","password":"x"}`, "registry"},
		{"/ghcr.io", `{"username":"u","password":"x","email":"a@b"}`, "email"},
	} {
		a := mustDo(t, request(t, http.MethodPut, url+tt.path, secret, tt.body))
		if a.Status != http.StatusBadRequest || a.Err(t).Field != tt.field {
			t.Errorf("PUT %s %s: %d %s, want 400 on %s", tt.path, tt.body, a.Status, a.Body, tt.field)
		}
	}
	if a := mustDo(t, request(t, http.MethodPut, url+"/ghcr.io", providerSecret, `{"username":"u","password":"x"}`)); a.Status != http.StatusForbidden {
		t.Errorf("PUT by a provider: %d %s, want 403", a.Status, a.Body)
	}
	if a := mustDo(t, request(t, http.MethodDelete, url+"/ghcr.io", otherSecret, "")); a.Status != http.StatusNotFound {
		t.Errorf("DELETE by another renter: %d %s, want 404", a.Status, a.Body)
	}
	if a := mustDo(t, request(t, http.MethodDelete, url+"/ghcr.io?account_id="+renterAcct.ID, otherSecret, "")); a.Status != http.StatusNotFound {
		t.Errorf("DELETE of its login by another renter naming it: %d %s, want 404", a.Status, a.Body)
	}
	if a := mustDo(t, request(t, http.MethodDelete, url+"/ghcr.io", secret, "")); a.Status != http.StatusNoContent {
		t.Errorf("DELETE: %d %s, want 204", a.Status, a.Body)
	}
	mustDo(t, request(t, http.MethodPut, url+"/ghcr.io", secret, `{"username":"acme-bot","password":"`+password+`"}`))
	if a := mustDo(t, request(t, http.MethodDelete, url+"/ghcr.io?account_id="+renterAcct.ID, f.AdminSecret, "")); a.Status != http.StatusNoContent {
		t.Errorf("DELETE of the renter's login by an admin: %d %s, want 204", a.Status, a.Body)
	}
}
