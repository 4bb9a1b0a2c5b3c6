package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
)

// watchStart is when the watch tests' job was submitted.
var watchStart = time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)

func at(secs int) *time.Time {
	t := watchStart.Add(time.Duration(secs) * time.Second)
	return &t
}

// watchScript is a bronze job's life, one view per poll: it waits, is
// placed, starts, saves a checkpoint, is given notice and preempted, waits
// again, is placed elsewhere and succeeds.
func watchScript() []*jobView {
	job := func(state idlegrid.JobState, reason string, charged idlegrid.Micros) *idlegrid.Job {
		return &idlegrid.Job{ID: "job_1", State: state, Reason: reason, ChargedMicros: charged, CreatedAt: watchStart,
			JobSpec: idlegrid.JobSpec{Tier: idlegrid.TierBronze, GPUs: 1, Nodes: 1, DurationSeconds: 600}}
	}
	first := idlegrid.Lease{ID: "lease_a", NodeID: "node_a", Attempt: 1, Tier: idlegrid.TierBronze, GPUUUIDs: []string{"g0"},
		PriceMicrosPerGPUHour: 350_000, State: idlegrid.LeaseAssigned, NoticeSeconds: 120, CreatedAt: watchStart}
	running := first
	running.State, running.StartedAt, running.Progress = idlegrid.LeaseRunning, at(20), 0.25
	saved := running
	saved.CheckpointRef, saved.Progress = "s3://ckpt/step-400", 0.45
	noticed := saved
	noticed.NoticeAt, noticed.StopRequested = at(200), "notice: preempted for gold job job_9"
	preempted := noticed
	preempted.State, preempted.Reason, preempted.ChargedMicros = idlegrid.LeasePreempted, "preempted for gold job job_9", 31_000
	second := idlegrid.Lease{ID: "lease_b", NodeID: "node_b", Attempt: 2, Tier: idlegrid.TierBronze, GPUUUIDs: []string{"g1"},
		PriceMicrosPerGPUHour: 400_000, State: idlegrid.LeaseRunning, StartedAt: at(400)}
	done := second
	done.State, done.Reason, done.ChargedMicros, done.Progress = idlegrid.LeaseSucceeded, "exited 0", 40_000, 1
	requeued := job(idlegrid.JobQueued, "requeued from s3://ckpt/step-400", 31_000)
	requeued.CheckpointRef = "s3://ckpt/step-400" // the store hands the job its lease's checkpoint
	views := []struct {
		job    *idlegrid.Job
		leases []idlegrid.Lease
	}{
		{job(idlegrid.JobQueued, "", 0), nil},
		{job(idlegrid.JobQueued, "no node fits: 3 cap below ask", 0), nil},
		{job(idlegrid.JobQueued, "no node fits: 3 cap below ask", 0), nil}, // nothing new
		{job(idlegrid.JobRunning, "", 0), []idlegrid.Lease{first}},
		{job(idlegrid.JobRunning, "", 0), []idlegrid.Lease{running}},
		{job(idlegrid.JobRunning, "", 0), []idlegrid.Lease{saved}},
		{job(idlegrid.JobRunning, "", 0), []idlegrid.Lease{noticed}},
		{requeued, []idlegrid.Lease{preempted}},
		{job(idlegrid.JobRunning, "", 31_000), []idlegrid.Lease{preempted, second}},
		{job(idlegrid.JobSucceeded, "", 71_000), []idlegrid.Lease{preempted, done}},
	}
	var out []*jobView
	for i, v := range views {
		jv := &jobView{At: watchStart.Add(time.Duration(i) * 50 * time.Second), Job: v.job, Leases: []*idlegrid.Lease{}}
		for _, l := range v.leases {
			jv.Leases = append(jv.Leases, &l)
		}
		out = append(out, jv)
	}
	return out
}

