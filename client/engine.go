package client

import (
	"context"
	"net/http"

	"github.com/idlegrid/idlegrid/internal/httpapi/wire"
)

// Explain says why a queued job has not started: the nodes ruled out per
// reason, the cheapest asks it would need to beat, and an estimated start.
func (c *Client) Explain(ctx context.Context, jobID string) (*wire.Explanation, error) {
	if err := requireID("job_id", jobID); err != nil {
		return nil, err
	}
	var out wire.Explanation
	if err := c.do(ctx, call{method: http.MethodGet, path: path("jobs", jobID, "explain"), out: &out}); err != nil {
		return nil, err
	}
	return &out, nil
}

// Market returns, per GPU model and region, supply, demand, recent
// clearing prices, fill rate and a suggested ask.
func (c *Client) Market(ctx context.Context) ([]wire.MarketStat, error) {
	var out []wire.MarketStat
	err := c.do(ctx, call{method: http.MethodGet, path: path("market"), out: &out})
	return out, err
}
