package httpapi

import (
	"math"
	"net/http"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/httpapi/wire"
	"github.com/idlegrid/idlegrid/internal/ledger"
)

// POST /v1/accounts, with an optional Idempotency-Key header: sent again
// with the same key, name and role, it answers 200 with the account the
// first made, a new key for it, and Idempotent-Replayed: true.
func (a *api) createAccount(w http.ResponseWriter, r *http.Request) error {
	if _, err := parseQuery(r); err != nil {
		return err
	}
	key, err := optionalIdempotencyKey(r)
	if err != nil {
		return err
	}
	var req wire.CreateAccountRequest
	if err := a.readJSON(w, r, &req); err != nil {
		return err
	}
	acct, apiKey, secret, replayed, err := a.srv.CreateAccountOnce(r.Context(), req.Name, req.Role, key)
	if err != nil {
		return err
	}
	return writeCreated(w, replayed, wire.CreateAccountResponse{Account: acct, APIKey: apiKey, Secret: secret})
}

// optionalIdempotencyKey returns the request's Idempotency-Key header, ""
// when it has none; one given must be a key.
func optionalIdempotencyKey(r *http.Request) (string, error) {
	key := r.Header.Get(wire.HeaderIdempotencyKey)
	if _, given := r.Header[wire.HeaderIdempotencyKey]; given {
		if err := ledger.CheckIdempotencyKey(wire.HeaderIdempotencyKey, key); err != nil {
			return "", err
		}
	}
	return key, nil
}

// writeCreated answers a creation: 201 with v, or, for one sent again
// under its idempotency key (replayed), 200 with Idempotent-Replayed.
func writeCreated(w http.ResponseWriter, replayed bool, v any) error {
	if replayed {
		w.Header().Set(wire.HeaderIdempotentReplayed, "true")
		return writeJSON(w, http.StatusOK, v)
	}
	return writeJSON(w, http.StatusCreated, v)
}

// writeApplied answers a move of money: 200 with v, and for one sent
// again under its idempotency key (replayed), Idempotent-Replayed.
func writeApplied(w http.ResponseWriter, replayed bool, v any) error {
	if replayed {
		w.Header().Set(wire.HeaderIdempotentReplayed, "true")
	}
	return writeJSON(w, http.StatusOK, v)
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

// POST /v1/keys, with an optional Idempotency-Key header: sent again with
// the same key, name and access, it answers 200 with the key the first
// made, a new secret for it (the first stops working), and
// Idempotent-Replayed: true.
func (a *api) createAPIKey(w http.ResponseWriter, r *http.Request) error {
	if _, err := parseQuery(r); err != nil {
		return err
	}
	idem, err := optionalIdempotencyKey(r)
	if err != nil {
		return err
	}
	var req wire.CreateAPIKeyRequest
	if err := a.readJSON(w, r, &req); err != nil {
		return err
	}
	key, secret, replayed, err := a.srv.CreateAPIKeyOnce(r.Context(), req.Name, req.Access, idem)
	if err != nil {
		return err
	}
	return writeCreated(w, replayed, wire.CreateAPIKeyResponse{APIKey: key, Secret: secret})
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

// POST /v1/join-tokens, with an optional Idempotency-Key header, as POST
// /v1/keys: the token the first made, with a new secret.
func (a *api) createJoinToken(w http.ResponseWriter, r *http.Request) error {
	if _, err := parseQuery(r); err != nil {
		return err
	}
	idem, err := optionalIdempotencyKey(r)
	if err != nil {
		return err
	}
	var req wire.CreateJoinTokenRequest
	if err := a.readJSON(w, r, &req); err != nil {
		return err
	}
	if req.TTLSeconds < 0 || req.TTLSeconds > maxTTLSeconds {
		return idlegrid.Invalid("join_token.ttl_seconds", "must be between 60 seconds and 30 days (0: a day), got %d", req.TTLSeconds)
	}
	tok, secret, replayed, err := a.srv.CreateJoinTokenOnce(r.Context(), req.Name, req.MaxUses, time.Duration(req.TTLSeconds)*time.Second, idem)
	if err != nil {
		return err
	}
	return writeCreated(w, replayed, wire.CreateJoinTokenResponse{JoinToken: tok, Secret: secret})
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