func TestJobChanges(t *testing.T) {
	want := [][]string{
		{"waits: the market has not looked at it yet", "  why, node by node: idlegrid job explain job_1"},
		{"waits: no node fits: 3 cap below ask"},
		nil,
		{"placed on node_a: 1 GPU(s) at $0.350000/GPU-h, bronze, attempt 1"},
		{"started on node_a"},
		{"checkpoint on node_a: s3://ckpt/step-400"},
		{"notice on node_a: it stops by " + at(320).Local().Format("15:04:05") + " (2m0s guaranteed): notice: preempted for gold job job_9"},
		{"preempted on node_a: preempted for gold job job_9; charged $0.031000", "back in the queue: requeued from s3://ckpt/step-400",
			"  its next run resumes from checkpoint s3://ckpt/step-400"},
		{"placed on node_b: 1 GPU(s) at $0.400000/GPU-h, bronze, attempt 2", "started on node_b"},
		{"succeeded on node_b: exited 0; charged $0.040000", "succeeded; charged $0.071000 in all"},
	}
	var prev *jobView
	for i, v := range watchScript() {
		got := texts(jobChanges(prev, v))
		if strings.Join(got, "\n") != strings.Join(want[i], "\n") {
			t.Errorf("view %d: changes\n%s\nwant\n%s", i, strings.Join(got, "\n"), strings.Join(want[i], "\n"))
		}
		prev = v
	}
}

// A watch that joins a job midway says what its running lease went
// through in the order it happened: placed, started, then its checkpoint
// and notice.
func TestJobChanges_joinsMidway(t *testing.T) {
	views := watchScript()
	got := texts(jobChanges(nil, views[6]))
	want := []string{"placed on node_a", "started on node_a", "checkpoint on node_a", "notice on node_a"}
	if len(got) != len(want) {
		t.Fatalf("first view of a running job:\n%s\nwant lines beginning %q", strings.Join(got, "\n"), want)
	}
	for i, w := range want {
		if !strings.HasPrefix(got[i], w) {
			t.Errorf("first view of a running job:\n%s\nwant line %d to begin %q", strings.Join(got, "\n"), i, w)
		}
	}
}

// TestJobChanges_joinsMidwayDated: a watch that first sees a job after
// its leases moved dates each move as the server recorded it, not as the
// watch's first look, and says the notice of a lease that has ended since.
func TestJobChanges_joinsMidwayDated(t *testing.T) {
	last := watchScript()[9]
	a, b := *last.Leases[0], *last.Leases[1]
	a.CreatedAt, a.EndedAt = *at(10), at(310)
	b.CreatedAt, b.EndedAt = *at(390), at(700)
	view := &jobView{At: *at(900), Job: last.Job, Leases: []*idlegrid.Lease{&a, &b}}
	want := []change{
		{*at(10), "placed on node_a: 1 GPU(s) at $0.350000/GPU-h, bronze, attempt 1"},
		{*at(20), "started on node_a"},
		{time.Time{}, "checkpoint on node_a: s3://ckpt/step-400"},
		{*at(200), "notice on node_a: it stops by " + at(320).Local().Format("15:04:05") + " (2m0s guaranteed): notice: preempted for gold job job_9"},
		{*at(310), "preempted on node_a: preempted for gold job job_9; charged $0.031000"},
		{*at(390), "placed on node_b: 1 GPU(s) at $0.400000/GPU-h, bronze, attempt 2"},
		{*at(400), "started on node_b"},
		{*at(700), "succeeded on node_b: exited 0; charged $0.040000"},
		{time.Time{}, "succeeded; charged $0.071000 in all"},
	}
	got := jobChanges(nil, view)
	if len(got) != len(want) {
		t.Fatalf("first view of an ended job:\n%s\nwant\n%s", strings.Join(texts(got), "\n"), strings.Join(texts(want), "\n"))
	}
	for i := range want {
		if got[i].text != want[i].text || !got[i].at.Equal(want[i].at) {
			t.Errorf("line %d: %v %q, want %v %q", i, got[i].at, got[i].text, want[i].at, want[i].text)
		}
	}
	if w := got[len(got)-1].when(view.At); !w.Equal(view.At) {
		t.Errorf("the job's own line dated %v, want the view's %v", w, view.At)
	}
}

