package agent

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/challenge"
	"github.com/idlegrid/idlegrid/internal/gpu"
	"github.com/idlegrid/idlegrid/internal/gpu/cuda"
	"github.com/idlegrid/idlegrid/internal/gpu/fake"
)

// realGPUs is a detector of GPUs that are not simulated: the agent must
// run challenges on them with a GPUChallenger.
type realGPUs []gpu.Device

func (d realGPUs) Detect(context.Context) ([]gpu.Device, error) { return d, nil }

// cpuChallenger stands in for CUDA: it computes the product on the CPU
// (or what wrong makes of it) and reports a GPU's time and memory.
type cpuChallenger struct {
	res   cuda.Result
	err   error
	wrong func(t challenge.Task) challenge.Task // the task it computes instead
	runs  int
}

func (c *cpuChallenger) Run(ctx context.Context, uuid string, t challenge.Task) (*cuda.Result, error) {
	c.runs++
	if c.err != nil {
		return nil, c.err
	}
	if c.wrong != nil {
		t = c.wrong(t)
	}
	hashes, _, err := challenge.Run(ctx, t)
	if err != nil {
		return nil, err
	}
	res := c.res
	res.RowHashes = hashes
	return &res, nil
}

const testGPU = "GPU-5b1a0c3e-9f2d-4e61-8a7b-0123456789ab"

func testChallenge(size int) *idlegrid.Challenge {
	return &idlegrid.Challenge{ID: "chl_1", GPUUUID: testGPU, Model: "RTX4090", VRAMMB: 24564,
		Seed: "00112233445566778899aabbccddeeff", Size: size}
}

func gpuAgent(procs ...gpu.Process) *Agent {
	dev := gpu.Device{GPU: idlegrid.GPU{UUID: testGPU, Model: "RTX4090", VRAMMB: 24564}, Processes: procs}
	return &Agent{det: realGPUs{dev}, log: slog.New(slog.DiscardHandler)}
}

// honestResult is what an RTX 4090 reports: its peak time, all its memory.
func honestResult(size int) cuda.Result {
	spec, _ := challenge.LookupSpec("RTX4090")
	return cuda.Result{Elapsed: spec.Expected(size) * 3 / 2, VRAMMB: 24100, TotalMB: 24564, FreeMBAtRun: 24200}
}

