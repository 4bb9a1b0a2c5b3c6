package httpapi

import (
	"net/http"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/httpapi/wire"
	"github.com/idlegrid/idlegrid/internal/ledger"
)

// idempotencyKey returns the request's Idempotency-Key header, which every
// call that moves money needs.
func idempotencyKey(r *http.Request, what string) (string, error) {
	key := r.Header.Get(wire.HeaderIdempotencyKey)
	if key == "" {
		return "", idlegrid.Invalid(wire.HeaderIdempotencyKey, "header required, so that a retried %s is not applied twice", what)
	}
	return key, ledger.CheckIdempotencyKey(wire.HeaderIdempotencyKey, key)
}

// POST /v1/payouts, with an Idempotency-Key header.
func (a *api) requestPayout(w http.ResponseWriter, r *http.Request) error {
	if _, err := parseQuery(r); err != nil {
		return err
	}
	key, err := idempotencyKey(r, "payout request")
	if err != nil {
		return err
	}
	var req wire.PayoutRequest
	if err := a.readJSON(w, r, &req); err != nil {
		return err
	}
	p, replayed, err := a.srv.RequestPayoutOnce(r.Context(), req.AmountMicros, key)
	if err != nil {
		return err
	}
	return writeCreated(w, replayed, p)
}

// POST /v1/payouts/{id}/settle, with an Idempotency-Key header.
func (a *api) settlePayout(w http.ResponseWriter, r *http.Request) error {
	if _, err := parseQuery(r); err != nil {
		return err
	}
	return a.resolvePayout(w, r, idlegrid.PayoutSettled)
}

// POST /v1/payouts/{id}/reject, with an Idempotency-Key header.
func (a *api) rejectPayout(w http.ResponseWriter, r *http.Request) error {
	if _, err := parseQuery(r); err != nil {
		return err
	}
	return a.resolvePayout(w, r, idlegrid.PayoutRejected)
}

func (a *api) resolvePayout(w http.ResponseWriter, r *http.Request, to idlegrid.PayoutState) error {
	key, err := idempotencyKey(r, "payout "+string(to))
	if err != nil {
		return err
	}
	var req wire.ResolvePayoutRequest
	if err := a.readJSON(w, r, &req); err != nil {
		return err
	}
	p, replayed, err := a.srv.ResolvePayoutOnce(r.Context(), r.PathValue("id"), to, req.Reason, key)
	if err != nil {
		return err
	}
	return writeApplied(w, replayed, p)
}

var payoutStates = []idlegrid.PayoutState{idlegrid.PayoutRequested, idlegrid.PayoutSettled, idlegrid.PayoutRejected}

// GET /v1/payouts?state=&provider_id=&order=&before=&after=&limit=
func (a *api) listPayouts(w http.ResponseWriter, r *http.Request) error {
	q, err := parseQuery(r, "state", "provider_id", "order", "before", "after", "limit")
	if err != nil {
		return err
	}
	f := idlegrid.PayoutFilter{ProviderID: q.string("provider_id"), Before: q.string("before"), After: q.string("after")}
	switch order := q.string("order"); order {
	case "", "newest":
	case "oldest":
		f.OldestFirst = true
	default:
		return idlegrid.Invalid("order", "must be newest or oldest, got %q", order)
	}
	if f.States, err = list(q, "state", payoutStates); err != nil {
		return err
	}
	if f.Limit, err = q.limit(); err != nil {
		return err
	}
	ps, err := a.srv.ListPayouts(r.Context(), f)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, wire.Payouts{Payouts: nonNil(ps)})
}

