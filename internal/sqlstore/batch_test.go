package sqlstore_test

import (
	"context"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/sqlstore"
)

// testPlaceJobs checks that a batch of placements commits the good ones
// and leaves no trace of the bad ones, each judged as PlaceJob would judge
// it alone, and that a transaction that fails whole stores nothing.
func testPlaceJobs(t *testing.T, db *sqlstore.DB) {
	ctx := context.Background()
	r := mustAccount(t, db, idlegrid.RoleRenter)
	poor := mustAccount(t, db, idlegrid.RoleRenter)
	p := mustAccount(t, db, idlegrid.RoleProvider)
	n1, n2 := mustNode(t, db, p.ID, 2), mustNode(t, db, p.ID, 2)
	mustTopUp(t, db, r.ID, 10*idlegrid.MicrosPerUnit)
	mustTopUp(t, db, poor.ID, idlegrid.MicrosPerUnit)

	type want struct {
		code, message string
	}
	var ps []*idlegrid.Placement
	var wants []want
	add := func(pl *idlegrid.Placement, code, message string) {
		ps = append(ps, pl)
		wants = append(wants, want{code, message})
	}
	j := func(renter *idlegrid.Account) *idlegrid.Job { return mustJob(t, db, renter.ID, 1, 1) }

	t.Run("AllGood", func(t *testing.T) { testPlaceJobsWithoutSavepoints(t, db, p) })

	first := j(r)
	add(placement(first, 0, lease(first, n1, 0)), "", "")
	taken := j(r) // the batch's first placement claimed this GPU
	add(placement(taken, 0, lease(taken, n1, 0)), idlegrid.ECONFLICT, "already claimed")
	broke := j(poor)
	add(placement(broke, 0, lease(broke, n2, 0)), idlegrid.EPAYMENT, "renter balance too low")
	second := j(r)
	add(placement(second, 0, lease(second, n1, 1)), "", "")
	empty := j(r)
	add(placement(empty, 0), idlegrid.EINVALID, "lease")
	stale := j(r)
	add(placement(stale, 1, lease(stale, n2, 0)), idlegrid.ECONFLICT, "moved on")
	again := j(r) // the same job twice in one batch: the second finds it running
	add(placement(again, 0, lease(again, n2, 0)), "", "")
	add(placement(again, 0, lease(again, n2, 1)), idlegrid.ECONFLICT, "moved on")

	redone := sqlstore.BatchesRedone(db)
	errs := db.PlaceJobs(ctx, ps)
	if got := sqlstore.BatchesRedone(db) - redone; got != 1 {
		t.Errorf("%d batches placed again behind savepoints, want 1: placements failed", got)
	}
	if len(errs) != len(ps) {
		t.Fatalf("PlaceJobs returned %d errors for %d placements", len(errs), len(ps))
	}
	for i, w := range wants {
		if got := idlegrid.ErrorCode(errs[i]); got != w.code || !strings.Contains(idlegrid.ErrorMessage(errs[i]), w.message) {
			t.Errorf("placement %d: error %q (%v), want %q saying %q", i, got, errs[i], w.code, w.message)
		}
		if movedOn := w.message == "moved on"; idlegrid.JobMovedOn(errs[i]) != movedOn {
			t.Errorf("placement %d: JobMovedOn(%v) = %v, want %v", i, errs[i], !movedOn, movedOn)
		}
	}
	checkLedger(t, db)
	for _, job := range []*idlegrid.Job{first, second, again} {
		mustJobState(t, db, job.ID, idlegrid.JobRunning, "running on 1 node(s)")
	}
	for _, job := range []*idlegrid.Job{taken, broke, empty, stale} {
		mustJobState(t, db, job.ID, idlegrid.JobQueued, "")
		if leases, err := db.ListLeases(ctx, idlegrid.LeaseFilter{JobID: job.ID}); err != nil || len(leases) != 0 {
			t.Errorf("job %s: %d leases written (%v), want none", job.ID, len(leases), err)
		}
	}
	for i, pl := range ps {
		for _, l := range pl.Leases {
			ts, err := db.ListTransfers(ctx, idlegrid.TransferFilter{LeaseID: l.ID})
			mustOK(t, err)
			want := 0
			if errs[i] == nil {
				want = 1
			}
			if len(ts) != want {
				t.Errorf("placement %d: %d holds for lease %s, want %d", i, len(ts), l.ID, want)
			}
		}
	}
	held := 3 * price // three one-GPU leases for an hour
	if b := mustBalance(t, db, r.ID); b.Held != held || b.Available != 10*idlegrid.MicrosPerUnit-held {
		t.Errorf("renter balance %+v, want %d held", *b, held)
	}
	if b := mustBalance(t, db, poor.ID); b.Held != 0 || b.Available != idlegrid.MicrosPerUnit {
		t.Errorf("poor renter balance %+v, want unchanged", *b)
	}

	t.Run("None", func(t *testing.T) {
		if errs := db.PlaceJobs(ctx, nil); len(errs) != 0 {
			t.Errorf("PlaceJobs(nil) = %v, want no errors", errs)
		}
	})
	t.Run("TransactionFails", func(t *testing.T) {
		job := j(r)
		cancelled, cancel := context.WithCancel(ctx)
		cancel()
		errs := db.PlaceJobs(cancelled, []*idlegrid.Placement{
			placement(job, 0, lease(job, n2, 1)), placement(empty, 0),
		})
		for i, err := range errs {
			if err == nil {
				t.Errorf("placement %d: no error from a transaction that never began", i)
			}
		}
		mustJobState(t, db, job.ID, idlegrid.JobQueued, "")
	})
}

