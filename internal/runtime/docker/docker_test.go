package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/runtime"
)

// These tests run against the Docker engine of the machine (DOCKER_HOST, or
// the local socket) and skip where there is none. They build the test
// workload (testdata/workload) once per test binary into a FROM scratch
// image, since no registry is reachable.

const testImage = "idlegrid-test/workload:latest"

// waitLimit bounds how long a test waits for the engine to do something
// that takes it well under a second.
const waitLimit = 60 * time.Second

var engine struct {
	once  sync.Once
	cli   *client.Client
	skip  string // why the tests cannot run here
	err   error  // the engine is there but the test image could not be built
	built bool
}

func TestMain(m *testing.M) {
	code := m.Run()
	if engine.built {
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		engine.cli.ImageRemove(ctx, testImage, image.RemoveOptions{Force: true, PruneChildren: true})
		cancel()
	}
	if engine.cli != nil {
		engine.cli.Close()
	}
	os.Exit(code)
}

// mustEngine returns a client of the engine, with the test image built,
// or skips the test where there is no engine.
func mustEngine(tb testing.TB) *client.Client {
	tb.Helper()
	engine.once.Do(setupEngine)
	if engine.skip != "" {
		tb.Skip(engine.skip)
	} else if engine.err != nil {
		tb.Fatal(engine.err)
	}
	return engine.cli
}

func setupEngine() {
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		engine.skip = "no Docker engine: " + err.Error()
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := cli.Ping(ctx); err != nil {
		cli.Close()
		engine.skip = fmt.Sprintf("no Docker engine reachable at %s (%v): the Docker runtime tests need one; start dockerd or set DOCKER_HOST", cli.DaemonHost(), err)
		return
	}
	engine.cli = cli
	if _, err := exec.LookPath("go"); err != nil {
		engine.skip = "no go command to build the test workload with: " + err.Error()
		return
	}
	engine.err = buildImage(cli)
	engine.built = engine.err == nil
}

// buildImage builds the test workload statically and packs it into an
// image FROM scratch, through the engine's build API with a tar context.
func buildImage(cli *client.Client) error {
	dir, err := os.MkdirTemp("", "idlegrid-workload-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "workload")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, "./testdata/workload")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build the test workload: %v\n%s", err, out)
	}
	exe, err := os.ReadFile(bin)
	if err != nil {
		return err
	}
	return buildTagged(cli, testImage,
		contextFile{"Dockerfile", 0o644, []byte("FROM scratch\nCOPY workload /workload\nENTRYPOINT [\"/workload\"]\n")},
		contextFile{"workload", 0o755, exe})
}

// contextFile is a file of a build's context.
type contextFile struct {
	name string
	mode int64
	data []byte
}

// buildTagged builds an image tagged tag from a context of files, through
// the engine's build API with a tar context.
func buildTagged(cli *client.Client, tag string, files ...contextFile) error {
	var ctxTar bytes.Buffer
	tw := tar.NewWriter(&ctxTar)
	for _, f := range files {
		tw.WriteHeader(&tar.Header{Name: f.name, Mode: f.mode, Size: int64(len(f.data))})
		tw.Write(f.data)
	}
	if err := tw.Close(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := cli.ImageBuild(ctx, &ctxTar, build.ImageBuildOptions{Tags: []string{tag}, Remove: true, ForceRemove: true})
	if err != nil {
		return fmt.Errorf("build image %s: %w", tag, err)
	}
	defer res.Body.Close()
	if err := StreamError(res.Body); err != nil {
		return fmt.Errorf("build image %s: %w", tag, err)
	}
	return nil
}

func randomID(prefix string) string {
	b := make([]byte, 5)
	rand.Read(b)
	return prefix + "_" + hex.EncodeToString(b)
}

// mustRuntime returns a runtime for a node of its own, so that tests do not
// see each other's containers, and removes whatever the node leaves.
func mustRuntime(tb testing.TB, o Options) *Runtime {
	tb.Helper()
	cli := mustEngine(tb)
	if o.NodeID == "" {
		o.NodeID = randomID("node_test")
	}
	r, err := New(context.Background(), o)
	if err != nil {
		tb.Fatalf("New: %v", err)
	}
	tb.Cleanup(func() {
		r.Close()
		removeNode(cli, o.NodeID)
	})
	return r
}

// removeNode removes every container and volume labelled with node.
func removeNode(cli *client.Client, node string) {
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	f := filters.NewArgs(filters.Arg("label", LabelNode+"="+node))
	cs, _ := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	for _, c := range cs {
		cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true})
	}
	vs, _ := cli.VolumeList(ctx, volume.ListOptions{Filters: f})
	for _, v := range vs.Volumes {
		cli.VolumeRemove(ctx, v.Name, true)
	}
}

// testWorkload runs the test image on two fake GPUs for a job of its own.
func testWorkload(env map[string]string) runtime.Workload {
	return runtime.Workload{
		LeaseID: randomID("lease"), JobID: randomID("job"), GPUs: []string{"GPU-fake-1", "GPU-fake-2"},
		Job: idlegrid.JobSpec{Name: "test", Kind: idlegrid.KindTraining, Image: testImage, Env: env, CPUCores: 1, RAMMB: 256},
	}
}

