package docker

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/runtime"
)

// The account files of the images TestRuntime_Start_ImageUser builds.
const (
	testPasswd = "root:x:0:0:root:/root:/bin/sh\n" +
		"  toor:x:0:0:a second root:/:/bin/sh\n" + // leading space: the engine trims it
		"trainer:x:1234:4321::/home/trainer:/bin/sh\n" +
		"broken:x:12ab:0::/:/bin/sh\n"
	testGroup = "root:x:0:\nstaff:x:777:trainer\n"
)

func TestRuntime_Start_ImageUser(t *testing.T) {
	t.Parallel()
	r := mustRuntime(t, Options{})
	for _, tt := range []struct {
		user string
		want string // the workload's line, or the start's error
	}{
		{"toor", "uid=65534 gid=65534"},       // uid 0 under another name
		{"00", "uid=65534 gid=65534"},         // uid 0 written otherwise
		{"trainer", "uid=1234 gid=4321"},      // its primary group
		{"trainer:staff", "uid=1234 gid=777"}, // a group by name
		{"1234:staff", "uid=1234 gid=777"},    // a uid with a named group
		{"ghost", `runs as "ghost", which its /etc/passwd does not list`},
		{"broken", `runs as "broken", which its /etc/passwd does not list with numeric IDs`},
		{"trainer:nogroup", `runs as "nogroup", which its /etc/group does not list`},
	} {
		t.Run(tt.user, func(t *testing.T) {
			w := testWorkload(map[string]string{"WORKLOAD_STEPS": "1"})
			w.Job.Image = mustUserImage(t, tt.user)
			events := make(chan runtime.Event, 64)
			err := r.Start(context.Background(), w, events)
			if !strings.HasPrefix(tt.want, "uid=") {
				if idlegrid.ErrorCode(err) != idlegrid.EINVALID || !strings.Contains(err.Error(), tt.want) {
					t.Errorf("Start: %v, want EINVALID saying %q", err, tt.want)
				}
				mustBeGone(t, w.LeaseID)
				return
			}
			if err != nil {
				t.Fatalf("Start: %v", err)
			}
			wa := watchEvents(t, events, w.LeaseID)
			wa.exited(t)
			wa.mustHave(t, "stdout: "+tt.want+"\n")
			if tt.user == "toor" {
				wa.mustHave(t, fmt.Sprintf("the image's user %q is uid 0 in its /etc/passwd; the workload runs as %s instead", tt.user, DefaultUser))
			}
		})
	}
}

// mustUserImage builds the test image with testPasswd, testGroup and USER
// user, and removes it once the test is over.
func mustUserImage(tb testing.TB, user string) string {
	tb.Helper()
	cli := mustEngine(tb)
	tag := "idlegrid-test/" + randomID("user") + ":1"
	dockerfile := fmt.Sprintf("FROM %s\nCOPY passwd /etc/passwd\nCOPY group /etc/group\nUSER %s\n", testImage, user)
	err := buildTagged(cli, tag,
		contextFile{"Dockerfile", 0o644, []byte(dockerfile)},
		contextFile{"passwd", 0o644, []byte(testPasswd)},
		contextFile{"group", 0o644, []byte(testGroup)})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { cli.ImageRemove(context.Background(), tag, image.RemoveOptions{Force: true}) })
	return tag
}

// TestRuntime_Start_JobCannotRun: a job whose command is not in its image,
// or whose image has none, is refused as the renter's to mend (EINVALID),
// and leaves nothing behind.
func TestRuntime_Start_JobCannotRun(t *testing.T) {
	t.Parallel()
	r := mustRuntime(t, Options{})
	cli := mustEngine(t)
	bare := "idlegrid-test/" + randomID("bare") + ":1"
	if err := buildTagged(cli, bare, contextFile{"Dockerfile", 0o644, []byte("FROM " + testImage + "\nENTRYPOINT []\n")}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.ImageRemove(context.Background(), bare, image.RemoveOptions{Force: true}) })
	for _, tt := range []struct {
		name    string
		image   string
		command []string
		want    string
	}{
		{"NotInImage", bare, []string{"/nope"}, "the job's command cannot run in its image"},
		{"NoCommand", bare, nil, "has no command (no ENTRYPOINT or CMD), and the job names none"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := testWorkload(nil)
			w.Job.Image, w.Job.Command = tt.image, tt.command
			events := make(chan runtime.Event, 64)
			err := r.Start(context.Background(), w, events)
			if err == nil && tt.command != nil {
				// runc may find the command missing only once the start
				// has returned: the workload then exits 127, its own
				// failure as well.
				if exit := watchEvents(t, events, w.LeaseID).exited(t); exit.Code != 127 {
					t.Errorf("exit = %+v, want 127", exit)
				}
				return
			}
			if idlegrid.ErrorCode(err) != idlegrid.EINVALID || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Start: %v, want EINVALID saying %q", err, tt.want)
			}
			mustBeGone(t, w.LeaseID)
			if volumeExists(t, CheckpointVolume(w.JobID)) {
				t.Errorf("a refused start left a checkpoint volume")
			}
		})
	}
}

