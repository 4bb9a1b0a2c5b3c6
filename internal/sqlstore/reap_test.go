package sqlstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/sqlstore"
)

// testLeasesToReap checks each of LeasesToReap's conditions, and its
// bounds, on four live leases and one that ended.
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

	for _, tt := range []struct {
		name string
		q    idlegrid.ReapQuery
		want []*idlegrid.Lease // newest first
	}{
		{"none asked", idlegrid.ReapQuery{}, nil},
		{"nothing due", idlegrid.ReapQuery{AssignedBefore: at(time.Minute), LimitBefore: limitEnd,
			NoticeBefore: at(10 * time.Minute), ReceiptsBefore: at(5*time.Minute + 7*time.Microsecond)}, nil},
		{"assigned", idlegrid.ReapQuery{AssignedBefore: at(time.Minute + time.Microsecond)}, []*idlegrid.Lease{assigned}},
		{"past the limit", idlegrid.ReapQuery{LimitBefore: limitEnd.Add(time.Microsecond)},
			[]*idlegrid.Lease{noticed, silent, withReceipts}},
		{"past the notice", idlegrid.ReapQuery{NoticeBefore: at(10*time.Minute + time.Microsecond)}, []*idlegrid.Lease{noticed}},
		{"receipts stopped", idlegrid.ReapQuery{ReceiptsBefore: at(5*time.Minute + 8*time.Microsecond)}, []*idlegrid.Lease{withReceipts}},
		{"all", idlegrid.ReapQuery{AssignedBefore: at(time.Hour), LimitBefore: at(2 * time.Hour),
			NoticeBefore: at(time.Hour), ReceiptsBefore: at(time.Hour)}, []*idlegrid.Lease{noticed, silent, withReceipts, assigned}},
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
