package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/httpapi/wire"
)

// PostBond stakes amount as a bond: a provider's own payable earnings
// (providerID empty), or an admin's record of a deposit for providerID. A
// retry with the same idempotencyKey moves nothing.
func (c *Client) PostBond(ctx context.Context, providerID string, amount idlegrid.Micros, idempotencyKey string) (*idlegrid.Balance, error) {
	b, _, err := c.PostBondOnce(ctx, providerID, amount, idempotencyKey)
	return b, err
}

// PostBondOnce is PostBond, saying too whether the key had staked the
// bond before (replayed): this call moved nothing.
func (c *Client) PostBondOnce(ctx context.Context, providerID string, amount idlegrid.Micros, idempotencyKey string) (b *idlegrid.Balance, replayed bool, err error) {
	var out idlegrid.Balance
	if replayed, err = c.postOnce(ctx, path("bonds"), wire.BondRequest{ProviderID: providerID, AmountMicros: amount}, &out, idempotencyKey); err != nil {
		return nil, false, err
	}
	return &out, replayed, nil
}

// ReleaseBond gives amount of the calling provider's bond back to its
// payable earnings; refused while a dispute against it is open.
func (c *Client) ReleaseBond(ctx context.Context, amount idlegrid.Micros, idempotencyKey string) (*idlegrid.Balance, error) {
	b, _, err := c.ReleaseBondOnce(ctx, amount, idempotencyKey)
	return b, err
}

// ReleaseBondOnce is ReleaseBond, saying too whether the key had released
// it before (replayed): this call moved nothing.
func (c *Client) ReleaseBondOnce(ctx context.Context, amount idlegrid.Micros, idempotencyKey string) (b *idlegrid.Balance, replayed bool, err error) {
	var out idlegrid.Balance
	if replayed, err = c.postOnce(ctx, path("bonds", "release"), wire.BondRequest{AmountMicros: amount}, &out, idempotencyKey); err != nil {
		return nil, false, err
	}
	return &out, replayed, nil
}

// ListDisputes lists disputes: those against a provider, those a renter
// was harmed in, or any for admins (f.ProviderID narrows it).
func (c *Client) ListDisputes(ctx context.Context, f idlegrid.DisputeFilter) ([]*idlegrid.Dispute, error) {
	q := url.Values{}
	setString(q, "provider_id", f.ProviderID)
	setList(q, "state", f.States)
	setString(q, "before", f.Before)
	setInt(q, "limit", int64(f.Limit))
	var out wire.Disputes
	err := c.do(ctx, call{method: http.MethodGet, path: path("disputes"), query: q, out: &out})
	return out.Disputes, err
}

// ListVerifications lists verifications of work, newest first: a
// renter's own, those touching a provider's runs, or any for admins; after
// f.Before when it is set (the last of the page before).
func (c *Client) ListVerifications(ctx context.Context, f idlegrid.VerificationFilter) ([]*idlegrid.Verification, error) {
	q := url.Values{}
	setString(q, "provider_id", f.ProviderID)
	setString(q, "before", f.Before)
	setInt(q, "limit", int64(f.Limit))
	var out wire.Verifications
	err := c.do(ctx, call{method: http.MethodGet, path: path("verifications"), query: q, out: &out})
	return out.Verifications, err
}

// FindDispute returns one dispute.
func (c *Client) FindDispute(ctx context.Context, id string) (*idlegrid.Dispute, error) {
	if err := requireID("dispute_id", id); err != nil {
		return nil, err
	}
	var out idlegrid.Dispute
	if err := c.do(ctx, call{method: http.MethodGet, path: path("disputes", id), out: &out}); err != nil {
		return nil, err
	}
	return &out, nil
}

// OpenDispute charges a provider with an offence the market cannot prove
// by itself. Admins only.
func (c *Client) OpenDispute(ctx context.Context, d idlegrid.Dispute) (*idlegrid.Dispute, error) {
	out, _, err := c.OpenDisputeOnce(ctx, d, "")
	return out, err
}

// OpenDisputeOnce opens a dispute with an idempotency key ("" for none),
// so that sending it again, after an answer that never came, opens no
// second one: the server answers with the first, as it is now, and
// replayed says so. A key sent with another request is refused
// (ECONFLICT).
func (c *Client) OpenDisputeOnce(ctx context.Context, d idlegrid.Dispute, key string) (out *idlegrid.Dispute, replayed bool, err error) {
	var got idlegrid.Dispute
	if replayed, err = c.postOnce(ctx, path("disputes"), d, &got, key); err != nil {
		return nil, false, err
	}
	return &got, replayed, nil
}

// UpholdDispute upholds an open dispute, taking the trust policy's penalty
// from the provider's bond. Admins only.
func (c *Client) UpholdDispute(ctx context.Context, id, resolution string) (*idlegrid.Dispute, error) {
	return c.resolveDispute(ctx, id, "uphold", resolution)
}

// DismissDispute dismisses an open dispute. Admins only.
func (c *Client) DismissDispute(ctx context.Context, id, resolution string) (*idlegrid.Dispute, error) {
	return c.resolveDispute(ctx, id, "dismiss", resolution)
}

func (c *Client) resolveDispute(ctx context.Context, id, verb, resolution string) (*idlegrid.Dispute, error) {
	if err := requireID("dispute_id", id); err != nil {
		return nil, err
	}
	var out idlegrid.Dispute
	err := c.do(ctx, call{method: http.MethodPost, path: path("disputes", id, verb),
		in: wire.ResolveDisputeRequest{Resolution: resolution}, out: &out})
	if err != nil {
		return nil, err
	}
	return &out, nil
}