// A running workload's checkpoints reach the server as times (its runtime
// names the reference only when it exits): each new one is a line.
func TestJobChanges_checkpointTimes(t *testing.T) {
	running := &idlegrid.Lease{ID: "lease_a", NodeID: "node_a", State: idlegrid.LeaseRunning, StartedAt: at(0)}
	saved := *running
	saved.CheckpointAt = at(60)
	again := saved
	again.CheckpointAt = at(120)
	crept := saved // the same checkpoint, placed by its age a heartbeat's latency later
	creptAt := at(60).Add(3 * time.Millisecond)
	crept.CheckpointAt = &creptAt
	for _, tc := range []struct {
		prev, next *idlegrid.Lease
		want       string
	}{
		{running, &saved, "checkpoint saved on node_a at " + at(60).Local().Format("15:04:05")},
		{&saved, &saved, ""},
		{&saved, &crept, ""},
		{&saved, &again, "checkpoint saved on node_a at " + at(120).Local().Format("15:04:05")},
	} {
		if got := strings.Join(texts(leaseChanges(tc.prev, tc.next, nil)), "\n"); got != tc.want {
			t.Errorf("changes = %q, want %q", got, tc.want)
		}
	}
}

// A requeued job's lines say whether its next run resumes, and from what.
func TestJobChanges_requeueSaysResume(t *testing.T) {
	running := &jobView{Job: &idlegrid.Job{ID: "job_1", State: idlegrid.JobRunning,
		JobSpec: idlegrid.JobSpec{Tier: idlegrid.TierBronze, DurationSeconds: 3600}}}
	for _, tc := range []struct {
		name string
		edit func(j *idlegrid.Job)
		want string
	}{
		{"NoCheckpoint", func(j *idlegrid.Job) {}, "  no checkpoint was reported: its next run starts from the beginning"},
		{"OnItsNode", func(j *idlegrid.Job) {
			j.CheckpointRef, j.ResumeSeconds, j.CheckpointNodeID = "docker-volume:idlegrid-ckpt-job_1", 1200, "node_a"
		}, "  its next run resumes from checkpoint docker-volume:idlegrid-ckpt-job_1 (20m0s of its 1h0m0s done, kept on node node_a)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := *running.Job
			j.State, j.Reason = idlegrid.JobQueued, "requeued after preemption: preempted for gold job job_9"
			tc.edit(&j)
			got := texts(jobChanges(running, &jobView{Job: &j}))
			want := []string{"back in the queue: requeued after preemption: preempted for gold job job_9", tc.want}
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("changes = %q, want %q", got, want)
			}
		})
	}
}

func TestJobChanges_providerFault(t *testing.T) {
	l := &idlegrid.Lease{ID: "lease_a", NodeID: "node_a", State: idlegrid.LeaseRunning}
	lost := *l
	lost.State, lost.Reason, lost.Fault = idlegrid.LeaseLost, "node went silent", idlegrid.FaultProvider
	got := texts(leaseChanges(l, &lost, nil))
	if len(got) != 1 || got[0] != "lost on node_a: node went silent; charged $0.000000 (the node's fault: you pay nothing for it)" {
		t.Errorf("changes = %q", got)
	}
}

