package httpapi_test

import (
	"context"
	"encoding/json"
	"maps"
	"strings"
	"testing"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/client"
	"github.com/idlegrid/idlegrid/internal/httpapi"
	"github.com/idlegrid/idlegrid/internal/httpapi/wire"
)

// TestAPI_keyAccess: a key with access use may not manage its account, one
// with access read may only read, over real HTTP, each refusal a 403 that
// says the key's access and what to do.
func TestAPI_keyAccess(t *testing.T) {
	f := mustOpen(t, httpapi.Options{})
	ctx := context.Background()
	renter, _, _ := f.mustAccount(t, "ren", idlegrid.RoleRenter)
	useKey, useSecret, err := renter.CreateAPIKeyWithAccess(ctx, "team", idlegrid.AccessUse)
	if err != nil {
		t.Fatal(err)
	}
	_, readSecret, err := renter.CreateAPIKeyWithAccess(ctx, "grafana", idlegrid.AccessRead)
	if err != nil {
		t.Fatal(err)
	}
	spec, err := json.Marshal(testSpec())
	if err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name         string
		secret       string
		method, path string
		body         string
		wantStatus   int
		wantText     string // in the message of a refusal
	}{
		{"use lifts its own limit", useSecret, "DELETE", "/v1/keys/" + useKey.ID + "/spend-limit", "", 403, "access is use"},
		{"use raises its own limit", useSecret, "PUT", "/v1/keys/" + useKey.ID + "/spend-limit", `{"limit_micros":1}`, 403, "idlegrid key create --access all"},
		{"use mints a key", useSecret, "POST", "/v1/keys", `{"name":"escape"}`, 403, "access is use"},
		{"use submits", useSecret, "POST", "/v1/jobs", string(spec), 201, ""},
		{"use lists keys", useSecret, "GET", "/v1/keys", "", 200, ""},
		{"read submits", readSecret, "POST", "/v1/jobs", string(spec), 403, "access is read"},
		{"read mints a key", readSecret, "POST", "/v1/keys", `{"name":"escape"}`, 403, "idlegrid key create --access use"},
		{"read lists jobs", readSecret, "GET", "/v1/jobs", "", 200, ""},
		{"read reads its balance", readSecret, "HEAD", "/v1/balance", "", 200, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := mustDo(t, request(t, tt.method, f.URL+tt.path, tt.secret, tt.body))
			if got.Status != tt.wantStatus {
				t.Fatalf("%s %s = %d %s, want %d", tt.method, tt.path, got.Status, got.Body, tt.wantStatus)
			}
			if tt.wantStatus == 403 {
				if e := got.Err(t); e.Code != idlegrid.EFORBIDDEN || !strings.Contains(e.Message, tt.wantText) {
					t.Errorf("refusal %+v, want code %q and a message with %q", e, idlegrid.EFORBIDDEN, tt.wantText)
				}
			}
		})
	}

	t.Run("an unknown access", func(t *testing.T) {
		got := mustDo(t, request(t, "POST", f.URL+"/v1/keys", f.AdminSecret, `{"name":"x","access":"root"}`))
		if e := got.Err(t); got.Status != 400 || e.Field != "key.access" {
			t.Errorf("POST /v1/keys with access root = %d %+v, want 400 naming key.access", got.Status, e)
		}
	})
	t.Run("listed with their access", func(t *testing.T) {
		answer := mustDo(t, request(t, "GET", f.URL+"/v1/keys", readSecret, ""))
		var keys wire.APIKeys
		if err := json.Unmarshal(answer.Body, &keys); err != nil {
			t.Fatal(err)
		}
		got := map[string]idlegrid.Access{}
		for _, k := range keys.APIKeys {
			got[k.Name] = k.Access
		}
		want := map[string]idlegrid.Access{"default": idlegrid.AccessAll, "team": idlegrid.AccessUse, "grafana": idlegrid.AccessRead}
		if !maps.Equal(got, want) {
			t.Errorf("keys listed with accesses %q, want %q", got, want)
		}
	})
}

// TestAPI_meKeyAccess: GET /v1/me names the key calling and its access,
// for each access, beside the account's fields, which a client decoding
// an idlegrid.Account still reads.
func TestAPI_meKeyAccess(t *testing.T) {
	f := mustOpen(t, httpapi.Options{})
	ctx := context.Background()
	renter, acct, _ := f.mustAccount(t, "ren", idlegrid.RoleRenter)
	for _, access := range []idlegrid.Access{idlegrid.AccessAll, idlegrid.AccessUse, idlegrid.AccessRead} {
		t.Run(string(access), func(t *testing.T) {
			key, secret, err := renter.CreateAPIKeyWithAccess(ctx, "key-"+string(access), access)
			if err != nil {
				t.Fatal(err)
			}
			answer := mustDo(t, request(t, "GET", f.URL+"/v1/me", secret, ""))
			var got map[string]any
			if err := json.Unmarshal(answer.Body, &got); err != nil || answer.Status != 200 {
				t.Fatalf("GET /v1/me = %d %s (%v)", answer.Status, answer.Body, err)
			}
			want := map[string]any{"id": acct.ID, "name": "ren", "role": "renter", "key_id": key.ID, "key_access": string(access)}
			for field, v := range want {
				if got[field] != v {
					t.Errorf("GET /v1/me with a key of access %s: %s = %v, want %v (body %s)", access, field, got[field], v, answer.Body)
				}
			}
			if me, err := client.New(f.URL, secret).Me(ctx); err != nil || me.ID != acct.ID || me.Role != idlegrid.RoleRenter {
				t.Errorf("client Me = %+v, %v; want the account %s", me, err, acct.ID)
			}
		})
	}
}
