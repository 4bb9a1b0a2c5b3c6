package server

import (
	"context"
	"slices"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/ledger"
)

// Statement returns an account's statement for a calendar month such as
// "2026-11": a renter's per job, a provider's per node. The caller's own,
// or any account's for admins.
func (s *Server) Statement(ctx context.Context, accountID, month string) (*idlegrid.Statement, error) {
	id, err := ownAccount(ctx, accountID)
	if err != nil {
		return nil, err
	}
	from, to, err := idlegrid.ParseMonth(month)
	if err != nil {
		return nil, err
	}
	a, err := s.store.FindAccount(ctx, id)
	if idlegrid.ErrorCode(err) == idlegrid.ENOTFOUND {
		return nil, notFound("account", id)
	} else if err != nil {
		return nil, err
	}
	f := idlegrid.SettlementFilter{From: from, To: to}
	switch a.Role {
	case idlegrid.RoleRenter:
		f.RenterID = a.ID
	case idlegrid.RoleProvider:
		f.ProviderID = a.ID
	default:
		return nil, idlegrid.Invalid("account_id", "admins have no statement of their own; name a renter or a provider")
	}
	settlements, err := s.store.ListSettlements(ctx, f)
	if err != nil {
		return nil, err
	}
	inference, err := s.store.InferenceTotals(ctx, f)
	if err != nil {
		return nil, err
	}
	st := ledger.NewStatement(a.ID, a.Role, from.Format("2006-01"), from, to, settlements, inference)
	penalties, err := s.statementPenalties(ctx, a, from, to)
	if err != nil {
		return nil, err
	}
	ledger.AddPenalties(st, penalties)
	return st, nil
}

// statementPenalties are the penalties of the disputes upheld in [from,
// to): those taken from provider a's bond, or paid to renter a, oldest
// first.
func (s *Server) statementPenalties(ctx context.Context, a *idlegrid.Account, from, to time.Time) ([]idlegrid.StatementPenalty, error) {
	f := idlegrid.DisputeFilter{States: []idlegrid.DisputeState{idlegrid.DisputeUpheld}, Limit: everyRow}
	if a.Role == idlegrid.RoleProvider {
		f.ProviderID = a.ID
	} else {
		f.RenterID = a.ID
	}
	ds, err := s.store.ListDisputes(ctx, f)
	if err != nil {
		return nil, err
	}
	out := []idlegrid.StatementPenalty{}
	for _, d := range ds {
		p := idlegrid.StatementPenalty{DisputeID: d.ID, Offence: d.Offence, NodeID: d.NodeID, LeaseID: d.LeaseID,
			PenaltyMicros: d.PenaltyMicros, PenaltyTo: d.PenaltyTo, RefundMicros: d.RefundMicros}
		if a.Role == idlegrid.RoleRenter {
			if d.PenaltyTo != "renter" {
				p.PenaltyMicros = 0 // the market's, not the renter's
			}
			p.RefundMicros += d.FeeRefundMicros // the provider's earnings and the market's fee, both the renter's now
		}
		if d.ResolvedAt == nil || d.ResolvedAt.Before(from) || !d.ResolvedAt.Before(to) || p.PenaltyMicros+p.RefundMicros <= 0 {
			continue
		}
		p.UpheldAt = *d.ResolvedAt
		out = append(out, p)
	}
	slices.SortStableFunc(out, func(x, y idlegrid.StatementPenalty) int { return x.UpheldAt.Compare(y.UpheldAt) })
	return out, nil
}

// ListNotices lists what the market told an account, such as leases
// stopped before its money ran out: the caller's own (f.AccountID empty),
// or any for admins; newest first, after f.Before when it is set.
func (s *Server) ListNotices(ctx context.Context, f idlegrid.NoticeFilter) ([]*idlegrid.Notice, error) {
	id, err := ownAccount(ctx, f.AccountID)
	if err != nil {
		return nil, err
	}
	if err := checkLimit(f.Limit); err != nil {
		return nil, err
	}
	return s.store.ListNotices(ctx, idlegrid.NoticeFilter{AccountID: id, Before: f.Before, Limit: f.Limit})
}
