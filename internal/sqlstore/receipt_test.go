package sqlstore_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/sqlstore"
)

// receiptChain returns n receipts of lease l, chained, a minute each from
// at(2m), each claiming a minute of the lease's GPUs. The times carry
// microseconds, so that a time that does not round-trip shows.
func receiptChain(l *idlegrid.Lease, n int) []idlegrid.Receipt {
	var out []idlegrid.Receipt
	prev := ""
	for i := range n {
		start := at(2*time.Minute + time.Duration(i)*time.Minute + 7*time.Microsecond)
		r := idlegrid.Receipt{
			LeaseID: l.ID, Seq: int64(i + 1), Start: start, End: start.Add(time.Minute),
			GPUSeconds: 60 * int64(len(l.GPUUUIDs)), AvgUtilPct: 50 + i, EnergyWh: int64(i),
			PrevHash: prev, Signature: fmt.Sprintf("sig-%d", i+1), // the store keeps signatures; the server checks them
		}
		prev = r.Hash()
		out = append(out, r)
	}
	return out
}

// mustRunningLease places a one-GPU lease and starts it.
func mustRunningLease(tb testing.TB, db *sqlstore.DB) *idlegrid.Lease {
	tb.Helper()
	l := mustAssignedLease(tb, db)
	start(tb, db, l)
	return l
}

// mustAssignedLease places a one-GPU lease, of a renter and a provider of
// its own, not started.
func mustAssignedLease(tb testing.TB, db *sqlstore.DB) *idlegrid.Lease {
	tb.Helper()
	return mustAssignedLeaseWith(tb, db, func(*idlegrid.Lease) {})
}

// mustAssignedLeaseWith is mustAssignedLease, the lease changed by tune
// before it is placed.
func mustAssignedLeaseWith(tb testing.TB, db *sqlstore.DB, tune func(*idlegrid.Lease)) *idlegrid.Lease {
	tb.Helper()
	r := mustAccount(tb, db, idlegrid.RoleRenter)
	p := mustAccount(tb, db, idlegrid.RoleProvider)
	n := mustNode(tb, db, p.ID, 1)
	mustTopUp(tb, db, r.ID, 10*idlegrid.MicrosPerUnit)
	j := mustJob(tb, db, r.ID, 1, 1)
	l := lease(j, n, 0)
	tune(l)
	mustPlace(tb, db, placement(j, 0, l))
	return l
}