// watch collects what one workload sends, while it runs.
type watch struct {
	mu       sync.Mutex
	logs     []idlegrid.LogLine
	progress []float64
	exit     *runtime.Exit // without At, which finished holds
	exitAt   time.Time     // when the Exit came
	finished time.Time     // the Exit's At: when the engine says the container finished
	detached bool          // Detach left it running
	changed  chan struct{} // a receive follows every change
}

// mustStart starts w on r and watches its events.
func mustStart(tb testing.TB, r *Runtime, w runtime.Workload) *watch {
	tb.Helper()
	events := make(chan runtime.Event)
	if err := r.Start(context.Background(), w, events); err != nil {
		tb.Fatalf("Start: %v", err)
	}
	return watchEvents(tb, events, w.LeaseID)
}

func watchEvents(tb testing.TB, events <-chan runtime.Event, leaseID string) *watch {
	wa := &watch{changed: make(chan struct{}, 1)}
	go func() {
		for ev := range events { // the runtime never closes it
			if ev.LeaseID != leaseID {
				tb.Errorf("event for lease %q, want %q", ev.LeaseID, leaseID)
			}
			wa.mu.Lock()
			switch {
			case ev.Log != nil:
				wa.logs = append(wa.logs, *ev.Log)
			case ev.Progress != nil:
				wa.progress = append(wa.progress, *ev.Progress)
			case ev.Detached:
				if wa.exit != nil || wa.detached {
					tb.Errorf("Detached after the workload's last event")
				}
				wa.detached = true
			case ev.Exit != nil:
				if wa.exit != nil || wa.detached {
					tb.Errorf("an Exit after the workload's last event: %+v", *ev.Exit)
				}
				e := *ev.Exit
				wa.finished, e.At = e.At, time.Time{}
				wa.exit, wa.exitAt = &e, time.Now()
			}
			wa.mu.Unlock()
			select {
			case wa.changed <- struct{}{}:
			default:
			}
		}
	}()
	return wa
}

// until waits until ok holds of what the workload sent, or fails.
func (wa *watch) until(tb testing.TB, what string, ok func(*watch) bool) {
	tb.Helper()
	deadline := time.NewTimer(waitLimit)
	defer deadline.Stop()
	for {
		wa.mu.Lock()
		done := ok(wa)
		wa.mu.Unlock()
		if done {
			return
		}
		select {
		case <-wa.changed:
		case <-deadline.C:
			tb.Fatalf("gave up waiting for %s; the workload sent:\n%s", what, wa.text())
		}
	}
}

// line waits for a line containing s and returns it.
func (wa *watch) line(tb testing.TB, s string) string {
	tb.Helper()
	var got string
	wa.until(tb, fmt.Sprintf("a line with %q", s), func(wa *watch) bool {
		for _, l := range wa.logs {
			if strings.Contains(l.Text, s) {
				got = l.Text
				return true
			}
		}
		return false
	})
	return got
}

// exited waits for the Exit.
func (wa *watch) exited(tb testing.TB) runtime.Exit {
	tb.Helper()
	wa.until(tb, "the exit", func(wa *watch) bool { return wa.exit != nil })
	wa.mu.Lock()
	defer wa.mu.Unlock()
	if wa.exit.Err == nil && wa.finished.IsZero() {
		tb.Errorf("Exit.At is zero, want when the container finished")
	}
	return *wa.exit
}

// text is the output so far, a line per line: "stream: text".
func (wa *watch) text() string {
	wa.mu.Lock()
	defer wa.mu.Unlock()
	var b strings.Builder
	for _, l := range wa.logs {
		b.WriteString(l.Stream + ": " + l.Text + "\n")
	}
	return b.String()
}

func (wa *watch) mustHave(tb testing.TB, lines ...string) {
	tb.Helper()
	text := wa.text()
	for _, want := range lines {
		if !strings.Contains(text, want) {
			tb.Errorf("output lacks %q:\n%s", want, text)
		}
	}
}

// mustBeGone fails unless the lease's container and scratch volume are gone.
func mustBeGone(tb testing.TB, leaseID string) {
	tb.Helper()
	cli := mustEngine(tb)
	ctx := context.Background()
	cs, err := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", LabelLease+"="+leaseID))})
	if err != nil || len(cs) != 0 {
		tb.Errorf("containers of lease %s: %d (%v), want none left", leaseID, len(cs), err)
	}
	if _, err := cli.VolumeInspect(ctx, scratchVolume(leaseID)); !cerrdefs.IsNotFound(err) {
		tb.Errorf("scratch volume of lease %s: inspect error %v, want not found", leaseID, err)
	}
}

// ulimits writes limits as "name=soft:hard ...".
func ulimits(us []*container.Ulimit) string {
	var parts []string
	for _, u := range us {
		parts = append(parts, fmt.Sprintf("%s=%d:%d", u.Name, u.Soft, u.Hard))
	}
	return strings.Join(parts, " ")
}

