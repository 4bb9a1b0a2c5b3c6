package agent_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/runtime"
	rtfake "github.com/idlegrid/idlegrid/internal/runtime/fake"
)

// TestAgent_StartWaitsForTheGPU: the server may end a lease without its
// node (lost in an outage, say) and give its GPU to another at once; the
// agent hears of the end at its next heartbeat, while the new lease's
// start may come first. The new workload starts only once the old one has
// exited, never beside it on the GPU.
func TestAgent_StartWaitsForTheGPU(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv, rt := &fakeServer{}, &gpuLedger{Runtime: &rtfake.Runtime{}}
		r := startAgent(t, testConfig(t), srv, rt)
		r.assign(srv, "lease_a", job(3600, nil))
		waitFor(t, "lease_a to run", leaseIn(srv, "lease_a", idlegrid.LeaseRunning))
		srv.setState("lease_a", idlegrid.LeaseLost)
		r.assign(srv, "lease_b", job(3600, nil)) // lease_a's GPU
		waitFor(t, "lease_b to run", leaseIn(srv, "lease_b", idlegrid.LeaseRunning))
		if o := rt.overlaps(); len(o) > 0 {
			t.Errorf("workloads shared a GPU: %s", strings.Join(o, "; "))
		}
		if rt.started("lease_b").Before(rt.exited("lease_a")) {
			t.Errorf("lease_b started at %s, before lease_a's workload exited at %s", rt.started("lease_b"), rt.exited("lease_a"))
		}
		if err := r.stop(t); err != nil {
			t.Fatal(err)
		}
		rt.Close()
	})
}

// TestAgent_StartGivesUpOnAHeldGPU: a GPU that an older lease's workload
// still holds after gpuFreeWait (nothing told the agent to stop it) is
// not shared: the new lease fails, the node's fault, naming the GPU and
// the lease that holds it, and the old one runs on.
func TestAgent_StartGivesUpOnAHeldGPU(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv, rt := &fakeServer{}, &gpuLedger{Runtime: &rtfake.Runtime{}}
		r := startAgent(t, testConfig(t), srv, rt)
		r.assign(srv, "lease_a", job(3600, nil))
		waitFor(t, "lease_a to run", leaseIn(srv, "lease_a", idlegrid.LeaseRunning))
		assigned := time.Now()
		r.assign(srv, "lease_b", job(3600, nil)) // lease_a's GPU, lease_a still the server's
		waitFor(t, "lease_b to fail", leaseIn(srv, "lease_b", idlegrid.LeaseFailed))
		rs := srv.reportsFor("lease_b")
		final := rs[len(rs)-1]
		if final.Fault != idlegrid.FaultProvider || !strings.Contains(final.Message, "held by the workload of lease lease_a") {
			t.Errorf("lease_b failed with fault %q: %q; want the node's fault, naming lease_a", final.Fault, final.Message)
		}
		if waited := time.Since(assigned); waited < 2*time.Minute {
			t.Errorf("lease_b gave up after %s, want 2m0s", waited)
		}
		if got := srv.lease("lease_a").State; got != idlegrid.LeaseRunning || len(rt.overlaps()) > 0 {
			t.Errorf("lease_a is %s, overlaps %q; want it running alone", got, rt.overlaps())
		}
		if err := r.stop(t); err != nil {
			t.Fatal(err)
		}
		rt.Close()
	})
}

// TestAgent_FailedStartHoldsNoGPU: a lease whose workload could not start
// holds no GPU, even while its failure report waits for the server: a
// newer lease on its GPU starts at once rather than wait for it.
func TestAgent_FailedStartHoldsNoGPU(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv, rt := &fakeServer{}, &gpuLedger{Runtime: &rtfake.Runtime{}}
		r := startAgent(t, testConfig(t), srv, rt)
		srv.setDown("ReportLease") // lease_a's failure is not delivered
		r.assign(srv, "lease_a", job(3600, map[string]string{"FAKE_START_ERROR": "no such image"}))
		waitFor(t, "lease_a's start to fail", func() bool { return !rt.exited("lease_a").IsZero() })
		assigned := time.Now()
		r.assign(srv, "lease_b", job(3600, nil)) // lease_a's GPU
		waitFor(t, "lease_b's workload to start", func() bool { return !rt.started("lease_b").IsZero() })
		if waited := rt.started("lease_b").Sub(assigned); waited > 30*time.Second {
			t.Errorf("lease_b started %s after it was assigned, waiting for lease_a, whose workload never started", waited)
		}
		srv.setDown()
		waitFor(t, "lease_a to fail", leaseIn(srv, "lease_a", idlegrid.LeaseFailed))
		waitFor(t, "lease_b to run", leaseIn(srv, "lease_b", idlegrid.LeaseRunning))
		if err := r.stop(t); err != nil {
			t.Fatal(err)
		}
		rt.Close()
	})
}

