package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/httpapi"
)

func TestAPI_keyRouting(t *testing.T) {
	f := mustOpen(t, httpapi.Options{})
	ctx := context.Background()
	renter, _, secret := f.mustAccount(t, "ren", idlegrid.RoleRenter)
	_, _, otherSecret := f.mustAccount(t, "other", idlegrid.RoleRenter)
	_, _, providerSecret := f.mustAccount(t, "prov", idlegrid.RoleProvider)
	keys, err := renter.ListAPIKeys(ctx, "")
	if err != nil || len(keys) != 1 {
		t.Fatalf("keys = %v, %v", keys, err)
	}
	url := f.URL + "/v1/keys/" + keys[0].ID + "/routing"

	t.Run("empty before it is set", func(t *testing.T) {
		a := mustDo(t, request(t, http.MethodGet, url, secret, ""))
		var got idlegrid.KeyRouting
		if a.Status != http.StatusOK || json.Unmarshal(a.Body, &got) != nil || !got.Routing.IsZero() || got.KeyID != keys[0].ID {
			t.Fatalf("GET: %d %s", a.Status, a.Body)
		}
	})
	t.Run("put and get", func(t *testing.T) {
		body := `{"sort":"latency","data_residency":["EU"],"max_price":{"prompt":"1.5","completion":2},"allow_fallbacks":false}`
		a := mustDo(t, request(t, http.MethodPut, url, secret, body))
		if a.Status != http.StatusOK {
			t.Fatalf("PUT: %d %s", a.Status, a.Body)
		}
		a = mustDo(t, request(t, http.MethodGet, url, secret, ""))
		want := `{"key_id":"` + keys[0].ID + `","routing":{"sort":"latency","allow_fallbacks":false,"data_residency":["EU"],"max_price":{"prompt":"1.500000","completion":"2.000000"}}}`
		var got, wantV map[string]any
		if err := json.Unmarshal(a.Body, &got); err != nil {
			t.Fatal(err)
		}
		delete(got, "account_id")
		delete(got, "updated_at")
		_ = json.Unmarshal([]byte(want), &wantV)
		if g, w := mustMarshal(t, got), mustMarshal(t, wantV); g != w {
			t.Errorf("GET after PUT\n got %s\nwant %s", g, w)
		}
	})
	t.Run("field-named errors", func(t *testing.T) {
		for _, tt := range []struct{ body, field string }{
			{`{"sort":"cheapest"}`, "routing.sort"},
			{`{"region":["eu-west","eu-west"]}`, "routing.region[1]"},
			{`{"only":[""]}`, "routing.only[0]"},
			{`{"max_price":{"prompt":"1.2345678"}}`, "routing.max_price.prompt"},
			{`{"max_price":{"prompt":"-1"}}`, "routing.max_price.prompt"},
			{`{"region":"eu-west"}`, "routing.region"},
			{`{"sorting":"price"}`, "routing.sorting"},
		} {
			a := mustDo(t, request(t, http.MethodPut, url, secret, tt.body))
			if a.Status != http.StatusBadRequest || a.Err(t).Field != tt.field {
				t.Errorf("PUT %s: %d %s, want 400 on %s", tt.body, a.Status, a.Body, tt.field)
			}
		}
	})
	t.Run("only the owner", func(t *testing.T) {
		for _, method := range []string{http.MethodGet, http.MethodPut, http.MethodDelete} {
			body := ""
			if method == http.MethodPut {
				body = `{"sort":"price"}`
			}
			if a := mustDo(t, request(t, method, url, otherSecret, body)); a.Status != http.StatusNotFound {
				t.Errorf("%s by another renter: %d %s, want 404", method, a.Status, a.Body)
			}
		}
		if a := mustDo(t, request(t, http.MethodPut, url, providerSecret, `{"sort":"price"}`)); a.Status != http.StatusForbidden {
			t.Errorf("PUT by a provider: %d %s, want 403", a.Status, a.Body)
		}
	})
	t.Run("delete", func(t *testing.T) {
		if a := mustDo(t, request(t, http.MethodDelete, url, secret, "")); a.Status != http.StatusNoContent {
			t.Fatalf("DELETE: %d %s", a.Status, a.Body)
		}
		if a := mustDo(t, request(t, http.MethodDelete, url, secret, "")); a.Status != http.StatusNoContent {
			t.Errorf("DELETE again: %d %s", a.Status, a.Body)
		}
		got, err := renter.KeyRouting(ctx, keys[0].ID)
		if err != nil || !got.Routing.IsZero() {
			t.Errorf("after DELETE: %+v, %v", got, err)
		}
	})
}

func mustMarshal(tb testing.TB, v any) string {
	tb.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		tb.Fatal(err)
	}
	return string(b)
}
