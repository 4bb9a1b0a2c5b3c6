package docker

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/google/go-cmp/cmp"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/runtime"
)

// These tests need no engine: they check the container the runtime asks for.

func mustOptions(tb testing.TB, o Options) *Options {
	tb.Helper()
	if err := o.setDefaults(16, 64<<30); err != nil {
		tb.Fatalf("setDefaults: %v", err)
	}
	return &o
}

func specWorkload() runtime.Workload {
	return runtime.Workload{
		LeaseID: "lease_a", JobID: "job_a", GPUs: []string{"GPU-fake-1", "GPU-fake-2"},
		Job: idlegrid.JobSpec{Image: "ghcr.io/acme/train:1", Command: []string{"python", "train.py"}, Env: map[string]string{"EPOCHS": "3"}},
	}
}

func TestOptions_SandboxFor(t *testing.T) {
	t.Run("Defaults", func(t *testing.T) {
		s := mustOptions(t, Options{NodeID: "node_a"}).sandboxFor(specWorkload(), "sha256:img", "", "idlegrid-ckpt-job_a")
		h := s.host
		if !h.ReadonlyRootfs || !slices.Equal(h.CapDrop, []string{"ALL"}) || len(h.CapAdd) != 0 || h.Privileged {
			t.Errorf("readonly %v, cap drop %v, cap add %v, privileged %v: want a read-only root, every capability dropped, none added", h.ReadonlyRootfs, h.CapDrop, h.CapAdd, h.Privileged)
		}
		if !slices.Equal(h.SecurityOpt, []string{"no-new-privileges:true"}) {
			t.Errorf("security opts = %v, want no-new-privileges", h.SecurityOpt)
		}
		// Two GPUs: twice the per-GPU defaults.
		if h.NanoCPUs != 4e9 || h.Memory != 16384<<20 || h.MemorySwap != h.Memory || *h.PidsLimit != 4096 {
			t.Errorf("cpus %d, memory %d, swap %d, pids %d: want 4 cores, 16 GiB, no swap, 4096 pids", h.NanoCPUs, h.Memory, h.MemorySwap, *h.PidsLimit)
		}
		if h.NetworkMode != WorkloadNetwork {
			t.Errorf("network mode = %q, want %s", h.NetworkMode, WorkloadNetwork)
		}
		if len(h.DeviceRequests) != 0 {
			t.Errorf("device requests = %+v, want none for fake GPUs", h.DeviceRequests)
		}
		var mounts []string
		for _, m := range h.Mounts {
			mounts = append(mounts, string(m.Type)+":"+m.Source+":"+m.Target)
		}
		want := []string{"volume:idlegrid-scratch-lease_a:/scratch", "volume:idlegrid-ckpt-job_a:/checkpoint"}
		if diff := cmp.Diff(want, mounts); diff != "" {
			t.Errorf("mounts (-want +got):\n%s", diff)
		}
		if c := s.config; c.Image != "sha256:img" || c.User != DefaultUser || !slices.Equal(c.Cmd, []string{"python", "train.py"}) {
			t.Errorf("image %q, user %q, cmd %v", c.Image, c.User, c.Cmd)
		}
		wantLabels := map[string]string{
			LabelManagedBy: ManagedBy, LabelNode: "node_a", LabelLease: "lease_a", LabelJob: "job_a",
			LabelRole: roleWorkload, LabelImage: "ghcr.io/acme/train:1",
		}
		if diff := cmp.Diff(wantLabels, s.config.Labels); diff != "" {
			t.Errorf("labels (-want +got):\n%s", diff)
		}
		if s.uid != 65534 || s.gid != 65534 || s.mode != 0o755 {
			t.Errorf("volume owner %d:%d mode %o, want 65534:65534 0755", s.uid, s.gid, s.mode)
		}
	})
	t.Run("TierAndNotice", func(t *testing.T) {
		w := specWorkload()
		w.Job.Tier, w.Notice = idlegrid.TierBronze, 2*time.Minute
		labels := mustOptions(t, Options{}).sandboxFor(w, "img", "", "v").config.Labels
		if labels[LabelTier] != "bronze" || noticeLabel(labels[LabelNotice]) != 2*time.Minute {
			t.Errorf("labels %v: want the tier and the notice, for an agent that takes the workload back", labels)
		}
		for _, bad := range []string{"", "soon", "-5s", "0s"} {
			if n := noticeLabel(bad); n != 0 {
				t.Errorf("noticeLabel(%q) = %v, want 0 (unknown)", bad, n)
			}
		}
	})
	t.Run("Env", func(t *testing.T) {
		w := specWorkload()
		w.Job.CheckpointRef = "s3://bucket/ckpt"
		got := mustOptions(t, Options{}).sandboxFor(w, "img", "", "v").config.Env
		want := []string{
			"EPOCHS=3", "HOME=/scratch", "IDLEGRID_CHECKPOINT_DIR=/checkpoint", "IDLEGRID_CHECKPOINT_REF=s3://bucket/ckpt",
			"IDLEGRID_GPUS=GPU-fake-1,GPU-fake-2", "IDLEGRID_JOB_ID=job_a", "IDLEGRID_LEASE_ID=lease_a",
			"IDLEGRID_SCRATCH_DIR=/scratch", "NVIDIA_VISIBLE_DEVICES=void",
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("env (-want +got):\n%s", diff)
		}
	})
	t.Run("RealGPUs", func(t *testing.T) {
		w := specWorkload()
		w.GPUs = []string{"GPU-0b1c2d3e-aaaa-bbbb-cccc-000000000001", "GPU-0b1c2d3e-aaaa-bbbb-cccc-000000000002"}
		s := mustOptions(t, Options{}).sandboxFor(w, "img", "", "v")
		want := []container.DeviceRequest{{Driver: "nvidia", DeviceIDs: w.GPUs, Capabilities: [][]string{{"gpu", "compute", "utility"}}}}
		if diff := cmp.Diff(want, s.host.DeviceRequests); diff != "" {
			t.Errorf("device requests (-want +got):\n%s", diff)
		}
		for _, e := range s.config.Env {
			if strings.HasPrefix(e, "NVIDIA_VISIBLE_DEVICES=") {
				t.Errorf("env has %s: the device request, not the runtime, sets it for real GPUs", e)
			}
		}
	})
	t.Run("JobLimits", func(t *testing.T) {
		w := specWorkload()
		w.Job.CPUCores, w.Job.RAMMB = 3, 1000
		h := mustOptions(t, Options{}).sandboxFor(w, "img", "", "v").host
		if h.NanoCPUs != 3e9 || h.Memory != 1000<<20 || h.ShmSize != 250<<20 {
			t.Errorf("cpus %d, memory %d, shm %d: want the job's 3 cores and 1000 MB, a quarter of it as shm", h.NanoCPUs, h.Memory, h.ShmSize)
		}
	})
	t.Run("NodeCaps", func(t *testing.T) {
		w := specWorkload()
		w.Job.CPUCores, w.Job.RAMMB = 64, 1<<20
		s := mustOptions(t, Options{MaxCPUCores: 8, MaxMemoryMB: 32768}).sandboxFor(w, "img", "", "v")
		if s.host.NanoCPUs != 8e9 || s.host.Memory != 32768<<20 {
			t.Errorf("cpus %d, memory %d: want the node's caps, 8 cores and 32 GiB", s.host.NanoCPUs, s.host.Memory)
		}
		if len(s.notes) != 2 || !strings.Contains(s.notes[0], "at most 8") || !strings.Contains(s.notes[1], "at most 32768 MB") {
			t.Errorf("notes = %q, want one per capped limit", s.notes)
		}
	})
	t.Run("MemoryShare", func(t *testing.T) {
		// Two GPUs of eight: a quarter of the node's memory, so that the
		// node's workloads together fit in it.
		o := mustOptions(t, Options{MaxMemoryMB: 64000, DefaultMemoryMBPerGPU: 20000})
		for _, tt := range []struct {
			ram, nodeGPUs int
			want          int64
			note          string
		}{
			{0, 8, 16000, ""}, // the default, 40000 MB for two GPUs, is over the share
			{30000, 8, 16000, "on 2 of its GPUs at most 16000 MB"},
			{10000, 8, 10000, ""}, // within the share
			{30000, 0, 30000, ""}, // no share told: the node's cap
			{30000, 2, 30000, ""}, // all the node's GPUs
		} {
			w := specWorkload()
			w.Job.RAMMB, w.NodeGPUs = tt.ram, tt.nodeGPUs
			s := o.sandboxFor(w, "img", "", "v")
			if s.host.Memory != tt.want<<20 || (tt.note == "") != (len(s.notes) == 0) || tt.note != "" && !strings.Contains(s.notes[0], tt.note) {
				t.Errorf("ram %d on 2 of %d GPUs: memory %d MB, notes %q; want %d MB, a note saying %q", tt.ram, tt.nodeGPUs, s.host.Memory>>20, s.notes, tt.want, tt.note)
			}
		}
	})
	t.Run("NoNetwork", func(t *testing.T) {
		w := specWorkload()
		w.NoNetwork = true
		if got := mustOptions(t, Options{}).sandboxFor(w, "img", "", "v").host.NetworkMode; got != "none" {
			t.Errorf("lease without network: mode %q, want none", got)
		}
		if got := mustOptions(t, Options{NoNetwork: true}).sandboxFor(specWorkload(), "img", "", "v").host.NetworkMode; got != "none" {
			t.Errorf("node without network: mode %q, want none", got)
		}
	})
	t.Run("Capabilities", func(t *testing.T) {
		w := specWorkload()
		w.Capabilities = []string{"cap_sys_ptrace", "SYS_PTRACE"}
		got := mustOptions(t, Options{AllowedCapabilities: []string{"CAP_SYS_PTRACE"}}).sandboxFor(w, "img", "", "v").host.CapAdd
		if !slices.Equal(got, []string{"SYS_PTRACE"}) {
			t.Errorf("cap add = %v, want [SYS_PTRACE]", got)
		}
	})
	t.Run("User", func(t *testing.T) {
		for _, tt := range []struct {
			image, node, want string
			uid, gid          int
			mode              int64
		}{
			{"", "", DefaultUser, 65534, 65534, 0o755},
			{"root", "", DefaultUser, 65534, 65534, 0o755},
			{"0:0", "", DefaultUser, 65534, 65534, 0o755},
			{"00:staff", "", DefaultUser, 65534, 65534, 0o755},
			{"1000", "", "1000", 1000, 1000, 0o755},
			{"1000:100", "", "1000:100", 1000, 100, 0o755},
			{"trainer", "", "trainer", 0, 0, 0o1777}, // a name: its uid is unknown, so anyone may write
			{"", "root", "root", 0, 0, 0o1777},
		} {
			s := mustOptions(t, Options{User: tt.node}).sandboxFor(specWorkload(), "img", tt.image, "v")
			if s.config.User != tt.want || s.uid != tt.uid || s.gid != tt.gid || s.mode != tt.mode {
				t.Errorf("image user %q, node user %q: got %q %d:%d %o, want %q %d:%d %o",
					tt.image, tt.node, s.config.User, s.uid, s.gid, s.mode, tt.want, tt.uid, tt.gid, tt.mode)
			}
		}
	})
}

