// Package fake is a simulated runtime for development and tests. Its
// workload pretends to train a model: it runs for the job's duration
// (divided by Speed), reports progress every 2%, writes log lines like a
// trainer ("step 120/1000 loss=1.234 …"), saves a checkpoint as often as
// the job says it does (CheckpointEverySeconds of its run, at the end of a
// progress report's tick), and on Stop checkpoints and exits 143 within the
// grace period. Its Exit's At is when the run ended, on its Clock.
//
// Like the docker runtime, it keeps a job's checkpoint past its exit (in
// memory, so on the node that ran it): a job that checkpoints and did not
// finish exits with Exit.CheckpointRef (CheckpointRef(jobID)), and a later
// run of that job on the same Runtime whose Job.CheckpointRef names it
// resumes at the checkpoint's tick rather than from zero.
//
// A job's env steers the simulation:
//
//	FAKE_EXIT_CODE=3      exit with code 3 at the end instead of 0
//	FAKE_FAIL_AT=0.5      crash half way (exit 1, or FAKE_EXIT_CODE if set)
//	FAKE_START_ERROR=msg  refuse to start, as a runtime that cannot pull the image
//	FAKE_PULL_SECONDS=120 pull the job's image first, for 120 seconds (divided
//	                      by Speed), telling Workload.OnPull how far it has come
//	FAKE_IMAGE_MB=8192    that image's size; 4096 unless set
//
// It hands its workloads over as the docker runtime does (runtime.Detacher):
// Detach leaves them running, unfollowed (their events meanwhile are kept,
// as the engine keeps a container's output), and Successor opens the
// runtime the next agent would, whose Adopt takes them back and sends what
// was kept. Its workloads live in this process, so only an agent in it, a
// test's, can take them back.
//
// Waiting uses the time package's timers, which testing/synctest makes
// virtual, so tests of an hour-long job take no real time; the injected
// Clock stamps the log lines.
package fake

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"hash/fnv"
	"io"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/runtime"
)

// Simulation constants.
const (
	Steps       = 1000 // training steps in every simulated run
	Ticks       = 50   // progress reports per run: one every 2%
	checkpoint  = 2 * time.Second
	exitStopped = 143 // 128 + SIGTERM
	exitKilled  = 137 // 128 + SIGKILL
)

// Runtime runs simulated workloads. Its zero value is ready: real-time speed
// and the system clock.
type Runtime struct {
	// Speed is how many simulated seconds pass in one second: 60 runs an
	// hour-long job in a minute. Zero or less means 1.
	Speed float64
	// Clock stamps log lines; nil means idlegrid.SystemClock.
	Clock idlegrid.Clock

	once   sync.Once
	n      *node // what outlives this Runtime: its workloads and checkpoints
	closed bool  // under n.mu
}

// node is what a simulated node keeps whichever Runtime follows its
// workloads: a Runtime and its Successor share it.
type node struct {
	mu      sync.Mutex
	running map[string]*workload // by lease ID, until each exits
	left    map[string]*workload // detached and not yet taken back
	saved   map[string]int       // by checkpoint reference: the tick the job's checkpoint holds
	digests map[string]string    // taken-back verifiable workloads' output digests, until asked
}

var (
	_ runtime.Runtime  = (*Runtime)(nil)
	_ runtime.Detacher = (*Runtime)(nil)
)

func (r *Runtime) node() *node {
	r.once.Do(func() {
		if r.n == nil {
			r.n = &node{running: map[string]*workload{}, left: map[string]*workload{}, saved: map[string]int{}, digests: map[string]string{}}
		}
	})
	return r.n
}

