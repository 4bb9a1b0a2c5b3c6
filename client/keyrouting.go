package client

import (
	"context"
	"net/http"

	"github.com/idlegrid/idlegrid"
)

// KeyRouting returns the default routing of one of the caller's API keys
// (empty when none is set).
func (c *Client) KeyRouting(ctx context.Context, keyID string) (*idlegrid.KeyRouting, error) {
	if err := requireID("key_id", keyID); err != nil {
		return nil, err
	}
	var out idlegrid.KeyRouting
	if err := c.do(ctx, call{method: http.MethodGet, path: path("keys", keyID, "routing"), out: &out}); err != nil {
		return nil, err
	}
	return &out, nil
}

// SetKeyRouting replaces the default routing of one of the caller's API
// keys: the "provider" object its inference requests get, field by field,
// where they send none of their own.
func (c *Client) SetKeyRouting(ctx context.Context, keyID string, r idlegrid.Routing) (*idlegrid.KeyRouting, error) {
	if err := requireID("key_id", keyID); err != nil {
		return nil, err
	}
	var out idlegrid.KeyRouting
	if err := c.do(ctx, call{method: http.MethodPut, path: path("keys", keyID, "routing"), in: r, out: &out}); err != nil {
		return nil, err
	}
	return &out, nil
}

// RemoveKeyRouting removes the default routing of one of the caller's API
// keys.
func (c *Client) RemoveKeyRouting(ctx context.Context, keyID string) error {
	if err := requireID("key_id", keyID); err != nil {
		return err
	}
	return c.do(ctx, call{method: http.MethodDelete, path: path("keys", keyID, "routing")})
}