func TestOptions_CheckWorkload(t *testing.T) {
	o := mustOptions(t, Options{AllowedCapabilities: []string{"SYS_PTRACE"}})
	for _, tt := range []struct {
		name  string
		edit  func(*runtime.Workload)
		field string // "" when the workload is fine
	}{
		{"Fine", func(w *runtime.Workload) {}, ""},
		{"NoGPUs", func(w *runtime.Workload) { w.GPUs = nil }, ""},
		{"AllowedCapability", func(w *runtime.Workload) { w.Capabilities = []string{"sys_ptrace"} }, ""},
		{"BadLease", func(w *runtime.Workload) { w.LeaseID = "../etc" }, "workload.lease_id"},
		{"NoJob", func(w *runtime.Workload) { w.JobID = "" }, "workload.job_id"},
		{"NoImage", func(w *runtime.Workload) { w.Job.Image = " " }, "job.image"},
		{"NvidiaEnv", func(w *runtime.Workload) { w.Job.Env = map[string]string{"NVIDIA_VISIBLE_DEVICES": "all"} }, "job.env.NVIDIA_VISIBLE_DEVICES"},
		{"IdlegridEnv", func(w *runtime.Workload) { w.Job.Env = map[string]string{"idlegrid_gpus": "x"} }, "job.env.idlegrid_gpus"},
		{"MixedGPUs", func(w *runtime.Workload) { w.GPUs = []string{"GPU-fake-1", "GPU-1234"} }, "workload.gpus"},
		{"BadGPU", func(w *runtime.Workload) { w.GPUs = []string{"GPU-1,GPU-2"} }, "workload.gpus"},
		{"DeniedCapability", func(w *runtime.Workload) { w.Capabilities = []string{"SYS_ADMIN"} }, "workload.capabilities"},
		{"BadCapability", func(w *runtime.Workload) { w.Capabilities = []string{"all"} }, "workload.capabilities"},
		{"Login", func(w *runtime.Workload) {
			w.RegistryAuth = &idlegrid.RegistryAuth{Registry: "ghcr.io", Username: "u", Password: "p"}
		}, ""},
		{"LoginForAnotherRegistry", func(w *runtime.Workload) {
			w.RegistryAuth = &idlegrid.RegistryAuth{Registry: "docker.io", Username: "u", Password: "p"}
		}, "workload.registry_auth"},
		{"LoginForDockerHub", func(w *runtime.Workload) {
			w.Job.Image, w.RegistryAuth = "acme/train:1", &idlegrid.RegistryAuth{Registry: "docker.io", Username: "u", Password: "p"}
		}, ""},
		{"PrivateMark", func(w *runtime.Workload) { w.Job.Image = PrivateRepository + ":0123abcd" }, "job.image"},
		{"PrivateMarkInFull", func(w *runtime.Workload) { w.Job.Image = "docker.io/library/" + PrivateRepository + ":1" }, "job.image"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := specWorkload()
			tt.edit(&w)
			err := o.checkWorkload(w)
			var e *idlegrid.Error
			switch {
			case tt.field == "" && err != nil:
				t.Errorf("got %v, want nil", err)
			case tt.field != "" && (!errors.As(err, &e) || e.Code != idlegrid.EINVALID || e.Field != tt.field):
				t.Errorf("got %v, want EINVALID naming %s", err, tt.field)
			}
		})
	}
	t.Run("BadAllowList", func(t *testing.T) {
		for _, c := range []string{"not a cap", "all", "CAP_ALL"} { // ALL would win over CapDrop ALL
			o := Options{AllowedCapabilities: []string{c}}
			if err := o.setDefaults(1, 1<<30); idlegrid.ErrorCode(err) != idlegrid.EINVALID {
				t.Errorf("%q: got %v, want EINVALID", c, err)
			}
		}
	})
}

