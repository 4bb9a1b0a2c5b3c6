package server

import (
	"context"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/ledger"
)

// DefaultPayoutHold is how long earnings stay pending unless Config says.
const DefaultPayoutHold = 72 * time.Hour

// maturePage is how many settlements one reaper pass matures at a time.
const maturePage = 500

// matureEarnings makes payable the provider earnings of every settlement
// older than the payout hold: one mature transfer per settlement, whose
// idempotency key makes a second pass, or a pass by another coordinator,
// a no-op.
func (s *Server) matureEarnings(ctx context.Context) error {
	now := s.Now()
	before := now.Add(-max(s.cfg.PayoutHold, 0))
	for {
		settlements, err := s.store.ListMaturing(ctx, before, maturePage)
		if err != nil {
			return err
		}
		for _, st := range settlements {
			if err := s.mature(ctx, st, now); err != nil {
				return err
			}
		}
		if len(settlements) < maturePage {
			return nil
		}
	}
}

// mature makes payable what is left of one settlement's earnings after
// the refunds of upheld disputes about its lease.
func (s *Server) mature(ctx context.Context, st *idlegrid.Transfer, now time.Time) error {
	refunded := idlegrid.Micros(0)
	if st.LeaseID != "" {
		e, err := s.store.LeaseEarnings(ctx, st.LeaseID)
		if err != nil {
			return err
		}
		refunded = e.Refunded
	}
	m := ledger.Mature(st, refunded, now)
	if m == nil {
		return nil
	}
	m.ID = idlegrid.NewID("tx")
	_, err := s.store.PostTransfer(ctx, m)
	return err
}

// RequestPayout asks for amount of the calling provider's payable earnings
// to be paid out; the money moves to in flight until an operator settles
// or rejects the payout. A retry with the same idempotency key returns the
// first request's payout and moves nothing.
func (s *Server) RequestPayout(ctx context.Context, amount idlegrid.Micros, idempotencyKey string) (*idlegrid.Payout, error) {
	c, err := requireManage(ctx, idlegrid.RoleProvider)
	if err != nil {
		return nil, err
	}
	now := s.Now()
	p := &idlegrid.Payout{ID: idlegrid.NewID("payout"), ProviderID: c.AccountID, AmountMicros: amount,
		State: idlegrid.PayoutRequested, IdempotencyKey: idempotencyKey, CreatedAt: now}
	t, err := ledger.RequestPayout(p, now)
	if err != nil {
		return nil, err
	}
	t.ID = idlegrid.NewID("tx")
	out, err := s.store.CreatePayout(ctx, p, t)
	if err != nil {
		return nil, err
	}
	s.log.Info("payout requested", "payout", out.ID, "provider", out.ProviderID, "amount", out.AmountMicros.String())
	return out, nil
}

// SettlePayout records that an operator sent a requested payout's money:
// it leaves the market. reference is the payment's reference, e.g. a
// bank transfer ID. Admins only.
func (s *Server) SettlePayout(ctx context.Context, id, reference, idempotencyKey string) (*idlegrid.Payout, error) {
	return s.resolvePayout(ctx, id, idlegrid.PayoutSettled, reference, idempotencyKey)
}

// RejectPayout refuses a requested payout, for reason: its money is
// payable again. Admins only.
func (s *Server) RejectPayout(ctx context.Context, id, reason, idempotencyKey string) (*idlegrid.Payout, error) {
	if reason == "" {
		return nil, idlegrid.Invalid("payout.reason", "required: say why, for the provider")
	}
	return s.resolvePayout(ctx, id, idlegrid.PayoutRejected, reason, idempotencyKey)
}

func (s *Server) resolvePayout(ctx context.Context, id string, to idlegrid.PayoutState, reason, idempotencyKey string) (*idlegrid.Payout, error) {
	c, err := requireManage(ctx, idlegrid.RoleAdmin)
	if err != nil {
		return nil, err
	}
	if err := ledger.CheckIdempotencyKey("idempotency_key", idempotencyKey); err != nil {
		return nil, err
	} else if len(reason) > 500 {
		return nil, idlegrid.Invalid("payout.reason", "at most 500 characters")
	}
	p, err := s.store.FindPayout(ctx, id)
	if idlegrid.ErrorCode(err) == idlegrid.ENOTFOUND {
		return nil, notFound("payout", id)
	} else if err != nil {
		return nil, err
	}
	if p.State != idlegrid.PayoutRequested {
		if p.State == to && p.ResolutionKey == idempotencyKey {
			return p, nil // a retry
		}
		return nil, idlegrid.Errorf(idlegrid.ECONFLICT, "payout %s is already %s", p.ID, p.State)
	}
	now := s.Now()
	t, err := ledger.ResolvePayout(p, to, now)
	if err != nil {
		return nil, err
	}
	t.ID = idlegrid.NewID("tx")
	out, err := s.store.ResolvePayout(ctx, &idlegrid.PayoutResolution{PayoutID: p.ID, To: to, Reason: reason,
		IdempotencyKey: idempotencyKey, By: c.AccountID, At: now}, t)
	if err != nil {
		return nil, err
	}
	s.log.Info("payout "+string(to), "payout", out.ID, "provider", out.ProviderID, "amount", out.AmountMicros.String(), "by", c.AccountID)
	return out, nil
}

// ListPayouts lists payouts: a provider's own, or anyone's for admins
// (f.ProviderID narrows it). Renters have none.
func (s *Server) ListPayouts(ctx context.Context, f idlegrid.PayoutFilter) ([]*idlegrid.Payout, error) {
	c, err := requireRole(ctx, idlegrid.RoleProvider, idlegrid.RoleAdmin)
	if err != nil {
		return nil, err
	}
	if f.ProviderID, err = ownProvider(c, f.ProviderID); err != nil {
		return nil, err
	}
	if err := checkLimit(f.Limit); err != nil {
		return nil, err
	}
	for _, st := range f.States {
		if !st.Valid() {
			return nil, idlegrid.Invalid("state", "must be requested, settled or rejected, got %q", st)
		}
	}
	if err := s.checkPayoutCursor(ctx, f); err != nil {
		return nil, err
	}
	return s.store.ListPayouts(ctx, f)
}

// checkPayoutCursor refuses a page's cursor that does not go with the
// list's order, or is not a payout the filter's provider (any, for an
// admin's list of all) requested.
func (s *Server) checkPayoutCursor(ctx context.Context, f idlegrid.PayoutFilter) error {
	field, id := "before", f.Before
	switch {
	case f.Before != "" && f.OldestFirst:
		return idlegrid.Invalid("before", "pages newest first; a list oldest first goes on with after, the last payout ID of the page before")
	case f.After != "" && !f.OldestFirst:
		return idlegrid.Invalid("after", "pages oldest first; ask for the oldest first too, or page newest first with before")
	case f.After != "":
		field, id = "after", f.After
	case f.Before == "":
		return nil
	}
	p, err := s.store.FindPayout(ctx, id)
	if idlegrid.ErrorCode(err) == idlegrid.ENOTFOUND || (err == nil && f.ProviderID != "" && p.ProviderID != f.ProviderID) {
		return idlegrid.Invalid(field, "no payout %s in this list to list from; give the last payout ID of the page before", id)
	}
	return err
}