// testPlaceJobsWithoutSavepoints checks that a batch whose placements all
// succeed, but for those checkPlacement turns away before they write, is
// stored in one pass, without savepoints, and stores them all.
func testPlaceJobsWithoutSavepoints(t *testing.T, db *sqlstore.DB, p *idlegrid.Account) {
	ctx := context.Background()
	r := mustAccount(t, db, idlegrid.RoleRenter)
	mustTopUp(t, db, r.ID, 10*idlegrid.MicrosPerUnit)
	n := mustNode(t, db, p.ID, 4)
	var ps []*idlegrid.Placement
	for gpu := range 4 {
		job := mustJob(t, db, r.ID, 1, 1)
		ps = append(ps, placement(job, 0, lease(job, n, gpu)))
	}
	ps[0].Leases[0].Tier = "" // left to the job's spec
	empty := mustJob(t, db, r.ID, 1, 1)
	ps = append(ps, placement(empty, 0))
	before := mustBalance(t, db, r.ID)
	redone := sqlstore.BatchesRedone(db)
	errs := db.PlaceJobs(ctx, ps)
	if got := sqlstore.BatchesRedone(db) - redone; got != 0 {
		t.Errorf("%d batches placed again behind savepoints, want none", got)
	}
	for i, pl := range ps[:4] {
		if errs[i] != nil {
			t.Errorf("placement %d: %v", i, errs[i])
		}
		mustJobState(t, db, pl.JobID, idlegrid.JobRunning, "running on 1 node(s)")
	}
	if l, err := db.FindLease(ctx, ps[0].Leases[0].ID); err != nil || l.Tier != idlegrid.TierSilver {
		t.Errorf("a lease placed without a tier: %v, %v; want the job's, silver", l, err)
	}
	if code := idlegrid.ErrorCode(errs[4]); code != idlegrid.EINVALID {
		t.Errorf("placement without leases: error %q (%v), want %q", code, errs[4], idlegrid.EINVALID)
	}
	mustJobState(t, db, empty.ID, idlegrid.JobQueued, "")
	if b := mustBalance(t, db, r.ID); b.Held-before.Held != 4*price {
		t.Errorf("renter holds %d more, want %d: four one-GPU leases for an hour", b.Held-before.Held, 4*price)
	}
	checkLedger(t, db)
	// The same jobs again: every one has moved on, so the batch is placed
	// a second time behind savepoints and stores nothing more.
	redone = sqlstore.BatchesRedone(db)
	for i, err := range db.PlaceJobs(ctx, ps[:4]) {
		if code := idlegrid.ErrorCode(err); code != idlegrid.ECONFLICT {
			t.Errorf("placement %d placed twice: error %q (%v), want %q", i, code, err, idlegrid.ECONFLICT)
		}
	}
	if got := sqlstore.BatchesRedone(db) - redone; got != 1 {
		t.Errorf("%d batches placed again behind savepoints, want 1", got)
	}
	if b := mustBalance(t, db, r.ID); b.Held-before.Held != 4*price {
		t.Errorf("renter holds %d more after placing the same jobs twice, want %d", b.Held-before.Held, 4*price)
	}
}

// testListBeyondDefaultLimit checks that a list is cut at DefaultLimit only
// when its filter asks for no limit: the coordinator reads every queued job
// and every live lease with a larger one.
func testListBeyondDefaultLimit(t *testing.T, db *sqlstore.DB) {
	ctx := context.Background()
	r := mustAccount(t, db, idlegrid.RoleRenter)
	for range sqlstore.DefaultLimit + 1 {
		mustJob(t, db, r.ID, 1, 1)
	}
	for _, tt := range []struct {
		limit, want int
	}{
		{0, sqlstore.DefaultLimit},
		{10, 10},
		{1 << 30, sqlstore.DefaultLimit + 1},
	} {
		jobs, err := db.ListJobs(ctx, idlegrid.JobFilter{RenterID: r.ID, Limit: tt.limit})
		mustOK(t, err)
		if len(jobs) != tt.want {
			t.Errorf("ListJobs(limit %d) = %d jobs, want %d", tt.limit, len(jobs), tt.want)
		}
	}
}