func testReceipts(t *testing.T, db *sqlstore.DB) {
	ctx := context.Background()
	l := mustRunningLease(t, db)
	chain := receiptChain(l, 5)

	t.Run("None", func(t *testing.T) {
		sum, last, err := db.ReceiptUsage(ctx, l.ID)
		mustOK(t, err)
		if sum != 0 || last != nil {
			t.Errorf("ReceiptUsage = %d, %+v; want 0, nil", sum, last)
		}
		got, err := db.ListReceipts(ctx, l.ID)
		mustOK(t, err)
		if len(got) != 0 {
			t.Errorf("ListReceipts = %+v, want none", got)
		}
	})
	t.Run("Append", func(t *testing.T) {
		mustOK(t, db.AppendReceipts(ctx, l.ID, chain[:2]))
		mustOK(t, db.AppendReceipts(ctx, l.ID, chain[2:3]))
		mustOK(t, db.AppendReceipts(ctx, l.ID, nil))
		got, err := db.ListReceipts(ctx, l.ID)
		mustOK(t, err)
		if diff := cmp.Diff(chain[:3], got); diff != "" {
			t.Errorf("ListReceipts (-want +got):\n%s", diff)
		}
		for i := range got {
			if got[i].Hash() != chain[i].Hash() {
				t.Errorf("receipt %d's hash changed in the store", i+1)
			}
		}
		sum, last, err := db.ReceiptUsage(ctx, l.ID)
		mustOK(t, err)
		if sum != 180 || last == nil || last.Seq != 3 || last.Hash() != chain[2].Hash() {
			t.Errorf("ReceiptUsage = %d, %+v; want 180 and receipt 3", sum, last)
		}
	})
	t.Run("LastReceipts", func(t *testing.T) {
		one, none := mustRunningLease(t, db), mustRunningLease(t, db)
		oneChain := receiptChain(one, 1)
		mustOK(t, db.AppendReceipts(ctx, one.ID, oneChain))
		// More IDs than one query names, the leases with receipts in
		// different chunks, and IDs of no lease.
		var ids []string
		for i := range 1200 {
			ids = append(ids, fmt.Sprintf("lease_nobody_%04d", i))
		}
		ids[3], ids[700], ids[1199] = l.ID, one.ID, none.ID
		got, err := db.LastReceipts(ctx, ids)
		mustOK(t, err)
		want := map[string]*idlegrid.Receipt{l.ID: &chain[2], one.ID: &oneChain[0]}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("LastReceipts (-want +got):\n%s", diff)
		}
		got, err = db.LastReceipts(ctx, nil)
		mustOK(t, err)
		if len(got) != 0 {
			t.Errorf("LastReceipts of no lease = %+v, want none", got)
		}
	})
	t.Run("Refused", func(t *testing.T) {
		broken := chain[3]
		broken.PrevHash = chain[0].Hash()
		for _, tt := range []struct {
			name string
			rs   []idlegrid.Receipt
			code string
		}{
			{"Repeated", chain[2:4], idlegrid.ECONFLICT},
			{"Skipped", chain[4:], idlegrid.ECONFLICT},
			{"BrokenChain", []idlegrid.Receipt{broken}, idlegrid.ECONFLICT},
			{"HalfGood", []idlegrid.Receipt{chain[3], chain[3]}, idlegrid.ECONFLICT},
		} {
			t.Run(tt.name, func(t *testing.T) {
				wantCode(t, db.AppendReceipts(ctx, l.ID, tt.rs), tt.code)
			})
		}
		other := mustRunningLease(t, db)
		wantCode(t, db.AppendReceipts(ctx, other.ID, chain[:1]), idlegrid.EINVALID)
		got, err := db.ListReceipts(ctx, l.ID)
		mustOK(t, err)
		if len(got) != 3 {
			t.Errorf("after refused appends the lease has %d receipts, want still 3: a refused batch stores nothing", len(got))
		}
	})
	t.Run("UnknownLease", func(t *testing.T) {
		wantCode(t, db.AppendReceipts(ctx, "lease_missing", chain[:1]), idlegrid.ENOTFOUND)
		_, err := db.ListReceipts(ctx, "lease_missing")
		wantCode(t, err, idlegrid.ENOTFOUND)
		_, _, err = db.ReceiptUsage(ctx, "lease_missing")
		wantCode(t, err, idlegrid.ENOTFOUND)
	})
	t.Run("Ended", func(t *testing.T) {
		mustTransition(t, db, &idlegrid.LeaseTransition{LeaseID: l.ID, From: []idlegrid.LeaseState{idlegrid.LeaseRunning},
			To: idlegrid.LeaseCancelled, Reason: "cancelled", At: at(10 * time.Minute)})
		wantCode(t, db.AppendReceipts(ctx, l.ID, chain[3:4]), idlegrid.ECONFLICT)
		got, err := db.ListReceipts(ctx, l.ID)
		mustOK(t, err)
		if len(got) != 3 {
			t.Errorf("an ended lease has %d receipts, want its 3 kept", len(got))
		}
	})
}

// testConcurrentReceipts checks that two writers racing to store the same
// next receipt store it once.
func testConcurrentReceipts(t *testing.T, db *sqlstore.DB) {
	ctx := context.Background()
	l := mustRunningLease(t, db)
	chain := receiptChain(l, 1)
	const writers = 4
	errs := make([]error, writers)
	var wg sync.WaitGroup
	for i := range writers {
		wg.Go(func() { errs[i] = db.AppendReceipts(ctx, l.ID, chain) })
	}
	wg.Wait()
	ok := 0
	for _, err := range errs {
		switch idlegrid.ErrorCode(err) {
		case "":
			ok++
		case idlegrid.ECONFLICT:
		default:
			t.Errorf("AppendReceipts: %v, want success or ECONFLICT", err)
		}
	}
	sum, last, err := db.ReceiptUsage(ctx, l.ID)
	mustOK(t, err)
	if ok != 1 || sum != 60 || last == nil || last.Seq != 1 {
		t.Errorf("%d writers succeeded and the lease has %d GPU-seconds; want 1 and 60", ok, sum)
	}
}
