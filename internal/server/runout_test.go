package server_test

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/idlegrid/idlegrid"
)

// TestServer_RunoutSpendLimitNotYetReached: a spend limit that the live
// leases have not run up to yet, but would pass within their notice (and
// the margin), stops them before it is reached, and says so: it would be
// exceeded, not reached.
func TestServer_RunoutSpendLimitNotYetReached(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustMoneyMarket(t)
		spec := testSpec()
		spec.Tier, spec.MaxPriceMicrosPerGPUHour = idlegrid.TierBronze, 600_000
		j, err := m.srv.SubmitJob(m.renter, spec)
		if err != nil {
			t.Fatal(err)
		}
		l, _ := mustStarted(t, m, j)
		ran := 5 * time.Minute
		m.advance(t, ran)

		// Halfway between what the lease has cost by now and what it will
		// have by the end of its notice and the margin (2m by default).
		gpuSeconds := func(d time.Duration) int64 { return int64(len(l.GPUUUIDs)) * int64(d/time.Second) }
		costNow := idlegrid.CostOf(l.PriceMicrosPerGPUHour, gpuSeconds(ran))
		costLater := idlegrid.CostOf(l.PriceMicrosPerGPUHour, gpuSeconds(ran+time.Duration(l.NoticeSeconds)*time.Second+2*time.Minute))
		limit := (costNow + costLater) / 2
		if _, err := m.srv.SetAccountLimit(m.admin, m.renterID, &limit); err != nil {
			t.Fatal(err)
		}
		if err := m.srv.Reap(context.Background()); err != nil {
			t.Fatal(err)
		}
		got, _, err := m.srv.FindLease(m.renter, l.ID)
		if err != nil {
			t.Fatal(err)
		}
		want := "notice: spend limit of account " + m.renterID + " would be exceeded: " + limit.String() + " a month"
		if !strings.HasPrefix(got.StopRequested, want) || got.NoticeAt == nil {
			t.Fatalf("lease stop = %q at %v, want it to begin %q (%s run of the limit)", got.StopRequested, got.NoticeAt, want, costNow)
		}
		notices, err := m.srv.ListNotices(m.renter, idlegrid.NoticeFilter{})
		if err != nil || len(notices) != 1 || strings.Contains(notices[0].Message, "reached") {
			t.Fatalf("notices = %+v (%v), want one that does not say the limit was reached", notices, err)
		}
	})
}

// TestServer_SpendLimitWhileRunning_key: a key's spend limit, reached
// while jobs run, stops the leases of the jobs that key submitted, and
// only those: the account's other key runs on.
func TestServer_SpendLimitWhileRunning_key(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustMoneyMarket(t)
		team, key := mustKeyAs(t, m, m.renter, idlegrid.AccessUse)
		spec := testSpec()
		spec.Tier, spec.MaxPriceMicrosPerGPUHour = idlegrid.TierBronze, 600_000
		capped, err := m.srv.SubmitJob(team, spec)
		if err != nil {
			t.Fatal(err)
		}
		free, err := m.srv.SubmitJob(m.renter, spec)
		if err != nil {
			t.Fatal(err)
		}
		cappedLease, _ := mustStarted(t, m, capped)
		freeLease, _ := mustStarted(t, m, free)
		m.advance(t, 5*time.Minute)

		low := idlegrid.MicrosPerUnit / 100
		if _, err := m.srv.SetKeyLimit(m.renter, key.ID, &low); err != nil {
			t.Fatal(err)
		}
		if err := m.srv.Reap(context.Background()); err != nil {
			t.Fatal(err)
		}
		got, _, err := m.srv.FindLease(m.renter, cappedLease.ID)
		if err != nil {
			t.Fatal(err)
		}
		if want := "notice: spend limit of API key " + key.ID + " reached"; !strings.HasPrefix(got.StopRequested, want) || got.NoticeAt == nil {
			t.Fatalf("the capped key's lease: stop %q at %v, want it to begin %q", got.StopRequested, got.NoticeAt, want)
		}
		if got, _, err = m.srv.FindLease(m.renter, freeLease.ID); err != nil {
			t.Fatal(err)
		} else if got.StopRequested != "" || got.NoticeAt != nil {
			t.Fatalf("the other key's lease: stop %q at %v, want it left running", got.StopRequested, got.NoticeAt)
		}
		notices, err := m.srv.ListNotices(m.renter, idlegrid.NoticeFilter{})
		if err != nil || len(notices) != 1 || notices[0].LeaseID != cappedLease.ID {
			t.Fatalf("notices = %+v (%v), want one, for lease %s", notices, err, cappedLease.ID)
		}
	})
}
