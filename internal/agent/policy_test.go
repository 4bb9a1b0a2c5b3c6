package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
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

// rig is a running agent whose fake GPUs, runtime and processes a test
// controls.
type rig struct {
	*running
	srv *fakeServer
	det *gpufake.Detector
	rt  *recordingRuntime

	mu   sync.Mutex
	ours map[int]bool // host PIDs of the agent's workloads
}

// startRig runs an agent for cfg with fake GPUs the test can turn the
// knobs of; det, when not nil, wraps them (to hide or count abilities).
func startRig(tb testing.TB, cfg *agent.Config, wrap func(*gpufake.Detector) gpu.Detector) *rig {
	tb.Helper()
	key, err := nodekey.LoadOrCreate(cfg.KeyPath())
	if err != nil {
		tb.Fatal(err)
	}
	d, err := cfg.Detector(key)
	if err != nil {
		tb.Fatal(err)
	}
	r := &rig{srv: &fakeServer{}, det: d.(*gpufake.Detector), rt: &recordingRuntime{Runtime: &rtfake.Runtime{}}, ours: map[int]bool{}}
	var det gpu.Detector = r.det
	if wrap != nil {
		det = wrap(r.det)
	}
	a, err := agent.New(agent.Options{
		Config: cfg, Server: r.srv, Detector: det, Runtime: r.rt, Key: key,
		Host:        &agent.Host{Name: "host", CPUCores: 8, RAMMB: 32768, DiskGB: 1000},
		Logger:      slog.New(slog.NewTextHandler(testOutput(tb), &slog.HandlerOptions{Level: slog.LevelDebug})),
		Version:     "test",
		OwnsProcess: r.owns,
	})
	if err != nil {
		tb.Fatalf("New: %v", err)
	}
	devs, _ := r.det.Detect(context.Background())
	r.running = &running{a: a, done: make(chan error, 1)}
	for _, g := range devs {
		r.gpus = append(r.gpus, g.UUID)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() { r.done <- a.Run(ctx) }()
	waitFor(tb, "the first offer", func() bool { _, offers, _ := r.srv.counts(); return offers >= 1 })
	return r
}

func (r *rig) owns(pid int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ours[pid]
}

// lease places a lease of j on the GPUs with the given indexes.
func (r *rig) lease(id string, j idlegrid.JobSpec, notice int64, gpuIdx ...int) {
	var uuids []string
	for _, i := range gpuIdx {
		uuids = append(uuids, r.gpus[i])
	}
	r.srv.assign(idlegrid.Lease{ID: id, JobID: "job_" + id, GPUUUIDs: uuids, LimitSeconds: j.DurationSeconds, Tier: j.Tier, NoticeSeconds: notice}, j)
}

// offer returns the offer the server has now, and how many it was sent.
func (r *rig) offer() (idlegrid.Offer, int) {
	r.srv.mu.Lock()
	defer r.srv.mu.Unlock()
	return r.srv.offers[len(r.srv.offers)-1].Offer, len(r.srv.offers)
}

// offered lists the indexes of the GPUs the node offers now: none when its
// offer's schedule is closed.
func (r *rig) offered() []int {
	o, _ := r.offer()
	if o.Schedule.AvailableUntil(time.Now()).IsZero() {
		return []int{}
	}
	out := []int{}
	for _, g := range o.GPUs {
		out = append(out, slices.Index(r.gpus, g.UUID))
	}
	return out
}

// offering waits until the node offers exactly the GPUs with indexes want.
func (r *rig) offering(tb testing.TB, what string, want ...int) {
	tb.Helper()
	if want == nil {
		want = []int{}
	}
	waitFor(tb, what, func() bool { return slices.Equal(r.offered(), want) })
}

func bronze(seconds int64) idlegrid.JobSpec {
	j := job(seconds, nil)
	j.Tier, j.Interruptible = idlegrid.TierBronze, true
	return j
}

// recordingRuntime records the grace of every Stop and counts starts.
type recordingRuntime struct {
	runtime.Runtime
	mu     sync.Mutex
	graces map[string]time.Duration
	starts int
}

func (r *recordingRuntime) Start(ctx context.Context, w runtime.Workload, events chan<- runtime.Event) error {
	r.mu.Lock()
	r.starts++
	r.mu.Unlock()
	return r.Runtime.Start(ctx, w, events)
}

func (r *recordingRuntime) Stop(id string, grace time.Duration) error {
	r.mu.Lock()
	if r.graces == nil {
		r.graces = map[string]time.Duration{}
	}
	r.graces[id] = grace
	r.mu.Unlock()
	return r.Runtime.Stop(id, grace)
}

func (r *recordingRuntime) stopped(id string) (time.Duration, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	g, ok := r.graces[id]
	return g, ok
}

func (r *recordingRuntime) startCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.starts
}