// testPlaceJobsTogether checks what a batch placed without savepoints
// leaves to its end, the leases and the balances they move, against what
// each placement alone would be refused: holds that fit the renter's
// balance one by one but not together, and holds that a spend limit
// allows one by one but not together.
func testPlaceJobsTogether(t *testing.T, db *sqlstore.DB) {
	ctx := context.Background()
	p := mustAccount(t, db, idlegrid.RoleProvider)
	n := mustNode(t, db, p.ID, 6)
	threeJobs := func(r *idlegrid.Account, gpu int) []*idlegrid.Placement {
		var ps []*idlegrid.Placement
		for i := range 3 {
			job := mustJob(t, db, r.ID, 1, 1)
			ps = append(ps, placement(job, 0, lease(job, n, gpu+i)))
		}
		return ps
	}
	for _, tt := range []struct {
		name, refusal string
		gpu           int // the first of the three on n
		prepare       func(r *idlegrid.Account)
	}{
		{"Balance", "renter balance too low", 0, func(r *idlegrid.Account) {
			mustTopUp(t, db, r.ID, 2*price) // two one-GPU hours
		}},
		{"SpendLimit", "spend limit of account", 3, func(r *idlegrid.Account) {
			mustTopUp(t, db, r.ID, 10*price)
			mustOK(t, db.SetSpendLimit(ctx, &idlegrid.SpendLimit{Scope: idlegrid.SpendAccount, AccountID: r.ID,
				LimitMicros: 2*price + price/2, UpdatedAt: t0}))
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := mustAccount(t, db, idlegrid.RoleRenter)
			tt.prepare(r)
			before := mustBalance(t, db, r.ID)
			ps := threeJobs(r, tt.gpu)
			errs := db.PlaceJobs(ctx, ps)
			if errs[0] != nil || errs[1] != nil {
				t.Errorf("the first two placements: %v, %v; want both stored", errs[0], errs[1])
			}
			if code := idlegrid.ErrorCode(errs[2]); code != idlegrid.EPAYMENT || !strings.Contains(idlegrid.ErrorMessage(errs[2]), tt.refusal) {
				t.Errorf("the third placement: error %q (%v), want %q saying %q", code, errs[2], idlegrid.EPAYMENT, tt.refusal)
			}
			mustJobState(t, db, ps[2].JobID, idlegrid.JobQueued, "")
			if b := mustBalance(t, db, r.ID); b.Held != 2*price || b.Available != before.Available-2*price {
				t.Errorf("renter balance %+v, want two holds of %d taken from %d", *b, price, before.Available)
			}
			checkLedger(t, db)
		})
	}
}

// testConcurrentPlaceJobs runs several batches of the same jobs at once, on
// the same GPUs, each batch in an order of its own, as coordinators sharing
// a database would: every job is placed once, by one batch, and the others
// are told ECONFLICT for it, never an error of their own; no hold is left
// behind.
func testConcurrentPlaceJobs(t *testing.T, db *sqlstore.DB) {
	ctx := context.Background()
	r := mustAccount(t, db, idlegrid.RoleRenter)
	p := mustAccount(t, db, idlegrid.RoleProvider)
	const gpus = 100 // more than one statement reads: rowsPerStatement
	mustTopUp(t, db, r.ID, 2*gpus*price)
	var nodes []*idlegrid.Node
	for range gpus / 4 {
		nodes = append(nodes, mustNode(t, db, p.ID, 4))
	}
	var jobs []*idlegrid.Job
	for range gpus {
		jobs = append(jobs, mustJob(t, db, r.ID, 1, 1))
	}
	const racers = 4
	batches := make([][]*idlegrid.Placement, racers)
	for k := range batches {
		for i, j := range jobs {
			batches[k] = append(batches[k], placement(j, 0, lease(j, nodes[i/4], i%4)))
		}
		rand.New(rand.NewPCG(uint64(k), 7)).Shuffle(len(jobs), func(a, b int) {
			batches[k][a], batches[k][b] = batches[k][b], batches[k][a]
		})
	}
	errs := make([][]error, racers)
	var wg sync.WaitGroup
	for k := range batches {
		wg.Go(func() { errs[k] = db.PlaceJobs(ctx, batches[k]) })
	}
	wg.Wait()
	placed := map[string]int{}
	for k, batch := range batches {
		for i, pl := range batch {
			switch err := errs[k][i]; idlegrid.ErrorCode(err) {
			case "":
				placed[pl.JobID]++
			case idlegrid.ECONFLICT:
			default:
				t.Errorf("batch %d, job %s: %v; want it placed or ECONFLICT", k, pl.JobID, err)
			}
		}
	}
	for _, j := range jobs {
		if placed[j.ID] != 1 {
			t.Errorf("job %s placed by %d batches, want 1", j.ID, placed[j.ID])
		}
		mustJobState(t, db, j.ID, idlegrid.JobRunning, "running on 1 node(s)")
	}
	if b := mustBalance(t, db, r.ID); b.Held != gpus*price {
		t.Errorf("renter holds %d, want %d: %d one-GPU leases for an hour", b.Held, gpus*price, gpus)
	}
	checkLedger(t, db)
}
