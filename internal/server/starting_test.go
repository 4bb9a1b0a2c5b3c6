package server_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/idlegrid/idlegrid"
)

// TestServer_SlowStart: a node pulling a large image names the lease as
// starting in its heartbeats. The lease outlives the start timeout while
// the node names it, is lost the start timeout after the node stops naming
// it, and is lost anyway once it has been starting for MaxStart.
func TestServer_SlowStart(t *testing.T) {
	for _, tt := range []struct {
		name     string
		named    time.Duration // how long the heartbeats name the lease
		wait     time.Duration // then how long they do not
		want     idlegrid.LeaseState
		inReason string
	}{
		{name: "named", named: 20 * time.Minute, want: idlegrid.LeaseAssigned},
		{name: "named, then started", named: 20 * time.Minute, want: idlegrid.LeaseRunning},
		{name: "no longer named", named: 20 * time.Minute, wait: 2*time.Minute + 15*time.Second,
			want: idlegrid.LeaseLost, inReason: "did not start the lease within 2m0s of last saying it was starting it"},
		{name: "named past MaxStart", named: time.Hour + 15*time.Second,
			want: idlegrid.LeaseLost, inReason: "did not start the lease within 1h0m0s of its placement (it was still starting it"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				m := mustMoneyMarket(t)
				l := mustLeaseByHand(t, m, 3600, 0)
				m.advanceStarting(t, tt.named, l.ID)
				if tt.want == idlegrid.LeaseRunning {
					if err := m.srv.ReportLease(m.node, l.ID, idlegrid.LeaseReport{State: idlegrid.LeaseRunning}); err != nil {
						t.Fatalf("the node reports the lease running after %s starting it: %v", tt.named, err)
					}
				}
				m.advance(t, tt.wait)
				got := mustFindLease(t, m, l.ID)
				if got.State != tt.want || !strings.Contains(got.Reason, tt.inReason) {
					t.Fatalf("the lease named as starting for %s, then not for %s: %s (%q), want %s (%q)",
						tt.named, tt.wait, got.State, got.Reason, tt.want, tt.inReason)
				}
			})
		})
	}
}

// TestServer_SlowStart_ended: a heartbeat naming as starting a lease that
// has ended, or one the server has no record of for the node, is answered
// with it in Ended, so that the agent stops pulling its image; one that
// names another node's lease keeps that lease from nothing.
func TestServer_SlowStart_ended(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustMoneyMarket(t)
		l := mustLeaseByHand(t, m, 3600, 0)
		resp, err := m.srv.Heartbeat(m.rival, idlegrid.HeartbeatRequest{Starting: starting(l.ID)})
		if err != nil {
			t.Fatal(err)
		} else if !slices.ContainsFunc(resp.Ended, func(e idlegrid.EndedLease) bool { return e.LeaseID == l.ID }) {
			t.Fatalf("another node naming the lease as starting is answered %+v, want it in Ended", resp.Ended)
		}
		m.beat(t, 2*time.Minute+15*time.Second, idlegrid.HeartbeatRequest{}, idlegrid.HeartbeatRequest{Starting: starting(l.ID)})
		got := mustFindLease(t, m, l.ID)
		if got.State != idlegrid.LeaseLost {
			t.Fatalf("a lease only another node named as starting: %s after the start timeout, want lost", got.State)
		}
		resp, err = m.srv.Heartbeat(m.node, idlegrid.HeartbeatRequest{Starting: starting(l.ID, "lease_unknown")})
		if err != nil {
			t.Fatal(err)
		}
		var ended []string
		for _, e := range resp.Ended {
			ended = append(ended, e.LeaseID+" "+string(e.State))
		}
		if want := []string{l.ID + " lost", "lease_unknown failed"}; !slices.Equal(ended, want) {
			t.Fatalf("the node naming a lost lease and an unknown one as starting is answered Ended %q, want %q", ended, want)
		}
		for _, bad := range [][]idlegrid.LeaseStarting{starting(""), starting(l.ID, l.ID), make([]idlegrid.LeaseStarting, idlegrid.MaxGPUsPerNode+1),
			{{LeaseID: l.ID, PulledBytes: 2, ImageBytes: 1}}} {
			if _, err := m.srv.Heartbeat(m.node, idlegrid.HeartbeatRequest{Starting: bad}); err != nil {
				t.Fatalf("a heartbeat naming %+v as starting fails (%v); want the list left out, and the node heard", bad, err)
			}
		}
	})
}