func whenIdleConfig(tb testing.TB) *agent.Config {
	cfg := testConfig(tb)
	cfg.Mode = agent.ModeWhenIdle
	return cfg
}

func lastReport(srv *fakeServer, id string) idlegrid.LeaseReport {
	rs := srv.reportsFor(id)
	if len(rs) == 0 {
		return idlegrid.LeaseReport{}
	}
	return rs[len(rs)-1]
}

func TestPolicy_WhenIdle(t *testing.T) {
	t.Run("OffersAfterTheIdlePeriod", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			began := time.Now()
			r := startRig(t, whenIdleConfig(t), nil)
			first, _ := r.offer()
			if len(first.GPUs) != 2 || !first.Schedule.AvailableUntil(time.Now()).IsZero() || first.Validate() != nil {
				t.Errorf("first offer = %+v, want both GPUs listed under a schedule that is not open, valid", first)
			}
			r.offering(t, "both GPUs offered", 0, 1)
			if took := time.Since(began); took < agent.DefaultIdleFor || took > agent.DefaultIdleFor+agent.DefaultTelemetryInterval {
				t.Errorf("offered after %v, want after the idle period of %v", took, agent.DefaultIdleFor)
			}
			if o, n := r.offer(); n != 2 || o.Schedule.Mode != idlegrid.ScheduleAlways {
				t.Errorf("offer %d has schedule %+v, want the second offer with the configured schedule", n, o.Schedule)
			}
			time.Sleep(time.Hour)
			if _, n := r.offer(); n != 2 {
				t.Errorf("%d offers after an idle hour, want 2: nothing changed", n)
			}
			r.stop(t)
		})
	})
	t.Run("OwnerComesBack", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r := startRig(t, whenIdleConfig(t), nil)
			r.offering(t, "both GPUs offered", 0, 1)
			r.det.SetProcesses(r.gpus[1], gpu.Process{PID: 48721, Name: "/home/alice/Games/game.x86_64", UsedMB: 9000})
			came := time.Now()
			r.offering(t, "GPU 1 withdrawn", 0)
			if took := time.Since(came); took > agent.DefaultTelemetryInterval+time.Second {
				t.Errorf("withdrawn %v after the owner came back, want within one telemetry interval", took)
			}
			// A start on it that crossed the new offer is refused.
			r.lease("lease_a", job(600, nil), 0, 1)
			waitFor(t, "the refusal", leaseIn(r.srv, "lease_a", idlegrid.LeaseFailed))
			if rep := lastReport(r.srv, "lease_a"); rep.Fault != idlegrid.FaultProvider || !strings.Contains(rep.Message, "the owner is using it: process 48721 (/home/alice/Games/game.x86_64)") {
				t.Errorf("report = %+v, want the node's failure naming the owner's process", rep)
			}
			r.det.SetProcesses(r.gpus[1])
			left := time.Now()
			r.offering(t, "GPU 1 back", 0, 1)
			if took := time.Since(left); took < agent.DefaultIdleFor {
				t.Errorf("offered again %v after the owner left, want the full idle period", took)
			}
			if n := r.rt.startCount(); n != 0 {
				t.Errorf("runtime started %d times, want 0", n)
			}
			r.stop(t)
		})
	})
	t.Run("Utilisation", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			cfg := whenIdleConfig(t)
			cfg.Idle = agent.IdleConfig{MaxUtilPct: 20, For: time.Minute}
			r := startRig(t, cfg, nil)
			r.offering(t, "both GPUs offered", 0, 1)
			r.det.SetUtil(r.gpus[0], 20) // at the threshold: still idle
			time.Sleep(time.Minute)
			if got := r.offered(); !slices.Equal(got, []int{0, 1}) {
				t.Errorf("at 20%% of 20%%, offered %v, want both", got)
			}
			r.det.SetUtil(r.gpus[0], 21)
			r.offering(t, "GPU 0 withdrawn above the threshold", 1)
			r.det.SetUtil(r.gpus[0], 0)
			r.offering(t, "GPU 0 back after a minute idle", 0, 1)
			r.stop(t)
		})
	})
	t.Run("DisplayServerIsNotTheOwner", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r := startRig(t, whenIdleConfig(t), nil)
			r.det.SetProcesses(r.gpus[0], gpu.Process{PID: 2143, Name: "/usr/lib/xorg/Xorg", UsedMB: 1421},
				gpu.Process{PID: 2587, Name: "/usr/bin/gnome-shell --mode=user", UsedMB: 312})
			r.offering(t, "both GPUs offered", 0, 1)
			r.stop(t)
		})
	})
	t.Run("OwnerBackGivesBronzeNotice", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r := startRig(t, whenIdleConfig(t), nil)
			r.offering(t, "both GPUs offered", 0, 1)
			r.lease("lease_bronze", bronze(3600), 45, 0)
			r.lease("lease_default", bronze(3600), 0, 1)
			waitFor(t, "both to run", func() bool {
				return leaseIn(r.srv, "lease_bronze", idlegrid.LeaseRunning)() && leaseIn(r.srv, "lease_default", idlegrid.LeaseRunning)()
			})
			r.mu.Lock()
			r.ours[9001] = true
			r.mu.Unlock()
			// The lease's own process and utilisation are not the owner.
			r.det.SetProcesses(r.gpus[0], gpu.Process{PID: 9001, Name: "python", UsedMB: 20000})
			r.det.SetUtil(r.gpus[0], 100)
			time.Sleep(time.Minute)
			if _, stopped := r.rt.stopped("lease_bronze"); stopped {
				t.Fatal("the lease was stopped for its own process")
			}
			r.det.SetProcesses(r.gpus[0], gpu.Process{PID: 9001, Name: "python", UsedMB: 20000}, gpu.Process{PID: 777, Name: "blender"})
			r.det.SetProcesses(r.gpus[1], gpu.Process{PID: 778, Name: "blender"})
			waitFor(t, "both to end", func() bool {
				return leaseIn(r.srv, "lease_bronze", idlegrid.LeaseFailed)() && leaseIn(r.srv, "lease_default", idlegrid.LeaseFailed)()
			})
			for id, want := range map[string]time.Duration{"lease_bronze": 45 * time.Second, "lease_default": agent.DefaultNotice} {
				if g, _ := r.rt.stopped(id); g != want {
					t.Errorf("%s stopped with %v to go, want its notice of %v", id, g, want)
				}
				rep := lastReport(r.srv, id)
				if rep.Fault != idlegrid.FaultProvider || rep.ExitCode == nil || *rep.ExitCode != 143 ||
					!strings.Contains(rep.Message, "notice") || !strings.Contains(rep.Message, "the owner is using it") {
					t.Errorf("%s report = %+v, want the node's failure after notice, naming the owner", id, rep)
				}
			}
			r.offering(t, "both withdrawn", []int{}...)
			r.stop(t)
		})
	})
	t.Run("OwnerBackSilverRunsOn", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r := startRig(t, whenIdleConfig(t), nil)
			r.offering(t, "both GPUs offered", 0, 1)
			r.lease("lease_a", job(3600, nil), 0, 0)
			waitFor(t, "the lease to run", leaseIn(r.srv, "lease_a", idlegrid.LeaseRunning))
			r.det.SetProcesses(r.gpus[0], gpu.Process{PID: 777, Name: "blender"})
			r.offering(t, "GPU 0 withdrawn", 1)
			time.Sleep(10 * time.Minute)
			if _, stopped := r.rt.stopped("lease_a"); stopped || r.srv.lease("lease_a").State != idlegrid.LeaseRunning {
				t.Errorf("silver lease = %+v, want it running on", r.srv.lease("lease_a"))
			}
			r.stop(t)
		})
	})
}

