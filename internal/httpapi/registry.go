package httpapi

import (
	"net/http"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/httpapi/wire"
)

// GET /v1/registry-logins?account_id=: the caller's logins, or for an
// admin another account's; never their secrets.
func (a *api) listRegistryLogins(w http.ResponseWriter, r *http.Request) error {
	q, err := parseQuery(r, "account_id")
	if err != nil {
		return err
	}
	logins, err := a.srv.ListRegistryLogins(r.Context(), q.string("account_id"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, wire.RegistryLogins{Logins: nonNil(logins)})
}

// PUT /v1/registry-logins/{registry}: sets the caller's login to the
// registry, replacing the one it had.
func (a *api) putRegistryLogin(w http.ResponseWriter, r *http.Request) error {
	if _, err := parseQuery(r); err != nil {
		return err
	}
	var req wire.RegistryLoginRequest
	if err := a.readJSON(w, r, &req); err != nil {
		return err
	}
	l, err := a.srv.PutRegistryLogin(r.Context(), idlegrid.RegistryLogin{
		Registry: r.PathValue("registry"), Username: req.Username, Secret: req.Password})
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, l)
}

// DELETE /v1/registry-logins/{registry}?account_id=: the caller's login,
// or for an admin another account's.
func (a *api) removeRegistryLogin(w http.ResponseWriter, r *http.Request) error {
	q, err := parseQuery(r, "account_id")
	if err != nil {
		return err
	}
	if err := a.srv.RemoveRegistryLogin(r.Context(), q.string("account_id"), r.PathValue("registry")); err != nil {
		return err
	}
	return writeNoContent(w)
}