// TestRuntime_Start_WorkloadsApart: a workload reaches the internet's side
// of the bridge but not another workload, even one on the same node.
func TestRuntime_Start_WorkloadsApart(t *testing.T) {
	t.Parallel()
	r := mustRuntime(t, Options{})
	server := testWorkload(map[string]string{"WORKLOAD_STEPS": "100000", "WORKLOAD_LISTEN": ":8000"})
	wa := mustStart(t, r, server)
	wa.line(t, "listening on :8000")
	info, err := mustEngine(t).ContainerInspect(context.Background(), containerName(server.LeaseID))
	if err != nil {
		t.Fatal(err)
	}
	ep := info.NetworkSettings.Networks[WorkloadNetwork]
	if ep == nil || ep.IPAddress == "" {
		t.Fatalf("the workload is on networks %v, want %s", maps.Keys(info.NetworkSettings.Networks), WorkloadNetwork)
	}
	addr := ep.IPAddress + ":8000"
	client := testWorkload(map[string]string{"WORKLOAD_STEPS": "1", "WORKLOAD_CONNECT": addr})
	cw := mustStart(t, r, client)
	cw.exited(t)
	cw.mustHave(t, "connect "+addr+": failed")
	r.Stop(server.LeaseID, 0)
	wa.exited(t)
}

// TestRuntime_Start_LongLine: the engine keeps a long line in 16 KiB
// pieces; the workload's line comes back whole, as it printed it, so that
// two nodes hash the same output.
func TestRuntime_Start_LongLine(t *testing.T) {
	t.Parallel()
	r := mustRuntime(t, Options{})
	wa := mustStart(t, r, testWorkload(map[string]string{"WORKLOAD_STEPS": "1", "WORKLOAD_LONG_LINE": "40000"}))
	wa.exited(t)
	wa.mustHave(t, "stdout: "+strings.Repeat("x", 40000)+"\n")
}

// TestRuntime_Adopt_PastAFailure: a container the engine fails to show
// leaves the node's other workloads to be taken back all the same.
func TestRuntime_Adopt_PastAFailure(t *testing.T) {
	t.Parallel()
	node := randomID("node_test")
	old := mustRuntime(t, Options{NodeID: node})
	var ws []runtime.Workload
	for range 2 {
		w := testWorkload(map[string]string{"WORKLOAD_STEPS": "100000"})
		mustStart(t, old, w).line(t, "step 1/")
		ws = append(ws, w)
	}
	old.detach() // the agent crashes

	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation(),
		client.WithHTTPClient(&http.Client{Transport: &failFirstInspect{base: mustEngine(t).HTTPClient().Transport}}))
	if err != nil {
		t.Fatal(err)
	}
	r := mustRuntime(t, Options{NodeID: node, Client: cli})
	got, err := r.Adopt(context.Background(), make(chan runtime.Event, 64))
	if err == nil || !strings.Contains(err.Error(), "injected") {
		t.Errorf("Adopt's error = %v, want the failed inspection's", err)
	}
	if len(got) != 1 || !slices.Contains([]string{ws[0].LeaseID, ws[1].LeaseID}, got[0]) {
		t.Errorf("Adopt took back %v, want the one workload it could inspect", got)
	}
}

// failFirstInspect is a transport to the engine that fails the first
// container inspection it carries.
type failFirstInspect struct {
	base   http.RoundTripper
	failed atomic.Bool
}

