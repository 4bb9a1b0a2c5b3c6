package server_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/idlegrid/idlegrid"
)

// mustStartSpec is mustStart for a job of spec: it is submitted, placed
// on m.node and started there.
func mustStartSpec(t *testing.T, m *testMarket, spec idlegrid.JobSpec) (*idlegrid.Job, *idlegrid.Lease) {
	t.Helper()
	j, err := m.srv.SubmitJob(m.renter, spec)
	if err != nil {
		t.Fatal(err)
	}
	started := reportOn(t, m, idlegrid.LeaseReport{State: idlegrid.LeaseRunning}, func(c idlegrid.Command) bool {
		return c.Kind == idlegrid.CommandStart && c.Lease.JobID == j.ID
	})
	if len(started) != 1 {
		t.Fatalf("started %d leases of job %s, want 1", len(started), j.ID)
	}
	return j, started[0].lease
}

// wantCancelledOnce checks that job id ended cancelled by its renter,
// placed once: whatever ended its lease, it was not requeued.
func wantCancelledOnce(t *testing.T, m *testMarket, id string) {
	t.Helper()
	synctest.Wait() // a requeued job would be placed again now
	j := mustFindJob(t, m, id)
	if j.State != idlegrid.JobCancelled || j.Attempts != 1 || j.Reason != idlegrid.RenterCancelReason || j.CancelRequestedAt == nil {
		t.Fatalf("job is %s after %d attempts (%q, cancel asked at %v), want cancelled by the renter, placed once",
			j.State, j.Attempts, j.Reason, j.CancelRequestedAt)
	}
}

// wantUnpaid checks that lease id ended as state by its provider's fault,
// and that the renter paid nothing for it.
func wantUnpaid(t *testing.T, m *testMarket, id string, state idlegrid.LeaseState) {
	t.Helper()
	if l := mustFindLease(t, m, id); l.State != state || l.Fault != idlegrid.FaultProvider || l.ChargedMicros != 0 {
		t.Errorf("lease is %s (fault %q, %q) charged %s, want %s by the provider, charged nothing",
			l.State, l.Fault, l.Reason, l.ChargedMicros, state)
	}
}

// TestServer_CancelHolds: a renter's cancel holds however the job's lease
// then ends. Ended by its provider's fault, the lease costs the renter
// nothing, but the job is cancelled, not requeued and run (and charged)
// again.
func TestServer_CancelHolds(t *testing.T) {
	t.Run("the node goes silent", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			m := mustMarket(t)
			j, l := mustStart(t, m)
			m.advance(t, time.Minute)
			if _, err := m.srv.CancelJob(m.renter, j.ID); err != nil {
				t.Fatal(err)
			}
			for range 12 { // a minute in which only the rival heartbeats
				if _, err := m.srv.Heartbeat(m.rival, idlegrid.HeartbeatRequest{}); err != nil {
					t.Fatal(err)
				}
				time.Sleep(5 * time.Second)
			}
			wantCancelledOnce(t, m, j.ID)
			wantUnpaid(t, m, l.ID, idlegrid.LeaseLost)
			mustLedgerBalanced(t, m.store)
		})
	})
	t.Run("the node reports its own failure", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			m := mustMarket(t)
			j, l := mustStart(t, m)
			m.advance(t, time.Minute)
			if _, err := m.srv.CancelJob(m.renter, j.ID); err != nil {
				t.Fatal(err)
			}
			if err := m.srv.ReportLease(m.node, l.ID, idlegrid.LeaseReport{State: idlegrid.LeaseFailed,
				Fault: idlegrid.FaultProvider, Message: "GPU fell off the bus"}); err != nil {
				t.Fatal(err)
			}
			wantCancelledOnce(t, m, j.ID)
			wantUnpaid(t, m, l.ID, idlegrid.LeaseFailed)
			mustLedgerBalanced(t, m.store)
		})
	})
	t.Run("the node had abandoned the lease", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			m := mustMarketWith(t, nil)
			j, l := mustStart(t, m)
			m.advance(t, time.Minute)
			mustSendReceipts(t, m, l.ID, 60)
			m.advance(t, 3*time.Minute) // under the receipt silence: the reaper leaves it
			if _, err := m.srv.CancelJob(m.renter, j.ID); err != nil {
				t.Fatal(err)
			}
			if err := m.srv.ReportLease(m.node, l.ID, idlegrid.LeaseReport{State: idlegrid.LeaseCancelled}); err != nil {
				t.Fatal(err)
			}
			wantCancelledOnce(t, m, j.ID)
			wantUnpaid(t, m, l.ID, idlegrid.LeaseFailed)
			mustLedgerBalanced(t, m.store)
		})
	})
	t.Run("the job is requeued as the cancel is asked", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			race := &requeueOnRead{}
			m := mustMarketOn(t, goldForAll, func(s idlegrid.Store) idlegrid.Store { race.Store = s; return race })
			j, _ := mustStart(t, m)
			m.advance(t, time.Minute)
			race.armed.Store(true)
			got, err := m.srv.CancelJob(m.renter, j.ID)
			if err != nil {
				t.Fatal(err)
			} else if race.armed.Load() {
				t.Fatal("the job was not requeued during the cancel")
			}
			if got.State != idlegrid.JobCancelled {
				t.Errorf("the cancel answered the job %s (%q), want cancelled", got.State, got.Reason)
			}
			wantCancelledOnce(t, m, j.ID)
		})
	})
}