func TestCheckpointPlan(t *testing.T) {
	w := specWorkload()
	for _, tt := range []struct {
		ref    string
		exists bool
		note   string
	}{
		{"", false, ""},
		{"", true, ""}, // the job's own volume is mounted even without its reference
		{"docker-volume:idlegrid-ckpt-job_a", true, "resuming from checkpoint docker-volume:idlegrid-ckpt-job_a"},
		{"docker-volume:idlegrid-ckpt-job_a", false, "is not on this node; the job starts without it"},
		{"docker-volume:idlegrid-ckpt-job_b", true, "is not this job's; ignored"},
		{"docker-volume:postgres-data", true, "is not this job's; ignored"},
		{"s3://bucket/ckpt", false, "IDLEGRID_CHECKPOINT_REF"},
	} {
		w.Job.CheckpointRef = tt.ref
		vol, note := checkpointPlan(w, tt.exists)
		if vol != "idlegrid-ckpt-job_a" {
			t.Errorf("ref %q: volume %q, want the job's own, idlegrid-ckpt-job_a", tt.ref, vol)
		}
		if (tt.note == "") != (note == "") || !strings.Contains(note, tt.note) {
			t.Errorf("ref %q, exists %v: note %q, want one containing %q", tt.ref, tt.exists, note, tt.note)
		}
	}
}

