package agent_test

import (
	"context"
	"strings"
	"sync"
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

// adoptingRuntime is a fake runtime that a previous agent left workloads
// in: Adopt starts them (as if they had been running all along) and sends
// their events on the channel it is given, the way the docker runtime
// follows the containers it finds. A stopped workload's Exit names a
// checkpoint, as the docker runtime's does.
type adoptingRuntime struct {
	*rtfake.Runtime
	left   []runtime.Workload
	starts atomic.Int32

	mu    sync.Mutex
	exits map[string]runtime.Exit
}

var (
	_ runtime.Adopter = (*adoptingRuntime)(nil)
	_ runtime.Runtime = (*adoptingRuntime)(nil)
)

func (r *adoptingRuntime) Start(ctx context.Context, w runtime.Workload, events chan<- runtime.Event) error {
	r.starts.Add(1)
	return r.Runtime.Start(ctx, w, events)
}

func (r *adoptingRuntime) Adopt(ctx context.Context, events chan<- runtime.Event) ([]string, error) {
	var ids []string
	for _, w := range r.left {
		mid := make(chan runtime.Event)
		if err := r.Runtime.Start(ctx, w, mid); err != nil {
			return ids, err
		}
		go r.forward(mid, events, w.JobID) // ends with the workload's Exit
		ids = append(ids, w.LeaseID)
	}
	return ids, nil
}

func (r *adoptingRuntime) forward(from <-chan runtime.Event, to chan<- runtime.Event, jobID string) {
	for ev := range from {
		if ev.Exit != nil {
			if ev.Exit.Stopped {
				ev.Exit.CheckpointRef = "fake-ckpt:" + jobID
			}
			r.mu.Lock()
			if r.exits == nil {
				r.exits = map[string]runtime.Exit{}
			}
			r.exits[ev.LeaseID] = *ev.Exit
			r.mu.Unlock()
			to <- ev
			return
		}
		to <- ev
	}
}

func (r *adoptingRuntime) LeaseGPUs(leaseID string) []string {
	for _, w := range r.left {
		if w.LeaseID == leaseID {
			return w.GPUs
		}
	}
	return nil
}

func (r *adoptingRuntime) exit(leaseID string) (runtime.Exit, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.exits[leaseID]
	return e, ok
}

// mustGPUs returns the fake GPUs of the node cfg describes, as its agent
// will detect them.
func mustGPUs(tb testing.TB, cfg *agent.Config) []string {
	tb.Helper()
	key, err := nodekey.LoadOrCreate(cfg.KeyPath())
	if err != nil {
		tb.Fatal(err)
	}
	det, err := cfg.Detector(key)
	if err != nil {
		tb.Fatal(err)
	}
	devs, err := det.Detect(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	var out []string
	for _, d := range devs {
		out = append(out, d.UUID)
	}
	return out
}

// leftBehind sets up a node whose previous agent left lease_a running on
// its first GPU, and a server that placed it there in state s.
func leftBehind(tb testing.TB, s idlegrid.LeaseState, seconds int64) (*agent.Config, *fakeServer, *adoptingRuntime) {
	tb.Helper()
	cfg := testConfig(tb)
	gpus := mustGPUs(tb, cfg)
	j := job(seconds, nil)
	srv := &fakeServer{}
	srv.assign(idlegrid.Lease{ID: "lease_a", JobID: "job_a", GPUUUIDs: gpus[:1], LimitSeconds: seconds, Tier: j.Tier}, j)
	srv.setState("lease_a", s)
	rt := &adoptingRuntime{
		Runtime: &rtfake.Runtime{},
		left:    []runtime.Workload{{LeaseID: "lease_a", JobID: "job_a", Job: j, GPUs: gpus[:1]}},
	}
	return cfg, srv, rt
}

func TestAgent_Adopt(t *testing.T) {
	t.Run("ReportsAdoptedLease", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			cfg, srv, rt := leftBehind(t, idlegrid.LeaseRunning, 600)
			r := startAgent(t, cfg, srv, rt)
			waitFor(t, "the lease to succeed", leaseIn(srv, "lease_a", idlegrid.LeaseSucceeded))
			if got, want := states(srv.reportsFor("lease_a")), "running,succeeded"; got != want {
				t.Errorf("reports = %s, want %s", got, want)
			}
			if logs := logText(srv.logsFor("lease_a")); !strings.Contains(logs, "training complete") {
				t.Errorf("logs lack the adopted workload's output:\n%s", logs)
			}
			progressed := false
			for _, hb := range srv.heartbeats() {
				for _, p := range hb.Leases {
					progressed = progressed || p.LeaseID == "lease_a" && p.Progress > 0
				}
			}
			if !progressed {
				t.Error("no heartbeat carried the adopted lease's progress")
			}
			if n := rt.starts.Load(); n != 0 {
				t.Errorf("runtime started %d workloads, want 0: the lease was adopted", n)
			}
			if err := r.stop(t); err != nil {
				t.Fatal(err)
			}
		})
	})
	t.Run("StartOfAdoptedLeaseIgnored", func(t *testing.T) {
		// The previous agent started it but died before reporting it
		// running: the server still asks for it to start.
		synctest.Test(t, func(t *testing.T) {
			cfg, srv, rt := leftBehind(t, idlegrid.LeaseAssigned, 120)
			r := startAgent(t, cfg, srv, rt)
			waitFor(t, "the lease to succeed", leaseIn(srv, "lease_a", idlegrid.LeaseSucceeded))
			if n := rt.starts.Load(); n != 0 {
				t.Errorf("runtime started %d workloads, want 0: the lease was adopted", n)
			}
			r.stop(t)
		})
	})
	t.Run("StopReportsCheckpoint", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			cfg, srv, rt := leftBehind(t, idlegrid.LeaseRunning, 3600)
			r := startAgent(t, cfg, srv, rt)
			waitFor(t, "the running report", func() bool { return len(srv.reportsFor("lease_a")) == 1 })
			srv.requestStop("lease_a", "cancelled by the renter")
			waitFor(t, "the lease to be cancelled", leaseIn(srv, "lease_a", idlegrid.LeaseCancelled))
			reports := srv.reportsFor("lease_a")
			last := reports[len(reports)-1]
			if last.ExitCode == nil || *last.ExitCode != 143 || last.CheckpointRef != "fake-ckpt:job_a" {
				t.Errorf("final report = %+v, want exit 143 and checkpoint fake-ckpt:job_a", last)
			}
			r.stop(t)
		})
	})
	t.Run("LeaseTheServerEndedIsStopped", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			cfg, srv, rt := leftBehind(t, idlegrid.LeaseLost, 3600)
			r := startAgent(t, cfg, srv, rt)
			began := time.Now()
			waitFor(t, "the workload to exit", func() bool { _, ok := rt.exit("lease_a"); return ok })
			if e, _ := rt.exit("lease_a"); !e.Stopped {
				t.Errorf("exit = %+v, want a stopped workload", e)
			}
			if took := time.Since(began); took > agent.StopGrace+5*time.Second {
				t.Errorf("stopped after %v, want within the grace of %v", took, agent.StopGrace)
			}
			if got := srv.lease("lease_a").State; got != idlegrid.LeaseLost {
				t.Errorf("lease is %s, want it left lost", got)
			}
			r.stop(t)
		})
	})
	t.Run("ShutdownStopsAdopted", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			cfg, srv, rt := leftBehind(t, idlegrid.LeaseRunning, 3600)
			r := startAgent(t, cfg, srv, rt)
			waitFor(t, "the running report", func() bool { return len(srv.reportsFor("lease_a")) == 1 })
			if err := r.stop(t); err != nil {
				t.Fatal(err)
			}
			l := srv.lease("lease_a")
			if l.State != idlegrid.LeaseFailed || l.Fault != idlegrid.FaultProvider {
				t.Errorf("lease = %s (%s), want failed by the provider: the agent shut down", l.State, l.Fault)
			}
		})
	})
}