func TestPolicy_ScheduleMode(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := startRig(t, testConfig(t), nil)
		if got := r.offered(); !slices.Equal(got, []int{0, 1}) {
			t.Errorf("first offer has %v, want both GPUs at once", got)
		}
		r.det.SetProcesses(r.gpus[0], gpu.Process{PID: 777, Name: "blender"})
		r.det.SetUtil(r.gpus[0], 100)
		time.Sleep(time.Minute)
		if _, n := r.offer(); n != 1 {
			t.Errorf("%d offers, want 1: the owner's use does not matter in schedule mode", n)
		}
		r.stop(t)
	})
}

func TestPolicy_ThermalCap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := testConfig(t)
		cfg.ThermalCapC = 80
		r := startRig(t, cfg, nil)
		r.lease("lease_gold", job(3600, nil), 0, 0)
		waitFor(t, "the lease to run", leaseIn(r.srv, "lease_gold", idlegrid.LeaseRunning))
		r.det.SetTemp(r.gpus[0], 80) // at the cap: fine
		time.Sleep(time.Minute)
		if _, stopped := r.rt.stopped("lease_gold"); stopped {
			t.Fatal("stopped at the cap, want only above it")
		}
		r.det.SetTemp(r.gpus[0], 86)
		r.offering(t, "GPU 0 withdrawn", 1)
		waitFor(t, "the lease to be stopped", leaseIn(r.srv, "lease_gold", idlegrid.LeaseFailed))
		if g, _ := r.rt.stopped("lease_gold"); g != agent.DefaultNotice {
			t.Errorf("stopped with %v to go, want the notice %v", g, agent.DefaultNotice)
		}
		if rep := lastReport(r.srv, "lease_gold"); rep.Fault != idlegrid.FaultProvider || !strings.Contains(rep.Message, "thermal cap: 86°C, above the cap of 80°C") {
			t.Errorf("report = %+v, want the node's failure for the thermal cap", rep)
		}
		r.lease("lease_new", job(60, nil), 0, 0)
		waitFor(t, "the refusal", leaseIn(r.srv, "lease_new", idlegrid.LeaseFailed))
		if rep := lastReport(r.srv, "lease_new"); rep.Fault != idlegrid.FaultProvider || !strings.Contains(rep.Message, "thermal cap") {
			t.Errorf("report = %+v, want a refusal for the thermal cap", rep)
		}
		r.det.SetTemp(r.gpus[0], 77) // cooler, but not by the hysteresis
		time.Sleep(time.Minute)
		if got := r.offered(); !slices.Equal(got, []int{1}) {
			t.Errorf("at 77°C offered %v, want GPU 0 still withdrawn", got)
		}
		r.det.SetTemp(r.gpus[0], 75)
		r.offering(t, "GPU 0 back", 0, 1)
		if n := r.rt.startCount(); n != 1 {
			t.Errorf("runtime started %d times, want only the first lease", n)
		}
		r.stop(t)
	})
}