// requeueOnRead is a store that, once armed, requeues the job it reads
// right after the read: its live leases end lost, as the reaper ends a
// lost node's. The caller gets the job as it was read, running: a cancel
// that raced the node's loss.
type requeueOnRead struct {
	idlegrid.Store
	armed atomic.Bool
}

func (s *requeueOnRead) FindJob(ctx context.Context, id string) (*idlegrid.Job, error) {
	j, err := s.Store.FindJob(ctx, id)
	if err != nil || !s.armed.CompareAndSwap(true, false) {
		return j, err
	}
	live := []idlegrid.LeaseState{idlegrid.LeaseAssigned, idlegrid.LeaseRunning}
	leases, err := s.Store.ListLeases(ctx, idlegrid.LeaseFilter{JobID: id, States: live})
	if err != nil {
		return nil, err
	}
	for _, l := range leases {
		err := s.Store.TransitionLease(ctx, &idlegrid.LeaseTransition{LeaseID: l.ID, From: live, To: idlegrid.LeaseLost,
			Fault: idlegrid.FaultProvider, Reason: "node lost meanwhile", At: time.Now()}, nil)
		if err != nil {
			return nil, err
		}
	}
	return j, nil
}

// TestServer_GangWorkloadFails: when one lease of a gang fails by its
// workload, the server stops the others, and the job ends failed with the
// failed lease's reason, not cancelled by the stops that followed.
func TestServer_GangWorkloadFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustMoneyMarket(t)
		j, gang := mustGang(t, m)
		m.advance(t, time.Minute)
		exit := 2
		if err := m.srv.ReportLease(m.node, gang[0].lease.ID, idlegrid.LeaseReport{State: idlegrid.LeaseFailed, ExitCode: &exit}); err != nil {
			t.Fatal(err)
		}
		if n := confirmStops(t, m, j.ID); n != 1 {
			t.Fatalf("%d stops confirmed, want the other node's", n)
		}
		if got := mustFindLease(t, m, gang[1].lease.ID); got.State != idlegrid.LeaseCancelled {
			t.Errorf("the other lease is %s (%q), want cancelled", got.State, got.Reason)
		}
		if job := mustFindJob(t, m, j.ID); job.State != idlegrid.JobFailed || job.Reason != "exited 2" {
			t.Fatalf("job is %s (%q), want failed: exited 2", job.State, job.Reason)
		}
		mustLedgerBalanced(t, m.store)
	})
}

// TestServer_TimeLimitFailsJob: a lease that runs past its time limit is
// stopped and ends cancelled, paid for as any stop; its job, which the
// renter did not cancel, ends failed, saying it ran past its time limit.
func TestServer_TimeLimitFailsJob(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustMarket(t)
		spec := testSpec()
		spec.DurationSeconds = 120
		j, l := mustStartSpec(t, m, spec)
		m.advance(t, 120*time.Second+45*time.Second)
		if got := mustFindLease(t, m, l.ID); got.StopRequested != idlegrid.LimitStop(got) {
			t.Fatalf("past its limit, the lease's stop is %q, want %q", got.StopRequested, idlegrid.LimitStop(got))
		}
		if n := confirmStops(t, m, j.ID); n != 1 {
			t.Fatalf("%d stops confirmed, want 1", n)
		}
		if got := mustFindLease(t, m, l.ID); got.State != idlegrid.LeaseCancelled || got.Fault != "" {
			t.Errorf("the lease is %s (fault %q, %q), want cancelled as before", got.State, got.Fault, got.Reason)
		}
		job := mustFindJob(t, m, j.ID)
		if job.State != idlegrid.JobFailed || !strings.Contains(job.Reason, "ran past its time limit of 120s") {
			t.Fatalf("job is %s (%q), want failed for running past its time limit", job.State, job.Reason)
		}
		mustLedgerBalanced(t, m.store)
	})
}