func TestLiveLine(t *testing.T) {
	views := watchScript()
	for _, tc := range []struct {
		v    *jobView
		want string
	}{
		{views[1], "queued for 50s"},
		{views[3], "starting on node_a for 2m30s (the node pulls the job's image first)"},
		{views[5], "[##########..............]  45% on node_a · 3m50s of 10m0s"},
		{views[9], ""},
	} {
		if got := liveLine(tc.v); got != tc.want {
			t.Errorf("live line of %s = %q, want %q", tc.v.Job.State, got, tc.want)
		}
	}
	pulling := *views[3]
	l := *pulling.Leases[0]
	l.Pull = &idlegrid.LeasePull{PulledBytes: 3 << 30, ImageBytes: 8 << 30}
	pulling.Leases = []*idlegrid.Lease{&l}
	if got, want := liveLine(&pulling), "starting on node_a for 2m30s: pulling the job's image [#########...............]  38%, 3.0 GiB of 8.0 GiB"; got != want {
		t.Errorf("live line of a lease whose image is pulled = %q, want %q", got, want)
	}
	l.StartBy = ptr(watchStart.Add(30 * time.Minute))
	if got, want := liveLine(&pulling), "starting on node_a for 2m30s (to start by 09:30:00 UTC, or it goes back to the queue): "+
		"pulling the job's image [#########...............]  38%, 3.0 GiB of 8.0 GiB"; got != want {
		t.Errorf("live line of a lease with a start-by = %q, want %q", got, want)
	}
	soon := *views[3]
	soon.At = watchStart.Add(20 * time.Second)
	if got, want := liveLine(&soon), "starting on node_a for 20s"; got != want {
		t.Errorf("live line of a lease placed 20s ago = %q, want %q", got, want)
	}
	due := *views[1]
	job := *due.Job
	deadline := due.At.Add(5*time.Minute + time.Duration(job.DurationSeconds)*time.Second)
	job.Deadline, due.Job = &deadline, &job
	if got, want := liveLine(&due), "queued for 50s; must start within 5m0s to finish by its deadline"; got != want {
		t.Errorf("live line of a queued job with a deadline = %q, want %q", got, want)
	}
}

// scriptServer answers "job watch" from views: its watches, each with the
// next view (the view's index is its version; asked with the last one's,
// it waits out the wait and answers 304), or, as an older server without
// watches (noWatch), the lease and job reads, moving to the next view
// after each job read. The last view stays. It answers node reads from
// nodes, and counts them in nodeReads. fail makes the first fail requests
// answer 503.
type scriptServer struct {
	mu        sync.Mutex
	views     []*jobView
	i         int
	fail      int
	noWatch   bool
	nodes     map[string]*idlegrid.Node
	nodeReads map[string]int
	watches   int // watch requests answered
}

func (s *scriptServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasSuffix(r.URL.Path, "/watch") && !s.noWatch && s.unchanged(r) {
		wait, _ := time.ParseDuration(r.URL.Query().Get("wait") + "s")
		select { // nothing will change: wait it out, as the server does
		case <-time.After(wait):
		case <-r.Context().Done():
		}
		w.Header().Set("ETag", r.Header.Get("If-None-Match"))
		w.WriteHeader(http.StatusNotModified)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	v := s.views[min(s.i, len(s.views)-1)]
	w.Header().Set("Content-Type", "application/json")
	if s.fail > 0 {
		s.fail--
		w.WriteHeader(http.StatusServiceUnavailable)
		json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": "unavailable", "message": "restarting"}})
		return
	}
	switch {
	case r.URL.Path == "/v1/jobs/"+v.Job.ID+"/watch" && !s.noWatch:
		s.watches++
		w.Header().Set("ETag", fmt.Sprintf(`"%d"`, min(s.i, len(s.views)-1)))
		json.NewEncoder(w).Encode(idlegrid.JobView{Job: v.Job, Leases: v.Leases})
		s.i++
	case strings.HasSuffix(r.URL.Path, "/watch") && s.noWatch:
		w.WriteHeader(http.StatusNotFound)
		json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": "not_found", "message": "no such endpoint: GET " + r.URL.Path}})
	case r.URL.Path == "/v1/leases": // as the server does, an empty list for an unknown job
		leases := []*idlegrid.Lease{}
		if r.URL.Query().Get("job_id") == v.Job.ID {
			leases = v.Leases
		}
		json.NewEncoder(w).Encode(map[string]any{"leases": leases})
	case r.URL.Path == "/v1/jobs/"+v.Job.ID:
		json.NewEncoder(w).Encode(v.Job)
		s.i++
	case strings.HasPrefix(r.URL.Path, "/v1/nodes/") && s.nodes[strings.TrimPrefix(r.URL.Path, "/v1/nodes/")] != nil:
		s.nodeReads[r.URL.Path]++
		json.NewEncoder(w).Encode(s.nodes[strings.TrimPrefix(r.URL.Path, "/v1/nodes/")])
	case strings.HasPrefix(r.URL.Path, "/v1/nodes/"):
		if s.nodeReads != nil {
			s.nodeReads[r.URL.Path]++
		}
		w.WriteHeader(http.StatusNotFound)
		json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": "not_found", "message": "node not found"}})
	default:
		id := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/v1/jobs/"), "/watch")
		w.WriteHeader(http.StatusNotFound)
		json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": "not_found", "message": `job "` + id + `" not found`}})
	}
}

// unchanged reports whether a watch asks with the version of the view it
// would get: the last view, which stays.
func (s *scriptServer) unchanged(r *http.Request) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	last := len(s.views) - 1
	return s.fail == 0 && s.i >= last && r.Header.Get("If-None-Match") == fmt.Sprintf(`"%d"`, last)
}

