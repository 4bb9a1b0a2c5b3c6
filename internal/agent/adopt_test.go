package agent_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
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
	// missed is how many of each workload's first stdout lines came while
	// no agent ran: they are not sent, as the docker runtime follows only
	// an adopted container's new output. Digests are of them all.
	missed int

	mu      sync.Mutex
	exits   map[string]runtime.Exit
	digests map[string]string // of verifiable workloads' whole stdout, once they exited
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
		go r.forward(mid, events, w) // ends with the workload's Exit
		ids = append(ids, w.LeaseID)
	}
	return ids, nil
}

func (r *adoptingRuntime) forward(from <-chan runtime.Event, to chan<- runtime.Event, w runtime.Workload) {
	stdout, missed := sha256.New(), 0
	for ev := range from {
		if ev.Exit != nil {
			if ev.Exit.Stopped {
				ev.Exit.CheckpointRef = "fake-ckpt:" + w.JobID
			}
			r.mu.Lock()
			if r.exits == nil {
				r.exits, r.digests = map[string]runtime.Exit{}, map[string]string{}
			}
			r.exits[ev.LeaseID] = *ev.Exit
			if w.Job.Verifiable {
				r.digests[ev.LeaseID] = "sha256:" + hex.EncodeToString(stdout.Sum(nil))
			}
			r.mu.Unlock()
			to <- ev
			return
		}
		if ev.Log != nil && ev.Log.Stream != "stderr" {
			io.WriteString(stdout, ev.Log.Text+"\n")
			if missed < r.missed {
				missed++
				continue
			}
		}
		to <- ev
	}
}

// digestingRuntime is an adoptingRuntime that keeps its workloads' whole
// output, as the docker runtime keeps a container's log, and gives the
// digest of a verifiable one's once it exited.
type digestingRuntime struct {
	*adoptingRuntime
	asked atomic.Int32
}

func (r *digestingRuntime) AdoptedOutputDigest(leaseID string) (string, bool) {
	r.asked.Add(1)
	r.mu.Lock()
	defer r.mu.Unlock()
	d, ok := r.digests[leaseID]
	return d, ok
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
	return leftBehindJob(tb, s, job(seconds, nil))
}

// leftBehindJob is leftBehind for a lease of j.
func leftBehindJob(tb testing.TB, s idlegrid.LeaseState, j idlegrid.JobSpec) (*agent.Config, *fakeServer, *adoptingRuntime) {
	tb.Helper()
	cfg := testConfig(tb)
	gpus := mustGPUs(tb, cfg)
	seconds := j.DurationSeconds
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
	t.Run("VerifiableReportsItsWholeOutputsDigest", func(t *testing.T) {
		// The agent saw only the output that came after it took the
		// workload back; its digest is of all of it, from the runtime,
		// and is the one the same work run from its start reports.
		synctest.Test(t, func(t *testing.T) {
			j := job(600, nil)
			j.Verifiable = true
			cfg, srv, left := leftBehindJob(t, idlegrid.LeaseRunning, j)
			left.missed = 3
			rt := &digestingRuntime{adoptingRuntime: left}
			r := startAgent(t, cfg, srv, rt)
			waitFor(t, "the adopted lease to succeed", leaseIn(srv, "lease_a", idlegrid.LeaseSucceeded))
			r.assign(srv, "lease_b", j)
			waitFor(t, "the same work to succeed", leaseIn(srv, "lease_b", idlegrid.LeaseSucceeded))
			got, want := lastReport(srv, "lease_a").OutputDigest, lastReport(srv, "lease_b").OutputDigest
			if want == "" {
				t.Fatal("the lease run from its start reported no digest")
			}
			if got != want {
				t.Errorf("adopted lease's digest = %q, want %q, that of the same work's whole output", got, want)
			}
			if n := rt.asked.Load(); n != 1 {
				t.Errorf("the runtime was asked for the digest %d times, want once, at the adopted workload's exit", n)
			}
			if err := r.stop(t); err != nil {
				t.Fatal(err)
			}
		})
	})
	t.Run("VerifiableWithoutTheWholeOutputReportsNoDigest", func(t *testing.T) {
		// A runtime that cannot give the whole output's digest: the agent
		// makes none of the part it saw.
		synctest.Test(t, func(t *testing.T) {
			j := job(600, nil)
			j.Verifiable = true
			cfg, srv, rt := leftBehindJob(t, idlegrid.LeaseRunning, j)
			rt.missed = 3
			r := startAgent(t, cfg, srv, rt)
			waitFor(t, "the adopted lease to succeed", leaseIn(srv, "lease_a", idlegrid.LeaseSucceeded))
			if got := lastReport(srv, "lease_a").OutputDigest; got != "" {
				t.Errorf("digest = %q, want none: the agent saw only part of the output", got)
			}
			if err := r.stop(t); err != nil {
				t.Fatal(err)
			}
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
