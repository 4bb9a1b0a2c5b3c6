package server

import (
	"context"
	"fmt"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/ledger"
)

// An API key or a join token created with an idempotency key is made once:
// the same creation sent again (its answer lost on the way) finds the first
// and gives it a new secret, answered as a replay. The first secret was
// shown once and is not kept, so it cannot be answered again; it stops
// working instead, so that a caller whose answer never came is left no
// working secret it never saw. A creation that asks for something else
// under the key, or finds the first revoked (or a token no longer usable),
// is ECONFLICT naming idempotency_key.

// CreateAPIKeyOnce is CreateAPIKey with an idempotency key ("" for none);
// replayed says the key is the one the key made before, with a new secret.
func (s *Server) CreateAPIKeyOnce(ctx context.Context, name string, access idlegrid.Access, idem string) (
	*idlegrid.APIKey, string, bool, error) {
	c, err := requireManage(ctx)
	if err != nil {
		return nil, "", false, err
	}
	if access == "" {
		access = idlegrid.AccessAll
	}
	k, secret, err := s.apiKey(c.AccountID, name, access)
	if err == nil {
		k.IdempotencyKey, err = idem, checkOptionalKey(idem)
	}
	if err != nil {
		return nil, "", false, err
	}
	first, err := createOnce(ctx, k, idem, s.store.CreateAPIKey, func() (*idlegrid.APIKey, error) {
		return s.store.FindAPIKeyByIdempotencyKey(ctx, c.AccountID, idem)
	})
	if err != nil {
		return nil, "", false, err
	} else if first == nil {
		return k, secret, false, nil
	} else if first.Name != k.Name || first.Access != k.Access {
		return nil, "", false, idempotencyConflict(idem, fmt.Sprintf("API key %s named %q with access %s, not one named %q with access %s",
			first.ID, first.Name, first.Access, k.Name, k.Access))
	}
	if err := resecret(idem, "API key "+first.ID, s.store.ResecretAPIKey(ctx, first.AccountID, first.ID, k.Prefix, k.Hash)); err != nil {
		return nil, "", false, err
	}
	first.Prefix, first.Hash = k.Prefix, k.Hash
	s.log.Info("API key creation sent again: gave the key a new secret", "account", first.AccountID, "key", first.ID)
	return first, secret, true, nil
}

// CreateJoinTokenOnce is CreateJoinToken with an idempotency key ("" for
// none), as CreateAPIKeyOnce; the first token must still be usable.
func (s *Server) CreateJoinTokenOnce(ctx context.Context, name string, maxUses int, ttl time.Duration, idem string) (
	*idlegrid.JoinToken, string, bool, error) {
	c, err := requireManage(ctx, idlegrid.RoleProvider)
	if err != nil {
		return nil, "", false, err
	}
	t, secret, err := s.joinToken(c.AccountID, name, maxUses, ttl)
	if err == nil {
		t.IdempotencyKey, err = idem, checkOptionalKey(idem)
	}
	if err != nil {
		return nil, "", false, err
	}
	first, err := createOnce(ctx, t, idem, s.store.CreateJoinToken, func() (*idlegrid.JoinToken, error) {
		return s.store.FindJoinTokenByIdempotencyKey(ctx, c.AccountID, idem)
	})
	if err != nil {
		return nil, "", false, err
	} else if first == nil {
		return t, secret, false, nil
	} else if err := sameJoinToken(idem, first, t, s.Now()); err != nil {
		return nil, "", false, err
	}
	if err := resecret(idem, "join token "+first.ID, s.store.ResecretJoinToken(ctx, first.ProviderID, first.ID, t.Prefix, t.Hash)); err != nil {
		return nil, "", false, err
	}
	first.Prefix, first.Hash = t.Prefix, t.Hash
	s.log.Info("join token creation sent again: gave the token a new secret", "provider", first.ProviderID, "token", first.ID)
	return first, secret, true, nil
}

// sameJoinToken is nil when first, made under idempotency key idem, is
// what t asks for again, and still usable at now.
func sameJoinToken(idem string, first, t *idlegrid.JoinToken, now time.Time) error {
	firstTTL, ttl := first.ExpiresAt.Sub(first.CreatedAt), t.ExpiresAt.Sub(t.CreatedAt)
	if first.Name != t.Name || first.MaxUses != t.MaxUses || firstTTL != ttl {
		return idempotencyConflict(idem, fmt.Sprintf("join token %s named %q for %d uses over %s, not one named %q for %d uses over %s",
			first.ID, first.Name, first.MaxUses, firstTTL, t.Name, t.MaxUses, ttl))
	} else if err := first.Usable(now); err != nil {
		return idempotencyConflict(idem, fmt.Sprintf("join token %s, which can no longer be used (%s)", first.ID, idlegrid.ErrorMessage(err)))
	}
	return nil
}

// createOnce stores v with create when idempotency key idem (if any) made
// nothing yet, and answers nil; otherwise it answers what idem made, as
// find reads it, also when another creation under idem was stored first
// while this one was on its way.
func createOnce[T any](ctx context.Context, v *T, idem string, create func(context.Context, *T) error, find func() (*T, error)) (*T, error) {
	if idem == "" {
		return nil, create(ctx, v)
	}
	first, err := find()
	if idlegrid.ErrorCode(err) != idlegrid.ENOTFOUND {
		return first, err
	}
	if err := create(ctx, v); !conflictOn(err, "idempotency_key") {
		return nil, err
	}
	return find()
}

// checkOptionalKey checks an idempotency key given ("": none).
func checkOptionalKey(idem string) error {
	if idem == "" {
		return nil
	}
	return ledger.CheckIdempotencyKey("idempotency_key", idem)
}

// resecret is err, the giving of a new secret to what (made under
// idempotency key idem), said as idem's conflict when what was revoked.
func resecret(idem, what string, err error) error {
	if idlegrid.ErrorCode(err) == idlegrid.ECONFLICT {
		return idempotencyConflict(idem, what+", since revoked")
	}
	return err
}

// idempotencyConflict says that idempotency key idem made made, and that a
// new key is needed for something else.
func idempotencyConflict(idem, made string) error {
	return &idlegrid.Error{Code: idlegrid.ECONFLICT, Field: "idempotency_key", Message: fmt.Sprintf(
		"idempotency key %q made %s; use a new key for a new one", idem, made)}
}