func TestAgent_runOnGPU(t *testing.T) {
	ctx := context.Background()
	const n = 128
	c := testChallenge(n)
	spec, _ := challenge.LookupSpec(c.Model)
	lo, hi := spec.Band(n)
	c.MinNanos, c.MaxNanos = int64(lo), int64(hi)

	t.Run("honest", func(t *testing.T) {
		ch := &cpuChallenger{res: honestResult(n)}
		ans := gpuAgent(gpu.Process{PID: os.Getpid(), Name: "idlegrid"}).runOnGPU(ctx, c, &attestation{gpu: ch})
		if ans.Unsupported != "" {
			t.Fatalf("answer unsupported: %s", ans.Unsupported)
		}
		if ans.ElapsedNanos != int64(honestResult(n).Elapsed) || ans.VRAMMB != 24100 || ans.Digest != challenge.Digest(ans.RowHashes) {
			t.Fatalf("answer = %d ns, %d MB, digest %s; want the GPU's time and memory and the hashes' digest", ans.ElapsedNanos, ans.VRAMMB, ans.Digest)
		}
		if v := challenge.Judge(c, &ans, []int{0, 5, n - 1}); !v.Passed {
			t.Fatalf("the coordinator would fail it: %v", v.Failures)
		}
	})

	for _, tc := range []struct {
		name  string
		agent *Agent
		ch    *cpuChallenger
		want  string
	}{
		{"no runner", gpuAgent(), nil, "cannot run the challenge workload on a real GPU: CUDA challenge runner unavailable"},
		{"CUDA error", gpuAgent(), &cpuChallenger{err: errors.New("allocating A (64 MB): cuMemAlloc_v2: CUDA_ERROR_OUT_OF_MEMORY (2)")},
			"the GPU could not run the challenge: allocating A (64 MB): cuMemAlloc_v2: CUDA_ERROR_OUT_OF_MEMORY (2)"},
		{"wrong product", gpuAgent(), &cpuChallenger{res: honestResult(n), wrong: func(t challenge.Task) challenge.Task {
			t.Seed[0] ^= 1 // e.g. the operands laid out wrong
			return t
		}}, "the GPU result failed the agent's own self-check: row "},
		{"missing rows", gpuAgent(), &cpuChallenger{res: honestResult(n), wrong: func(t challenge.Task) challenge.Task {
			t.Size = n - 64
			return t
		}}, "self-check: 2048 bytes of row hashes for N=128"},
		{"no time", gpuAgent(), &cpuChallenger{}, "self-check: the product took 0s by the GPU's clock"},
		{"busy", gpuAgent(gpu.Process{PID: os.Getpid() + 1, Name: "python"}), &cpuChallenger{res: honestResult(n)},
			"is in use by 1 other processes"},
		{"memory in use", gpuAgent(), &cpuChallenger{res: cuda.Result{Elapsed: time.Millisecond, VRAMMB: 20000, TotalMB: 24564, FreeMBAtRun: 20100}},
			"4464 MB of the GPU's memory were in use by others"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			last := &attestation{why: cuda.ErrUnavailable.Error() + ": libcuda.so.1 not found"}
			if tc.ch != nil {
				last.gpu = tc.ch
			}
			ans := tc.agent.runOnGPU(ctx, c, last)
			if !strings.Contains(ans.Unsupported, tc.want) || ans.RowHashes != nil || ans.Digest != "" {
				t.Fatalf("answer = %+v, want unsupported saying %q", ans, tc.want)
			}
		})
	}

	t.Run("too little memory is answered", func(t *testing.T) {
		// A GPU that really has less memory than claimed is judged, not excused.
		res := honestResult(n)
		res.VRAMMB, res.TotalMB, res.FreeMBAtRun = 15000, 15360, 15100
		ans := gpuAgent().runOnGPU(ctx, c, &attestation{gpu: &cpuChallenger{res: res}})
		if ans.Unsupported != "" || ans.VRAMMB != 15000 {
			t.Fatalf("answer = %+v, want the 15000 MB answered", ans)
		}
		if v := challenge.Judge(c, &ans, []int{1}); v.Passed {
			t.Fatal("the coordinator would pass a GPU with 15000 MB that claims 24564 MB")
		}
	})
}

func TestAgent_settleRunner(t *testing.T) {
	ch := &cpuChallenger{}
	a := gpuAgent()
	a.challenger = ch
	last := &attestation{}
	a.settleRunner(last)
	if last.runner != idlegrid.RunnerCUDA || last.gpu != ch {
		t.Errorf("with a challenger: runner %q, want cuda with it", last.runner)
	}

	det, err := fake.Parse("1xRTX4090", "seed")
	if err != nil {
		t.Fatal(err)
	}
	sim := &Agent{det: det, log: slog.New(slog.DiscardHandler)}
	last = &attestation{}
	sim.settleRunner(last)
	if last.runner != idlegrid.RunnerSimulated || last.gpu != nil {
		t.Errorf("simulated GPUs: runner %q, want simulated", last.runner)
	}

	last = &attestation{}
	gpuAgent().settleRunner(last)
	defer last.close()
	switch {
	case last.runner == idlegrid.RunnerCUDA:
		t.Log("this machine has CUDA: the runner opened")
	case last.runner != idlegrid.RunnerUnknown || !strings.Contains(last.why, "unavailable"):
		t.Errorf("no CUDA: runner %q, why %q; want none, saying CUDA is unavailable", last.runner, last.why)
	}
}