// TestServer_SlowStart_pull: the renter sees how far the node has pulled
// the image of a lease it is starting, in the lease, its job's leases and
// the job's watch, which wakes when the pull moves; the started lease
// shows no pull.
func TestServer_SlowStart_pull(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustMoneyMarket(t)
		l := mustLeaseByHand(t, m, 3600, 0)
		_, seen, err := m.srv.WatchJob(m.renter, l.JobID, "", 0)
		if err != nil {
			t.Fatal(err)
		}
		type watched struct {
			v    *idlegrid.JobView
			took time.Duration
		}
		woke := make(chan watched, 1)
		go func() {
			began := time.Now()
			v, _, err := m.srv.WatchJob(m.renter, l.JobID, seen, time.Minute)
			if err != nil {
				t.Error(err)
			}
			woke <- watched{v, time.Since(began)}
		}()
		synctest.Wait() // the watch waits
		pulled := []idlegrid.LeaseStarting{{LeaseID: l.ID, PulledBytes: 3 << 30, ImageBytes: 8 << 30}}
		if _, err := m.srv.Heartbeat(m.node, idlegrid.HeartbeatRequest{Starting: pulled}); err != nil {
			t.Fatal(err)
		}
		want := &idlegrid.LeasePull{PulledBytes: 3 << 30, ImageBytes: 8 << 30, At: m.srv.Now()}
		w := <-woke
		if w.took > 0 || w.v == nil || len(w.v.Leases) != 1 || w.v.Leases[0].Pull == nil || *w.v.Leases[0].Pull != *want {
			t.Errorf("the job's watch answered after %s with %+v; want it woken at once by the pull, with %+v", w.took, w.v, want)
		}
		time.Sleep(10 * time.Second)
		if _, err := m.srv.Heartbeat(m.node, idlegrid.HeartbeatRequest{Starting: pulled}); err != nil { // no further
			t.Fatal(err)
		}
		got, _, err := m.srv.FindLease(m.renter, l.ID)
		if err != nil {
			t.Fatal(err)
		} else if got.Pull == nil || *got.Pull != *want {
			t.Errorf("the lease's pull after a heartbeat saying the same = %+v, want %+v: unchanged, so that watches see nothing new", got.Pull, want)
		}
		if err := m.srv.ReportLease(m.node, l.ID, idlegrid.LeaseReport{State: idlegrid.LeaseRunning}); err != nil {
			t.Fatal(err)
		}
		ls, err := m.srv.ListLeases(m.renter, idlegrid.LeaseFilter{JobID: l.JobID})
		if err != nil {
			t.Fatal(err)
		} else if len(ls) != 1 || ls[0].Pull != nil {
			t.Errorf("the job's leases once started: %+v, want one with no pull", ls)
		}
	})
}

// mustLeaseByHand places a one-GPU lease on m's node by hand, with the
// time limit and notice given in seconds, for a job the scheduler leaves
// alone (it asks for a GPU no node has); the node has not started it.
func mustLeaseByHand(t *testing.T, m *testMarket, limit, notice int64) *idlegrid.Lease {
	t.Helper()
	spec := testSpec()
	spec.GPUModels = []string{"NO-SUCH-GPU"}
	j, err := m.srv.SubmitJob(m.renter, spec)
	if err != nil {
		t.Fatal(err)
	}
	synctest.Wait()
	l := &idlegrid.Lease{ID: idlegrid.NewID("lease"), NodeID: m.nodeID, GPUUUIDs: []string{"GPU-barn-1-0"},
		PriceMicrosPerGPUHour: 500_000, LimitSeconds: limit, HoldMicros: 500_000, NoticeSeconds: notice, Reason: "placed by hand"}
	mustPlaceByHand(t, m, j, l)
	return mustFindLease(t, m, l.ID)
}

// advanceStarting is advance, m's node naming leaseIDs as starting in its
// heartbeats.
func (m *testMarket) advanceStarting(t *testing.T, d time.Duration, leaseIDs ...string) {
	t.Helper()
	m.beat(t, d, idlegrid.HeartbeatRequest{Starting: starting(leaseIDs...)}, idlegrid.HeartbeatRequest{})
}

// starting names leaseIDs as a heartbeat does the leases its node is
// starting, with no pull.
func starting(leaseIDs ...string) []idlegrid.LeaseStarting {
	var out []idlegrid.LeaseStarting
	for _, id := range leaseIDs {
		out = append(out, idlegrid.LeaseStarting{LeaseID: id})
	}
	return out
}

