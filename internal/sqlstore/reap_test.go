package sqlstore_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/sqlstore"
)

// testLeasesToReap checks each of LeasesToReap's conditions, and its
// bounds, on five live leases and one that ended.
func testLeasesToReap(t *testing.T, db *sqlstore.DB) {
	ctx := context.Background()
	// Every lease is placed at at(1m), and the running ones start at
	// at(2m) with an hour's limit.
	assigned := mustAssignedLease(t, db)
	withReceipts := mustRunningLease(t, db) // receipts end at at(5m)+7µs
	mustOK(t, db.AppendReceipts(ctx, withReceipts.ID, receiptChain(withReceipts, 3)))
	silent := mustRunningLease(t, db)
	noticed := mustRunningLease(t, db)
	mustOK(t, db.RequestLeaseStop(ctx, noticed.ID, "notice: preempted", at(10*time.Minute)))
	ended := mustRunningLease(t, db)
	mustTransition(t, db, &idlegrid.LeaseTransition{LeaseID: ended.ID, From: []idlegrid.LeaseState{idlegrid.LeaseRunning},
		To: idlegrid.LeaseCancelled, Reason: "done", At: at(3 * time.Minute)})
	limitEnd := at(2*time.Minute + time.Hour)
	startBy := mustAssignedLeaseWith(t, db, func(l *idlegrid.Lease) { l.StartBy = ptr(at(5 * time.Minute)) })
	got, err := db.FindLease(ctx, startBy.ID)
	mustOK(t, err)
	if got.StartBy == nil || !got.StartBy.Equal(at(5*time.Minute)) {
		t.Fatalf("a lease placed to start by %s reads back with StartBy %v", at(5*time.Minute), got.StartBy)
	}

	for _, tt := range []struct {
		name string
		q    idlegrid.ReapQuery
		want []*idlegrid.Lease // newest first
	}{
		{"none asked", idlegrid.ReapQuery{}, nil},
		{"nothing due", idlegrid.ReapQuery{AssignedBefore: at(time.Minute), LimitBefore: limitEnd,
			NoticeBefore: at(10 * time.Minute), ReceiptsBefore: at(5*time.Minute + 7*time.Microsecond)}, nil},
		{"assigned", idlegrid.ReapQuery{AssignedBefore: at(time.Minute + time.Microsecond)}, []*idlegrid.Lease{startBy, assigned}},
		{"past the limit", idlegrid.ReapQuery{LimitBefore: limitEnd.Add(time.Microsecond)},
			[]*idlegrid.Lease{noticed, silent, withReceipts}},
		{"past the notice", idlegrid.ReapQuery{NoticeBefore: at(10*time.Minute + time.Microsecond)}, []*idlegrid.Lease{noticed}},
		{"receipts stopped", idlegrid.ReapQuery{ReceiptsBefore: at(5*time.Minute + 8*time.Microsecond)}, []*idlegrid.Lease{withReceipts}},
		{"all", idlegrid.ReapQuery{AssignedBefore: at(time.Hour), LimitBefore: at(2 * time.Hour),
			NoticeBefore: at(time.Hour), ReceiptsBefore: at(time.Hour)}, []*idlegrid.Lease{startBy, noticed, silent, withReceipts, assigned}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := db.LeasesToReap(ctx, tt.q)
			mustOK(t, err)
			var ids, want []string
			for _, l := range got {
				ids = append(ids, l.ID)
			}
			for _, l := range tt.want {
				want = append(want, l.ID)
			}
			if diff := cmp.Diff(want, ids); diff != "" {
				t.Errorf("LeasesToReap (-want +got):\n%s", diff)
			}
		})
	}
}

// testRenterStakes checks that RenterStakes sums what each renter's live
// leases would cost to their time limits, leaving out ended leases and
// renters with none live, beside the renter's balance and whether it has
// a spend limit.
func testRenterStakes(t *testing.T, db *sqlstore.DB) {
	ctx := context.Background()
	got, err := db.RenterStakes(ctx)
	mustOK(t, err)
	if len(got) != 0 {
		t.Fatalf("RenterStakes of an empty store = %+v, want none", got)
	}
	r := mustAccount(t, db, idlegrid.RoleRenter)
	p := mustAccount(t, db, idlegrid.RoleProvider)
	n := mustNode(t, db, p.ID, 4)
	mustTopUp(t, db, r.ID, 100*idlegrid.MicrosPerUnit)
	var costs []idlegrid.Micros
	for i, gpus := range [][]int{{0}, {1, 2}, {3}} {
		j := mustJob(t, db, r.ID, 1, len(gpus))
		l := lease(j, n, gpus...)
		l.PriceMicrosPerGPUHour, l.LimitSeconds = 1_234_567, 5000+int64(i)*77 // not whole hours: CostOf rounds
		l.HoldMicros = 1000                                                   // an escrow topped up per interval holds less
		mustPlace(t, db, placement(j, 0, l))
		costs = append(costs, idlegrid.CostOf(l.PriceMicrosPerGPUHour, int64(len(gpus))*l.LimitSeconds))
		if i == 1 {
			start(t, db, l) // running counts as live too
		}
		if i == 2 {
			mustTransition(t, db, &idlegrid.LeaseTransition{LeaseID: l.ID, From: []idlegrid.LeaseState{idlegrid.LeaseAssigned},
				To: idlegrid.LeaseCancelled, Reason: "cancelled", At: at(3 * time.Minute)})
		}
	}
	mustOK(t, db.SetSpendLimit(ctx, &idlegrid.SpendLimit{Scope: idlegrid.SpendAccount, AccountID: r.ID,
		LimitMicros: 50 * idlegrid.MicrosPerUnit, SetBy: "admin", UpdatedAt: t0}))
	other := mustAssignedLease(t, db) // a renter of its own, with 10 units
	got, err = db.RenterStakes(ctx)
	mustOK(t, err)
	want := []*idlegrid.RenterStake{
		{RenterID: r.ID, AtMost: costs[0] + costs[1], Funds: 100 * idlegrid.MicrosPerUnit, Limited: true},
		{RenterID: other.RenterID, AtMost: idlegrid.CostOf(other.PriceMicrosPerGPUHour, other.LimitSeconds), Funds: 10 * idlegrid.MicrosPerUnit},
	}
	slices.SortFunc(want, func(a, b *idlegrid.RenterStake) int { return strings.Compare(a.RenterID, b.RenterID) })
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("RenterStakes (-want +got):\n%s", diff)
	}
}
