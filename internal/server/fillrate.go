package server

import (
	"context"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/reputation"
)

// fillLeaseLimit bounds the leases ProviderFill reads. The store lists a
// provider's leases newest first with no time filter, so a day's history
// reads them all; past this many, the oldest days may be undercounted.
const fillLeaseLimit = 1_000_000

// fillNote is FillHistory.Note: what the numbers rest on.
const fillNote = "offered GPU-hours apply each node's current schedule to every past day " +
	"(from the node's joining; schedules are not kept as history); leased GPU-hours are the " +
	"GPU-time of leases from start to end; earnings are settlements made that day"

// ProviderFill returns a provider's fill over the last days UTC days, today
// (up to now) last: for each day, the GPU-hours its nodes' schedules
// offered, the GPU-hours its leases ran, their ratio and the earnings
// settled that day. days 0 means idlegrid.DefaultFillDays.
//
// Offered hours use each node's current schedule for past days too (the
// store keeps no history of schedules), counted from when the node joined:
// a schedule changed last week redraws the weeks before it. Leased hours
// are each lease's GPUs times its time from StartedAt to EndedAt (or now)
// within the day, whatever the schedule said.
//
// The provider itself or an admin may ask; renters are refused, and a
// provider asking for another provider is told it does not exist.
func (s *Server) ProviderFill(ctx context.Context, providerID string, days int) (*idlegrid.FillHistory, error) {
	providerID, err := s.fillSubject(ctx, providerID)
	if err != nil {
		return nil, err
	}
	if days == 0 {
		days = idlegrid.DefaultFillDays
	}
	if days < 1 || days > idlegrid.MaxFillDays {
		return nil, idlegrid.Invalid("days", "must be between 1 and %d, got %d", idlegrid.MaxFillDays, days)
	}
	now := s.Now().UTC()
	y, m, d := now.Date()
	from := time.Date(y, m, d-days+1, 0, 0, 0, 0, time.UTC)
	h := &idlegrid.FillHistory{ProviderID: providerID, Note: fillNote}
	for i := range days {
		start := time.Date(y, m, d-days+1+i, 0, 0, 0, 0, time.UTC)
		h.Days = append(h.Days, idlegrid.FillDay{Day: start.Format(time.DateOnly), Start: start})
	}
	offered := make([]int64, days) // GPU-seconds
	leased := make([]int64, days)
	if err := s.fillOffered(ctx, providerID, from, now, offered); err != nil {
		return nil, err
	}
	if err := s.fillLeased(ctx, providerID, from, now, leased); err != nil {
		return nil, err
	}
	if err := s.fillEarnings(ctx, providerID, from, now, h.Days); err != nil {
		return nil, err
	}
	for i := range h.Days {
		fd := &h.Days[i]
		fd.OfferedGPUHours = float64(offered[i]) / 3600
		fd.LeasedGPUHours = float64(leased[i]) / 3600
		if offered[i] > 0 {
			fd.Fill = float64(leased[i]) / float64(offered[i])
		}
	}
	return h, nil
}

// fillSubject authorises a fill request and names the provider it is for:
// the caller itself ("" or its own ID) or, for admins, any provider.
func (s *Server) fillSubject(ctx context.Context, providerID string) (string, error) {
	c, err := requireRole(ctx, idlegrid.RoleProvider, idlegrid.RoleAdmin)
	if err != nil {
		return "", err
	}
	if providerID == "" && c.Role == idlegrid.RoleProvider {
		return c.AccountID, nil
	}
	if providerID == "" {
		return "", idlegrid.Invalid("provider_id", "name the provider whose fill to show")
	}
	if !c.IsAdmin() && providerID != c.AccountID {
		return "", notFound("provider", providerID)
	}
	a, err := s.store.FindAccount(ctx, providerID)
	if idlegrid.ErrorCode(err) == idlegrid.ENOTFOUND || (err == nil && a.Role != idlegrid.RoleProvider) {
		return "", notFound("provider", providerID)
	} else if err != nil {
		return "", err
	}
	return providerID, nil
}

// fillOffered adds to offered[i] the GPU-seconds the provider's nodes'
// schedules promised on day i of [from, now).
func (s *Server) fillOffered(ctx context.Context, providerID string, from, now time.Time, offered []int64) error {
	nodes, err := s.store.ListNodes(ctx, idlegrid.NodeFilter{ProviderID: providerID})
	if err != nil {
		return err
	}
	for _, n := range nodes {
		start := from
		if n.CreatedAt.After(start) {
			start = n.CreatedAt
		}
		for _, sp := range reputation.PromisedSpans(&n.Schedule, start, now) {
			addByDay(offered, from, sp.Start, sp.End, int64(len(n.GPUs)))
		}
	}
	return nil
}

// fillLeased adds to leased[i] the GPU-seconds the provider's leases ran on
// day i of [from, now).
func (s *Server) fillLeased(ctx context.Context, providerID string, from, now time.Time, leased []int64) error {
	leases, err := s.store.ListLeases(ctx, idlegrid.LeaseFilter{ProviderID: providerID, Limit: fillLeaseLimit})
	if err != nil {
		return err
	}
	for _, l := range leases {
		if l.StartedAt == nil {
			continue
		}
		end := now
		if l.EndedAt != nil && l.EndedAt.Before(now) {
			end = *l.EndedAt
		}
		addByDay(leased, from, *l.StartedAt, end, int64(len(l.GPUUUIDs)))
	}
	return nil
}

// fillEarnings adds each settlement of [from, now] to its day's earnings.
func (s *Server) fillEarnings(ctx context.Context, providerID string, from, now time.Time, days []idlegrid.FillDay) error {
	sts, err := s.store.ListSettlements(ctx, idlegrid.SettlementFilter{ProviderID: providerID, From: from, To: now.Add(time.Nanosecond)})
	if err != nil {
		return err
	}
	for _, st := range sts {
		if i := int(st.At.Sub(from) / (24 * time.Hour)); i >= 0 && i < len(days) {
			days[i].EarningsMicros += st.EarningsMicros
		}
	}
	return nil
}

// addByDay adds gpus times the whole seconds of [start, end) that fall in
// each UTC day to perDay, whose index 0 is the day starting at from.
func addByDay(perDay []int64, from, start, end time.Time, gpus int64) {
	if start.Before(from) {
		start = from
	}
	for i := range perDay {
		dayStart := from.Add(time.Duration(i) * 24 * time.Hour)
		dayEnd := dayStart.Add(24 * time.Hour)
		lo, hi := start, end
		if dayStart.After(lo) {
			lo = dayStart
		}
		if dayEnd.Before(hi) {
			hi = dayEnd
		}
		if hi.After(lo) {
			perDay[i] += int64(hi.Sub(lo)/time.Second) * gpus
		}
	}
}