// TestAgent_StartWaitsForWhatAPreviousAgentLeft: an agent restarted while
// Docker restarts cannot say at first which workloads its previous agent
// left; the server, which ended the lease of one of them while the node
// was gone, gives its GPU to a new lease. The new lease's start takes back
// what was left first, and its workload starts only once the old one,
// which the server refuses, has exited: never beside it on the GPU.
func TestAgent_StartWaitsForWhatAPreviousAgentLeft(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg, srv, left := leftBehind(t, idlegrid.LeaseLost, 3600)
		rt := &restartingDocker{adoptingRuntime: left}
		rt.fails.Store(1) // serve's first try
		j := job(3600, nil)
		srv.assign(idlegrid.Lease{ID: "lease_b", JobID: "job_b", GPUUUIDs: left.left[0].GPUs, LimitSeconds: 3600, Tier: j.Tier}, j)
		r := startAgent(t, cfg, srv, rt)
		waitFor(t, "lease_b to run", leaseIn(srv, "lease_b", idlegrid.LeaseRunning))
		if o := rt.overlaps(); len(o) > 0 {
			t.Errorf("workloads shared a GPU: %s", strings.Join(o, "; "))
		}
		if _, exited := left.exit("lease_a"); !exited {
			t.Error("lease_a's workload, which the server ended, still runs")
		}
		if err := r.stop(t); err != nil {
			t.Fatal(err)
		}
		rt.Close()
	})
}

// restartingDocker is an adoptingRuntime whose first Adopt calls fail, as
// the docker runtime's do while the engine restarts. It notes a workload
// started on a GPU that one left behind, not yet exited, holds: the
// previous agent's workloads run whether or not one has taken them back.
type restartingDocker struct {
	*adoptingRuntime
	fails   atomic.Int32 // Adopt calls still to fail
	mu      sync.Mutex
	overlap []string
}

func (r *restartingDocker) Adopt(ctx context.Context, events chan<- runtime.Event) ([]string, error) {
	if r.fails.Add(-1) >= 0 {
		return nil, errors.New("Cannot connect to the Docker daemon at unix:///var/run/docker.sock")
	}
	return r.adoptingRuntime.Adopt(ctx, events)
}

func (r *restartingDocker) Start(ctx context.Context, w runtime.Workload, events chan<- runtime.Event) error {
	for _, o := range r.left {
		if _, exited := r.exit(o.LeaseID); !exited && slices.ContainsFunc(w.GPUs, func(u string) bool { return slices.Contains(o.GPUs, u) }) {
			r.mu.Lock()
			r.overlap = append(r.overlap, fmt.Sprintf("%s started on the GPU of %s, which still ran", w.LeaseID, o.LeaseID))
			r.mu.Unlock()
		}
	}
	return r.adoptingRuntime.Start(ctx, w, events)
}

func (r *restartingDocker) overlaps() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.overlap...)
}

// gpuLedger is a runtime that notes when each workload started and
// exited, and any that started on a GPU another workload still held.
type gpuLedger struct {
	runtime.Runtime
	mu      sync.Mutex
	holder  map[string]string // GPU UUID → the lease whose workload holds it
	starts  map[string]time.Time
	exits   map[string]time.Time
	overlap []string
}

func (g *gpuLedger) Start(ctx context.Context, w runtime.Workload, events chan<- runtime.Event) error {
	g.mu.Lock()
	if g.holder == nil {
		g.holder, g.starts, g.exits = map[string]string{}, map[string]time.Time{}, map[string]time.Time{}
	}
	for _, u := range w.GPUs {
		if h, ok := g.holder[u]; ok {
			g.overlap = append(g.overlap, fmt.Sprintf("%s started on %s, which %s held", w.LeaseID, u, h))
		}
		g.holder[u] = w.LeaseID
	}
	g.starts[w.LeaseID] = time.Now()
	g.mu.Unlock()
	mine, quit := make(chan runtime.Event), make(chan struct{})
	go func() { // ends at the workload's Exit, or when it never started
		for {
			select {
			case ev := <-mine:
				if ev.Exit != nil {
					g.release(w)
				}
				events <- ev
				if ev.Exit != nil {
					return
				}
			case <-quit:
				return
			}
		}
	}()
	if err := g.Runtime.Start(ctx, w, mine); err != nil {
		close(quit)
		g.release(w)
		return err
	}
	return nil
}

// release frees the workload's GPUs and notes its exit.
func (g *gpuLedger) release(w runtime.Workload) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, u := range w.GPUs {
		if g.holder[u] == w.LeaseID {
			delete(g.holder, u)
		}
	}
	g.exits[w.LeaseID] = time.Now()
}

func (g *gpuLedger) overlaps() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.overlap...)
}

func (g *gpuLedger) started(id string) time.Time {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.starts[id]
}

func (g *gpuLedger) exited(id string) time.Time {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.exits[id]
}