// The node keeps its rules while the server is out of reach: a GPU over
// the thermal cap gives its lease notice, though the offer that withdraws
// it cannot be published.
func TestPolicy_ThermalCapDuringAnOutage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := testConfig(t)
		cfg.ThermalCapC = 80
		r := startRig(t, cfg, nil)
		r.lease("lease_gold", job(3600, nil), 0, 0)
		waitFor(t, "the lease to run", leaseIn(r.srv, "lease_gold", idlegrid.LeaseRunning))
		down := idlegrid.Errorf(idlegrid.EUNAVAILABLE, "server unreachable")
		r.srv.fail("UpdateOffer", slices.Repeat([]error{down}, 1000)...)
		r.det.SetTemp(r.gpus[1], 86) // a new offer, that cannot be published
		time.Sleep(time.Minute)
		r.det.SetTemp(r.gpus[0], 86) // then the leased GPU
		time.Sleep(5 * time.Minute)  // more than the notice
		if _, stopped := r.rt.stopped("lease_gold"); !stopped {
			t.Fatal("the lease on the GPU over the cap was never stopped while its offer could not be published")
		}
		r.stop(t)
	})
}

// powerCounter counts SetPowerLimit calls on a fake detector.
type powerCounter struct {
	*gpufake.Detector
	mu    sync.Mutex
	calls int
}

func (p *powerCounter) SetPowerLimit(ctx context.Context, uuid string, w int) (int, error) {
	p.mu.Lock()
	p.calls++
	p.mu.Unlock()
	return p.Detector.SetPowerLimit(ctx, uuid, w)
}

func (p *powerCounter) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls
}

// refusing is a fake detector one GPU of which refuses power limits
// while refuse(true) holds, as a driver does that does not support them.
type refusing struct {
	*gpufake.Detector
	bad string
	mu  sync.Mutex
	on  bool
}

func refuseOn(d *gpufake.Detector, idx int) *refusing {
	devs, _ := d.Detect(context.Background())
	return &refusing{Detector: d, bad: devs[idx].UUID}
}

func (f *refusing) refuse(on bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.on = on
}

func (f *refusing) SetPowerLimit(ctx context.Context, uuid string, w int) (int, error) {
	f.mu.Lock()
	refused := f.on && uuid == f.bad
	f.mu.Unlock()
	if refused {
		return 0, errors.New("Not Supported")
	}
	return f.Detector.SetPowerLimit(ctx, uuid, w)
}

// unknownLimit is a fake detector whose driver does not report one GPU's
// power limit (nvidia-smi's N/A).
type unknownLimit struct {
	*gpufake.Detector
	uuid string
}

func (u unknownLimit) Detect(ctx context.Context) ([]gpu.Device, error) {
	devs, err := u.Detector.Detect(ctx)
	for i := range devs {
		if devs[i].UUID == u.uuid {
			devs[i].PowerLimitW = 0
		}
	}
	return devs, err
}

// readPower reads the record of the limits the agent is to set back.
func readPower(tb testing.TB, cfg *agent.Config) map[string]int {
	tb.Helper()
	data, err := os.ReadFile(filepath.Join(cfg.DataDir, "power.json"))
	if errors.Is(err, os.ErrNotExist) {
		return map[string]int{}
	} else if err != nil {
		tb.Fatal(err)
	}
	was := map[string]int{}
	if err := json.Unmarshal(data, &was); err != nil {
		tb.Fatalf("power.json: %v", err)
	}
	return was
}