// beat is advance, m's node heartbeating with node and the rival with
// rival; then the reaper makes a pass.
func (m *testMarket) beat(t *testing.T, d time.Duration, node, rival idlegrid.HeartbeatRequest) {
	t.Helper()
	for step := 5 * time.Second; d > 0; d -= step {
		if _, err := m.srv.Heartbeat(m.node, node); err != nil {
			t.Fatal(err)
		} else if _, err := m.srv.Heartbeat(m.rival, rival); err != nil {
			t.Fatal(err)
		}
		time.Sleep(min(step, d))
	}
	synctest.Wait()
	if err := m.srv.Reap(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestServer_SlowStart_reserved: a silver job reserves barn-1 from the
// end of the lease running there, an hour on, and a shorter job takes
// barn-1's free GPU, which the reserved job will need: it must start by
// the reservation's start less its duration (StartBy). Its node still
// pulling the image 30 seconds past then, the reaper has taken it back,
// no one's fault and nothing charged, and its job waits again; started
// in time, or with the reservation gone, it is left be. A start-by
// sooner than the start timeout after the placement is put off to it:
// any node may take that long to start a lease.
func TestServer_SlowStart_reserved(t *testing.T) {
	for _, tt := range []struct {
		name   string
		short  time.Duration                                                                // the job that takes the free GPU
		then   func(t *testing.T, m *testMarket, reserved *idlegrid.Job, l *idlegrid.Lease) // 30 seconds before its start-by
		want   idlegrid.LeaseState
		reason string
	}{
		{name: "not started", short: 30 * time.Minute, want: idlegrid.LeasePreempted,
			reason: "the node had not started the lease by 2000-01-01T00:30:00Z; started now, it would run past the start of another job's reservation of the node at 2000-01-01T01:00:00Z"},
		{name: "not started, start-by sooner than the start timeout", short: 59 * time.Minute, want: idlegrid.LeasePreempted,
			reason: "the start of another job's reservation of the node"},
		{name: "started in time", short: 30 * time.Minute, want: idlegrid.LeaseRunning,
			then: func(t *testing.T, m *testMarket, _ *idlegrid.Job, l *idlegrid.Lease) {
				if err := m.srv.ReportLease(m.node, l.ID, idlegrid.LeaseReport{State: idlegrid.LeaseRunning}); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "reservation gone", short: 30 * time.Minute, want: idlegrid.LeaseAssigned,
			then: func(t *testing.T, m *testMarket, reserved *idlegrid.Job, _ *idlegrid.Lease) {
				if _, err := m.srv.CancelJob(m.renter, reserved.ID); err != nil {
					t.Fatal(err)
				}
			}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				m := mustMarket(t)
				mustStarted(t, m, mustSubmitted(t, m, onlyBarn1(1, time.Hour)))
				reserved := mustSubmitted(t, m, onlyBarn1(2, 3*time.Hour))
				if j := mustFindJob(t, m, reserved.ID); !strings.Contains(j.Reason, "2 GPUs on barn-1") {
					t.Fatalf("the 2-GPU job: %s (%q), want barn-1 reserved for it", j.State, j.Reason)
				}
				time.Sleep(time.Second) // younger, so that a pass after a rebuild plans the reservation first
				short := mustSubmitted(t, m, onlyBarn1(1, tt.short))
				l, _ := mustCommandFor(t, m, short.ID)
				want := l.CreatedAt.Add(-time.Second + time.Hour - tt.short) // the reservation's start, less its run
				if timeout := l.CreatedAt.Add(2 * time.Minute); want.Before(timeout) {
					want = timeout // never sooner than the start timeout
				}
				if l.StartBy == nil || !l.StartBy.Equal(want) {
					t.Fatalf("the short job's lease must start by %v, want %s", l.StartBy, want)
				}
				m.advanceStarting(t, time.Until(*l.StartBy)-30*time.Second, l.ID)
				if tt.then != nil {
					tt.then(t, m, reserved, l)
				}
				m.advanceStarting(t, time.Minute, l.ID)
				got := mustFindLease(t, m, l.ID)
				if got.State != tt.want || !strings.Contains(got.Reason, tt.reason) {
					t.Fatalf("the lease 30 seconds past its start-by: %s (%q), want %s (%q)", got.State, got.Reason, tt.want, tt.reason)
				}
				if tt.want != idlegrid.LeasePreempted {
					return
				}
				if got.Fault != idlegrid.FaultNone || got.ChargedMicros != 0 {
					t.Fatalf("the lease taken back: fault %q, charged %s; want no one's fault and nothing charged", got.Fault, got.ChargedMicros)
				}
				if j := mustFindJob(t, m, short.ID); j.State != idlegrid.JobQueued || !strings.Contains(j.Reason, "reservation") {
					t.Fatalf("the short job: %s (%q), want queued again, kept off barn-1 by the reservation", j.State, j.Reason)
				}
				resp, err := m.srv.Heartbeat(m.node, idlegrid.HeartbeatRequest{Starting: starting(l.ID)})
				if err != nil {
					t.Fatal(err)
				} else if !slices.ContainsFunc(resp.Ended, func(e idlegrid.EndedLease) bool { return e.LeaseID == l.ID }) {
					t.Fatalf("the node naming the lease taken back is answered Ended %+v, want it there, to stop the pull", resp.Ended)
				}
				mustLedgerBalanced(t, m.store)
			})
		})
	}
}

