package server

import (
	"context"
	"fmt"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/ledger"
)

// TopUp credits a renter's available balance. Admins only. A repeated
// idempotency key for the same account does not credit twice.
func (s *Server) TopUp(ctx context.Context, accountID string, amount idlegrid.Micros, idempotencyKey string) (*idlegrid.Balance, error) {
	b, _, err := s.TopUpOnce(ctx, accountID, amount, idempotencyKey)
	return b, err
}

// TopUpOnce is TopUp, saying too whether the key had credited the account
// before (replayed): this one moved nothing.
func (s *Server) TopUpOnce(ctx context.Context, accountID string, amount idlegrid.Micros, idempotencyKey string) (b *idlegrid.Balance, replayed bool, err error) {
	if _, err := requireManage(ctx, idlegrid.RoleAdmin); err != nil {
		return nil, false, err
	}
	if idempotencyKey == "" || len(idempotencyKey) > 200 {
		return nil, false, idlegrid.Invalid("idempotency_key", "required, 1-200 characters; a retry with the same key is not applied twice")
	}
	a, err := s.store.FindAccount(ctx, accountID)
	if idlegrid.ErrorCode(err) == idlegrid.ENOTFOUND {
		return nil, false, notFound("account", accountID)
	} else if err != nil {
		return nil, false, err
	} else if a.Role != idlegrid.RoleRenter {
		return nil, false, idlegrid.Invalid("topup.account_id", "only renter accounts hold a spendable balance; %s is a %s", a.ID, a.Role)
	}
	t, err := ledger.TopUp(a.ID, amount, idempotencyKey, s.Now())
	if err != nil {
		return nil, false, err
	}
	t.ID = idlegrid.NewID("tx")
	out, err := s.store.PostTransfer(ctx, t)
	if err != nil {
		return nil, false, callersKey(err, idempotencyKey, "a top-up of account "+a.ID+" of another amount")
	}
	s.Kick() // jobs waiting for funds may now place
	b, err = s.store.Balance(ctx, a.ID)
	return b, out.ID != t.ID, err
}

// callersKey says, in the caller's terms, that the caller's idempotency
// key was used before for another request (used says what), when err is
// the store's conflict on a transfer's key. The store names the ledger's
// key, which scopes the caller's to an account ("topup:ACCOUNT:KEY"),
// while the caller gave only KEY. Any other err is returned as it was.
func callersKey(err error, key, used string) error {
	if !conflictOn(err, "idempotency_key") {
		return err
	}
	return &idlegrid.Error{Code: idlegrid.ECONFLICT, Field: "idempotency_key", Message: fmt.Sprintf(
		"idempotency key %q was used before for %s; retry with what was sent then, or use a new key", key, used)}
}

// ownAccount resolves "" to the caller's account and refuses other people's
// accounts to everyone but admins.
func ownAccount(ctx context.Context, accountID string) (string, error) {
	c, err := account(ctx)
	if err != nil {
		return "", err
	}
	if accountID == "" || accountID == c.AccountID {
		return c.AccountID, nil
	} else if !c.IsAdmin() {
		return "", notFound("account", accountID)
	}
	return accountID, nil
}

// ownProvider is the provider a listing of c's may narrow to: a
// provider's own account whatever it names (another's is not found, as
// ownAccount says), or the one a renter or an admin named, if any.
func ownProvider(c *idlegrid.Caller, providerID string) (string, error) {
	if c.Role != idlegrid.RoleProvider {
		return providerID, nil
	} else if providerID != "" && providerID != c.AccountID {
		return "", notFound("account", providerID)
	}
	return c.AccountID, nil
}

// Balance returns an account's money: the caller's own, or any for admins.
func (s *Server) Balance(ctx context.Context, accountID string) (*idlegrid.Balance, error) {
	id, err := ownAccount(ctx, accountID)
	if err != nil {
		return nil, err
	}
	if _, err := s.store.FindAccount(ctx, id); idlegrid.ErrorCode(err) == idlegrid.ENOTFOUND {
		return nil, notFound("account", id)
	} else if err != nil {
		return nil, err
	}
	return s.store.Balance(ctx, id)
}

// ListTransfers lists the transfers that touch an account (f.AccountID:
// the caller's own when empty, any for admins), newest first, f.Limit of
// them from after f.Before. The rest of f is not the caller's to set.
func (s *Server) ListTransfers(ctx context.Context, f idlegrid.TransferFilter) ([]*idlegrid.Transfer, error) {
	id, err := ownAccount(ctx, f.AccountID)
	if err != nil {
		return nil, err
	}
	if err := checkLimit(f.Limit); err != nil {
		return nil, err
	}
	f = idlegrid.TransferFilter{AccountID: id, Before: f.Before, Limit: f.Limit}
	if f.Before != "" {
		if cursor, err := s.store.ListTransfers(ctx, idlegrid.TransferFilter{AccountID: id, ID: f.Before, Limit: 1}); err != nil {
			return nil, err
		} else if len(cursor) == 0 {
			return nil, idlegrid.Invalid("before", "no transfer %s on account %s to list from; give the last transfer ID of the page before", f.Before, id)
		}
	}
	ts, err := s.store.ListTransfers(ctx, f)
	if err != nil || idlegrid.CallerFromContext(ctx).IsAdmin() {
		return ts, err
	}
	for i, t := range ts {
		ts[i] = t.SeenBy(id)
	}
	return ts, nil
}

// Summary counts the market at a glance. Admins only.
func (s *Server) Summary(ctx context.Context) (*idlegrid.Summary, error) {
	if _, err := requireRole(ctx, idlegrid.RoleAdmin); err != nil {
		return nil, err
	}
	return s.store.Summary(ctx)
}
