package agent_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/agent"
	"github.com/idlegrid/idlegrid/internal/gpu"
	gpufake "github.com/idlegrid/idlegrid/internal/gpu/fake"
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

// noticeAdopting is an adoptingRuntime that says an adopted lease is
// bronze and owed notice (0: it cannot say), as the docker runtime reads
// them back from its container's labels, and records every stop's grace.
type noticeAdopting struct {
	*adoptingRuntime
	notice time.Duration
	mu     sync.Mutex
	graces map[string]time.Duration
}

func (r *noticeAdopting) LeaseTier(string) idlegrid.Tier   { return idlegrid.TierBronze }
func (r *noticeAdopting) LeaseNotice(string) time.Duration { return r.notice }
func (r *noticeAdopting) Stop(id string, grace time.Duration) error {
	r.mu.Lock()
	if r.graces == nil {
		r.graces = map[string]time.Duration{}
	}
	r.graces[id] = grace
	r.mu.Unlock()
	return r.adoptingRuntime.Stop(id, grace)
}

func (r *noticeAdopting) stopped(id string) (time.Duration, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	g, ok := r.graces[id]
	return g, ok
}

// TestAgent_AdoptedBronzeLeaseGetsItsNotice: a bronze lease taken back
// after a restart is owed its own notice, not the agent's default, when
// the server gives it notice and when the node's policy stops it.
func TestAgent_AdoptedBronzeLeaseGetsItsNotice(t *testing.T) {
	leftBronze := func(t *testing.T, notice time.Duration) (*agent.Config, *fakeServer, *noticeAdopting) {
		cfg, srv, left := leftBehindJob(t, idlegrid.LeaseRunning, bronze(3600))
		l := srv.lease("lease_a")
		l.NoticeSeconds = 120
		srv.assign(l, bronze(3600))
		srv.setState("lease_a", idlegrid.LeaseRunning)
		return cfg, srv, &noticeAdopting{adoptingRuntime: left, notice: notice}
	}
	t.Run("FromTheStopCommand", func(t *testing.T) {
		// The runtime cannot say the notice; the server's stop command
		// carries the lease, which does.
		synctest.Test(t, func(t *testing.T) {
			cfg, srv, rt := leftBronze(t, 0)
			r := startAgent(t, cfg, srv, rt)
			waitFor(t, "the running report", func() bool { return len(srv.reportsFor("lease_a")) == 1 })
			srv.requestStop("lease_a", idlegrid.NoticeStopPrefix+"the window ends")
			waitFor(t, "the stop", func() bool { _, ok := rt.stopped("lease_a"); return ok })
			if g, _ := rt.stopped("lease_a"); g != 120*time.Second {
				t.Errorf("stopped with grace %v, want the lease's notice of 2m0s", g)
			}
			r.stop(t)
		})
	})
	t.Run("FromTheRuntime", func(t *testing.T) {
		// The node's policy stops it (too hot): only the runtime, which
		// kept the notice with the workload, can say what it is owed.
		synctest.Test(t, func(t *testing.T) {
			cfg, srv, rt := leftBronze(t, 2*time.Minute)
			cfg.ThermalCapC = 80
			var det *gpufake.Detector
			r := startAgentOn(t, cfg, srv, rt, func(d gpu.Detector) gpu.Detector { det = d.(*gpufake.Detector); return d })
			waitFor(t, "the running report", func() bool { return len(srv.reportsFor("lease_a")) == 1 })
			det.SetTemp(r.gpus[0], 95)
			waitFor(t, "the stop", func() bool { _, ok := rt.stopped("lease_a"); return ok })
			if g, _ := rt.stopped("lease_a"); g != 2*time.Minute {
				t.Errorf("stopped with grace %v, want the notice the runtime kept, 2m0s", g)
			}
			waitFor(t, "the lease to end", leaseIn(srv, "lease_a", idlegrid.LeaseFailed))
			if rep := lastReport(srv, "lease_a"); !strings.Contains(rep.Message, "after 2m0s notice") {
				t.Errorf("report = %+v, want the notice given named", rep)
			}
			r.stop(t)
		})
	})
}

