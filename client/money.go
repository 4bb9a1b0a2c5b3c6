package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/httpapi/wire"
)

func idempotent(key string) http.Header { return http.Header{wire.HeaderIdempotencyKey: {key}} }

// RequestPayout asks for amount of the caller's payable earnings to be paid
// out. A retry with the same idempotencyKey returns the first request's
// payout and moves no more money. Providers only.
func (c *Client) RequestPayout(ctx context.Context, amount idlegrid.Micros, idempotencyKey string) (*idlegrid.Payout, error) {
	p, _, err := c.RequestPayoutOnce(ctx, amount, idempotencyKey)
	return p, err
}

// RequestPayoutOnce is RequestPayout, saying too whether the key had
// requested it before (replayed): the payout is that request's.
func (c *Client) RequestPayoutOnce(ctx context.Context, amount idlegrid.Micros, idempotencyKey string) (p *idlegrid.Payout, replayed bool, err error) {
	var out idlegrid.Payout
	if replayed, err = c.postOnce(ctx, path("payouts"), wire.PayoutRequest{AmountMicros: amount}, &out, idempotencyKey); err != nil {
		return nil, false, err
	}
	return &out, replayed, nil
}

// ListPayouts lists payouts: a provider's own, or anyone's for admins
// (f.ProviderID narrows it).
func (c *Client) ListPayouts(ctx context.Context, f idlegrid.PayoutFilter) ([]*idlegrid.Payout, error) {
	q := url.Values{}
	setString(q, "provider_id", f.ProviderID)
	setList(q, "state", f.States)
	if f.OldestFirst {
		q.Set("order", "oldest")
	}
	setString(q, "before", f.Before)
	setString(q, "after", f.After)
	setInt(q, "limit", int64(f.Limit))
	var out wire.Payouts
	err := c.do(ctx, call{method: http.MethodGet, path: path("payouts"), query: q, out: &out})
	return out.Payouts, err
}

// SettlePayout records that a requested payout's money was sent, with the
// payment's reference. A retry with the same idempotencyKey is a no-op.
// Admins only.
func (c *Client) SettlePayout(ctx context.Context, id, reference, idempotencyKey string) (*idlegrid.Payout, error) {
	p, _, err := c.SettlePayoutOnce(ctx, id, reference, idempotencyKey)
	return p, err
}

// SettlePayoutOnce is SettlePayout, saying too whether the key had
// settled it before (replayed): this call moved nothing.
func (c *Client) SettlePayoutOnce(ctx context.Context, id, reference, idempotencyKey string) (*idlegrid.Payout, bool, error) {
	return c.resolvePayout(ctx, id, "settle", reference, idempotencyKey)
}

// RejectPayout refuses a requested payout, saying why; its money is payable
// again. A retry with the same idempotencyKey is a no-op. Admins only.
func (c *Client) RejectPayout(ctx context.Context, id, reason, idempotencyKey string) (*idlegrid.Payout, error) {
	p, _, err := c.RejectPayoutOnce(ctx, id, reason, idempotencyKey)
	return p, err
}

// RejectPayoutOnce is RejectPayout, saying too whether the key had
// rejected it before (replayed): this call moved nothing.
func (c *Client) RejectPayoutOnce(ctx context.Context, id, reason, idempotencyKey string) (*idlegrid.Payout, bool, error) {
	return c.resolvePayout(ctx, id, "reject", reason, idempotencyKey)
}

func (c *Client) resolvePayout(ctx context.Context, id, verb, reason, key string) (p *idlegrid.Payout, replayed bool, err error) {
	if err := requireID("payout_id", id); err != nil {
		return nil, false, err
	}
	var out idlegrid.Payout
	if replayed, err = c.postOnce(ctx, path("payouts", id, verb), wire.ResolvePayoutRequest{Reason: reason}, &out, key); err != nil {
		return nil, false, err
	}
	return &out, replayed, nil
}

// Statement returns an account's statement for a month such as "2026-11";
// accountID "" is the caller's own.
func (c *Client) Statement(ctx context.Context, accountID, month string) (*idlegrid.Statement, error) {
	var out idlegrid.Statement
	if err := c.do(ctx, call{method: http.MethodGet, path: path("statements"), query: statementQuery(accountID, month, wire.FormatJSON), out: &out}); err != nil {
		return nil, err
	}
	return &out, nil
}

// StatementCSV returns the same statement as CSV.
func (c *Client) StatementCSV(ctx context.Context, accountID, month string) ([]byte, error) {
	var out []byte
	err := c.do(ctx, call{method: http.MethodGet, path: path("statements"), query: statementQuery(accountID, month, wire.FormatCSV), out: &out})
	return out, err
}

func statementQuery(accountID, month, format string) url.Values {
	q := url.Values{"month": {month}, "format": {format}}
	setString(q, "account_id", accountID)
	return q
}

// ListNotices lists what the market told an account, newest first, such as
// leases stopped before its money ran out: f.AccountID's ("" is the
// caller's own), after f.Before when it is set.
func (c *Client) ListNotices(ctx context.Context, f idlegrid.NoticeFilter) ([]*idlegrid.Notice, error) {
	q := url.Values{}
	setString(q, "account_id", f.AccountID)
	setString(q, "before", f.Before)
	setInt(q, "limit", int64(f.Limit))
	var out wire.Notices
	err := c.do(ctx, call{method: http.MethodGet, path: path("notices"), query: q, out: &out})
	return out.Notices, err
}

// SpendReport is what an account spent this month and its spend limits.
type SpendReport struct {
	Month  string                       `json:"month"`
	Spend  idlegrid.Spend               `json:"spend"`
	Limits []*idlegrid.SpendLimitStatus `json:"limits"`
}

// SpendLimits returns what an account spent this month and its limits,
// each with what its scope used; accountID "" is the caller's own.
func (c *Client) SpendLimits(ctx context.Context, accountID string) (*SpendReport, error) {
	q := url.Values{}
	setString(q, "account_id", accountID)
	var out wire.SpendLimits
	if err := c.do(ctx, call{method: http.MethodGet, path: path("spend-limits"), query: q, out: &out}); err != nil {
		return nil, err
	}
	return &SpendReport{Month: out.Month, Spend: out.Spend, Limits: out.Limits}, nil
}

// SetAccountLimit sets what a renter account may spend in a calendar month;
// nil lifts the limit. Admins only.
func (c *Client) SetAccountLimit(ctx context.Context, accountID string, limit *idlegrid.Micros) (*idlegrid.SpendLimitStatus, error) {
	if err := requireID("account_id", accountID); err != nil {
		return nil, err
	}
	return c.setLimit(ctx, path("accounts", accountID, "spend-limit"), limit)
}

// SetKeyLimit sets what the jobs one of the caller's API keys submits may
// spend in a calendar month; nil lifts the limit.
func (c *Client) SetKeyLimit(ctx context.Context, keyID string, limit *idlegrid.Micros) (*idlegrid.SpendLimitStatus, error) {
	if err := requireID("key_id", keyID); err != nil {
		return nil, err
	}
	return c.setLimit(ctx, path("keys", keyID, "spend-limit"), limit)
}

func (c *Client) setLimit(ctx context.Context, p string, limit *idlegrid.Micros) (*idlegrid.SpendLimitStatus, error) {
	if limit == nil {
		return nil, c.do(ctx, call{method: http.MethodDelete, path: p})
	}
	var out idlegrid.SpendLimitStatus
	if err := c.do(ctx, call{method: http.MethodPut, path: p, in: wire.SpendLimitRequest{LimitMicros: *limit}, out: &out}); err != nil {
		return nil, err
	}
	return &out, nil
}