// GET /v1/statements?month=2026-11&format=json|csv&account_id=
func (a *api) statement(w http.ResponseWriter, r *http.Request) error {
	q, err := parseQuery(r, "month", "format", "account_id")
	if err != nil {
		return err
	}
	format := q.string("format")
	if format == "" {
		format = wire.FormatJSON
	} else if format != wire.FormatJSON && format != wire.FormatCSV {
		return idlegrid.Invalid("format", "must be json or csv, got %q", format)
	}
	if q.string("month") == "" {
		return idlegrid.Invalid("month", "required, e.g. month=2026-11")
	}
	s, err := a.srv.Statement(r.Context(), q.string("account_id"), q.string("month"))
	if err != nil {
		return err
	}
	if format == wire.FormatJSON {
		return writeJSON(w, http.StatusOK, s)
	}
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("Content-Disposition", `attachment; filename="idlegrid-`+s.AccountID+`-`+s.Month+`.csv"`)
	w.WriteHeader(http.StatusOK)
	return ledger.WriteStatementCSV(w, s)
}

// GET /v1/notices?account_id=&before=&limit=
func (a *api) listNotices(w http.ResponseWriter, r *http.Request) error {
	q, err := parseQuery(r, "account_id", "before", "limit")
	if err != nil {
		return err
	}
	f := idlegrid.NoticeFilter{AccountID: q.string("account_id"), Before: q.string("before")}
	if f.Limit, err = q.limit(); err != nil {
		return err
	}
	ns, err := a.srv.ListNotices(r.Context(), f)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, wire.Notices{Notices: nonNil(ns)})
}

// readSpendLimit reads a wire.SpendLimitRequest's limit, which must be
// there: a limit left out is not a limit of 0, which would refuse all
// spending (DELETE removes a limit).
func (a *api) readSpendLimit(w http.ResponseWriter, r *http.Request) (*idlegrid.Micros, error) {
	var req struct {
		LimitMicros *idlegrid.Micros `json:"limit_micros"`
	}
	if err := a.readJSON(w, r, &req); err != nil {
		return nil, err
	} else if req.LimitMicros == nil {
		return nil, idlegrid.Invalid("limit_micros", "required: the most to spend in a calendar month, in micros; DELETE removes a limit")
	}
	return req.LimitMicros, nil
}

// PUT /v1/accounts/{id}/spend-limit
func (a *api) setAccountLimit(w http.ResponseWriter, r *http.Request) error {
	if _, err := parseQuery(r); err != nil {
		return err
	}
	limit, err := a.readSpendLimit(w, r)
	if err != nil {
		return err
	}
	st, err := a.srv.SetAccountLimit(r.Context(), r.PathValue("id"), limit)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, st)
}

// DELETE /v1/accounts/{id}/spend-limit
func (a *api) removeAccountLimit(w http.ResponseWriter, r *http.Request) error {
	if _, err := parseQuery(r); err != nil {
		return err
	}
	if _, err := a.srv.SetAccountLimit(r.Context(), r.PathValue("id"), nil); err != nil {
		return err
	}
	return writeNoContent(w)
}

// PUT /v1/keys/{id}/spend-limit
func (a *api) setKeyLimit(w http.ResponseWriter, r *http.Request) error {
	if _, err := parseQuery(r); err != nil {
		return err
	}
	limit, err := a.readSpendLimit(w, r)
	if err != nil {
		return err
	}
	st, err := a.srv.SetKeyLimit(r.Context(), r.PathValue("id"), limit)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, st)
}

// DELETE /v1/keys/{id}/spend-limit
func (a *api) removeKeyLimit(w http.ResponseWriter, r *http.Request) error {
	if _, err := parseQuery(r); err != nil {
		return err
	}
	if _, err := a.srv.SetKeyLimit(r.Context(), r.PathValue("id"), nil); err != nil {
		return err
	}
	return writeNoContent(w)
}

// GET /v1/spend-limits?account_id=
func (a *api) listSpendLimits(w http.ResponseWriter, r *http.Request) error {
	q, err := parseQuery(r, "account_id")
	if err != nil {
		return err
	}
	limits, err := a.srv.ListSpendLimits(r.Context(), q.string("account_id"))
	if err != nil {
		return err
	}
	spend, err := a.srv.MonthSpend(r.Context(), q.string("account_id"))
	if err != nil {
		return err
	}
	month, _ := idlegrid.MonthOf(a.srv.Now())
	return writeJSON(w, http.StatusOK, wire.SpendLimits{Month: month.Format("2006-01"), Spend: *spend, Limits: nonNil(limits)})
}
