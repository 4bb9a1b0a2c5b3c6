package agent_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/agent"
	"github.com/idlegrid/idlegrid/internal/nodekey"
	"github.com/idlegrid/idlegrid/internal/runtime"
	rtfake "github.com/idlegrid/idlegrid/internal/runtime/fake"
)

// within waits, in virtual time, up to d for cond, and reports whether it
// came.
func within(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
	return true
}

func nodePub(tb testing.TB, cfg *agent.Config) (ed25519.PublicKey, ed25519.PrivateKey) {
	tb.Helper()
	key, err := nodekey.LoadOrCreate(cfg.KeyPath())
	if err != nil {
		tb.Fatal(err)
	}
	return key.Public().(ed25519.PublicKey), key
}

func gone(path string) func() bool {
	return func() bool { _, err := os.Stat(path); return errors.Is(err, os.ErrNotExist) }
}

// TestAgent_ReceiptsOutliveAShutdown: an agent that shuts down before the
// server has had a lease's last receipts and end keeps them, and the next
// agent sends them: they are the provider's pay.
func TestAgent_ReceiptsOutliveAShutdown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg, srv := testConfig(t), &fakeServer{}
		pub, _ := nodePub(t, cfg)
		r := startAgent(t, cfg, srv, &rtfake.Runtime{})
		waitFor(t, "the agent to join", func() bool { return len(srv.heartbeats()) > 0 })
		r.assign(srv, "lease_a", job(3600, nil))
		waitFor(t, "the first receipt", func() bool { return len(srv.receiptsFor("lease_a")) == 1 })
		// The server stops taking receipts and reports; the renter's
		// cancel still reaches the node.
		srv.setDown("SendReceipts", "ReportLease", "LastReceipt")
		time.Sleep(5 * time.Minute)
		srv.requestStop("lease_a", "cancelled by the renter")
		stopAsked := time.Now()
		time.Sleep(time.Minute) // the workload has exited; its end is not heard
		if err := r.stop(t); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(cfg.DataDir, "receipts", "lease_a.json")
		if _, err := os.Stat(path); err != nil {
			t.Fatalf("the lease's receipt state is gone with the agent: %v", err)
		}

		srv.setDown()
		r2 := startAgent(t, cfg, srv, &rtfake.Runtime{})
		defer r2.stop(t)
		waitFor(t, "the lease to end", func() bool { return srv.lease("lease_a").State.Terminal() })
		if l := srv.lease("lease_a"); l.State != idlegrid.LeaseCancelled {
			t.Errorf("lease is %s (%s), want cancelled", l.State, l.Reason)
		}
		if rep := lastReport(srv, "lease_a"); rep.ExitCode == nil || *rep.ExitCode != 143 {
			t.Errorf("final report = %+v, want the workload's own end (exit 143), as the first agent saw it", rep)
		}
		rs := srv.receiptsFor("lease_a")
		checkChain(t, "lease_a", pub, rs)
		if len(rs) < 2 || rs[len(rs)-1].End.Before(stopAsked) {
			t.Errorf("the server has %d receipts, the last ending %v; want them up to the stop asked at %v", len(rs), rs[len(rs)-1].End, stopAsked)
		}
		waitFor(t, "the kept state to be forgotten", gone(path))
	})
}

// TestAgent_LeftoverOfAVanishedWorkload: a receipt state a crashed agent
// left for a workload no runtime holds any more is sent, charging nothing
// past its last receipt, and the lease reported lost by the node.
func TestAgent_LeftoverOfAVanishedWorkload(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg, srv := testConfig(t), &fakeServer{}
		pub, key := nodePub(t, cfg)
		gpus := mustGPUs(t, cfg)
		srv.assign(idlegrid.Lease{ID: "lease_a", JobID: "job_a", GPUUUIDs: gpus[:1], LimitSeconds: 3600}, job(3600, nil))
		srv.setState("lease_a", idlegrid.LeaseRunning)
		began := time.Now().UTC().Add(-time.Hour)
		rc := idlegrid.Receipt{LeaseID: "lease_a", Seq: 1, Start: began, End: began.Add(time.Minute), GPUSeconds: 60, AvgUtilPct: 50}
		nodekey.SignReceipt(key, &rc)
		writeMeterState(t, cfg.DataDir, map[string]any{
			"lease_id": "lease_a", "gpus": gpus[:1], "limit_seconds": 3600, "began": began,
			"cut": rc.End, "seq": 1, "prev_hash": rc.Hash(), "unsent": []idlegrid.Receipt{rc},
		})
		r := startAgent(t, cfg, srv, &rtfake.Runtime{})
		defer r.stop(t)
		waitFor(t, "the lease to end", func() bool { return srv.lease("lease_a").State.Terminal() })
		if l := srv.lease("lease_a"); l.State != idlegrid.LeaseFailed || l.Fault != idlegrid.FaultProvider {
			t.Errorf("lease is %s (%s), want failed by the node: its workload is lost", l.State, l.Fault)
		}
		rs := srv.receiptsFor("lease_a")
		if sum := checkChain(t, "lease_a", pub, rs); len(rs) != 1 || sum != 60 {
			t.Errorf("the server has %d receipts of %d GPU-seconds; want the one kept, of 60", len(rs), sum)
		}
		waitFor(t, "the kept state to be forgotten", gone(filepath.Join(cfg.DataDir, "receipts", "lease_a.json")))
	})
}