func TestLineWriter(t *testing.T) {
	events := make(chan runtime.Event, 64)
	r := &Runtime{opt: *mustOptions(t, Options{Clock: fixedClock{}})}
	wl := r.newWorkload("lease_a", "job_a", events)
	out := &lineWriter{wl: wl, stream: "stdout"}
	out.Write([]byte("step 1/2\nidlegrid:progress=0.5\nidlegrid:progress=7\ncr\r\npar"))
	out.Write([]byte("tial\nidlegrid:checkpoint\n"))
	// A long line goes in pieces of maxLineBytes, however it is read.
	long := strings.Repeat("x", maxLineBytes) + strings.Repeat("y", maxLineBytes) + "zz\n"
	for chunk := range slices.Chunk([]byte(long), 1000) {
		out.Write(chunk)
	}
	out.Write([]byte(long))
	errw := &lineWriter{wl: wl, stream: "stderr"}
	errw.Write([]byte("idlegrid:progress=0.9\n")) // progress only counts on stdout
	errw.Write([]byte("idlegrid:checkpoint\n"))   // and so do checkpoints
	close(events)
	var got []string
	for ev := range events {
		switch {
		case ev.LeaseID != "lease_a":
			t.Errorf("event for lease %q", ev.LeaseID)
		case ev.Progress != nil:
			got = append(got, "progress "+strconv.FormatFloat(*ev.Progress, 'g', -1, 64))
		case ev.Checkpoint != nil:
			got = append(got, "checkpoint at "+ev.Checkpoint.Format(time.TimeOnly))
		case ev.Log != nil:
			text := ev.Log.Text
			if len(text) > 100 {
				text = fmt.Sprintf("%s…×%d", text[:1], len(text))
			}
			got = append(got, ev.Log.At.Format(time.TimeOnly)+" "+ev.Log.Stream+" "+text)
		}
	}
	piece := fmt.Sprint(maxLineBytes)
	want := []string{
		"09:30:00 stdout step 1/2", // stamped by the clock
		"progress 0.5",
		"progress 1",
		"09:30:00 stdout cr",
		"09:30:00 stdout partial",
		"checkpoint at 09:30:00",
		"09:30:00 stdout x…×" + piece, "09:30:00 stdout y…×" + piece, "09:30:00 stdout zz",
		"09:30:00 stdout x…×" + piece, "09:30:00 stdout y…×" + piece, "09:30:00 stdout zz",
		"09:30:00 stderr idlegrid:progress=0.9",
		"09:30:00 stderr idlegrid:checkpoint",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

type fixedClock struct{}

func (fixedClock) Now() time.Time { return time.Date(2024, 5, 1, 9, 30, 0, 0, time.UTC) }

func TestKillNote(t *testing.T) {
	for _, tt := range []struct {
		name     string
		recorded bool
		exit     runtime.Exit
		want     string
	}{
		{"recorded", true, runtime.Exit{Code: 137}, "the workload ran out of memory: its limit is 64 MB"},
		{"unexplained SIGKILL", false, runtime.Exit{Code: 137},
			"the workload was killed (SIGKILL, exit 137) and the agent did not stop it; Docker did not say why, and the likely cause is memory: its limit is 64 MB"},
		{"stopped by the agent", false, runtime.Exit{Code: 137, Stopped: true}, ""},
		{"failed on its own", false, runtime.Exit{Code: 1}, ""},
		{"lost", false, runtime.Exit{Code: 137, Err: errors.New("lost the container")}, ""},
		{"succeeded", false, runtime.Exit{}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := killNote(tt.recorded, tt.exit, 64); got != tt.want {
				t.Errorf("killNote = %q, want %q", got, tt.want)
			}
		})
	}
}