// workload is one simulated run. Its goroutine, started by Start, owns
// everything but stop, which Stop and Close write to, and what mu guards.
type workload struct {
	n     *node
	w     runtime.Workload
	from  int // the tick it resumes after: 0 from the start
	clock idlegrid.Clock
	tick  time.Duration // time between progress reports
	plan  plan
	stop  chan time.Duration // the grace of the first stop request
	done  chan struct{}      // closed once its Exit is sent or kept

	owner *Runtime // the Runtime that follows it; nil while detached. Under the node's mu.

	mu       sync.Mutex
	events   chan<- runtime.Event // nil while detached
	kept     []runtime.Event      // sent while detached, for the Adopt that takes it back
	sentExit bool                 // the Exit was sent
	taken    bool                 // taken back by an Adopt
	stdout   hash.Hash            // a verifiable job's standard output, summed as it is made
}

// plan is how a run ends, from the job's env.
type plan struct {
	exitCode int     // at the end, or when failing
	failAt   float64 // fraction at which to crash; 0 never
	badEnv   string  // a message about a malformed variable: exit 2 at once
}

// Start starts a simulated run of w and returns at once.
func (r *Runtime) Start(ctx context.Context, w runtime.Workload, events chan<- runtime.Event) error {
	if err := ctx.Err(); err != nil {
		return err
	} else if events == nil {
		return idlegrid.Invalid("events", "required")
	} else if w.LeaseID == "" {
		return idlegrid.Invalid("workload.lease_id", "required")
	} else if msg := w.Job.Env["FAKE_START_ERROR"]; msg != "" {
		return fmt.Errorf("fake runtime: start %s: %s", w.Job.Image, msg)
	} else if err := r.pull(ctx, w); err != nil {
		return err
	}
	n := r.node()
	n.mu.Lock()
	defer n.mu.Unlock()
	if r.closed {
		return errors.New("fake runtime: closed")
	} else if n.running[w.LeaseID] != nil || n.left[w.LeaseID] != nil {
		return idlegrid.Errorf(idlegrid.ECONFLICT, "lease %s is already running", w.LeaseID)
	}
	wl := &workload{
		n: n, w: w, events: events, clock: r.clock(), tick: r.tick(w.Job.DurationSeconds),
		plan: planFor(w.Job.Env), stop: make(chan time.Duration, 1), done: make(chan struct{}), owner: r,
	}
	if w.Job.Verifiable {
		wl.stdout = sha256.New()
	}
	if ref := CheckpointRef(w.JobID); w.Job.CheckpointRef == ref {
		wl.from = n.saved[ref] // 0 when this node keeps none: from the start
	}
	n.running[w.LeaseID] = wl
	go func() { // owned by the Runtime that follows it: Close and Detach wait for it
		defer close(wl.done)
		exit := wl.run()
		exit.At = wl.clock.Now()
		n.mu.Lock()
		delete(n.running, w.LeaseID)
		ref := CheckpointRef(w.JobID)
		if _, ok := n.saved[ref]; ok && exit.Err == nil && (exit.Code != 0 || exit.Stopped) {
			exit.CheckpointRef = ref
		} else {
			delete(n.saved, ref) // done: nothing to resume
		}
		n.mu.Unlock()
		wl.send(runtime.Event{Exit: &exit})
	}()
	return nil
}

// pullSteps is how many times a simulated pull reports its progress after
// the first, which gives the image's size.
const pullSteps = 10

