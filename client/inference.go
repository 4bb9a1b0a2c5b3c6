package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/httpapi/wire"
	"github.com/idlegrid/idlegrid/internal/openai"
)

// InferenceModels lists the models providers serve now through the
// inference gateway, with the cheapest prices and the number of providers
// of each (GET /v1/models). Renters call them with any OpenAI client.
func (c *Client) InferenceModels(ctx context.Context) ([]openai.Model, error) {
	var out openai.ModelList
	err := c.do(ctx, call{method: http.MethodGet, path: path("models"), out: &out})
	return out.Data, err
}

// InferenceStats returns the gateway's figures per model: latency and time
// to first token, tokens a second, price per million tokens, requests
// waiting for room; and the circuit breakers that have tripped.
func (c *Client) InferenceStats(ctx context.Context) (*wire.InferenceStats, error) {
	var out wire.InferenceStats
	err := c.do(ctx, call{method: http.MethodGet, path: path("inference", "stats"), out: &out})
	return &out, err
}

// InferenceUsage lists the caller's metered gateway requests, as renter or
// provider, newest first: those older than f.Before, when set, and at most
// f.Limit (0: the server's default, 100). f.AccountID is the caller's, and
// not sent.
func (c *Client) InferenceUsage(ctx context.Context, f idlegrid.UsageFilter) ([]*idlegrid.InferenceUsage, error) {
	q := url.Values{}
	if f.Limit > 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	if f.Before != "" {
		q.Set("before", f.Before)
	}
	var out wire.InferenceUsageList
	err := c.do(ctx, call{method: http.MethodGet, path: path("inference", "usage"), query: q, out: &out})
	return out.Data, err
}

// ConversationUsage returns what the caller's conversations (the
// gateway's Conversations API) hold, all together, and the most they may.
func (c *Client) ConversationUsage(ctx context.Context) (*wire.ConversationUsage, error) {
	var out wire.ConversationUsage
	err := c.do(ctx, call{method: http.MethodGet, path: path("inference", "conversations"), out: &out})
	return &out, err
}
