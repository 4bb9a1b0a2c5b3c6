package server

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/ledger"
	"github.com/idlegrid/idlegrid/internal/market"
)

// runScheduler runs a placement pass whenever something may have changed
// (a job arrived, capacity freed, money came in) and every SchedulePeriod,
// so that opening windows and passing deadlines are noticed.
func (s *Server) runScheduler(ctx context.Context) {
	ticker := time.NewTicker(s.cfg.SchedulePeriod)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.kick:
		case <-ticker.C:
		}
		if err := s.SchedulePass(ctx); err != nil && ctx.Err() == nil {
			s.log.Error("schedule pass", "err", err)
		}
	}
}

// SchedulePass tries to place every queued job, highest tier first and
// oldest first within a tier. A job that cannot be placed stays queued with
// the engine's reason.
func (s *Server) SchedulePass(ctx context.Context) error {
	jobs, err := s.store.ListJobs(ctx, idlegrid.JobFilter{States: []idlegrid.JobState{idlegrid.JobQueued}, Limit: 10000})
	if err != nil || len(jobs) == 0 {
		return err
	}
	sort.SliceStable(jobs, func(a, b int) bool {
		if ra, rb := jobs[a].Tier.Rank(), jobs[b].Tier.Rank(); ra != rb {
			return ra < rb
		}
		return jobs[a].CreatedAt.Before(jobs[b].CreatedAt)
	})
	snap, err := s.snapshot(ctx)
	if err != nil {
		return err
	}
	funds := map[string]idlegrid.Micros{} // renters' available balance, drawn down as we place
	for _, j := range jobs {
		if ctx.Err() != nil {
			return nil
		}
		if err := s.placeJob(ctx, j, snap, funds); err != nil {
			s.log.Error("place job", "job", j.ID, "err", err)
		}
	}
	return nil
}

// snapshot reads the market as the engine sees it now.
func (s *Server) snapshot(ctx context.Context) (*market.Snapshot, error) {
	now := s.Now()
	nodes, err := s.store.ListNodes(ctx, idlegrid.NodeFilter{States: []idlegrid.NodeState{idlegrid.NodeOnline}})
	if err != nil {
		return nil, err
	}
	leases, err := s.store.ListLeases(ctx, idlegrid.LeaseFilter{States: liveLeaseStates, Limit: 1 << 30})
	if err != nil {
		return nil, err
	}
	claimed := map[string]bool{} // node ID + "/" + GPU UUID
	for _, l := range leases {
		for _, u := range l.GPUUUIDs {
			claimed[l.NodeID+"/"+u] = true
		}
	}
	snap := &market.Snapshot{Now: now}
	for _, n := range nodes {
		v := &market.NodeView{Node: n, AvailableUntil: n.Schedule.AvailableUntil(now)}
		for _, g := range n.GPUs {
			if !claimed[n.ID+"/"+g.UUID] {
				v.FreeGPUs = append(v.FreeGPUs, g)
			}
		}
		snap.Nodes = append(snap.Nodes, v)
	}
	return snap, nil
}

// placeJob asks the engine for one job and stores the placement it makes.
func (s *Server) placeJob(ctx context.Context, j *idlegrid.Job, snap *market.Snapshot, funds map[string]idlegrid.Micros) error {
	now := snap.Now
	if j.Deadline != nil && !now.Before(*j.Deadline) {
		return s.store.CancelQueuedJob(ctx, j.ID, "deadline passed before a node could take it", now)
	}
	d := s.matcher.Place(j, snap)
	if !d.Placed() {
		return s.setReason(ctx, j, d.Reason)
	}
	p := s.placement(j, d.Picks, now)
	hold := idlegrid.Micros(0)
	for _, l := range p.Leases {
		hold += l.HoldMicros
	}
	avail, err := s.available(ctx, j.RenterID, funds)
	if err != nil {
		return err
	}
	if hold > avail {
		return s.setReason(ctx, j, fmt.Sprintf("waiting for funds: the escrow hold is %s and the renter has %s available; top up the account", hold, avail))
	}
	switch err := s.store.PlaceJob(ctx, p); idlegrid.ErrorCode(err) {
	case "":
	case idlegrid.ECONFLICT: // the job or a GPU moved on since the snapshot; the next pass sees it
		return nil
	case idlegrid.EPAYMENT:
		return s.setReason(ctx, j, "waiting for funds: "+idlegrid.ErrorMessage(err))
	default:
		return err
	}
	funds[j.RenterID] = avail - hold
	for i, pick := range d.Picks {
		snap.Claim(pick)
		s.waiters.notify(p.Leases[i].NodeID)
		s.log.Info("job placed", "job", j.ID, "lease", p.Leases[i].ID, "node", pick.Node.ID,
			"price_per_gpu_hour", pick.PriceMicrosPerGPUHour.String())
	}
	return nil
}

// placement turns the engine's picks into leases and their escrow holds.
func (s *Server) placement(j *idlegrid.Job, picks []market.Pick, now time.Time) *idlegrid.Placement {
	p := &idlegrid.Placement{JobID: j.ID, Attempt: j.Attempts, At: now}
	for _, pick := range picks {
		l := &idlegrid.Lease{
			ID: idlegrid.NewID("lease"), JobID: j.ID, RenterID: j.RenterID,
			NodeID: pick.Node.ID, ProviderID: pick.Node.ProviderID, Attempt: j.Attempts + 1,
			Tier: j.Tier, PriceMicrosPerGPUHour: pick.PriceMicrosPerGPUHour, PriceNote: pick.PriceNote,
			LimitSeconds: j.DurationSeconds, State: idlegrid.LeaseAssigned,
			Reason: "placed on " + pick.Node.Name, CreatedAt: now,
		}
		for _, g := range pick.GPUs {
			l.GPUUUIDs = append(l.GPUUUIDs, g.UUID)
		}
		l.HoldMicros = ledger.HoldFor(l.PriceMicrosPerGPUHour, len(l.GPUUUIDs), l.LimitSeconds)
		p.Leases = append(p.Leases, l)
		if t := ledger.Hold(l, now); t != nil {
			t.ID = idlegrid.NewID("tx")
			p.Transfers = append(p.Transfers, t)
		}
	}
	return p
}

func (s *Server) available(ctx context.Context, renterID string, funds map[string]idlegrid.Micros) (idlegrid.Micros, error) {
	if v, ok := funds[renterID]; ok {
		return v, nil
	}
	b, err := s.store.Balance(ctx, renterID)
	if err != nil {
		return 0, err
	}
	funds[renterID] = b.Available
	return b.Available, nil
}

// setReason records why a job waits, writing only when the reason changed.
func (s *Server) setReason(ctx context.Context, j *idlegrid.Job, reason string) error {
	if reason == j.Reason {
		return nil
	}
	return s.store.SetJobReason(ctx, j.ID, reason, s.Now())
}
