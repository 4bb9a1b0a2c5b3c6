package httpapi

import (
	"net/http"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/httpapi/wire"
)

// POST /v1/accounts/{id}/topup, with an Idempotency-Key header.
func (a *api) topUp(w http.ResponseWriter, r *http.Request) error {
	if _, err := parseQuery(r); err != nil {
		return err
	}
	key, err := idempotencyKey(r, "top-up")
	if err != nil {
		return err
	}
	var req wire.TopUpRequest
	if err := a.readJSON(w, r, &req); err != nil {
		return err
	}
	b, replayed, err := a.srv.TopUpOnce(r.Context(), r.PathValue("id"), req.AmountMicros, key)
	if err != nil {
		return err
	}
	return writeApplied(w, replayed, b)
}

// GET /v1/balance
func (a *api) ownBalance(w http.ResponseWriter, r *http.Request) error {
	if _, err := parseQuery(r); err != nil {
		return err
	}
	return a.balance(w, r, "")
}

// GET /v1/accounts/{id}/balance
func (a *api) accountBalance(w http.ResponseWriter, r *http.Request) error {
	if _, err := parseQuery(r); err != nil {
		return err
	}
	return a.balance(w, r, r.PathValue("id"))
}

func (a *api) balance(w http.ResponseWriter, r *http.Request, accountID string) error {
	if _, err := parseQuery(r); err != nil {
		return err
	}
	b, err := a.srv.Balance(r.Context(), accountID)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, b)
}

// GET /v1/transfers?account_id=&limit=&before=
func (a *api) listTransfers(w http.ResponseWriter, r *http.Request) error {
	q, err := parseQuery(r, "account_id", "limit", "before")
	if err != nil {
		return err
	}
	limit, err := q.limit()
	if err != nil {
		return err
	}
	ts, err := a.srv.ListTransfers(r.Context(), idlegrid.TransferFilter{AccountID: q.string("account_id"), Before: q.string("before"), Limit: limit})
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, wire.Transfers{Transfers: nonNil(ts)})
}

// GET /v1/summary
func (a *api) summary(w http.ResponseWriter, r *http.Request) error {
	if _, err := parseQuery(r); err != nil {
		return err
	}
	s, err := a.srv.Summary(r.Context())
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, s)
}
