package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/httpapi/wire"
)

// PutRegistryLogin keeps the caller's login to a container registry
// ("ghcr.io", "registry.example.com:5000", "docker.io"), replacing the one
// it had there: the caller's jobs whose images are on it are pulled with
// it. The answer never carries the password.
func (c *Client) PutRegistryLogin(ctx context.Context, registry, username, password string) (*idlegrid.RegistryLogin, error) {
	if err := requireID("registry", registry); err != nil {
		return nil, err
	}
	var out idlegrid.RegistryLogin
	in := wire.RegistryLoginRequest{Username: username, Password: password}
	if err := c.do(ctx, call{method: http.MethodPut, path: path("registry-logins", registry), in: in, out: &out}); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListRegistryLogins lists the caller's registry logins, or for an admin
// another account's ("": its own), without their passwords.
func (c *Client) ListRegistryLogins(ctx context.Context, accountID string) ([]*idlegrid.RegistryLogin, error) {
	q := url.Values{}
	if accountID != "" {
		q.Set("account_id", accountID)
	}
	var out wire.RegistryLogins
	if err := c.do(ctx, call{method: http.MethodGet, path: path("registry-logins"), query: q, out: &out}); err != nil {
		return nil, err
	}
	return out.Logins, nil
}

// RemoveRegistryLogin removes an account's login to a registry: the
// caller's own (accountID ""), or for an admin any account's.
func (c *Client) RemoveRegistryLogin(ctx context.Context, accountID, registry string) error {
	if err := requireID("registry", registry); err != nil {
		return err
	}
	q := url.Values{}
	if accountID != "" {
		q.Set("account_id", accountID)
	}
	return c.do(ctx, call{method: http.MethodDelete, path: path("registry-logins", registry), query: q})
}