// A GPU that drives a display runs its challenge beside the display
// server and compositor while they hold little of its memory and draw
// little; the answer is judged like any other.
func TestAgent_runOnGPU_desktop(t *testing.T) {
	ctx := context.Background()
	det, err := fake.Parse("1xRTX4090", "desktop")
	if err != nil {
		t.Fatal(err)
	}
	devs, _ := det.Detect(ctx)
	uuid := devs[0].UUID
	const n = 128
	c := testChallenge(n)
	c.GPUUUID = uuid
	spec, _ := challenge.LookupSpec(c.Model)
	lo, hi := spec.Band(n)
	c.MinNanos, c.MaxNanos = int64(lo), int64(hi)
	a := &Agent{det: det, log: slog.New(slog.DiscardHandler)}
	// What the GPU gives the challenge with the display's memory taken.
	beside := func(displayMB int) *cpuChallenger {
		res := honestResult(n)
		res.FreeMBAtRun -= displayMB
		res.VRAMMB -= displayMB
		return &cpuChallenger{res: res}
	}

	det.SetProcesses(uuid, fake.Display(1700)...) // 7% of 24564 MB
	ch := beside(1700)
	ans := a.runOnGPU(ctx, c, &attestation{gpu: ch})
	if ans.Unsupported != "" || ch.runs != 1 {
		t.Fatalf("desktop at rest: answer unsupported %q after %d runs; want the challenge run", ans.Unsupported, ch.runs)
	}
	if v := challenge.Judge(c, &ans, []int{0, n - 1}); !v.Passed {
		t.Fatalf("the coordinator would fail the desktop's answer: %v", v.Failures)
	}

	for _, tc := range []struct {
		name  string
		set   func()
		want  string
		noRun bool
	}{
		{"a compute process too", func() {
			det.SetProcesses(uuid, append(fake.Display(1700), gpu.Process{PID: 9001, Name: "python", UsedMB: 300, Kind: gpu.ProcessCompute})...)
		}, "in use by 1 other processes (PIDs [9001])", true},
		{"a game that only draws", func() {
			det.SetProcesses(uuid, append(fake.Display(1700), gpu.Process{PID: 48721, Name: "game.x86_64", UsedMB: 9000, Kind: gpu.ProcessGraphics})...)
		}, "3 graphics processes (PIDs [2143 2587 48721]) holding 10700 MB, more than 10% of its 24564 MB", true},
		{"drawing hard", func() {
			det.SetProcesses(uuid, fake.Display(1700)...)
			det.SetUtil(uuid, 60)
		}, "60% busy drawing", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			det.SetUtil(uuid, 0)
			tc.set()
			ch := beside(1700)
			ans := a.runOnGPU(ctx, c, &attestation{gpu: ch})
			if !strings.Contains(ans.Unsupported, tc.want) || ans.Digest != "" || (ch.runs > 0) == tc.noRun {
				t.Fatalf("answer = %+v after %d runs, want unsupported saying %q, unrun", ans, ch.runs, tc.want)
			}
		})
	}
}

func TestBusyWith(t *testing.T) {
	const self = 4000
	g := func(pid, mb int) gpu.Process { return gpu.Process{PID: pid, UsedMB: mb, Kind: gpu.ProcessGraphics} }
	dev := func(util, memUsed int, ps ...gpu.Process) gpu.Device {
		return gpu.Device{GPU: idlegrid.GPU{UUID: "GPU-1", VRAMMB: 10000}, UtilPct: util, MemUsedMB: memUsed, Processes: ps}
	}
	for _, tc := range []struct {
		name string
		d    gpu.Device
		want string // "" when free
	}{
		{"idle", dev(0, 1), ""},
		{"only this agent", dev(0, 1, gpu.Process{PID: self}), ""},
		{"display at the bound", dev(DisplayMaxUtilPct, 1001, g(1, 600), g(2, 400)), ""},
		{"display over the bound", dev(0, 1002, g(1, 600), g(2, 401)), "holding 1001 MB, more than 10% of its 10000 MB"},
		{"display of unknown memory, little in use", dev(0, 700, g(1, 0)), ""},
		{"display of unknown memory, much in use", dev(0, 3000, g(1, 0)), "holding 3000 MB"},
		{"drawing over the bound", dev(DisplayMaxUtilPct+1, 101, g(1, 100)), "11% busy drawing for 1 graphics processes"},
		{"unknown kind counts as compute", dev(0, 101, gpu.Process{PID: 7, UsedMB: 100}), "in use by 1 other processes (PIDs [7])"},
		{"memory unknown", gpu.Device{GPU: idlegrid.GPU{UUID: "GPU-1"}, Processes: []gpu.Process{g(1, 100)}}, "more than 10% of its 0 MB"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := busyWith(tc.d, self)
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Errorf("busyWith = %q, want %q", got, tc.want)
			}
		})
	}
}