// pull simulates pulling the job's image when its env asks for it
// (FAKE_PULL_SECONDS, FAKE_IMAGE_MB): it tells w.OnPull how far it has
// come, and gives up with ctx's error when ctx ends first. A value that
// is not one is the job's mistake (EINVALID).
func (r *Runtime) pull(ctx context.Context, w runtime.Workload) error {
	v, ok := w.Job.Env["FAKE_PULL_SECONDS"]
	if !ok {
		return nil
	}
	secs, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil || !(secs > 0 && secs <= 86400) {
		return idlegrid.Invalid("job.env.FAKE_PULL_SECONDS", "want seconds above 0 and at most a day, e.g. 120; got %q", v)
	}
	mb := int64(4096)
	if v, ok := w.Job.Env["FAKE_IMAGE_MB"]; ok {
		if mb, err = strconv.ParseInt(strings.TrimSpace(v), 10, 64); err != nil || mb < 1 || mb > 1<<24 {
			return idlegrid.Invalid("job.env.FAKE_IMAGE_MB", "want a whole number of MiB from 1 to %d; got %q", 1<<24, v)
		}
	}
	total := mb << 20
	step := r.tick(int64(math.Ceil(secs))) * Ticks / pullSteps
	for i := range pullSteps + 1 {
		if i > 0 {
			t := time.NewTimer(step)
			select {
			case <-ctx.Done():
				t.Stop()
				return fmt.Errorf("fake runtime: pull %s: %w", w.Job.Image, ctx.Err())
			case <-t.C:
			}
		}
		if w.OnPull != nil {
			w.OnPull(runtime.PullProgress{DoneBytes: total * int64(i) / pullSteps, TotalBytes: total})
		}
	}
	return nil
}

// CheckpointRef is the reference the runtime reports for a job's checkpoint.
func CheckpointRef(jobID string) string { return "fake-checkpoint:" + jobID }

// save records that the workload's job checkpointed after tick, when the
// job says it can resume (CheckpointEverySeconds).
func (wl *workload) save(tick int) {
	if wl.w.Job.CheckpointEverySeconds <= 0 || wl.w.JobID == "" || tick <= 0 {
		return
	}
	wl.n.mu.Lock()
	defer wl.n.mu.Unlock()
	wl.n.saved[CheckpointRef(wl.w.JobID)] = tick
}

func (r *Runtime) clock() idlegrid.Clock {
	if r.Clock == nil {
		return idlegrid.SystemClock{}
	}
	return r.Clock
}

// tick is the real time between progress reports of a job of durationSeconds.
func (r *Runtime) tick(durationSeconds int64) time.Duration {
	speed := r.Speed
	if speed <= 0 {
		speed = 1
	}
	total := float64(durationSeconds) * float64(time.Second) / speed
	return time.Duration(total / Ticks)
}

func planFor(env map[string]string) plan {
	var p plan
	if v, ok := env["FAKE_EXIT_CODE"]; ok {
		code, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || code < 0 || code > 255 {
			return plan{exitCode: 2, badEnv: fmt.Sprintf("FAKE_EXIT_CODE=%q: want a whole number from 0 to 255", v)}
		}
		p.exitCode = code
	}
	if v, ok := env["FAKE_FAIL_AT"]; ok {
		at, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || !(at > 0 && at <= 1) {
			return plan{exitCode: 2, badEnv: fmt.Sprintf("FAKE_FAIL_AT=%q: want a fraction above 0 and at most 1, e.g. 0.5", v)}
		}
		p.failAt = at
		if p.exitCode == 0 {
			p.exitCode = 1
		}
	}
	return p
}

// Stop asks the lease's workload to checkpoint and exit within grace.
func (r *Runtime) Stop(leaseID string, grace time.Duration) error {
	n := r.node()
	n.mu.Lock()
	wl := n.running[leaseID]
	if wl != nil && wl.owner != r {
		wl = nil // left by Detach, or another Runtime's
	}
	n.mu.Unlock()
	if wl == nil {
		return idlegrid.Errorf(idlegrid.ENOTFOUND, "no workload runs for lease %s", leaseID)
	}
	wl.requestStop(grace)
	return nil
}

// Close kills every running workload it follows and waits for their Exits
// to be sent. What Detach left runs on.
func (r *Runtime) Close() error {
	mine := r.shut()
	for _, wl := range mine {
		wl.requestStop(0)
	}
	for _, wl := range mine {
		<-wl.done
	}
	return nil
}

