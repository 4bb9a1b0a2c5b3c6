package server

import (
	"context"
	"fmt"
	"strings"

	"github.com/idlegrid/idlegrid"
)

// SetAccountLimit sets what an account may spend in a calendar month;
// limit nil lifts the limit. Admins only.
func (s *Server) SetAccountLimit(ctx context.Context, accountID string, limit *idlegrid.Micros) (*idlegrid.SpendLimitStatus, error) {
	c, err := requireManage(ctx, idlegrid.RoleAdmin)
	if err != nil {
		return nil, err
	}
	a, err := s.store.FindAccount(ctx, accountID)
	if idlegrid.ErrorCode(err) == idlegrid.ENOTFOUND {
		return nil, notFound("account", accountID)
	} else if err != nil {
		return nil, err
	} else if a.Role != idlegrid.RoleRenter {
		return nil, idlegrid.Invalid("spend_limit.account_id", "only renters spend; %s is a %s", a.ID, a.Role)
	}
	return s.setLimit(ctx, &idlegrid.SpendLimit{Scope: idlegrid.SpendAccount, AccountID: a.ID, SetBy: c.AccountID}, limit)
}

// SetKeyLimit sets what the jobs one of the caller's API keys submits may
// spend in a calendar month; limit nil lifts the limit.
func (s *Server) SetKeyLimit(ctx context.Context, keyID string, limit *idlegrid.Micros) (*idlegrid.SpendLimitStatus, error) {
	c, err := requireManage(ctx, idlegrid.RoleRenter)
	if err != nil {
		return nil, err
	}
	keys, err := s.store.ListAPIKeys(ctx, c.AccountID)
	if err != nil {
		return nil, err
	}
	for _, k := range keys {
		if k.ID == keyID && k.Access == idlegrid.AccessRead && limit != nil {
			return nil, idlegrid.Invalid("spend_limit.key_id", "key %s has access read: it spends nothing, so a limit on it would limit nothing; "+
				"set one on a key of access use or all", k.ID)
		}
		if k.ID == keyID {
			return s.setLimit(ctx, &idlegrid.SpendLimit{Scope: idlegrid.SpendKey, AccountID: c.AccountID, KeyID: k.ID, SetBy: c.AccountID}, limit)
		}
	}
	return nil, notFound("API key", keyID)
}

func (s *Server) setLimit(ctx context.Context, l *idlegrid.SpendLimit, limit *idlegrid.Micros) (*idlegrid.SpendLimitStatus, error) {
	if limit == nil {
		if err := s.store.RemoveSpendLimit(ctx, l.Scope, l.AccountID, l.KeyID); err != nil {
			return nil, err
		}
		s.Kick()
		return nil, nil
	}
	l.LimitMicros, l.UpdatedAt = *limit, s.Now()
	if err := s.store.SetSpendLimit(ctx, l); err != nil {
		return nil, err
	}
	st, err := s.limitStatus(ctx, l)
	s.Kick() // a raised limit may let queued jobs place
	return st, err
}

// ListSpendLimits lists an account's limit and its keys' limits with what
// each used this month: the caller's own, or any account's for admins.
func (s *Server) ListSpendLimits(ctx context.Context, accountID string) ([]*idlegrid.SpendLimitStatus, error) {
	id, err := ownAccount(ctx, accountID)
	if err != nil {
		return nil, err
	}
	limits, err := s.store.ListSpendLimits(ctx, id)
	if err != nil {
		return nil, err
	}
	out := make([]*idlegrid.SpendLimitStatus, 0, len(limits))
	for _, l := range limits {
		st, err := s.limitStatus(ctx, l)
		if err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	return out, nil
}

// MonthSpend returns what an account spent this calendar month: the
// caller's own, or any account's for admins.
func (s *Server) MonthSpend(ctx context.Context, accountID string) (*idlegrid.Spend, error) {
	id, err := ownAccount(ctx, accountID)
	if err != nil {
		return nil, err
	}
	from, to := idlegrid.MonthOf(s.Now())
	return s.store.MonthSpend(ctx, idlegrid.SpendFilter{AccountID: id, From: from, To: to})
}

func (s *Server) limitStatus(ctx context.Context, l *idlegrid.SpendLimit) (*idlegrid.SpendLimitStatus, error) {
	from, to := idlegrid.MonthOf(s.Now())
	spend, err := s.store.MonthSpend(ctx, idlegrid.SpendFilter{AccountID: l.AccountID, KeyID: l.KeyID, From: from, To: to})
	if err != nil {
		return nil, err
	}
	return &idlegrid.SpendLimitStatus{SpendLimit: *l, Month: from.Format("2006-01"), Spend: *spend}, nil
}

// waitingForMoney is the reason a job waits when the store refused its
// placement for money: the renter's balance or a spend limit.
func waitingForMoney(err error) string {
	msg := idlegrid.ErrorMessage(err)
	if strings.HasPrefix(msg, "spend limit ") {
		return fmt.Sprintf("waiting: %s; the limit resets next month, or its owner can raise it", msg)
	}
	return "waiting for funds: " + msg
}
