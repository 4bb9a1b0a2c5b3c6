package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/httpapi"
	"github.com/idlegrid/idlegrid/internal/httpapi/wire"
)

// postWithKey sends body to path as the admin, under key ("": none).
func (f *fixture) postWithKey(t *testing.T, path, key, body string) answer {
	t.Helper()
	req := request(t, http.MethodPost, f.URL+path, f.AdminSecret, body)
	if key != "" {
		req.Header.Set(wire.HeaderIdempotencyKey, key)
	}
	return mustDo(t, req)
}

// wantAnswer fails t unless a has status and, for an error, the code and
// field, its message holding none of hides.
func wantAnswer(t *testing.T, what string, a answer, status int, code, field string, hides ...string) {
	t.Helper()
	if a.Status != status {
		t.Fatalf("%s: %d %s, want %d", what, a.Status, a.Body, status)
	}
	if status < 400 {
		return
	}
	if e := a.Err(t); e.Code != code || e.Field != field {
		t.Errorf("%s: %s, want %s naming %q", what, a.Body, code, field)
	}
	for _, h := range hides {
		if strings.Contains(string(a.Body), h) {
			t.Errorf("%s: %s shows %q", what, a.Body, h)
		}
	}
}

// TestAPI_createAccountIdempotencyKey: POST /v1/accounts sent again with
// its Idempotency-Key answers 200 with the first account, marked
// replayed, and a new key's secret; the key with another body is 409
// naming idempotency_key, a name its role has 409 naming name, a bad key
// 400 naming the header.
func TestAPI_createAccountIdempotencyKey(t *testing.T) {
	f := mustOpen(t, httpapi.Options{})
	body := `{"name":"carol","role":"renter"}`
	created := func(a answer) wire.CreateAccountResponse {
		t.Helper()
		var out wire.CreateAccountResponse
		if err := json.Unmarshal(a.Body, &out); err != nil || out.Account == nil || out.Secret == "" {
			t.Fatalf("not a created account: %s", a.Body)
		}
		return out
	}
	first := f.postWithKey(t, "/v1/accounts", "onboard-carol", body)
	wantAnswer(t, "the first creation", first, http.StatusCreated, "", "")
	if first.Header.Get(wire.HeaderIdempotentReplayed) != "" {
		t.Errorf("the first creation is marked replayed")
	}
	again := f.postWithKey(t, "/v1/accounts", "onboard-carol", body)
	wantAnswer(t, "sent again", again, http.StatusOK, "", "")
	was, now := created(first), created(again)
	if again.Header.Get(wire.HeaderIdempotentReplayed) != "true" || now.Account.ID != was.Account.ID || now.Secret == was.Secret {
		t.Errorf("sent again: %v %s, want replayed, account %s with a new secret", again.Header, again.Body, was.Account.ID)
	}
	wantAnswer(t, "the key with another role", f.postWithKey(t, "/v1/accounts", "onboard-carol", `{"name":"carol","role":"provider"}`),
		http.StatusConflict, idlegrid.ECONFLICT, "idempotency_key")
	wantAnswer(t, "the name again without a key", f.postWithKey(t, "/v1/accounts", "", body),
		http.StatusConflict, idlegrid.ECONFLICT, "name")
	wantAnswer(t, "the name again under another key", f.postWithKey(t, "/v1/accounts", "onboard-carol-2", body),
		http.StatusConflict, idlegrid.ECONFLICT, "name")
	wantAnswer(t, "the name for a provider", f.postWithKey(t, "/v1/accounts", "", `{"name":"carol","role":"provider"}`),
		http.StatusCreated, "", "")
	wantAnswer(t, "a key of 201 characters", f.postWithKey(t, "/v1/accounts", strings.Repeat("k", 201), `{"name":"dave","role":"renter"}`),
		http.StatusBadRequest, idlegrid.EINVALID, wire.HeaderIdempotencyKey)
}

// TestAPI_openDisputeIdempotencyKey: POST /v1/disputes sent again with its
// Idempotency-Key answers 200 with the first dispute, marked replayed;
// the key with another body is 409 naming idempotency_key.
func TestAPI_openDisputeIdempotencyKey(t *testing.T) {
	f := mustOpen(t, httpapi.Options{})
	_, prov, _ := f.mustAccount(t, "prov", idlegrid.RoleProvider)
	body := `{"offence":"fake_hardware","provider_id":"` + prov.ID + `","harm_micros":0,"evidence":"smaller GPUs than offered"}`
	first := f.postWithKey(t, "/v1/disputes", "case-1", body)
	wantAnswer(t, "the first opening", first, http.StatusCreated, "", "")
	again := f.postWithKey(t, "/v1/disputes", "case-1", body)
	wantAnswer(t, "sent again", again, http.StatusOK, "", "")
	var was, now idlegrid.Dispute
	if json.Unmarshal(first.Body, &was) != nil || json.Unmarshal(again.Body, &now) != nil || was.ID == "" || now.ID != was.ID ||
		again.Header.Get(wire.HeaderIdempotentReplayed) != "true" {
		t.Errorf("sent again: %v %s, want replayed, the first dispute %s", again.Header, again.Body, first.Body)
	}
	wantAnswer(t, "the key with other evidence", f.postWithKey(t, "/v1/disputes", "case-1", strings.Replace(body, "smaller", "fewer", 1)),
		http.StatusConflict, idlegrid.ECONFLICT, "idempotency_key")
	wantAnswer(t, "an empty key", f.postWithKey(t, "/v1/disputes", "", body), http.StatusCreated, "", "") // none: a second dispute
	req := request(t, http.MethodPost, f.URL+"/v1/disputes", f.AdminSecret, body)
	req.Header[wire.HeaderIdempotencyKey] = []string{""}
	wantAnswer(t, "an empty header", mustDo(t, req), http.StatusBadRequest, idlegrid.EINVALID, wire.HeaderIdempotencyKey)
}