// endedRuntime is a runtime a previous agent left a workload in that
// ended while no agent ran: Adopt reports its Exit at once, with when it
// ended (zero: it cannot say).
type endedRuntime struct {
	*rtfake.Runtime
	gpus  []string
	ended time.Time
}

func (r *endedRuntime) Adopt(ctx context.Context, events chan<- runtime.Event) ([]string, error) {
	// The agent takes events from before Adopt returns.
	events <- runtime.Event{LeaseID: "lease_a", Exit: &runtime.Exit{Code: 0, At: r.ended}}
	return []string{"lease_a"}, nil
}

func (r *endedRuntime) LeaseGPUs(string) []string { return r.gpus }

// TestAgent_AdoptedLeaseThatEndedMeanwhile: a workload that ended while
// no agent ran is charged up to when it ended, not up to when an agent
// took it back, and a lease whose last receipt was cut is charged no more.
func TestAgent_AdoptedLeaseThatEndedMeanwhile(t *testing.T) {
	// run takes back lease_a, begun 2h ago, whose previous agent kept
	// state (with extra fields) when it crashed an hour ago; the runtime
	// says it ended at ended. It returns the GPU-seconds charged since.
	run := func(t *testing.T, extra string, ended time.Time) int64 {
		cfg := testConfig(t)
		gpus := mustGPUs(t, cfg)
		j := job(4*3600, nil)
		srv := &fakeServer{}
		srv.assign(idlegrid.Lease{ID: "lease_a", JobID: "job_a", GPUUUIDs: gpus[:1], LimitSeconds: 4 * 3600, Tier: j.Tier}, j)
		srv.setState("lease_a", idlegrid.LeaseRunning)
		now := time.Now().UTC()
		st := fmt.Sprintf(`{"lease_id":"lease_a","gpus":[%q],"limit_seconds":14400,"began":%q,"cut":%q,"seq":0,"prev_hash":"","unsent":[]%s}`,
			gpus[0], now.Add(-2*time.Hour).Format(time.RFC3339Nano), now.Add(-time.Hour).Format(time.RFC3339Nano), extra)
		if err := os.MkdirAll(filepath.Join(cfg.DataDir, "receipts"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(cfg.DataDir, "receipts", "lease_a.json"), []byte(st), 0o600); err != nil {
			t.Fatal(err)
		}
		r := startAgent(t, cfg, srv, &endedRuntime{Runtime: &rtfake.Runtime{}, gpus: gpus[:1], ended: ended})
		waitFor(t, "the lease to end", leaseIn(srv, "lease_a", idlegrid.LeaseSucceeded))
		var secs int64
		for _, rc := range srv.receiptsFor("lease_a") {
			secs += rc.GPUSeconds
		}
		if err := r.stop(t); err != nil {
			t.Fatal(err)
		}
		return secs
	}
	t.Run("ChargedUpToItsEnd", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			if secs := run(t, "", time.Now().Add(-30*time.Minute)); secs != 1800 {
				t.Errorf("%d GPU-seconds charged, want 1800: from the last receipt to the end, not to the restart", secs)
			}
		})
	})
	t.Run("LastReceiptAlreadyCut", func(t *testing.T) {
		// The previous agent cut the last receipt and crashed before its
		// final report; the runtime reports the exit again without a time.
		synctest.Test(t, func(t *testing.T) {
			end := time.Now().UTC().Add(-time.Hour).Format(time.RFC3339Nano)
			if secs := run(t, fmt.Sprintf(`,"ended":%q,"final":true`, end), time.Time{}); secs != 0 {
				t.Errorf("%d GPU-seconds charged, want none: the last receipt had been cut", secs)
			}
		})
	})
}