func (f *failFirstInspect) RoundTrip(req *http.Request) (*http.Response, error) {
	inspect := strings.Contains(req.URL.Path, "/containers/") && strings.HasSuffix(req.URL.Path, "/json") &&
		!strings.HasSuffix(req.URL.Path, "/containers/json") // the list
	if inspect && f.failed.CompareAndSwap(false, true) {
		return &http.Response{StatusCode: http.StatusInternalServerError, Request: req,
			Header: http.Header{"Content-Type": {"application/json"}},
			Body:   io.NopCloser(strings.NewReader(`{"message":"injected failure"}`))}, nil
	}
	return f.base.RoundTrip(req)
}

// aheadClock is the wall clock moved on by d.
type aheadClock struct{ d time.Duration }

func (c aheadClock) Now() time.Time { return time.Now().Add(c.d) }

// TestRuntime_PruneCheckpoints: the checkpoints of jobs that never came
// back are removed once older than CheckpointTTL, when the agent starts;
// younger ones, and one a workload uses, stay.
func TestRuntime_PruneCheckpoints(t *testing.T) {
	t.Parallel()
	node := randomID("node_test")
	r := mustRuntime(t, Options{NodeID: node})
	ctx := context.Background()
	old, inUse := testWorkload(nil), testWorkload(map[string]string{"WORKLOAD_STEPS": "100000"})
	if err := r.createVolumes(ctx, old, CheckpointVolume(old.JobID)); err != nil {
		t.Fatal(err)
	}
	wa := mustStart(t, r, inUse)
	wa.line(t, "step 1/")

	if _, err := mustRuntime(t, Options{NodeID: node}).Adopt(ctx, make(chan runtime.Event, 64)); err != nil {
		t.Fatal(err)
	}
	if !volumeExists(t, CheckpointVolume(old.JobID)) {
		t.Fatal("a checkpoint younger than CheckpointTTL was removed")
	}
	later := mustRuntime(t, Options{NodeID: node, Clock: aheadClock{2 * time.Hour}, CheckpointTTL: time.Hour})
	if _, err := later.Adopt(ctx, make(chan runtime.Event, 64)); err != nil {
		t.Fatal(err)
	}
	if volumeExists(t, CheckpointVolume(old.JobID)) {
		t.Error("a checkpoint older than CheckpointTTL, used by nothing, was kept")
	}
	if !volumeExists(t, CheckpointVolume(inUse.JobID)) {
		t.Error("the checkpoint of a running workload was removed")
	}
	r.Stop(inUse.LeaseID, 0)
	wa.exited(t)
}

// TestRuntime_Start_ImageVolumes: the anonymous volume an image's VOLUME
// line gives each of the lease's containers goes with them, so that what
// a workload wrote there does not stay on the node's disk.
func TestRuntime_Start_ImageVolumes(t *testing.T) {
	t.Parallel()
	cli := mustEngine(t)
	tag := "idlegrid-test/" + randomID("volume") + ":1"
	if err := buildTagged(cli, tag, contextFile{"Dockerfile", 0o644, []byte("FROM " + testImage + "\nVOLUME /data\n")}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.ImageRemove(context.Background(), tag, image.RemoveOptions{Force: true}) })
	r := mustRuntime(t, Options{})
	w := testWorkload(map[string]string{"WORKLOAD_STEPS": "100000"})
	w.Job.Image = tag
	wa := mustStart(t, r, w)
	wa.line(t, "step 1/")
	info, err := cli.ContainerInspect(context.Background(), containerName(w.LeaseID))
	if err != nil {
		t.Fatalf("inspect: %v", err)
	}
	var anonymous string
	for _, m := range info.Mounts {
		if m.Destination == "/data" {
			anonymous = m.Name
		}
	}
	if anonymous == "" {
		t.Fatalf("the workload's mounts %+v have no volume at /data: the image's VOLUME did not apply", info.Mounts)
	}
	if err := r.Stop(w.LeaseID, time.Second); err != nil {
		t.Fatal(err)
	}
	wa.exited(t)
	mustBeGone(t, w.LeaseID)
	if volumeExists(t, anonymous) {
		t.Errorf("the image's volume %s outlived the lease", anonymous)
	}
}