func runWatch(t *testing.T, s *scriptServer, args ...string) result {
	t.Helper()
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	vars := map[string]string{"IDLEGRID_ADDR": ts.URL, "IDLEGRID_KEY": "key_test"}
	return run(t, vars, append([]string{"job", "watch"}, args...)...)
}

// TestJobWatch follows a job's whole life. Its first node is named as its
// owner calls it, with its ID, GPUs and region where it is placed; the
// server will not say what the second is, so the watch names it by its
// ID, and asks about it once.
func TestJobWatch(t *testing.T) {
	s := &scriptServer{views: watchScript(), nodeReads: map[string]int{}, nodes: map[string]*idlegrid.Node{
		"node_a": {ID: "node_a", Offer: idlegrid.Offer{Name: "rig-a", Region: "eu-west", GPUs: []idlegrid.GPU{{Model: "RTX4090"}, {Model: "RTX4090"}}}},
	}}
	r := runWatch(t, s, "job_1", "--every", "500ms")
	if r.code != 0 {
		t.Fatalf("job watch of a job that succeeds: %s", r)
	}
	for _, w := range []string{"waits: no node fits", "placed on rig-a (node_a, 2xRTX4090, eu-west): 1 GPU(s)", "started on rig-a",
		"20% done on rig-a", "40% done on rig-a", "notice on rig-a", "preempted on rig-a", "back in the queue", "placed on node_b: 1 GPU(s)",
		"succeeded on node_b", "succeeded; charged $0.071000 in all"} {
		if !strings.Contains(r.out, w) {
			t.Errorf("job watch printed:\n%s\nwant %q", r.out, w)
		}
	}
	if n := strings.Count(r.out, "waits: no node fits"); n != 1 {
		t.Errorf("the same wait reason printed %d times, want once:\n%s", n, r.out)
	}
	if a, b := s.nodeReads["/v1/nodes/node_a"], s.nodeReads["/v1/nodes/node_b"]; a != 1 || b != 1 {
		t.Errorf("node reads: node_a %d, node_b %d; want each once", a, b)
	}
}

// TestJobWatch_olderServer: a server without watches is asked about the
// job and its leases every --every instead, and the watch shows the same.
func TestJobWatch_olderServer(t *testing.T) {
	watched := &scriptServer{views: watchScript()}
	polled := &scriptServer{views: watchScript(), noWatch: true}
	a, b := runWatch(t, watched, "job_1", "--every", "500ms", "--json"), runWatch(t, polled, "job_1", "--every", "500ms", "--json")
	if a.code != 0 || b.code != 0 || watched.watches == 0 || polled.watches != 0 {
		t.Fatalf("job watch of a job that succeeds: %s, and without watches %s; %d and %d watches answered", a, b, watched.watches, polled.watches)
	}
	if states(t, a.out) != states(t, b.out) {
		t.Errorf("job watch printed states %s by watches and %s without", states(t, a.out), states(t, b.out))
	}
}