func volumeExists(tb testing.TB, name string) bool {
	tb.Helper()
	_, err := mustEngine(tb).VolumeInspect(context.Background(), name)
	if err != nil && !cerrdefs.IsNotFound(err) {
		tb.Fatalf("inspect volume %s: %v", name, err)
	}
	return err == nil
}

// stepOf returns N from a line "... step N ...".
func stepOf(tb testing.TB, line string) int {
	tb.Helper()
	m := regexp.MustCompile(`step (\d+)`).FindStringSubmatch(line)
	if m == nil {
		tb.Fatalf("no step in %q", line)
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

func TestRuntime_Start(t *testing.T) {
	t.Run("RunsToExit", func(t *testing.T) {
		t.Parallel()
		r := mustRuntime(t, Options{})
		w := testWorkload(map[string]string{"WORKLOAD_STEPS": "5", "WORKLOAD_STEP_MS": "20", "WORKLOAD_EXIT_CODE": "3"})
		wa := mustStart(t, r, w)
		exit := wa.exited(t)
		if want := (runtime.Exit{Code: 3, CheckpointRef: CheckpointRef(w.JobID)}); exit != want {
			t.Errorf("exit = %+v, want %+v: a failed job keeps its checkpoint", exit, want)
		}
		wa.mustHave(t,
			"stdout: uid=65534 gid=65534", // the image names no user: nobody
			"stdout: rootfs writable: false",
			"stdout: scratch writable: true",
			"stdout: tmp writable: true",
			"stdout: gpus: IDLEGRID_GPUS=GPU-fake-1,GPU-fake-2 NVIDIA_VISIBLE_DEVICES=void",
			"stdout: CapEff: 0000000000000000",
			"stdout: NoNewPrivs: 1",
			"stderr: this line goes to stderr",
			"stdout: step 5/5",
			"stdout: done: 5 steps",
			"stderr: exiting with code 3",
		)
		if strings.Contains(wa.text(), "idlegrid:progress") {
			t.Errorf("progress reports came as log lines:\n%s", wa.text())
		}
		if want := []float64{0.2, 0.4, 0.6, 0.8, 1}; !slices.Equal(wa.progress, want) {
			t.Errorf("progress = %v, want %v", wa.progress, want)
		}
		for _, l := range wa.logs {
			if l.At.IsZero() || time.Since(l.At) > time.Hour {
				t.Errorf("line %q stamped %v, want the engine's time", l.Text, l.At)
			}
		}
		mustBeGone(t, w.LeaseID)
		if !volumeExists(t, CheckpointVolume(w.JobID)) {
			t.Errorf("checkpoint volume of a failed job was removed")
		}
		if err := r.RemoveCheckpoint(context.Background(), exit.CheckpointRef); err != nil || volumeExists(t, CheckpointVolume(w.JobID)) {
			t.Errorf("RemoveCheckpoint: %v; want the volume gone", err)
		}
	})
	t.Run("Succeeds", func(t *testing.T) {
		t.Parallel()
		r := mustRuntime(t, Options{})
		w := testWorkload(map[string]string{"WORKLOAD_STEPS": "2", "WORKLOAD_STEP_MS": "10"})
		if got := mustStart(t, r, w).exited(t); got != (runtime.Exit{}) {
			t.Errorf("exit = %+v, want code 0 and no checkpoint", got)
		}
		mustBeGone(t, w.LeaseID)
		if volumeExists(t, CheckpointVolume(w.JobID)) {
			t.Errorf("the checkpoint volume of a job that succeeded is still there")
		}
	})
	t.Run("Sandbox", func(t *testing.T) {
		t.Parallel()
		r := mustRuntime(t, Options{PidsLimit: 200, AllowedCapabilities: []string{"NET_BIND_SERVICE"}})
		w := testWorkload(map[string]string{"WORKLOAD_STEPS": "100000"})
		w.NoNetwork, w.Capabilities = true, []string{"cap_net_bind_service"}
		wa := mustStart(t, r, w)
		wa.line(t, "step 1/")
		info, err := mustEngine(t).ContainerInspect(context.Background(), containerName(w.LeaseID))
		if err != nil {
			t.Fatalf("inspect: %v", err)
		}
		h := info.HostConfig
		for _, c := range []struct {
			what      string
			got, want any
		}{
			{"ReadonlyRootfs", h.ReadonlyRootfs, true},
			{"CapDrop", []string(h.CapDrop), []string{"ALL"}},
			{"CapAdd", strings.TrimPrefix(strings.Join(h.CapAdd, ","), "CAP_"), "NET_BIND_SERVICE"},
			{"SecurityOpt", h.SecurityOpt, []string{"no-new-privileges:true"}},
			{"PidsLimit", *h.PidsLimit, int64(200)},
			{"Memory", h.Memory, int64(256 << 20)},
			{"MemorySwap", h.MemorySwap, int64(256 << 20)},
			{"NanoCpus", h.NanoCPUs, int64(1e9)},
			{"NetworkMode", string(h.NetworkMode), "none"},
			{"Privileged", h.Privileged, false},
			{"CgroupnsMode", string(h.CgroupnsMode), "private"},
			{"Ulimits", ulimits(h.Ulimits), "core=0:0"},
			{"User", info.Config.User, DefaultUser},
			{"lease label", info.Config.Labels[LabelLease], w.LeaseID},
			{"job label", info.Config.Labels[LabelJob], w.JobID},
			{"node label", info.Config.Labels[LabelNode], r.opt.NodeID},
			{"managed-by label", info.Config.Labels[LabelManagedBy], ManagedBy},
		} {
			if fmt.Sprint(c.got) != fmt.Sprint(c.want) {
				t.Errorf("%s = %v, want %v", c.what, c.got, c.want)
			}
		}
		var mounts []string
		for _, m := range info.Mounts {
			mounts = append(mounts, fmt.Sprintf("%s:%s:rw=%v", m.Name, m.Destination, m.RW))
		}
		slices.Sort(mounts)
		want := []string{CheckpointVolume(w.JobID) + ":/checkpoint:rw=true", scratchVolume(w.LeaseID) + ":/scratch:rw=true"}
		if !slices.Equal(mounts, want) {
			t.Errorf("mounts = %v, want %v", mounts, want)
		}
		wa.mustHave(t, "stdout: network interfaces: lo\n")
		r.Stop(w.LeaseID, 0)
		if got := wa.exited(t); got.Code != 137 || !got.Stopped {
			t.Errorf("exit = %+v, want 137 stopped", got)
		}
	})
	t.Run("OutOfMemory", func(t *testing.T) {
		t.Parallel()
		r := mustRuntime(t, Options{})
		w := testWorkload(map[string]string{"WORKLOAD_ALLOC_MB": "512"})
		w.Job.RAMMB = 64
		wa := mustStart(t, r, w)
		if got := wa.exited(t); got.Code != 137 || got.Stopped {
			t.Errorf("exit = %+v, want 137, not stopped", got)
		}
		// Docker may lose the kernel's event (killNote); the note then
		// names memory as the likely cause.
		recorded := killNote(true, runtime.Exit{Code: 137}, 64)
		guessed := killNote(false, runtime.Exit{Code: 137}, 64)
		if text := wa.text(); !strings.Contains(text, "stderr: [idlegrid] "+recorded) && !strings.Contains(text, "stderr: [idlegrid] "+guessed) {
			t.Errorf("output lacks the out-of-memory note (%q or %q):\n%s", recorded, guessed, text)
		}
	})
	t.Run("ImageMissing", func(t *testing.T) {
		t.Parallel()
		r := mustRuntime(t, Options{LocalRegistries: []string{"127.0.0.1:1"}})
		for _, tt := range []struct {
			r    *Runtime
			want string
		}{
			{r, "is not present locally and could not be pulled"},
			{mustRuntime(t, Options{NoPull: true}), "is not present locally, and this node does not pull images"},
		} {
			w := testWorkload(nil)
			w.Job.Image = "127.0.0.1:1/idlegrid/absent:1" // nothing listens there
			events := make(chan runtime.Event, 1)
			err := tt.r.Start(context.Background(), w, events)
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "docker load") {
				t.Errorf("Start: %v, want an error saying %q and how to load the image", err, tt.want)
			}
			if len(events) != 0 {
				t.Errorf("%d events after a failed start, want none", len(events))
			}
			mustBeGone(t, w.LeaseID)
			if volumeExists(t, CheckpointVolume(w.JobID)) {
				t.Errorf("a failed start left a checkpoint volume")
			}
		}
	})
	t.Run("Refused", func(t *testing.T) {
		t.Parallel()
		r := mustRuntime(t, Options{})
		w := testWorkload(nil)
		w.Capabilities = []string{"SYS_ADMIN"}
		if err := r.Start(context.Background(), w, make(chan runtime.Event)); idlegrid.ErrorCode(err) != idlegrid.EINVALID {
			t.Errorf("a capability the node does not allow: %v, want EINVALID", err)
		}
		w = testWorkload(map[string]string{"NVIDIA_VISIBLE_DEVICES": "all"})
		if err := r.Start(context.Background(), w, make(chan runtime.Event)); idlegrid.ErrorCode(err) != idlegrid.EINVALID {
			t.Errorf("a job that picks its GPUs: %v, want EINVALID", err)
		}
	})
	t.Run("Duplicate", func(t *testing.T) {
		t.Parallel()
		r := mustRuntime(t, Options{})
		w := testWorkload(map[string]string{"WORKLOAD_STEPS": "100000"})
		wa := mustStart(t, r, w)
		err := r.Start(context.Background(), w, make(chan runtime.Event))
		if got := idlegrid.ErrorCode(err); got != idlegrid.ECONFLICT {
			t.Errorf("second Start: code %q (%v), want %q", got, err, idlegrid.ECONFLICT)
		}
		r.Stop(w.LeaseID, 0)
		wa.exited(t)
	})
}

func TestRuntime_Start_StaleContainer(t *testing.T) {
	t.Parallel()
	node := randomID("node_test")
	old := mustRuntime(t, Options{NodeID: node})
	w := testWorkload(map[string]string{"WORKLOAD_STEPS": "100000"})
	mustStart(t, old, w).line(t, "step 1/")
	old.detach() // the agent crashes and nobody adopts its container

	r := mustRuntime(t, Options{NodeID: node})
	err := r.Start(context.Background(), w, make(chan runtime.Event))
	if got := idlegrid.ErrorCode(err); got != idlegrid.ECONFLICT {
		t.Errorf("Start beside a running orphan: code %q (%v), want %q", got, err, idlegrid.ECONFLICT)
	}
	cli := mustEngine(t)
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	waitC, errC := cli.ContainerWait(ctx, containerName(w.LeaseID), container.WaitConditionNotRunning)
	if err := cli.ContainerKill(ctx, containerName(w.LeaseID), "SIGKILL"); err != nil {
		t.Fatalf("kill the orphan: %v", err)
	}
	select {
	case <-waitC:
	case err := <-errC:
		t.Fatalf("wait for the orphan: %v", err)
	}
	other := mustRuntime(t, Options{})
	if err := other.Start(context.Background(), w, make(chan runtime.Event)); idlegrid.ErrorCode(err) != idlegrid.ECONFLICT ||
		!strings.Contains(err.Error(), "another node's ("+node+")") {
		t.Errorf("Start of another node's stopped lease: %v, want ECONFLICT naming the node: a node removes only its own", err)
	}
	w.Job.Env["WORKLOAD_STEPS"] = "2"
	if got := mustStart(t, r, w).exited(t); got != (runtime.Exit{}) {
		t.Errorf("Start after the orphan ended: exit %+v, want code 0: the orphan is replaced", got)
	}
	mustBeGone(t, w.LeaseID)
}

// TestRuntime_Start_Cancelled cancels Starts at moments spread over the
// making of the container: whatever the moment, a Start that failed leaves
// nothing behind, and one that succeeded runs its workload to a clean end.
func TestRuntime_Start_Cancelled(t *testing.T) {
	t.Parallel()
	r := mustRuntime(t, Options{})
	cli := mustEngine(t)
	for i := range 8 {
		w := testWorkload(map[string]string{"WORKLOAD_STEPS": "100000", "WORKLOAD_STEP_MS": "20"})
		ctx, cancel := context.WithCancel(context.Background())
		timer := time.AfterFunc(time.Duration(i)*40*time.Millisecond, cancel)
		events := make(chan runtime.Event)
		err := r.Start(ctx, w, events)
		timer.Stop()
		cancel()
		if err == nil {
			wa := watchEvents(t, events, w.LeaseID)
			r.Stop(w.LeaseID, 0)
			wa.exited(t)
		}
		mustBeGone(t, w.LeaseID)
		if _, err := cli.ContainerInspect(context.Background(), prepName(w.LeaseID)); !cerrdefs.IsNotFound(err) {
			t.Errorf("cancelled after %dms: the prep container is left (inspect: %v)", i*40, err)
		}
		if err != nil && volumeExists(t, CheckpointVolume(w.JobID)) {
			t.Errorf("cancelled after %dms: Start failed (%v) but left the checkpoint volume it made", i*40, err)
		}
	}
}

func TestRuntime_Stop(t *testing.T) {
	t.Run("CheckpointAndResume", func(t *testing.T) {
		t.Parallel()
		r := mustRuntime(t, Options{})
		first := testWorkload(map[string]string{"WORKLOAD_STEPS": "100000", "WORKLOAD_STEP_MS": "20"})
		wa := mustStart(t, r, first)
		wa.line(t, "step 5/")
		asked := time.Now()
		if err := r.Stop(first.LeaseID, 30*time.Second); err != nil {
			t.Fatalf("Stop: %v", err)
		}
		if err := r.Stop(first.LeaseID, 0); err != nil {
			t.Errorf("second Stop: %v, want nil (and the first grace stands)", err)
		}
		exit := wa.exited(t)
		if want := (runtime.Exit{Code: 143, Stopped: true, CheckpointRef: CheckpointRef(first.JobID)}); exit != want {
			t.Fatalf("exit = %+v, want %+v", exit, want)
		}
		if took := wa.exitAt.Sub(asked); took > 10*time.Second {
			t.Errorf("exited %v after the stop, want well within the grace", took)
		}
		saved := stepOf(t, wa.line(t, "checkpoint saved: step"))
		wa.mustHave(t, fmt.Sprintf("stderr: received SIGTERM at step %d, checkpointing", saved))
		mustBeGone(t, first.LeaseID)

		// The job is requeued with the reference and resumes on a new lease.
		second := testWorkload(map[string]string{"WORKLOAD_STEPS": strconv.Itoa(saved + 3), "WORKLOAD_STEP_MS": "10"})
		second.JobID, second.Job.CheckpointRef = first.JobID, exit.CheckpointRef
		wa2 := mustStart(t, r, second)
		if got := wa2.exited(t); got != (runtime.Exit{}) {
			t.Errorf("resumed run: exit %+v, want code 0", got)
		}
		wa2.mustHave(t,
			"stderr: [idlegrid] resuming from checkpoint "+exit.CheckpointRef,
			fmt.Sprintf("stdout: resuming from step %d\n", saved),
			fmt.Sprintf("stdout: step %d/%d\n", saved+1, saved+3),
		)
		if strings.Contains(wa2.text(), fmt.Sprintf("step %d/", saved)) {
			t.Errorf("the resumed run redid step %d:\n%s", saved, wa2.text())
		}
		if volumeExists(t, CheckpointVolume(first.JobID)) {
			t.Errorf("the checkpoint outlived the job's success")
		}
	})
	t.Run("KillAfterGrace", func(t *testing.T) {
		t.Parallel()
		r := mustRuntime(t, Options{})
		w := testWorkload(map[string]string{"WORKLOAD_STEPS": "100000", "WORKLOAD_IGNORE_SIGTERM": "1"})
		wa := mustStart(t, r, w)
		wa.line(t, "step 1/")
		asked := time.Now()
		r.Stop(w.LeaseID, 500*time.Millisecond)
		exit := wa.exited(t)
		if exit.Code != 137 || !exit.Stopped || exit.CheckpointRef != CheckpointRef(w.JobID) {
			t.Errorf("exit = %+v, want 137 stopped with the checkpoint", exit)
		}
		if took := wa.exitAt.Sub(asked); took < 500*time.Millisecond {
			t.Errorf("killed %v after the stop, before the grace was out", took)
		}
		mustBeGone(t, w.LeaseID)
	})
	t.Run("Unknown", func(t *testing.T) {
		t.Parallel()
		err := mustRuntime(t, Options{}).Stop("lease_nope", time.Second)
		if got := idlegrid.ErrorCode(err); got != idlegrid.ENOTFOUND {
			t.Errorf("code = %q (%v), want %q", got, err, idlegrid.ENOTFOUND)
		}
	})
}

func TestRuntime_Close(t *testing.T) {
	t.Parallel()
	r := mustRuntime(t, Options{})
	a := testWorkload(map[string]string{"WORKLOAD_STEPS": "100000"})
	b := testWorkload(map[string]string{"WORKLOAD_STEPS": "100000"})
	wa, wb := mustStart(t, r, a), mustStart(t, r, b)
	wa.line(t, "step 1/")
	wb.line(t, "step 1/")
	if err := r.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for _, wx := range []*watch{wa, wb} { // the events are unbuffered: both were received
		if exit := wx.exited(t); exit.Code != 137 || !exit.Stopped {
			t.Errorf("exit = %+v, want 137 stopped", exit)
		}
	}
	mustBeGone(t, a.LeaseID)
	mustBeGone(t, b.LeaseID)
	if err := r.Start(context.Background(), testWorkload(nil), make(chan runtime.Event)); err == nil {
		t.Error("Start after Close: got nil error")
	}
}

// TestRuntime_Detach: Detach leaves the container running and ends its
// events with Detached; Close then kills nothing, and the next runtime
// with the same StateDir takes the workload back and goes on with its
// output from the line after the last one the first sent: none is lost
// or sent twice, the steps written between the two runtimes included.
func TestRuntime_Detach(t *testing.T) {
	t.Parallel()
	node, state := randomID("node_test"), t.TempDir()
	old := mustRuntime(t, Options{NodeID: node, StateDir: state})
	w := testWorkload(map[string]string{"WORKLOAD_STEPS": "100000", "WORKLOAD_STEP_MS": "20"})
	wa := mustStart(t, old, w)
	wa.line(t, "step 2/")
	if err := old.Detach(); err != nil {
		t.Fatal(err)
	}
	wa.until(t, "Detached", func(wa *watch) bool { return wa.detached })
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
	if err := old.Start(context.Background(), testWorkload(nil), make(chan runtime.Event)); err == nil {
		t.Error("Start after Detach: got nil error")
	}
	time.Sleep(500 * time.Millisecond) // steps no runtime follows

	r := mustRuntime(t, Options{NodeID: node, StateDir: state})
	events := make(chan runtime.Event)
	got, err := r.Adopt(context.Background(), events)
	if err != nil || !slices.Equal(got, []string{w.LeaseID}) {
		t.Fatalf("Adopt after Detach and Close = %v, %v; want [%s], still running", got, err, w.LeaseID)
	}
	wb := watchEvents(t, events, w.LeaseID)
	wb.line(t, "handed the workload over")
	wb.until(t, "the steps written meanwhile", func(wb *watch) bool { return len(wb.logs) > 40 })
	r.Stop(w.LeaseID, 30*time.Second)
	if exit := wb.exited(t); exit.Code != 143 || !exit.Stopped {
		t.Errorf("exit = %+v, want 143 stopped by the runtime that took it back", exit)
	}
	mustBeGone(t, w.LeaseID)
	if _, err := os.Stat(filepath.Join(state, handedOverFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the record of the hand-over outlives the Adopt that took the workload back: %v", err)
	}
	var steps []int
	for _, wx := range []*watch{wa, wb} {
		wx.mu.Lock()
		for _, l := range wx.logs {
			if strings.HasPrefix(l.Text, "step ") {
				steps = append(steps, stepOf(t, l.Text))
			}
		}
		wx.mu.Unlock()
	}
	for i := 1; i < len(steps); i++ {
		if steps[i] != steps[i-1]+1 {
			t.Fatalf("step %d follows step %d across the hand-over; want every step once, in order: %v", steps[i], steps[i-1], steps)
		}
	}
}

func TestRuntime_Adopt(t *testing.T) {
	t.Run("Running", func(t *testing.T) {
		t.Parallel()
		node := randomID("node_test")
		old := mustRuntime(t, Options{NodeID: node})
		w := testWorkload(map[string]string{"WORKLOAD_STEPS": "100000", "WORKLOAD_STEP_MS": "20"})
		w.Job.Tier, w.Notice = idlegrid.TierBronze, 2*time.Minute
		mustStart(t, old, w).line(t, "step 2/")
		old.detach() // the agent crashes

		if got, err := mustRuntime(t, Options{}).Adopt(context.Background(), make(chan runtime.Event)); err != nil || len(got) != 0 {
			t.Errorf("another node's Adopt = %v, %v; want nothing", got, err)
		}
		r := mustRuntime(t, Options{NodeID: node})
		events := make(chan runtime.Event)
		got, err := r.Adopt(context.Background(), events)
		if err != nil || !slices.Equal(got, []string{w.LeaseID}) {
			t.Fatalf("Adopt = %v, %v; want [%s]", got, err, w.LeaseID)
		}
		wa := watchEvents(t, events, w.LeaseID)
		wa.line(t, "took the workload back")
		if gpus := r.LeaseGPUs(w.LeaseID); !slices.Equal(gpus, w.GPUs) {
			t.Errorf("LeaseGPUs of the adopted lease = %q, want %q", gpus, w.GPUs)
		}
		if tier := r.LeaseTier(w.LeaseID); tier != idlegrid.TierBronze {
			t.Errorf("LeaseTier of the adopted lease = %q, want bronze: its notice depends on it", tier)
		}
		if n := r.LeaseNotice(w.LeaseID); n != 2*time.Minute {
			t.Errorf("LeaseNotice of the adopted lease = %v, want its own 2m0s", n)
		}
		step := stepOf(t, wa.line(t, "step "))
		if again, err := r.Adopt(context.Background(), make(chan runtime.Event)); err != nil || len(again) != 0 {
			t.Errorf("second Adopt = %v, %v; want nothing: the workload is followed already", again, err)
		}
		r.Stop(w.LeaseID, 30*time.Second)
		exit := wa.exited(t)
		if want := (runtime.Exit{Code: 143, Stopped: true, CheckpointRef: CheckpointRef(w.JobID)}); exit != want {
			t.Errorf("exit = %+v, want %+v", exit, want)
		}
		if saved := stepOf(t, wa.line(t, "checkpoint saved")); saved < step {
			t.Errorf("checkpoint at step %d, before step %d, which the adopter saw", saved, step)
		}
		mustBeGone(t, w.LeaseID)
	})
	t.Run("VerifiableDigest", func(t *testing.T) {
		t.Parallel()
		node := randomID("node_test")
		old := mustRuntime(t, Options{NodeID: node})
		steps := 40
		w := testWorkload(map[string]string{"WORKLOAD_STEPS": strconv.Itoa(steps), "WORKLOAD_STEP_MS": "25", "WORKLOAD_LONG_LINE": "70000"})
		w.Job.Verifiable = true
		mustStart(t, old, w).line(t, "step 2/")
		old.detach() // the agent crashes, having seen only the start

		r := mustRuntime(t, Options{NodeID: node})
		events := make(chan runtime.Event)
		if got, err := r.Adopt(context.Background(), events); err != nil || !slices.Equal(got, []string{w.LeaseID}) {
			t.Fatalf("Adopt = %v, %v; want [%s]", got, err, w.LeaseID)
		}
		if exit := watchEvents(t, events, w.LeaseID).exited(t); exit.Code != 0 || exit.Err != nil {
			t.Fatalf("exit = %+v, want 0", exit)
		}
		// The whole standard output as the agent sums a workload it follows
		// from the start (agent/lease.go): the same workload's, run whole.
		twin := testWorkload(w.Job.Env)
		twin.Job.Verifiable = true
		whole := mustStart(t, mustRuntime(t, Options{}), twin)
		whole.exited(t)
		sum := sha256.New()
		for _, l := range whole.logs {
			if l.Stream == "stdout" {
				io.WriteString(sum, l.Text+"\n")
			}
		}
		want := "sha256:" + hex.EncodeToString(sum.Sum(nil))
		if got, ok := r.AdoptedOutputDigest(w.LeaseID); !ok || got != want {
			t.Errorf("AdoptedOutputDigest = %q, %v; want %q, the whole output's", got, ok, want)
		}
		if _, ok := r.AdoptedOutputDigest(w.LeaseID); ok {
			t.Error("AdoptedOutputDigest gave the digest twice")
		}
		mustBeGone(t, w.LeaseID)
	})
	t.Run("NeverStarted", func(t *testing.T) {
		t.Parallel()
		r := mustRuntime(t, Options{})
		w := testWorkload(nil)
		// What a crash between creating the container and starting it leaves.
		ctx := context.Background()
		s := r.opt.sandboxFor(w, testImage, "", CheckpointVolume(w.JobID))
		if err := r.createVolumes(ctx, w, CheckpointVolume(w.JobID)); err != nil {
			t.Fatal(err)
		}
		if _, err := mustEngine(t).ContainerCreate(ctx, s.config, s.host, nil, nil, containerName(w.LeaseID)); err != nil {
			t.Fatalf("create: %v", err)
		}
		// And what a crash between making a scratch volume and the container leaves.
		orphan := testWorkload(nil)
		if err := r.createVolumes(ctx, orphan, CheckpointVolume(orphan.JobID)); err != nil {
			t.Fatal(err)
		}
		if got, err := r.Adopt(ctx, make(chan runtime.Event)); err != nil || len(got) != 0 {
			t.Errorf("Adopt = %v, %v; want nothing: the lease never ran", got, err)
		}
		mustBeGone(t, w.LeaseID)
		mustBeGone(t, orphan.LeaseID)
		if !volumeExists(t, CheckpointVolume(orphan.JobID)) {
			t.Errorf("Adopt removed a checkpoint")
		}
	})
	t.Run("ExitedMeanwhile", func(t *testing.T) {
		t.Parallel()
		node := randomID("node_test")
		old := mustRuntime(t, Options{NodeID: node})
		w := testWorkload(map[string]string{"WORKLOAD_STEPS": "10", "WORKLOAD_STEP_MS": "20", "WORKLOAD_EXIT_CODE": "5"})
		mustStart(t, old, w).line(t, "step 1/")
		old.detach()
		cli := mustEngine(t)
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		waitC, errC := cli.ContainerWait(ctx, containerName(w.LeaseID), container.WaitConditionNotRunning)
		select {
		case <-waitC:
		case err := <-errC:
			t.Fatalf("wait for the orphan to exit: %v", err)
		}
		exited := time.Now()
		time.Sleep(2 * time.Second) // the agent is down a while

		r := mustRuntime(t, Options{NodeID: node})
		events := make(chan runtime.Event)
		adopting := time.Now()
		if got, err := r.Adopt(context.Background(), events); err != nil || !slices.Equal(got, []string{w.LeaseID}) {
			t.Fatalf("Adopt = %v, %v; want [%s]", got, err, w.LeaseID)
		}
		wa := watchEvents(t, events, w.LeaseID)
		if exit := wa.exited(t); exit != (runtime.Exit{Code: 5, CheckpointRef: CheckpointRef(w.JobID)}) {
			t.Errorf("exit = %+v, want code 5 with the checkpoint", exit)
		}
		// When it really ended, not when it was found: the renter does not
		// pay for the time no agent ran (a second of slack for the
		// engine's clock).
		if at := wa.finished; at.Before(exited.Add(-time.Minute)) || !at.Before(adopting.Add(-time.Second)) {
			t.Errorf("Exit.At = %v, want about %v, when the container ended, not the adoption at %v", at, exited, adopting)
		}
		wa.mustHave(t, "had ended meanwhile")
		if d, ok := r.AdoptedOutputDigest(w.LeaseID); ok {
			t.Errorf("AdoptedOutputDigest of a job that is not verifiable = %q, want none", d)
		}
		mustBeGone(t, w.LeaseID)
	})
}

func TestNew_NoEngine(t *testing.T) {
	cli, err := client.NewClientWithOpts(client.WithHost("unix://"+filepath.Join(t.TempDir(), "docker.sock")), client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	_, err = New(context.Background(), Options{Client: cli})
	if err == nil || !strings.Contains(err.Error(), "cannot reach the Docker engine at unix://") || !strings.Contains(err.Error(), "is dockerd running") {
		t.Errorf("New = %v, want an error saying the engine cannot be reached and what to check", err)
	}
}

// TestNew_BadEnvironment: a Docker address the environment set wrong is
// named, with what to do, since that is where it must be fixed.
func TestNew_BadEnvironment(t *testing.T) {
	t.Setenv("DOCKER_HOST", "bogus")
	_, err := New(context.Background(), Options{})
	if err == nil || !strings.Contains(err.Error(), `DOCKER_HOST="bogus"`) || !strings.Contains(err.Error(), "unset DOCKER_HOST") {
		t.Errorf("New = %v, want an error naming DOCKER_HOST and what to do", err)
	}
}
