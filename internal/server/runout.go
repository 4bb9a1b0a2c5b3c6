package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/idlegrid/idlegrid"
)

// Before a renter's money could run out, its leases are stopped, bronze ones
// with their notice, and the renter is told. Each reaper pass asks, per
// renter and per spend limit, whether what is left would still pay for the
// renter's live leases to the end of their notice plus RunoutMargin:
//
//	need  = Σ over live leases: locked price × GPUs × (seconds run + min(notice + margin, seconds left of the limit))
//	money = available + held                         (the renter's balance)
//	      = limit − charged in this calendar month   (a spend limit of the account or of a key)
//
// When need > money, every live lease in that scope is stopped: a bronze
// lease gets notice (it ends preempted and its job waits, queued, with the
// reason), a silver or gold lease, which has no notice, is asked to stop at
// once (it ends cancelled), and the renter gets a notice it can list (GET
// /v1/notices). Every lease pays for what ran, the notice included.
//
// Holds today cover each lease's whole time limit, so a renter's balance
// cannot fall short of need: the balance check is the guard for holds that
// cover less than the limit (escrow topped up per interval) and for money
// taken out of escrow by a future adjustment. A spend limit lowered below
// what is running does trip it today.

// checkRunout runs the check for every renter with live leases. A lease's
// need never exceeds what it would cost to its time limit, so a renter
// whose money covers what its live leases would cost to their limits, and
// each of whose spend limits covers that beside what the month already
// charged, is safe without reading its leases: one query gives every
// renter's sums (Store.RenterStakes). A renter whose holds cover its
// leases' limits, as today's do, always is, unless a limit was lowered;
// only the others' leases are read.
func (s *Server) checkRunout(ctx context.Context) error {
	now := s.Now()
	stakes, err := s.store.RenterStakes(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, st := range stakes {
		if err := s.checkStake(ctx, st, now); err != nil && ctx.Err() == nil {
			errs = append(errs, fmt.Errorf("renter %s: %w", st.RenterID, err))
		}
	}
	return errors.Join(errs...)
}

// checkStake runs the check for a renter when its money or one of its
// spend limits may not cover what its live leases would cost at most.
func (s *Server) checkStake(ctx context.Context, st *idlegrid.RenterStake, now time.Time) error {
	covered, err := s.stakeCovered(ctx, st, now)
	if err != nil || covered {
		return err
	}
	leases, err := s.store.ListLeases(ctx, idlegrid.LeaseFilter{RenterID: st.RenterID, States: liveLeaseStates, Limit: everyRow})
	if err != nil {
		return err
	}
	return s.checkRenterRunout(ctx, st.RenterID, leases, now)
}

// stakeCovered reports whether the renter's funds cover st.AtMost, and
// each of its spend limits st.AtMost beside what its scope was charged
// this month. For a key's limit that counts the leases of the renter's
// other keys too, which errs towards reading the leases.
func (s *Server) stakeCovered(ctx context.Context, st *idlegrid.RenterStake, now time.Time) (bool, error) {
	if st.AtMost > st.Funds {
		return false, nil
	}
	if !st.Limited {
		return true, nil
	}
	limits, err := s.store.ListSpendLimits(ctx, st.RenterID)
	if err != nil {
		return false, err
	}
	from, to := idlegrid.MonthOf(now)
	for _, lim := range limits {
		spend, err := s.store.MonthSpend(ctx, idlegrid.SpendFilter{AccountID: st.RenterID, KeyID: lim.KeyID, From: from, To: to})
		if err != nil || spend.ChargedMicros+st.AtMost > lim.LimitMicros {
			return false, err
		}
	}
	return true, nil
}

func (s *Server) checkRenterRunout(ctx context.Context, renterID string, leases []*idlegrid.Lease, now time.Time) error {
	b, err := s.store.Balance(ctx, renterID)
	if err != nil {
		return err
	}
	if need := s.runoutNeed(leases, now); need > b.Available+b.Held {
		why := fmt.Sprintf("balance running out: %s available and %s held would not cover the %s your live leases will have cost by the end of their notice",
			b.Available, b.Held, need)
		return s.stopForMoney(ctx, leases, idlegrid.NoticeRunout, why)
	}
	limits, err := s.store.ListSpendLimits(ctx, renterID)
	if err != nil || len(limits) == 0 {
		return err
	}
	from, to := idlegrid.MonthOf(now)
	keys := leaseKeys{}
	for _, lim := range limits {
		scoped, err := keys.scope(ctx, s.store, leases, lim)
		if err != nil {
			return err
		} else if len(scoped) == 0 {
			continue
		}
		spend, err := s.store.MonthSpend(ctx, idlegrid.SpendFilter{AccountID: renterID, KeyID: lim.KeyID, From: from, To: to})
		if err != nil {
			return err
		}
		if need := s.runoutNeed(scoped, now); spend.ChargedMicros+need > lim.LimitMicros {
			// Reached once what was charged and what the live leases have
			// run come to it; before, they are stopped because they would
			// exceed it within their notice.
			state := "would be exceeded"
			if spend.ChargedMicros+ranCost(scoped, now) >= lim.LimitMicros {
				state = "reached"
			}
			why := fmt.Sprintf("spend limit of %s %s: %s a month, %s charged in %s, and live leases will have cost %s more by the end of their notice",
				limitName(lim), state, lim.LimitMicros, spend.ChargedMicros, from.Format("2006-01"), need)
			if err := s.stopForMoney(ctx, scoped, idlegrid.NoticeSpendLimit, why); err != nil {
				return err
			}
		}
	}
	return nil
}

// runoutNeed is what leases will have cost by the end of their notice plus
// the margin, at their locked prices, never past their time limits.
func (s *Server) runoutNeed(leases []*idlegrid.Lease, now time.Time) idlegrid.Micros {
	var need idlegrid.Micros
	for _, l := range leases {
		ran := ranSeconds(l, now)
		ahead := min(l.NoticeSeconds+int64(s.cfg.RunoutMargin/time.Second), l.LimitSeconds-ran)
		need += idlegrid.CostOf(l.PriceMicrosPerGPUHour, int64(len(l.GPUUUIDs))*(ran+ahead))
	}
	return need
}

// ranCost is what leases have cost by now, at their locked prices.
func ranCost(leases []*idlegrid.Lease, now time.Time) idlegrid.Micros {
	var cost idlegrid.Micros
	for _, l := range leases {
		cost += idlegrid.CostOf(l.PriceMicrosPerGPUHour, int64(len(l.GPUUUIDs))*ranSeconds(l, now))
	}
	return cost
}

// ranSeconds is how long l has run by now, never past its time limit.
func ranSeconds(l *idlegrid.Lease, now time.Time) int64 {
	if l.StartedAt == nil || !now.After(*l.StartedAt) {
		return 0
	}
	return min(int64(now.Sub(*l.StartedAt)/time.Second), l.LimitSeconds)
}

// stopForMoney stops leases for why and tells their renter, once per lease.
// A bronze lease gets its notice and ends preempted, so its job waits
// queued; others are stopped and end cancelled.
func (s *Server) stopForMoney(ctx context.Context, leases []*idlegrid.Lease, kind idlegrid.NoticeKind, why string) error {
	for _, l := range leases {
		if l.StopRequested != "" {
			continue // already ending
		}
		var err error
		if l.Tier == idlegrid.TierBronze {
			err = s.stopLease(ctx, l, noticePrefix+why)
		} else {
			err = s.stopLease(ctx, l, why)
		}
		if err != nil && idlegrid.ErrorCode(err) != idlegrid.ECONFLICT {
			return err
		}
		s.log.Warn("lease stopped for money", "lease", l.ID, "job", l.JobID, "renter", l.RenterID, "reason", why)
		n := &idlegrid.Notice{ID: idlegrid.NewID("ntc"), AccountID: l.RenterID, Kind: kind, Key: string(kind) + ":" + l.ID,
			LeaseID: l.ID, JobID: l.JobID, Message: stopMessage(l, why), CreatedAt: s.Now()}
		if _, err := s.store.AddNotice(ctx, n); err != nil {
			return err
		}
	}
	return nil
}

func stopMessage(l *idlegrid.Lease, why string) string {
	if l.Tier == idlegrid.TierBronze {
		return fmt.Sprintf("lease %s of job %s was given notice (%ds) and the job requeued: %s", l.ID, l.JobID, l.NoticeSeconds, why)
	}
	return fmt.Sprintf("lease %s of job %s was stopped: %s", l.ID, l.JobID, why)
}

func limitName(l *idlegrid.SpendLimit) string {
	if l.Scope == idlegrid.SpendKey {
		return "API key " + l.KeyID
	}
	return "account " + l.AccountID
}

// leaseKeys remembers which API key submitted each job, read once per pass.
type leaseKeys map[string]string

// scope returns the leases a limit applies to.
func (k leaseKeys) scope(ctx context.Context, store idlegrid.Store, leases []*idlegrid.Lease, lim *idlegrid.SpendLimit) ([]*idlegrid.Lease, error) {
	if lim.Scope != idlegrid.SpendKey {
		return leases, nil
	}
	var out []*idlegrid.Lease
	for _, l := range leases {
		key, ok := k[l.JobID]
		if !ok {
			j, err := store.FindJob(ctx, l.JobID)
			if err != nil {
				return nil, err
			}
			key, k[l.JobID] = j.SubmittedByKey, j.SubmittedByKey
		}
		if key == lim.KeyID {
			out = append(out, l)
		}
	}
	return out, nil
}
