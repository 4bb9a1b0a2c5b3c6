package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/idlegrid/idlegrid"
)

// ProviderFill returns a provider's fill rate and earnings for each of the
// last days UTC days, today last (0: the server's default, 14; at most 90).
// Providers may ask for themselves, admins for any provider.
func (c *Client) ProviderFill(ctx context.Context, providerID string, days int) (*idlegrid.FillHistory, error) {
	if err := requireID("provider_id", providerID); err != nil {
		return nil, err
	}
	q := url.Values{}
	setInt(q, "days", int64(days))
	var out idlegrid.FillHistory
	if err := c.do(ctx, call{method: http.MethodGet, path: path("providers", providerID, "fill"), query: q, out: &out}); err != nil {
		return nil, err
	}
	return &out, nil
}