// detectOnly hides a detector's power control.
type detectOnly struct{ d gpu.Detector }

func (d detectOnly) Detect(ctx context.Context) ([]gpu.Device, error) { return d.d.Detect(ctx) }

func TestPolicy_PowerCap(t *testing.T) {
	t.Run("Applied", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			cfg := testConfig(t)
			cfg.PowerCapW = 300
			var pc *powerCounter
			r := startRig(t, cfg, func(d *gpufake.Detector) gpu.Detector { pc = &powerCounter{Detector: d}; return pc })
			time.Sleep(time.Hour)
			want := []gpufake.PowerLimit{{UUID: r.gpus[0], Watts: 300}, {UUID: r.gpus[1], Watts: 300}}
			if got := r.det.PowerLimits(); !slices.Equal(got, want) || pc.count() != 2 {
				t.Errorf("power limits = %v after %d calls, want %v once each", got, pc.count(), want)
			}
			r.stop(t)
		})
	})
	t.Run("SetBackAtStop", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			cfg := testConfig(t)
			cfg.PowerCapW = 300
			// A previous agent capped GPU 0 from 420 W and crashed: what
			// GPU 0 has now is the cap, and 420 W is what it gets back.
			r := startRig(t, cfg, func(d *gpufake.Detector) gpu.Detector {
				devs, _ := d.Detect(context.Background())
				if err := os.WriteFile(filepath.Join(cfg.DataDir, "power.json"), []byte(fmt.Sprintf(`{%q: 420}`, devs[0].UUID)), 0o600); err != nil {
					t.Fatal(err)
				}
				return d
			})
			time.Sleep(time.Hour)
			devs, _ := r.det.Detect(context.Background())
			before := devs[1].PowerMaxW // the fake's limit before the cap: its most
			r.stop(t)
			got := r.det.PowerLimits()
			want := []gpufake.PowerLimit{{UUID: r.gpus[0], Watts: 300}, {UUID: r.gpus[1], Watts: 300}}
			if len(got) != 4 || !slices.Equal(got[:2], want) {
				t.Fatalf("power limits = %v, want the caps, then the limits from before", got)
			}
			back := map[string]int{got[2].UUID: got[2].Watts, got[3].UUID: got[3].Watts}
			if back[r.gpus[0]] != 420 || back[r.gpus[1]] != before {
				t.Errorf("set back to %v, want GPU 0 to 420 W (the record) and GPU 1 to %d W", back, before)
			}
			if _, err := os.Stat(filepath.Join(cfg.DataDir, "power.json")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("power.json after the limits were set back: %v, want it gone", err)
			}
		})
	})
	t.Run("BelowTheBoardsMinimum", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			cfg := testConfig(t)
			cfg.PowerCapW = 50 // an RTX 4090 (fake) goes down to 150 W
			r := startRig(t, cfg, nil)
			time.Sleep(time.Hour)
			if got := r.det.PowerLimits(); len(got) != 2 || got[0].Watts != 150 {
				t.Errorf("power limits = %v, want the board's minimum, once each", got)
			}
			r.stop(t)
		})
	})
	t.Run("NotPermitted", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			cfg := testConfig(t)
			cfg.PowerCapW = 300
			var pc *powerCounter
			r := startRig(t, cfg, func(d *gpufake.Detector) gpu.Detector {
				d.FailPowerLimits(errors.New("Insufficient Permissions"))
				pc = &powerCounter{Detector: d}
				return pc
			})
			time.Sleep(time.Hour)
			if n := pc.count(); n != 2 {
				t.Errorf("%d attempts, want one per GPU: a refusal is not retried", n)
			}
			if got := r.offered(); !slices.Equal(got, []int{0, 1}) {
				t.Errorf("offered %v, want both GPUs regardless", got)
			}
			r.stop(t)
		})
	})
	t.Run("RefusedCapLeavesNoRecord", func(t *testing.T) {
		// GPU 0 refuses the cap: it keeps its limit, so there is nothing
		// to set back, and GPU 1 alone is set back when the agent stops.
		synctest.Test(t, func(t *testing.T) {
			cfg := testConfig(t)
			cfg.PowerCapW = 300
			var f *refusing
			r := startRig(t, cfg, func(d *gpufake.Detector) gpu.Detector { f = refuseOn(d, 0); f.refuse(true); return f })
			time.Sleep(time.Minute)
			devs, _ := r.det.Detect(context.Background())
			before := devs[1].PowerMaxW // the fake's limit before the cap
			if was := readPower(t, cfg); !maps.Equal(was, map[string]int{r.gpus[1]: before}) {
				t.Errorf("power.json = %v, want only GPU 1's limit: GPU 0 refused the cap", was)
			}
			r.stop(t)
			want := []gpufake.PowerLimit{{UUID: r.gpus[1], Watts: 300}, {UUID: r.gpus[1], Watts: before}}
			if got := r.det.PowerLimits(); !slices.Equal(got, want) {
				t.Errorf("power limits = %v, want %v: GPU 0 never capped, nor set back", got, want)
			}
			if _, err := os.Stat(filepath.Join(cfg.DataDir, "power.json")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("power.json after the limits were set back: %v, want it gone", err)
			}
		})
	})
	t.Run("SetBackPastARefusal", func(t *testing.T) {
		// GPU 0 refuses to be set back: GPU 1 is set back all the same,
		// and the record keeps GPU 0's alone, for the next start.
		synctest.Test(t, func(t *testing.T) {
			cfg := testConfig(t)
			cfg.PowerCapW = 300
			var f *refusing
			r := startRig(t, cfg, func(d *gpufake.Detector) gpu.Detector { f = refuseOn(d, 0); return f })
			time.Sleep(time.Minute)
			devs, _ := r.det.Detect(context.Background())
			before := devs[1].PowerMaxW
			f.refuse(true)
			r.stop(t)
			devs, _ = r.det.Detect(context.Background())
			if devs[0].PowerLimitW != 300 || devs[1].PowerLimitW != before {
				t.Errorf("limits after stop %d W and %d W, want GPU 0 still capped at 300 W and GPU 1 set back to %d W",
					devs[0].PowerLimitW, devs[1].PowerLimitW, before)
			}
			if was := readPower(t, cfg); !maps.Equal(was, map[string]int{r.gpus[0]: devs[0].PowerMaxW}) {
				t.Errorf("power.json = %v, want only GPU 0's limit, not set back", was)
			}
		})
	})
	t.Run("LimitUnknown", func(t *testing.T) {
		// The driver does not report GPU 0's limit: capping it would
		// leave nothing to set back, and would be done again every look.
		synctest.Test(t, func(t *testing.T) {
			cfg := testConfig(t)
			cfg.PowerCapW = 300
			r := startRig(t, cfg, func(d *gpufake.Detector) gpu.Detector {
				devs, _ := d.Detect(context.Background())
				return unknownLimit{Detector: d, uuid: devs[0].UUID}
			})
			time.Sleep(time.Hour)
			if got, want := r.det.PowerLimits(), []gpufake.PowerLimit{{UUID: r.gpus[1], Watts: 300}}; !slices.Equal(got, want) {
				t.Errorf("%d power limits set (first %v), want %v: GPU 0 left alone", len(got), got[:min(len(got), 3)], want)
			}
			if was := readPower(t, cfg); len(was) != 1 || was[r.gpus[0]] != 0 {
				t.Errorf("power.json = %v, want GPU 1's limit alone", was)
			}
			r.stop(t)
		})
	})
	t.Run("DetectorCannot", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			cfg := testConfig(t)
			cfg.PowerCapW = 300
			r := startRig(t, cfg, func(d *gpufake.Detector) gpu.Detector { return detectOnly{d} })
			time.Sleep(time.Minute)
			if got := r.offered(); !slices.Equal(got, []int{0, 1}) || len(r.det.PowerLimits()) != 0 {
				t.Errorf("offered %v with limits %v, want both GPUs and no limit", got, r.det.PowerLimits())
			}
			r.stop(t)
		})
	})
}

