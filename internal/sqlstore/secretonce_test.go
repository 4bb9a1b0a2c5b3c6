package sqlstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/sqlstore"
)

// testSecretIdempotencyKeys: an API key or a join token created with an
// idempotency key is found by it, in its account's own space of keys (a
// second of the key is ECONFLICT naming idempotency_key; another account
// may use it). A new secret replaces the old one, which stops working, for
// the owner only and while not revoked.
func testSecretIdempotencyKeys(t *testing.T, db *sqlstore.DB) {
	ctx := context.Background()
	t.Run("APIKeys", func(t *testing.T) {
		a, other := mustAccount(t, db, idlegrid.RoleRenter), mustAccount(t, db, idlegrid.RoleRenter)
		newKey := func(acct, idem string) *idlegrid.APIKey {
			return &idlegrid.APIKey{ID: id("key"), AccountID: acct, Name: "ci", Prefix: "igk_a", Access: idlegrid.AccessUse,
				Hash: id("hash"), CreatedAt: t0, IdempotencyKey: idem}
		}
		k := newKey(a.ID, "ci-key-1")
		mustOK(t, db.CreateAPIKey(ctx, k))
		wantConflictOn(t, db.CreateAPIKey(ctx, newKey(a.ID, "ci-key-1")), "idempotency_key", `"ci-key-1"`)
		theirs := newKey(other.ID, "ci-key-1")
		mustOK(t, db.CreateAPIKey(ctx, theirs))
		mustOK(t, db.CreateAPIKey(ctx, newKey(a.ID, "")))
		mustOK(t, db.CreateAPIKey(ctx, newKey(a.ID, ""))) // keys without one never conflict

		for acct, want := range map[string]*idlegrid.APIKey{a.ID: k, other.ID: theirs} {
			got, err := db.FindAPIKeyByIdempotencyKey(ctx, acct, "ci-key-1")
			mustOK(t, err)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("the key of %s by its idempotency key (-want +got):\n%s", acct, diff)
			}
		}
		_, err := db.FindAPIKeyByIdempotencyKey(ctx, a.ID, "ci-key-2")
		wantCode(t, err, idlegrid.ENOTFOUND)

		old := k.Hash
		wantCode(t, db.ResecretAPIKey(ctx, other.ID, k.ID, "igk_b", id("hash")), idlegrid.ENOTFOUND)
		mustOK(t, db.ResecretAPIKey(ctx, a.ID, k.ID, "igk_b", "hash-new"))
		_, _, err = db.FindAPIKey(ctx, old)
		wantCode(t, err, idlegrid.ENOTFOUND)
		got, _, err := db.FindAPIKey(ctx, "hash-new")
		mustOK(t, err)
		k.Prefix, k.Hash = "igk_b", "hash-new"
		if diff := cmp.Diff(k, got); diff != "" {
			t.Errorf("the key by its new secret (-want +got):\n%s", diff)
		}
		mustOK(t, db.RevokeAPIKey(ctx, a.ID, k.ID, at(time.Hour)))
		wantCode(t, db.ResecretAPIKey(ctx, a.ID, k.ID, "igk_c", id("hash")), idlegrid.ECONFLICT)
		wantCode(t, db.ResecretAPIKey(ctx, a.ID, k.ID, "igk_c", ""), idlegrid.EINVALID)
	})
	t.Run("JoinTokens", func(t *testing.T) {
		p, other := mustAccount(t, db, idlegrid.RoleProvider), mustAccount(t, db, idlegrid.RoleProvider)
		newToken := func(provider, idem string) *idlegrid.JoinToken {
			return &idlegrid.JoinToken{ID: id("jt"), ProviderID: provider, Name: "fleet", Prefix: "igj_a", Hash: id("hash"),
				MaxUses: 3, ExpiresAt: at(24 * time.Hour), CreatedAt: t0, IdempotencyKey: idem}
		}
		tok := newToken(p.ID, "rack-7")
		mustOK(t, db.CreateJoinToken(ctx, tok))
		wantConflictOn(t, db.CreateJoinToken(ctx, newToken(p.ID, "rack-7")), "idempotency_key", `"rack-7"`)
		mustOK(t, db.CreateJoinToken(ctx, newToken(other.ID, "rack-7")))

		got, err := db.FindJoinTokenByIdempotencyKey(ctx, p.ID, "rack-7")
		mustOK(t, err)
		if diff := cmp.Diff(tok, got); diff != "" {
			t.Errorf("the token by its idempotency key (-want +got):\n%s", diff)
		}
		_, err = db.FindJoinTokenByIdempotencyKey(ctx, p.ID, "rack-8")
		wantCode(t, err, idlegrid.ENOTFOUND)

		old := tok.Hash
		wantCode(t, db.ResecretJoinToken(ctx, other.ID, tok.ID, "igj_b", id("hash")), idlegrid.ENOTFOUND)
		mustOK(t, db.ResecretJoinToken(ctx, p.ID, tok.ID, "igj_b", "hash-new"))
		_, err = db.FindJoinToken(ctx, old)
		wantCode(t, err, idlegrid.ENOTFOUND)
		tok.Prefix, tok.Hash = "igj_b", "hash-new"
		if got, err := db.FindJoinToken(ctx, "hash-new"); err != nil || !cmp.Equal(tok, got) {
			t.Errorf("the token by its new secret: %+v (%v), want %+v", got, err, tok)
		}
		mustOK(t, db.RevokeJoinToken(ctx, p.ID, tok.ID, at(time.Hour)))
		wantCode(t, db.ResecretJoinToken(ctx, p.ID, tok.ID, "igj_c", id("hash")), idlegrid.ECONFLICT)
	})
}