// TestAPI_topUpKeyOfAnotherAmount: a top-up whose key was used for
// another amount is 409 naming idempotency_key and the caller's key, not
// the ledger's.
func TestAPI_topUpKeyOfAnotherAmount(t *testing.T) {
	f := mustOpen(t, httpapi.Options{})
	_, ren, _ := f.mustAccount(t, "ren", idlegrid.RoleRenter)
	path := "/v1/accounts/" + ren.ID + "/topup"
	wantAnswer(t, "the top-up", f.postWithKey(t, path, "invoice-1", `{"amount_micros":1000}`), http.StatusOK, "", "")
	a := f.postWithKey(t, path, "invoice-1", `{"amount_micros":2000}`)
	wantAnswer(t, "its key with another amount", a, http.StatusConflict, idlegrid.ECONFLICT, "idempotency_key", "topup:", ren.ID+":")
	if !strings.Contains(a.Err(t).Message, `"invoice-1"`) {
		t.Errorf("its key with another amount: %s, want the key given", a.Body)
	}
}

// TestAPI_moneyReplayed: each call that moves money, sent again with its
// key, answers as the first did with Idempotent-Replayed: true (a payout
// request 200 rather than 201), and moves nothing more.
func TestAPI_moneyReplayed(t *testing.T) {
	f := mustOpen(t, httpapi.Options{})
	_, ren, _ := f.mustAccount(t, "ren", idlegrid.RoleRenter)
	prov, provAcct, provSecret := f.mustAccount(t, "prov", idlegrid.RoleProvider)
	asProvider := func(path, key, body string) answer {
		req := request(t, http.MethodPost, f.URL+path, provSecret, body)
		req.Header.Set(wire.HeaderIdempotencyKey, key)
		return mustDo(t, req)
	}
	twice := func(what string, send func() answer, first int) answer {
		t.Helper()
		a := send()
		if a.Status != first || a.Header.Get(wire.HeaderIdempotentReplayed) != "" {
			t.Fatalf("%s: %d %s (replayed %q), want %d, not replayed", what, a.Status, a.Body, a.Header.Get(wire.HeaderIdempotentReplayed), first)
		}
		again := send()
		if again.Status != http.StatusOK || again.Header.Get(wire.HeaderIdempotentReplayed) != "true" {
			t.Errorf("%s sent again: %d %s (replayed %q), want 200, replayed", what, again.Status, again.Body, again.Header.Get(wire.HeaderIdempotentReplayed))
		}
		return a
	}
	twice("a top-up", func() answer {
		return f.postWithKey(t, "/v1/accounts/"+ren.ID+"/topup", "invoice-1", `{"amount_micros":1000}`)
	}, http.StatusOK)
	twice("a bond deposit", func() answer {
		return f.postWithKey(t, "/v1/bonds", "deposit-1", `{"provider_id":"`+provAcct.ID+`","amount_micros":5000000}`)
	}, http.StatusOK)
	twice("a bond release", func() answer { return asProvider("/v1/bonds/release", "release-1", `{"amount_micros":3000000}`) }, http.StatusOK)
	twice("a payout request", func() answer { return asProvider("/v1/payouts", "payout-1", `{"amount_micros":2000000}`) }, http.StatusCreated)
	ps, err := prov.ListPayouts(context.Background(), idlegrid.PayoutFilter{})
	if err != nil || len(ps) != 1 {
		t.Fatalf("payouts after a request sent twice: %v, %v; want one", ps, err)
	}
	twice("a settlement", func() answer {
		return f.postWithKey(t, "/v1/payouts/"+ps[0].ID+"/settle", "wire-1", `{"reason":"SEPA 42"}`)
	}, http.StatusOK)
	b, err := prov.Balance(context.Background(), "")
	if err != nil || b.Bond != 2000000 || b.Payable != 1000000 || b.PaidOut != 2000000 {
		t.Errorf("the provider's balance %+v (%v), want each move made once: bond 2, payable 1, paid out 2", b, err)
	}
}