func TestPolicy_AllowedWork(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := testConfig(t)
		cfg.Ask.AllowedKinds = []idlegrid.WorkloadKind{idlegrid.KindTraining, idlegrid.KindFineTune}
		cfg.AllowedImages = []string{"ghcr.io/acme/", "pytorch/pytorch"}
		r := startRig(t, cfg, nil)
		evalJob := job(60, nil)
		evalJob.Kind = idlegrid.KindEval
		evil := job(60, nil)
		evil.Image = "ghcr.io/acme-evil/miner:1"
		hub := job(60, nil)
		hub.Image = "pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime"
		r.lease("lease_kind", evalJob, 0, 0)
		r.lease("lease_image", evil, 0, 0)
		r.lease("lease_ok", hub, 0, 1)
		waitFor(t, "the refusals", func() bool {
			return leaseIn(r.srv, "lease_kind", idlegrid.LeaseFailed)() && leaseIn(r.srv, "lease_image", idlegrid.LeaseFailed)()
		})
		for id, want := range map[string]string{
			"lease_kind":  `workload kind "eval" is not among its allowed kinds (training, fine-tuning)`,
			"lease_image": `image "ghcr.io/acme-evil/miner:1" is not in its allowed_images`,
		} {
			if rep := lastReport(r.srv, id); rep.Fault != idlegrid.FaultProvider || !strings.Contains(rep.Message, want) {
				t.Errorf("%s report = %+v, want the node's refusal: %s", id, rep, want)
			}
		}
		waitFor(t, "the allowed job to succeed", leaseIn(r.srv, "lease_ok", idlegrid.LeaseSucceeded))
		if n := r.rt.startCount(); n != 1 {
			t.Errorf("runtime started %d times, want only the allowed job", n)
		}
		r.stop(t)
	})
}

