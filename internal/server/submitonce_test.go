package server_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/idlegrid/idlegrid"
)

// TestServer_SubmitJobOnce: a submission sent again under its key answers
// with the first job, and makes no second lease or hold, even when the
// two arrive together; the key with another spec is refused, naming it;
// another renter's key of the same text is its own.
func TestServer_SubmitJobOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustMarket(t)
		spec := testSpec()
		spec.GPUs = 1
		first, replayed, err := m.srv.SubmitJobOnce(m.renter, spec, "nightly-2026-12-03")
		if err != nil || replayed || first.IdempotencyKey != "nightly-2026-12-03" {
			t.Fatalf("the first submission: %+v, replayed %v, %v", first, replayed, err)
		}
		again, replayed, err := m.srv.SubmitJobOnce(m.renter, spec, "nightly-2026-12-03")
		if err != nil || !replayed || again.ID != first.ID {
			t.Fatalf("sent again: %+v, replayed %v, %v; want %s, replayed", again, replayed, err, first.ID)
		}

		// Sent together, eight times, under a new key: one job.
		ids := make([]string, 8)
		var wg sync.WaitGroup
		for i := range ids {
			wg.Go(func() {
				if j, _, err := m.srv.SubmitJobOnce(m.renter, spec, "burst"); err != nil {
					t.Errorf("submission %d: %v", i, err)
				} else {
					ids[i] = j.ID
				}
			})
		}
		wg.Wait()
		for _, id := range ids {
			if id != ids[0] {
				t.Fatalf("eight submissions under one key made jobs %v, want one", ids)
			}
		}

		bigger := spec
		bigger.GPUs = 2
		_, _, err = m.srv.SubmitJobOnce(m.renter, bigger, "nightly-2026-12-03")
		var e *idlegrid.Error
		if !errors.As(err, &e) || e.Code != idlegrid.ECONFLICT || e.Field != "idempotency_key" {
			t.Errorf("the key with another spec: %v, want a conflict naming idempotency_key", err)
		}
		if _, _, err := m.srv.SubmitJobOnce(m.renter, spec, string(make([]byte, 300))); idlegrid.ErrorCode(err) != idlegrid.EINVALID {
			t.Errorf("a key of 300 NULs: %v, want invalid", err)
		}

		m.advance(t, 5*time.Second)
		jobs, err := m.srv.ListJobs(m.renter, idlegrid.JobFilter{})
		if err != nil {
			t.Fatal(err)
		}
		if len(jobs) != 2 {
			t.Errorf("the renter's jobs: %d, want 2 (one a key)", len(jobs))
		}
		leases, err := m.srv.ListLeases(m.renter, idlegrid.LeaseFilter{JobID: first.ID})
		if err != nil || len(leases) != 1 {
			t.Errorf("leases of the job submitted twice: %d (%v), want 1", len(leases), err)
		}

		other := otherRenter(t, m)
		theirs, replayed, err := m.srv.SubmitJobOnce(other, spec, "nightly-2026-12-03")
		if err != nil || replayed || theirs.ID == first.ID {
			t.Errorf("another renter's key of the same text: %+v, replayed %v, %v; want a job of its own", theirs, replayed, err)
		}
	})
}

// otherRenter is a funded renter apart from m's.
func otherRenter(t *testing.T, m *testMarket) context.Context {
	t.Helper()
	a, _, _, err := m.srv.CreateAccount(m.admin, "elsewhere", idlegrid.RoleRenter)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.srv.TopUp(m.admin, a.ID, 100*idlegrid.MicrosPerUnit, "other-first"); err != nil {
		t.Fatal(err)
	}
	return as(a)
}

// TestServer_SubmitJobOnce_deadlineSpan: a deadline given as a span from
// now ("--deadline 2h") is a later time when the same command is sent
// again; that submission is the first one's, while a deadline moved by
// more or less than the time between them is another spec.
func TestServer_SubmitJobOnce_deadlineSpan(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustMarket(t)
		spec := testSpec()
		spec.GPUs = 1
		in2h := func() *time.Time { d := time.Now().Add(2 * time.Hour); return &d }
		spec.Deadline = in2h()
		first, _, err := m.srv.SubmitJobOnce(m.renter, spec, "deadline-span")
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(3 * time.Minute) // the answer was lost; the renter runs the command again
		again := spec
		again.Deadline = in2h()
		j, replayed, err := m.srv.SubmitJobOnce(m.renter, again, "deadline-span")
		if err != nil || !replayed || j.ID != first.ID || !j.Deadline.Equal(*first.Deadline) {
			t.Fatalf("sent again 3 minutes on with --deadline 2h: %+v, replayed %v, %v; want the first job, its deadline kept", j, replayed, err)
		}
		for _, moved := range []time.Duration{time.Hour, -time.Minute, 3*time.Minute + 2*time.Minute} {
			other := spec
			d := first.Deadline.Add(moved)
			other.Deadline = &d
			if _, _, err := m.srv.SubmitJobOnce(m.renter, other, "deadline-span"); idlegrid.ErrorCode(err) != idlegrid.ECONFLICT {
				t.Errorf("the deadline moved by %s, 3 minutes on: %v, want a conflict", moved, err)
			}
		}
	})
}