// TestServer_NodeStopsAtTimeLimit: a node that stops a lease past its
// time limit before the server asked (its agent could not reach the
// server) ends it as the server's limit stop would: cancelled, paid for
// up to its limit, its job failed for running past it; not the node's
// failure. Before its limit, the same report is the node's failure.
func TestServer_NodeStopsAtTimeLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustMarket(t)
		spec := testSpec()
		spec.DurationSeconds = 120
		j, l := mustStartSpec(t, m, spec)
		m.advance(t, 125*time.Second) // past the limit, before the server's own stop (limitGrace)
		if got := mustFindLease(t, m, l.ID); got.StopRequested != "" {
			t.Fatalf("the server asked for a stop already (%q): the test must come before it", got.StopRequested)
		}
		if err := m.srv.ReportLease(m.node, l.ID, idlegrid.LeaseReport{State: idlegrid.LeaseCancelled,
			Message: "the lease reached its time limit of 2m0s"}); err != nil {
			t.Fatal(err)
		}
		if got := mustFindLease(t, m, l.ID); got.State != idlegrid.LeaseCancelled || got.Fault != "" || got.StopRequested != idlegrid.LimitStop(got) {
			t.Errorf("the lease is %s (fault %q, stop %q, %q), want cancelled at its limit", got.State, got.Fault, got.StopRequested, got.Reason)
		}
		job := mustFindJob(t, m, j.ID)
		if job.State != idlegrid.JobFailed || !strings.Contains(job.Reason, "ran past its time limit of 120s") {
			t.Errorf("job is %s (%q), want failed for running past its time limit", job.State, job.Reason)
		}
		mustLedgerBalanced(t, m.store)

		_, early := mustStartSpec(t, m, spec)
		m.advance(t, 60*time.Second)
		if err := m.srv.ReportLease(m.node, early.ID, idlegrid.LeaseReport{State: idlegrid.LeaseCancelled, Message: "stopped"}); err != nil {
			t.Fatal(err)
		}
		if got := mustFindLease(t, m, early.ID); got.State != idlegrid.LeaseFailed || got.Fault != idlegrid.FaultProvider {
			t.Errorf("stopped by the node before its limit, the lease is %s (fault %q), want failed by the provider", got.State, got.Fault)
		}
	})
}

// TestServer_DeadlineNamesRunLeft: a requeued job that resumes from a
// checkpoint is cancelled at its deadline's latest start, which counts
// only the run it has left, and its reason names that run, not its whole
// duration.
func TestServer_DeadlineNamesRunLeft(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustMarket(t)
		spec := testSpec() // an hour's run
		spec.CheckpointEverySeconds, spec.CheckpointRef = 600, "s3://ckpt/run-1"
		deadline := time.Now().Add(62 * time.Minute)
		spec.Deadline = &deadline
		j, l := mustStartSpec(t, m, spec)
		m.advance(t, 20*time.Minute)
		saved := time.Now()
		if _, err := m.srv.Heartbeat(m.node, idlegrid.HeartbeatRequest{Leases: []idlegrid.LeaseProgress{
			{LeaseID: l.ID, Progress: 0.3, CheckpointAt: &saved}}}); err != nil {
			t.Fatal(err)
		}
		// The node fails 43 minutes in: the job resumes from 20 minutes, so
		// its latest start was 22 minutes in, and it is cancelled.
		m.advance(t, 23*time.Minute)
		if err := m.srv.ReportLease(m.node, l.ID, idlegrid.LeaseReport{State: idlegrid.LeaseFailed,
			Fault: idlegrid.FaultProvider, Message: "GPU fell off the bus"}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		got := mustFindJob(t, m, j.ID)
		if got.State != idlegrid.JobCancelled || got.ResumeSeconds == 0 {
			t.Fatalf("job is %s (%q), resuming %ds in, want cancelled for its deadline, with a checkpoint", got.State, got.Reason, got.ResumeSeconds)
		}
		left := time.Duration(got.DurationSeconds-got.ResumeSeconds) * time.Second
		if !strings.Contains(got.Reason, "its "+left.String()+" run left") || strings.Contains(got.Reason, "1h0m0s run") {
			t.Errorf("reason = %q, want it to name the %s left to run, not the whole hour", got.Reason, left)
		}
	})
}