// Detach leaves every running workload it follows running, unfollowed:
// each one's events end with a Detached event, and those it sends until a
// Successor's Adopt takes it back are kept for it. It returns once the
// Detached events are sent; Start then fails.
func (r *Runtime) Detach() error {
	n := r.node()
	for _, wl := range r.shut() {
		if !wl.detach() {
			continue // its Exit went first
		}
		n.mu.Lock()
		if wl.owner == r {
			wl.owner = nil
		}
		n.left[wl.w.LeaseID] = wl
		n.mu.Unlock()
	}
	return nil
}

// shut closes r for Start and returns the running workloads it follows.
func (r *Runtime) shut() []*workload {
	n := r.node()
	n.mu.Lock()
	defer n.mu.Unlock()
	r.closed = true
	var mine []*workload
	for _, wl := range n.running {
		if wl.owner == r {
			mine = append(mine, wl)
		}
	}
	return mine
}

// Successor returns the Runtime the next agent on this simulated node
// would open, after this one's Detach: it holds what Detach left, which
// its Adopt takes back, and the node's checkpoints.
func (r *Runtime) Successor() *Runtime {
	return &Runtime{Speed: r.Speed, Clock: r.Clock, n: r.node()}
}

// Adopt takes back what a Detach of this node's previous Runtime left
// (runtime.Adopter): for each workload, a line saying it was handed over,
// the events it sent meanwhile (its Exit among them when it ended), and
// its events from then on.
func (r *Runtime) Adopt(ctx context.Context, events chan<- runtime.Event) ([]string, error) {
	if events == nil {
		return nil, idlegrid.Invalid("events", "required")
	}
	n := r.node()
	n.mu.Lock()
	if r.closed {
		n.mu.Unlock()
		return nil, errors.New("fake runtime: closed")
	}
	var taken []*workload
	for id, wl := range n.left {
		delete(n.left, id)
		if n.running[id] == wl {
			wl.owner = r
		}
		taken = append(taken, wl)
	}
	n.mu.Unlock()
	ids := make([]string, 0, len(taken))
	for _, wl := range taken {
		wl.attach(events)
		ids = append(ids, wl.w.LeaseID)
	}
	return ids, nil
}

// LeaseGPUs, LeaseTier and LeaseNotice say what a taken-back workload's
// lease holds and is owed, as the docker runtime reads them from its
// container.
func (r *Runtime) LeaseGPUs(leaseID string) []string { return r.workload(leaseID).w.GPUs }
func (r *Runtime) LeaseTier(leaseID string) idlegrid.Tier {
	return r.workload(leaseID).w.Job.Tier
}
func (r *Runtime) LeaseNotice(leaseID string) time.Duration { return r.workload(leaseID).w.Notice }

// workload returns the lease's workload while it runs or waits to be
// taken back; an empty one otherwise.
func (r *Runtime) workload(leaseID string) *workload {
	n := r.node()
	n.mu.Lock()
	defer n.mu.Unlock()
	if wl := n.running[leaseID]; wl != nil {
		return wl
	} else if wl := n.left[leaseID]; wl != nil {
		return wl
	}
	return &workload{}
}

// AdoptedOutputDigest is the digest of a taken-back verifiable workload's
// whole standard output, what it wrote before it was taken back
// included, once it has exited (the agent's adoptedOutput); it is
// forgotten once asked.
func (r *Runtime) AdoptedOutputDigest(leaseID string) (string, bool) {
	n := r.node()
	n.mu.Lock()
	defer n.mu.Unlock()
	d, ok := n.digests[leaseID]
	delete(n.digests, leaseID)
	return d, ok
}

// detach sends the Detached event that ends the workload's events, and
// keeps what it sends from then on to itself. It reports false when the
// workload's Exit was sent first.
func (wl *workload) detach() bool {
	wl.mu.Lock()
	defer wl.mu.Unlock()
	if wl.events == nil || wl.sentExit {
		return false
	}
	wl.events <- runtime.Event{LeaseID: wl.w.LeaseID, Detached: true}
	wl.events = nil
	return true
}