// flakyAdopter is an adoptingRuntime whose first Adopts fail, as Docker's
// does while its daemon restarts.
type flakyAdopter struct {
	*adoptingRuntime
	failures atomic.Int32
	calls    atomic.Int32
}

func (r *flakyAdopter) Adopt(ctx context.Context, events chan<- runtime.Event) ([]string, error) {
	r.calls.Add(1)
	if r.failures.Add(-1) >= 0 {
		return nil, errors.New("cannot connect to the Docker daemon")
	}
	return r.adoptingRuntime.Adopt(ctx, events)
}

// TestAgent_AdoptionRetried: workloads a previous agent left are taken
// back once the runtime can say which they are, however many tries that
// takes; until then their receipt states are not taken for leftovers of
// vanished workloads.
func TestAgent_AdoptionRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg, srv, left := leftBehind(t, idlegrid.LeaseRunning, 600)
		writeMeterState(t, cfg.DataDir, map[string]any{
			"lease_id": "lease_a", "gpus": left.left[0].GPUs, "limit_seconds": 600, "began": time.Now().UTC(),
			"cut": time.Now().UTC(), "seq": 0, "prev_hash": "", "unsent": []idlegrid.Receipt{},
		})
		rt := &flakyAdopter{adoptingRuntime: left}
		rt.failures.Store(3)
		r := startAgent(t, cfg, srv, rt)
		defer r.stop(t)
		if !within(time.Hour, leaseIn(srv, "lease_a", idlegrid.LeaseSucceeded)) {
			t.Fatalf("lease is %s after an hour, Adopt called %d times; want it taken back and succeeded",
				srv.lease("lease_a").State, rt.calls.Load())
		}
		if got, want := states(srv.reportsFor("lease_a")), "running,succeeded"; got != want {
			t.Errorf("reports = %s, want %s", got, want)
		}
		if n := rt.calls.Load(); n != 4 {
			t.Errorf("Adopt called %d times, want 4: three failures, then once more", n)
		}
		if n := rt.starts.Load(); n != 0 {
			t.Errorf("runtime started %d workloads, want 0", n)
		}
	})
}

// TestAgent_StopOfAnUnknownLeaseReachesTheRuntime: a stop command for a
// lease the agent does not know (its workload was not taken back) is
// passed to the runtime, which may hold it.
func TestAgent_StopOfAnUnknownLeaseReachesTheRuntime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := startRig(t, testConfig(t), nil)
		defer r.stop(t)
		r.lease("lease_x", job(3600, nil), 0, 0)
		r.srv.setState("lease_x", idlegrid.LeaseRunning)
		r.srv.requestStop("lease_x", "cancelled by the renter")
		if !within(10*time.Minute, func() bool { _, ok := r.rt.stopped("lease_x"); return ok }) {
			t.Error("the runtime was not asked to stop the unknown lease's workload")
		}
		waitFor(t, "the lease to be cancelled", leaseIn(r.srv, "lease_x", idlegrid.LeaseCancelled))
	})
}

// TestAgent_StopsAtTheTimeLimit: a workload that runs past its lease's
// time limit is stopped by the agent, LimitSlack after it, when no stop
// comes from the server; the limit counts from when the server took the
// running report.
func TestAgent_StopsAtTheTimeLimit(t *testing.T) {
	run := func(t *testing.T, reportLate time.Duration) {
		cfg := testConfig(t)
		pub, _ := nodePub(t, cfg)
		r := startRig(t, cfg, nil)
		defer r.stop(t)
		if reportLate > 0 {
			r.srv.setDown("ReportLease")
		}
		j := job(3*3600, nil) // runs three hours unless stopped
		r.srv.assign(idlegrid.Lease{ID: "lease_a", JobID: "job_a", GPUUUIDs: r.gpus[:1], LimitSeconds: 600, Tier: j.Tier}, j)
		if reportLate > 0 {
			time.Sleep(reportLate)
			r.srv.setDown()
		}
		waitFor(t, "the lease to run", leaseIn(r.srv, "lease_a", idlegrid.LeaseRunning))
		started := time.Now()
		if !within(time.Hour, func() bool { _, ok := r.rt.stopped("lease_a"); return ok }) {
			t.Fatal("the workload ran an hour past its 10-minute limit")
		}
		took := time.Since(started)
		if lo, hi := 600*time.Second+agent.LimitSlack-time.Second, 600*time.Second+agent.LimitSlack+15*time.Second; took < lo || took > hi {
			t.Errorf("stopped %v after the server took its running report, want between %v and %v", took, lo, hi)
		}
		if g, _ := r.rt.stopped("lease_a"); g != agent.StopGrace {
			t.Errorf("stopped with grace %v, want %v", g, agent.StopGrace)
		}
		waitFor(t, "the lease to end", func() bool { return r.srv.lease("lease_a").State.Terminal() })
		if rep := lastReport(r.srv, "lease_a"); rep.State != idlegrid.LeaseCancelled || !strings.Contains(rep.Message, "time limit") {
			t.Errorf("final report = %+v, want cancelled at its time limit", rep)
		}
		if sum := checkChain(t, "lease_a", pub, r.srv.receiptsFor("lease_a")); sum > 600 {
			t.Errorf("the receipts claim %d GPU-seconds, more than the limit of 600", sum)
		}
	}
	t.Run("Stopped", func(t *testing.T) { synctest.Test(t, func(t *testing.T) { run(t, 0) }) })
	t.Run("CountedFromTheRunningReport", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) { run(t, 5*time.Minute) })
	})
}
