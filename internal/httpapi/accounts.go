package httpapi

import (
	"math"
	"net/http"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/httpapi/wire"
)

// POST /v1/accounts
func (a *api) createAccount(w http.ResponseWriter, r *http.Request) error {
	if _, err := parseQuery(r); err != nil {
		return err
	}
	var req wire.CreateAccountRequest
	if err := a.readJSON(w, r, &req); err != nil {
		return err
	}
	acct, key, secret, err := a.srv.CreateAccount(r.Context(), req.Name, req.Role)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusCreated, wire.CreateAccountResponse{Account: acct, APIKey: key, Secret: secret})
}

// GET /v1/accounts?role=&after=&limit=
func (a *api) listAccounts(w http.ResponseWriter, r *http.Request) error {
	q, err := parseQuery(r, "role", "after", "limit")
	if err != nil {
		return err
	}
	f := idlegrid.AccountFilter{Role: idlegrid.Role(q.string("role")), After: q.string("after")}
	if f.Limit, err = q.limit(); err != nil {
		return err
	}
	accts, err := a.srv.ListAccounts(r.Context(), f)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, wire.Accounts{Accounts: nonNil(accts)})
}

// GET /v1/accounts/{id}
func (a *api) findAccount(w http.ResponseWriter, r *http.Request) error {
	if _, err := parseQuery(r); err != nil {
		return err
	}
	acct, err := a.srv.FindAccount(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, acct)
}

// GET /v1/me
func (a *api) me(w http.ResponseWriter, r *http.Request) error {
	if _, err := parseQuery(r); err != nil {
		return err
	}
	acct, err := a.srv.Me(r.Context())
	if err != nil {
		return err
	}
	keyID, access, err := a.srv.CallerKey(r.Context())
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, wire.Me{Account: acct, KeyID: keyID, KeyAccess: access})
}

// POST /v1/keys
func (a *api) createAPIKey(w http.ResponseWriter, r *http.Request) error {
	if _, err := parseQuery(r); err != nil {
		return err
	}
	var req wire.CreateAPIKeyRequest
	if err := a.readJSON(w, r, &req); err != nil {
		return err
	}
	key, secret, err := a.srv.CreateAPIKey(r.Context(), req.Name, req.Access)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusCreated, wire.CreateAPIKeyResponse{APIKey: key, Secret: secret})
}

// GET /v1/keys
func (a *api) listAPIKeys(w http.ResponseWriter, r *http.Request) error {
	q, err := parseQuery(r, "account_id")
	if err != nil {
		return err
	}
	keys, err := a.srv.ListAPIKeys(r.Context(), q.string("account_id"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, wire.APIKeys{APIKeys: nonNil(keys)})
}

// DELETE /v1/keys/{id}
func (a *api) revokeAPIKey(w http.ResponseWriter, r *http.Request) error {
	q, err := parseQuery(r, "account_id")
	if err != nil {
		return err
	}
	if err := a.srv.RevokeAPIKey(r.Context(), q.string("account_id"), r.PathValue("id")); err != nil {
		return err
	}
	return writeNoContent(w)
}

// maxTTLSeconds keeps a join token's lifetime inside a time.Duration.
const maxTTLSeconds = math.MaxInt64 / int64(time.Second)

// POST /v1/join-tokens
func (a *api) createJoinToken(w http.ResponseWriter, r *http.Request) error {
	if _, err := parseQuery(r); err != nil {
		return err
	}
	var req wire.CreateJoinTokenRequest
	if err := a.readJSON(w, r, &req); err != nil {
		return err
	}
	if req.TTLSeconds < 0 || req.TTLSeconds > maxTTLSeconds {
		return idlegrid.Invalid("join_token.ttl_seconds", "must be a positive number of seconds")
	}
	tok, secret, err := a.srv.CreateJoinToken(r.Context(), req.Name, req.MaxUses, time.Duration(req.TTLSeconds)*time.Second)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusCreated, wire.CreateJoinTokenResponse{JoinToken: tok, Secret: secret})
}

// GET /v1/join-tokens
func (a *api) listJoinTokens(w http.ResponseWriter, r *http.Request) error {
	if _, err := parseQuery(r); err != nil {
		return err
	}
	toks, err := a.srv.ListJoinTokens(r.Context())
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, wire.JoinTokens{JoinTokens: nonNil(toks)})
}

// DELETE /v1/join-tokens/{id}
func (a *api) revokeJoinToken(w http.ResponseWriter, r *http.Request) error {
	if _, err := parseQuery(r); err != nil {
		return err
	}
	if err := a.srv.RevokeJoinToken(r.Context(), r.PathValue("id")); err != nil {
		return err
	}
	return writeNoContent(w)
}