func TestPolicy_GPUHealth(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := startRig(t, testConfig(t), nil)
		r.lease("lease_a", job(3600, nil), 0, 1)
		waitFor(t, "the lease to run", leaseIn(r.srv, "lease_a", idlegrid.LeaseRunning))
		r.det.AddXid(r.gpus[1], 13) // a program's fault
		time.Sleep(time.Minute)
		if got := r.offered(); !slices.Equal(got, []int{0, 1}) {
			t.Errorf("after Xid 13 offered %v, want both", got)
		}
		r.det.AddXid(r.gpus[1], 79)
		r.offering(t, "GPU 1 withdrawn after Xid 79", 0)
		if _, stopped := r.rt.stopped("lease_a"); stopped {
			t.Error("the lease on the faulty GPU was stopped; it is left to fail by itself")
		}
		r.lease("lease_b", job(60, nil), 0, 1)
		waitFor(t, "the refusal", leaseIn(r.srv, "lease_b", idlegrid.LeaseFailed))
		if rep := lastReport(r.srv, "lease_b"); !strings.Contains(rep.Message, "unhealthy: Xid 79") {
			t.Errorf("report = %+v, want the Xid named", rep)
		}
		r.det.Remove(r.gpus[0])
		r.offering(t, "none offered once GPU 0 vanished too")
		if o, _ := r.offer(); len(o.GPUs) != 1 || o.GPUs[0].UUID != r.gpus[1] {
			t.Errorf("closed offer lists %+v, want the GPU still there", o.GPUs)
		}
		r.det.Remove(r.gpus[1])
		time.Sleep(time.Minute)
		if o, _ := r.offer(); len(o.GPUs) != 1 || !o.Schedule.AvailableUntil(time.Now()).IsZero() {
			t.Errorf("with no GPUs left the offer is %+v, want the last one, closed", o)
		}
		r.det.Restore(r.gpus[0])
		r.offering(t, "GPU 0 back", 0)
		r.stop(t)
	})
}

// TestPolicy_FaultyGPUStillGivesNotice: a GPU's Xid errors are kept for
// the detector's life, so a fault is the reason a GPU is withdrawn but
// must not turn off the rules that evict: a faulty GPU that overheats, or
// whose owner comes back, still gives its work notice.
func TestPolicy_FaultyGPUStillGivesNotice(t *testing.T) {
	t.Run("TooHot", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			cfg := testConfig(t)
			cfg.ThermalCapC = 80
			r := startRig(t, cfg, nil)
			r.lease("lease_gold", job(3600, nil), 0, 0)
			waitFor(t, "the lease to run", leaseIn(r.srv, "lease_gold", idlegrid.LeaseRunning))
			r.det.AddXid(r.gpus[0], 92) // a high single-bit ECC rate: the hardware's, not a program's
			r.offering(t, "GPU 0 withdrawn for the Xid", 1)
			if _, stopped := r.rt.stopped("lease_gold"); stopped {
				t.Fatal("the fault alone stopped the lease; it is left to fail by itself")
			}
			r.det.SetTemp(r.gpus[0], 95)
			waitFor(t, "the stop", func() bool { _, ok := r.rt.stopped("lease_gold"); return ok })
			waitFor(t, "the lease to end", leaseIn(r.srv, "lease_gold", idlegrid.LeaseFailed))
			if rep := lastReport(r.srv, "lease_gold"); !strings.Contains(rep.Message, "unhealthy: Xid 92") {
				t.Errorf("report = %+v, want the fault given as the reason, which takes precedence", rep)
			}
			r.stop(t)
		})
	})
	t.Run("OwnerBack", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			cfg := whenIdleConfig(t)
			cfg.Idle.For = time.Minute
			r := startRig(t, cfg, nil)
			r.offering(t, "both offered", 0, 1)
			r.lease("lease_b", bronze(3600), 60, 0)
			waitFor(t, "the lease to run", leaseIn(r.srv, "lease_b", idlegrid.LeaseRunning))
			r.det.AddXid(r.gpus[0], 92)
			r.offering(t, "GPU 0 withdrawn for the Xid", 1)
			r.det.SetProcesses(r.gpus[0], gpu.Process{PID: 4242, Name: "/usr/bin/blender"})
			waitFor(t, "the stop", func() bool { _, ok := r.rt.stopped("lease_b"); return ok })
			if g, _ := r.rt.stopped("lease_b"); g != time.Minute {
				t.Errorf("stopped with grace %v, want the lease's notice of 1m", g)
			}
			r.stop(t)
		})
	})
}