// TestServer_SlowStart_window: barn-1's window closes in two hours; a
// 90-minute job placed there must start within 30 minutes (StartBy), and
// is taken back once its node has not started it by then, as it would run
// past the window's close. A 30-minute job, whose start-by would be more
// than MaxStart away, gets none: the reaper gives up on a lease not
// started by then anyway.
func TestServer_SlowStart_window(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustMarket(t)
		o := testOffer("barn-1")
		o.Schedule = idlegrid.Schedule{Mode: idlegrid.ScheduleWindows,
			OneOff: []idlegrid.OneOffWindow{{Start: time.Now().Add(-time.Hour), End: time.Now().Add(2 * time.Hour)}}}
		if err := m.srv.UpdateOffer(m.node, idlegrid.OfferRequest{Offer: o}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		lease := func(d time.Duration) *idlegrid.Lease {
			l, _ := mustCommandFor(t, m, mustSubmitted(t, m, onlyBarn1(1, d)).ID)
			return l
		}
		long, short := lease(90*time.Minute), lease(30*time.Minute)
		if want := long.CreatedAt.Add(30 * time.Minute); long.StartBy == nil || !long.StartBy.Equal(want) {
			t.Fatalf("the 90-minute job's lease must start by %v, want %s", long.StartBy, want)
		}
		if short.StartBy != nil {
			t.Fatalf("the 30-minute job's lease must start by %s, want no start-by: 90 minutes is past MaxStart", short.StartBy)
		}
		m.advanceStarting(t, 30*time.Minute+30*time.Second, long.ID, short.ID)
		got := mustFindLease(t, m, long.ID)
		if want := "it would run past the close of the node's window at 2000-01-01T02:00:00Z"; got.State != idlegrid.LeasePreempted || !strings.Contains(got.Reason, want) {
			t.Fatalf("the 90-minute lease, not started 30 minutes on: %s (%q), want preempted (%q)", got.State, got.Reason, want)
		}
		if got := mustFindLease(t, m, short.ID); got.State != idlegrid.LeaseAssigned {
			t.Fatalf("the 30-minute lease, still starting 30 minutes on: %s (%q), want assigned", got.State, got.Reason)
		}
	})
}

// TestServer_SlowStart_deadline: a 50-minute job due in an hour must
// start within 10 minutes, its latest start (StartBy). Its node still
// pulling the image past then, the reaper takes the lease back, and the
// job, past its latest start, is cancelled with nothing charged, rather
// than run past its deadline.
func TestServer_SlowStart_deadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := mustMarket(t)
		spec := testSpec()
		deadline := time.Now().Add(time.Hour)
		spec.DurationSeconds, spec.Deadline = 50*60, &deadline
		j := mustSubmitted(t, m, spec)
		l, _ := mustCommandFor(t, m, j.ID)
		if want := deadline.Add(-50 * time.Minute); l.StartBy == nil || !l.StartBy.Equal(want) {
			t.Fatalf("the lease must start by %v, want %s, its job's latest start", l.StartBy, want)
		}
		m.advanceStarting(t, 10*time.Minute+30*time.Second, l.ID)
		got := mustFindLease(t, m, l.ID)
		if want := "it would not finish its job by its deadline, 2000-01-01T01:00:00Z"; got.State != idlegrid.LeasePreempted || !strings.Contains(got.Reason, want) {
			t.Fatalf("the lease not started 10 minutes on: %s (%q), want preempted (%q)", got.State, got.Reason, want)
		}
		m.advance(t, 5*time.Second)
		if got := mustFindJob(t, m, j.ID); got.State != idlegrid.JobCancelled || !strings.Contains(got.Reason, "it had not started by 2000-01-01T00:10:00Z") || got.ChargedMicros != 0 {
			t.Fatalf("the job: %s (%q), charged %s; want cancelled, past its latest start, with nothing charged", got.State, got.Reason, got.ChargedMicros)
		}
		mustLedgerBalanced(t, m.store)
	})
}

// onlyBarn1 is a job for gpus GPUs over d that only barn-1 will take: its
// cap is below barn-2's ask.
func onlyBarn1(gpus int, d time.Duration) idlegrid.JobSpec {
	spec := testSpec()
	spec.GPUs, spec.DurationSeconds = gpus, int64(d/time.Second)
	spec.MaxPriceMicrosPerGPUHour = 450_000
	return spec
}

// mustSubmitted submits spec as m's renter and lets the scheduler act on
// it.
func mustSubmitted(t *testing.T, m *testMarket, spec idlegrid.JobSpec) *idlegrid.Job {
	t.Helper()
	j, err := m.srv.SubmitJob(m.renter, spec)
	if err != nil {
		t.Fatal(err)
	}
	synctest.Wait()
	return j
}