func TestJobWatch_failedExits1(t *testing.T) {
	views := watchScript()[:5]
	failed := *views[4]
	failed.Job = &idlegrid.Job{ID: "job_1", State: idlegrid.JobFailed, Reason: "workload exited 3", CreatedAt: watchStart}
	r := runWatch(t, &scriptServer{views: append(views, &failed)}, "job_1", "--every", "500ms")
	if r.code != 1 || !strings.Contains(r.err, "job_1 failed: workload exited 3") || !strings.Contains(r.err, "idlegrid job logs job_1") {
		t.Errorf("job watch of a job that fails: %s", r)
	}
}

func TestJobWatch_json(t *testing.T) {
	r := runWatch(t, &scriptServer{views: watchScript()}, "job_1", "--every", "500ms", "--json")
	if r.code != 0 {
		t.Fatalf("job watch --json: %s", r)
	}
	// One line per change: the repeated queued view prints nothing.
	if got := states(t, r.out); got != "queued,queued,running,running,running,running,queued,running,succeeded" {
		t.Errorf("job watch --json printed states %s", got)
	}
}

// states is the job's states in the lines "job watch --json" printed.
func states(t *testing.T, out string) string {
	t.Helper()
	var states []string
	for line := range strings.Lines(out) {
		var v jobView
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Fatalf("line %q is not a view: %v", line, err)
		}
		states = append(states, string(v.Job.State))
	}
	return strings.Join(states, ",")
}

func TestJobWatch_serverAway(t *testing.T) {
	s := &scriptServer{views: watchScript()[8:], fail: 2}
	r := runWatch(t, s, "job_1", "--every", "500ms")
	if r.code != 0 || strings.Count(r.out, "cannot reach the server") != 1 || !strings.Contains(r.out, "in contact with the server again") {
		t.Errorf("job watch across a server restart: %s", r)
	}
}

func TestJobWatch_timeoutAndMistakes(t *testing.T) {
	queued := watchScript()[1:2]
	r := runWatch(t, &scriptServer{views: queued}, "job_1", "--every", "500ms", "--timeout", "1200ms")
	if r.code != 1 || !strings.Contains(r.err, "job_1 is still queued after 1.2s of watching") || !strings.Contains(r.err, "idlegrid job cancel job_1") {
		t.Errorf("job watch --timeout: %s", r)
	}
	r = runWatch(t, &scriptServer{views: queued}, "job_nope", "--every", "500ms")
	if r.code != 1 || !strings.Contains(r.err, `job "job_nope" not found`) {
		t.Errorf("job watch of an unknown job: %s", r)
	}
	r = runWatch(t, &scriptServer{views: queued}, "job_1", "--every", "10ms")
	if r.code != 2 || !strings.Contains(r.err, "--every: 10ms is too often") {
		t.Errorf("job watch --every 10ms: %s", r)
	}
	r = run(t, nil, "job", "submit", "--image", "x", "--max-price", "1", "--duration", "1m", "--timeout", "1h")
	if r.code != 2 || !strings.Contains(r.err, "--timeout only applies with --wait") {
		t.Errorf("job submit --timeout without --wait: %s", r)
	}
}

func TestJobWatch_interrupted(t *testing.T) {
	ts := httptest.NewServer(&scriptServer{views: watchScript()[1:2]})
	defer ts.Close()
	ctx, cancel := context.WithCancel(t.Context())
	var out, errOut bytes.Buffer
	done := make(chan int)
	go func() {
		done <- Main(ctx, []string{"job", "watch", "job_1", "--every", "500ms"}, Stdio{Out: &out, Err: &errOut},
			func(k string) string { return map[string]string{"IDLEGRID_ADDR": ts.URL, "IDLEGRID_KEY": "k"}[k] })
	}()
	time.Sleep(700 * time.Millisecond) // a poll or two, then Ctrl-C
	cancel()
	if code := <-done; code != 0 || !strings.Contains(errOut.String(), "stopped watching; job_1 goes on") {
		t.Errorf("job watch after Ctrl-C: exit %d, stderr %q", code, errOut.String())
	}
}
