package docker

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/idlegrid/idlegrid/internal/agent"
)

var _ agent.ProcessOwner = (*Runtime)(nil)

const (
	ourID   = "3f4e5d6c7b8a99887766554433221100ffeeddccbbaa00112233445566778899"
	otherID = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
)

// mustFakeProc writes a /proc with one cgroup file per PID.
func mustFakeProc(tb testing.TB, cgroups map[int]string) string {
	tb.Helper()
	root := tb.TempDir()
	for pid, content := range cgroups {
		dir := filepath.Join(root, strconv.Itoa(pid))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "cgroup"), []byte(content), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	return root
}

func TestRuntime_OwnsProcess(t *testing.T) {
	proc := mustFakeProc(t, map[int]string{
		// cgroup v2, systemd driver
		101: "0::/system.slice/docker-" + ourID + ".scope\n",
		// cgroup v1, cgroupfs driver
		102: "12:pids:/docker/" + ourID + "\n11:memory:/docker/" + ourID + "\n0::/\n",
		// cgroup v2, cgroupfs driver, dockerd nested in another container
		103: "0::/process_api/abc/docker/" + ourID + "\n",
		// Kubernetes with containerd
		104: "0::/kubepods.slice/kubepods-besteffort.slice/cri-containerd-" + ourID + ".scope\n",
		// another container on the same engine
		201: "0::/system.slice/docker-" + otherID + ".scope\n",
		// the owner's game, in their desktop session
		202: "0::/user.slice/user-1000.slice/session-2.scope\n",
		// a path holding ':', and a line that is not one
		203: "garbage\n0::/odd:path/" + otherID + "\n",
		// an ID only in part
		204: "0::/docker/" + ourID[:40] + "\n",
	})
	r := &Runtime{procRoot: proc, running: map[string]*workload{
		"lease_a": {leaseID: "lease_a", containerID: ourID},
		"lease_b": {leaseID: "lease_b"}, // created, no container yet
	}}
	tests := []struct {
		pid  int
		want bool
	}{
		{101, true}, {102, true}, {103, true}, {104, true},
		{201, false}, {202, false}, {203, false}, {204, false},
		{999, false}, // gone
		{0, false}, {-1, false},
	}
	for _, tt := range tests {
		t.Run(strconv.Itoa(tt.pid), func(t *testing.T) {
			if got := r.OwnsProcess(tt.pid); got != tt.want {
				t.Errorf("OwnsProcess(%d) = %v, want %v", tt.pid, got, tt.want)
			}
		})
	}
	t.Run("ProcessContainerIDs", func(t *testing.T) {
		if got := ProcessContainerIDs(proc, 102); !slices.Equal(got, []string{ourID}) {
			t.Errorf("ProcessContainerIDs(102) = %q, want [%s] once", got, ourID)
		}
		if got := ProcessContainerIDs(proc, 202); got != nil {
			t.Errorf("ProcessContainerIDs(202) = %q, want none", got)
		}
	})
	t.Run("NothingRunning", func(t *testing.T) {
		idle := &Runtime{procRoot: proc, running: map[string]*workload{}}
		if idle.OwnsProcess(101) {
			t.Error("OwnsProcess(101) = true with no workload running")
		}
	})
}

func TestGPUsFromEnv(t *testing.T) {
	tests := []struct {
		env  []string
		want []string
	}{
		{[]string{"HOME=/scratch", "IDLEGRID_GPUS=GPU-a,GPU-b", "X=1"}, []string{"GPU-a", "GPU-b"}},
		{[]string{"IDLEGRID_GPUS="}, nil},
		{[]string{"IDLEGRID_GPUSX=GPU-a"}, nil},
		{nil, nil},
	}
	for _, tt := range tests {
		if got := gpusFromEnv(tt.env); !slices.Equal(got, tt.want) {
			t.Errorf("gpusFromEnv(%q) = %q, want %q", tt.env, got, tt.want)
		}
	}
}

// TestRuntime_OwnsProcess_Engine asks about the real process of a running
// workload, and about the test's own.
func TestRuntime_OwnsProcess_Engine(t *testing.T) {
	r := mustRuntime(t, Options{})
	w := testWorkload(map[string]string{"WORKLOAD_STEPS": "100000", "WORKLOAD_STEP_MS": "100"})
	wa := mustStart(t, r, w)
	wa.line(t, "step 1/")
	info, err := mustEngine(t).ContainerInspect(context.Background(), containerName(w.LeaseID))
	if err != nil {
		t.Fatal(err)
	}
	pid := info.State.Pid
	if _, err := os.Stat(filepath.Join("/proc", strconv.Itoa(pid))); err != nil {
		t.Skipf("the engine's PIDs are not this machine's (%v): dockerd runs in another PID namespace", err)
	}
	if !r.OwnsProcess(pid) {
		cg, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cgroup"))
		t.Errorf("OwnsProcess(%d) = false for the workload's process; its cgroups:\n%s", pid, cg)
	}
	if r.OwnsProcess(os.Getpid()) {
		t.Errorf("OwnsProcess(%d) = true for the test itself", os.Getpid())
	}
	if got := r.LeaseGPUs(w.LeaseID); !slices.Equal(got, w.GPUs) {
		t.Errorf("LeaseGPUs = %q, want %q", got, w.GPUs)
	}
	r.Stop(w.LeaseID, 0)
	wa.exited(t)
	if r.OwnsProcess(pid) || r.LeaseGPUs(w.LeaseID) != nil {
		t.Error("the runtime still owns the workload after its exit")
	}
}