// attach makes events the workload's again, after a note and the events
// it sent while detached.
func (wl *workload) attach(events chan<- runtime.Event) {
	wl.mu.Lock()
	defer wl.mu.Unlock()
	wl.events, wl.taken = events, true
	note := "[idlegrid] the node agent handed the workload over to a new one, which goes on with its output"
	wl.events <- runtime.Event{LeaseID: wl.w.LeaseID, Log: &idlegrid.LogLine{At: wl.clock.Now(), Stream: "stderr", Text: note}}
	for _, ev := range wl.kept {
		wl.deliver(ev)
	}
	wl.kept = nil
}

// requestStop records the first stop request; later ones change nothing.
func (wl *workload) requestStop(grace time.Duration) {
	select {
	case wl.stop <- grace:
	default:
	}
}

// run simulates the workload until it ends, sending its events, and
// returns its exit.
func (wl *workload) run() runtime.Exit {
	if wl.plan.badEnv != "" {
		wl.logf("stderr", "fake: bad %s", wl.plan.badEnv)
		return runtime.Exit{Code: wl.plan.exitCode}
	}
	// A verifiable job's standard output must depend on its inputs only,
	// so what differs from node to node goes to standard error.
	info := "stdout"
	if wl.w.Job.Verifiable {
		info = "stderr"
	}
	wl.logf(info, "pulled %s (simulated)", wl.w.Job.Image)
	wl.logf(info, "visible GPUs: %s", strings.Join(wl.w.GPUs, ","))
	wl.logf("stdout", "starting %s run %q: %d steps, %d seconds", wl.w.Job.Kind, wl.w.Job.Name, Steps, wl.w.Job.DurationSeconds)
	if wl.from > 0 {
		frac := float64(wl.from) / Ticks
		wl.logf("stdout", "resuming from step %d, checkpointed in %s", step(frac), wl.w.Job.CheckpointRef)
		wl.send(runtime.Event{Progress: &frac})
	}
	timer := time.NewTimer(wl.tick)
	defer timer.Stop()
	for i := wl.from + 1; i <= Ticks; i++ {
		select {
		case grace := <-wl.stop:
			return wl.stopped(i-1, grace)
		case <-timer.C:
			timer.Reset(wl.tick)
		}
		frac := float64(i) / Ticks
		if wl.plan.failAt > 0 && frac >= wl.plan.failAt {
			wl.logf("stderr", "RuntimeError: CUDA error: an illegal memory access was encountered (step %d)", step(frac))
			return runtime.Exit{Code: wl.plan.exitCode}
		}
		wl.send(runtime.Event{Progress: &frac})
		wl.logf("stdout", "%s", wl.stepLine(frac))
		wl.checkpointAfter(i)
	}
	wl.logf("stdout", "training complete: %d steps, final loss=%.4f", Steps, wl.loss(1))
	if c := wl.plan.exitCode; c != 0 {
		wl.logf("stderr", "exiting with code %d", c)
	}
	return runtime.Exit{Code: wl.plan.exitCode}
}

// checkpointAfter saves a checkpoint after tick i when the job said it
// checkpoints and an interval of its run ended during the tick.
func (wl *workload) checkpointAfter(i int) {
	every, dur := wl.w.Job.CheckpointEverySeconds, wl.w.Job.DurationSeconds
	if every <= 0 || i == Ticks || int64(i)*dur/Ticks/every == int64(i-1)*dur/Ticks/every {
		return
	}
	wl.logf("stdout", "checkpoint saved: /checkpoints/step-%d.pt", step(float64(i)/Ticks))
	wl.save(i)
	at := wl.clock.Now()
	wl.send(runtime.Event{Checkpoint: &at})
}

