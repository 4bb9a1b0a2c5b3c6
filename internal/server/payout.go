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
	out, _, err := s.RequestPayoutOnce(ctx, amount, idempotencyKey)
	return out, err
}

// RequestPayoutOnce is RequestPayout, saying too whether the key had
// requested it before (replayed): the payout returned is that request's.
func (s *Server) RequestPayoutOnce(ctx context.Context, amount idlegrid.Micros, idempotencyKey string) (out *idlegrid.Payout, replayed bool, err error) {
	c, err := requireManage(ctx, idlegrid.RoleProvider)
	if err != nil {
		return nil, false, err
	}
	now := s.Now()
	p := &idlegrid.Payout{ID: idlegrid.NewID("payout"), ProviderID: c.AccountID, AmountMicros: amount,
		State: idlegrid.PayoutRequested, IdempotencyKey: idempotencyKey, CreatedAt: now}
	t, err := ledger.RequestPayout(p, now)
	if err != nil {
		return nil, false, err
	}
	t.ID = idlegrid.NewID("tx")
	if out, err = s.store.CreatePayout(ctx, p, t); err != nil {
		return nil, false, err
	} else if out.ID != p.ID {
		return out, true, nil
	}
	s.log.Info("payout requested", "payout", out.ID, "provider", out.ProviderID, "amount", out.AmountMicros.String())
	return out, false, nil
}

// SettlePayout records that an operator sent a requested payout's money:
// it leaves the market. reference is the payment's reference, e.g. a
// bank transfer ID. Admins only.
func (s *Server) SettlePayout(ctx context.Context, id, reference, idempotencyKey string) (*idlegrid.Payout, error) {
	out, _, err := s.ResolvePayoutOnce(ctx, id, idlegrid.PayoutSettled, reference, idempotencyKey)
	return out, err
}

// RejectPayout refuses a requested payout, for reason: its money is
// payable again. Admins only.
func (s *Server) RejectPayout(ctx context.Context, id, reason, idempotencyKey string) (*idlegrid.Payout, error) {
	out, _, err := s.ResolvePayoutOnce(ctx, id, idlegrid.PayoutRejected, reason, idempotencyKey)
	return out, err
}

// ResolvePayoutOnce settles a requested payout (to settled, reason its
// payment's reference) or rejects it (to rejected, reason why, required),
// saying too whether the key had resolved it so before (replayed): this
// one moved nothing. Admins only.
func (s *Server) ResolvePayoutOnce(ctx context.Context, id string, to idlegrid.PayoutState, reason, idempotencyKey string) (out *idlegrid.Payout, replayed bool, err error) {
	c, err := requireManage(ctx, idlegrid.RoleAdmin)
	if err != nil {
		return nil, false, err
	}
	switch {
	case to != idlegrid.PayoutSettled && to != idlegrid.PayoutRejected:
		return nil, false, idlegrid.Invalid("payout.state", "a payout is settled or rejected, not %q", to)
	case to == idlegrid.PayoutRejected && reason == "":
		return nil, false, idlegrid.Invalid("payout.reason", "required: say why, for the provider")
	case len(reason) > 500:
		return nil, false, idlegrid.Invalid("payout.reason", "at most 500 characters")
	}
	if err := ledger.CheckIdempotencyKey("idempotency_key", idempotencyKey); err != nil {
		return nil, false, err
	}
	p, err := s.store.FindPayout(ctx, id)
	if idlegrid.ErrorCode(err) == idlegrid.ENOTFOUND {
		return nil, false, notFound("payout", id)
	} else if err != nil {
		return nil, false, err
	}
	if p.State != idlegrid.PayoutRequested {
		if p.State == to && p.ResolutionKey == idempotencyKey {
			return p, true, nil // a retry
		}
		return nil, false, idlegrid.Errorf(idlegrid.ECONFLICT, "payout %s is already %s", p.ID, p.State)
	}
	now := s.Now()
	t, err := ledger.ResolvePayout(p, to, now)
	if err != nil {
		return nil, false, err
	}
	t.ID = idlegrid.NewID("tx")
	out, err = s.store.ResolvePayout(ctx, &idlegrid.PayoutResolution{PayoutID: p.ID, To: to, Reason: reason,
		IdempotencyKey: idempotencyKey, By: c.AccountID, At: now}, t)
	if err != nil {
		return nil, false, err
	}
	s.log.Info("payout "+string(to), "payout", out.ID, "provider", out.ProviderID, "amount", out.AmountMicros.String(), "by", c.AccountID)
	return out, false, nil
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