func TestConfig_AllowsImage(t *testing.T) {
	tests := []struct {
		allowed []string
		image   string
		want    bool
	}{
		{nil, "anything:1", true},
		{[]string{"*"}, "ghcr.io/x/y:1", true},
		{[]string{"ghcr.io/acme/"}, "ghcr.io/acme/train:1", true},
		{[]string{"ghcr.io/acme/"}, "ghcr.io/acme/team/train:1", true},
		{[]string{"ghcr.io/acme"}, "ghcr.io/acme/train:1", true},
		{[]string{"ghcr.io/acme"}, "ghcr.io/acme-evil/train:1", false},
		{[]string{"ghcr.io/acme/train"}, "ghcr.io/acme/train@sha256:abc", true},
		{[]string{"ghcr.io/acme/train"}, "ghcr.io/acme/trainer:1", false},
		{[]string{"ghcr.io/acme/train:1"}, "ghcr.io/acme/train:1", true},
		{[]string{"ghcr.io/acme/train:1"}, "ghcr.io/acme/train:12", false},
		{[]string{"python"}, "python:3.12", true},
		{[]string{"python"}, "docker.io/library/python:3.12", true},
		{[]string{"docker.io/library/python"}, "python", true},
		{[]string{"python"}, "python-evil/x:1", false},
		{[]string{"pytorch/pytorch"}, "docker.io/pytorch/pytorch:2.3", true},
		{[]string{"pytorch/pytorch"}, "pytorch/pytorch-nightly:1", false},
		{[]string{"nvcr.io/nvidia/pytorch:24.*"}, "nvcr.io/nvidia/pytorch:24.05-py3", true},
		{[]string{"nvcr.io/nvidia/pytorch:24.*"}, "nvcr.io/nvidia/pytorch:23.10-py3", false},
		{[]string{"ghcr.io/acme/*"}, "ghcr.io/acme/train:1", true},
		{[]string{"ghcr.io/acme/*"}, "ghcr.io/acme/team/train:1", false}, // * stops at '/'
		{[]string{"localhost:5000/"}, "localhost:5000/job:1", true},
		{[]string{"GHCR.io/Acme/"}, "ghcr.io/acme/x:1", true},
		{[]string{"ghcr.io/a/", "python"}, "python:3", true},
	}
	for _, tt := range tests {
		c := agent.Config{AllowedImages: tt.allowed}
		if got := c.AllowsImage(tt.image); got != tt.want {
			t.Errorf("allowed_images %q: AllowsImage(%q) = %v, want %v", tt.allowed, tt.image, got, tt.want)
		}
	}
}

func TestConfig_PolicyErrors(t *testing.T) {
	tests := []struct {
		yaml, field, want string
	}{
		{"mode: sometimes\n", "mode", "schedule or when-idle"},
		{"mode: when-idle\nidle:\n  max_util_pct: 101\n", "idle.max_util_pct", "between 0 and 100"},
		{"idle:\n  for: -1m\n", "idle.for", "between 0s and 24h"},
		{"idle:\n  for: 600\n", "idle.for", "a duration such as 10m"},
		{"idle:\n  ignore_processes: [/usr/bin/Xorg]\n", "idle.ignore_processes[0]", "executable name"},
		{"thermal_cap_c: 30\n", "thermal_cap_c", "between 40 and 110"},
		{"power_cap_w: 5\n", "power_cap_w", "between 10 and 3000"},
		{"telemetry_interval: 10ms\n", "telemetry_interval", "between 1s and 5m"},
		{"allowed_images: ['ghcr.io/[acme']\n", "allowed_images[0]", "bad glob"},
		{"allowed_images: ['ghcr.io/a b']\n", "allowed_images[0]", "want an image"},
		{"idle:\n  bogus: 1\n", "idle.bogus", "unknown key"},
	}
	for _, tt := range tests {
		t.Run(tt.field, func(t *testing.T) {
			_, err := agent.ParseConfig([]byte(minimal + tt.yaml))
			e, ok := err.(*idlegrid.Error)
			if !ok || e.Field != tt.field || !strings.Contains(e.Message, tt.want) {
				t.Errorf("ParseConfig error = %v, want one naming %s: %s", err, tt.field, tt.want)
			}
		})
	}
}