// stopped plays out a stop request after tick ticks: checkpoint and exit 143
// well within grace, or die at once (137) when there is no grace.
func (wl *workload) stopped(tick int, grace time.Duration) runtime.Exit {
	if grace <= 0 {
		wl.logf("stderr", "killed")
		return runtime.Exit{Code: exitKilled, Stopped: true}
	}
	wl.logf("stderr", "received SIGTERM, checkpointing")
	t := time.NewTimer(min(checkpoint, grace/2))
	defer t.Stop()
	select {
	case <-t.C:
	case g := <-wl.stop: // only Close stops twice, to kill
		if g <= 0 {
			wl.logf("stderr", "killed")
			return runtime.Exit{Code: exitKilled, Stopped: true}
		}
		<-t.C
	}
	wl.logf("stdout", "checkpoint saved: /checkpoints/step-%d.pt", step(float64(tick)/Ticks))
	wl.save(tick)
	return runtime.Exit{Code: exitStopped, Stopped: true}
}

func step(frac float64) int { return int(math.Round(frac * Steps)) }

// stepLine is a trainer's progress line; the numbers are deterministic for a
// lease so that runs can be compared.
func (wl *workload) stepLine(frac float64) string {
	lr := 3e-4 * 0.5 * (1 + math.Cos(math.Pi*frac))
	perGPU := 800 + 100*wl.noise(frac, "tput")
	return fmt.Sprintf("step %d/%d loss=%.4f lr=%.2e throughput=%.0f samples/s gpus=%d",
		step(frac), Steps, wl.loss(frac), lr, perGPU*float64(max(1, len(wl.w.GPUs))), len(wl.w.GPUs))
}

// loss falls from about 2.6 towards 0.1, with a little noise.
func (wl *workload) loss(frac float64) float64 {
	return 2.5*math.Exp(-3*frac) + 0.1 + 0.02*wl.noise(frac, "loss")
}

// noise is a deterministic value in [-1, 1) for the lease, point and kind;
// for a verifiable job, for its inputs (image and command) instead of the
// lease, so that a re-run elsewhere prints the same.
func (wl *workload) noise(frac float64, kind string) float64 {
	h := fnv.New64a()
	seed := wl.w.LeaseID
	if wl.w.Job.Verifiable {
		seed = wl.w.Job.Image + "\x00" + strings.Join(wl.w.Job.Command, "\x00")
	}
	fmt.Fprintf(h, "%s/%s/%d", seed, kind, step(frac))
	return float64(h.Sum64()%2000)/1000 - 1
}

func (wl *workload) logf(stream, format string, args ...any) {
	wl.send(runtime.Event{Log: &idlegrid.LogLine{
		At: wl.clock.Now(), Stream: stream, Text: fmt.Sprintf(format, args...),
	}})
}

// send sends ev, or keeps it while the workload is detached, for the
// Adopt that takes it back. A verifiable job's standard output is summed
// as it is made.
func (wl *workload) send(ev runtime.Event) {
	ev.LeaseID = wl.w.LeaseID
	wl.mu.Lock()
	defer wl.mu.Unlock()
	if wl.stdout != nil && ev.Log != nil && ev.Log.Stream == "stdout" {
		io.WriteString(wl.stdout, ev.Log.Text+"\n")
	}
	if wl.events == nil {
		wl.kept = append(wl.kept, ev)
		return
	}
	wl.deliver(ev)
}

// deliver sends ev to the workload's follower; wl.mu is held.
func (wl *workload) deliver(ev runtime.Event) {
	if ev.Exit != nil && wl.stdout != nil && wl.taken {
		wl.n.keepDigest(wl.w.LeaseID, wl.stdout)
	}
	wl.events <- ev
	wl.sentExit = ev.Exit != nil
}

// keepDigest keeps the digest of a taken-back workload's standard output
// for AdoptedOutputDigest. The workload's mu is held.
func (n *node) keepDigest(leaseID string, stdout hash.Hash) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.digests[leaseID] = "sha256:" + hex.EncodeToString(stdout.Sum(nil))
}
