package docker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/runtime"
)

// workload is one container the runtime follows. Its goroutine, follow,
// owns it; Stop and Close only write to stop and kill.
type workload struct {
	r           *Runtime
	leaseID     string
	jobID       string
	containerID string
	scratch     string // volume names
	checkpoint  string
	memoryBytes int64    // the container's limit, for the out-of-memory note
	gpus        []string // UUIDs of the lease's GPUs
	tier        idlegrid.Tier
	notice      time.Duration // the lease's notice; 0 when unknown
	notes       []string      // sent as stderr lines before the output
	adopted     bool          // taken back after a restart: follow only new output
	handedOver  bool          // taken back after a hand-over: follow the output from readTo
	// readTo is where the output was read to: just after the engine's
	// timestamp of the last message read. Written by stream; read once
	// follow has ended (Detach).
	readTo     time.Time
	verifiable bool // adopted: its job's output is checked by its digest (digest.go)
	events     chan<- runtime.Event

	waitC <-chan container.WaitResponse // the container's exit
	errC  <-chan error

	stop     chan time.Duration // the grace of the first stop request
	kill     chan struct{}      // closed by Close: kill now
	killOnce sync.Once

	// ctx ends only when the runtime detaches: the container is left as it
	// is and no Exit is sent; tellDetached, set before, sends a Detached
	// event in its place (Detach).
	ctx          context.Context
	cancel       context.CancelFunc
	tellDetached atomic.Bool

	mu       sync.Mutex
	diskNote string // why the disk watcher killed it (disk.go); "" if it did not
}

func (r *Runtime) newWorkload(leaseID, jobID string, events chan<- runtime.Event) *workload {
	ctx, cancel := context.WithCancel(context.Background())
	return &workload{
		r: r, leaseID: leaseID, jobID: jobID, events: events,
		stop: make(chan time.Duration, 1), kill: make(chan struct{}),
		ctx: ctx, cancel: cancel,
	}
}

// requestStop records the first stop request; later ones change nothing.
func (wl *workload) requestStop(grace time.Duration) {
	select {
	case wl.stop <- grace:
	default:
	}
}

func (wl *workload) killNow() { wl.killOnce.Do(func() { close(wl.kill) }) }

// follow streams the workload's output until it exits, removes its
// container and scratch, and sends the Exit. It runs in its own goroutine.
func (r *Runtime) follow(wl *workload) {
	defer r.wg.Done()
	defer wl.cancel()
	exit, detached := wl.run()
	if detached {
		r.mu.Lock()
		delete(r.running, wl.leaseID)
		r.mu.Unlock()
		if wl.tellDetached.Load() {
			wl.send(runtime.Event{Detached: true})
		}
		return
	}
	r.finish(wl, &exit)
	r.mu.Lock()
	delete(r.running, wl.leaseID)
	r.mu.Unlock()
	wl.send(runtime.Event{Exit: &exit})
}

// run streams the output while it waits for the exit, passing on stop
// requests, and returns the exit once the output is sent. detached is true
// when the runtime detached meanwhile.
func (wl *workload) run() (exit runtime.Exit, detached bool) {
	logsCtx, stopLogs := context.WithCancel(wl.ctx)
	defer stopLogs()
	streamed := make(chan struct{})
	go func() { // owned by run, which waits for it
		defer close(streamed)
		wl.stream(logsCtx)
	}()
	exit = wl.wait()
	drain := time.NewTimer(logDrain)
	defer drain.Stop()
	select {
	case <-streamed:
	case <-drain.C: // the engine did not end the stream: stop waiting for it
		stopLogs()
		<-streamed
	}
	return exit, wl.ctx.Err() != nil
}

// wait passes on stop requests until the container exits: SIGTERM, then
// SIGKILL when the grace is out or Close asks.
func (wl *workload) wait() runtime.Exit {
	stopped := false
	stop, kill := wl.stop, wl.kill
	var graceOut <-chan time.Time
	for {
		select {
		case grace := <-stop:
			stopped, stop = true, nil
			if grace <= 0 {
				wl.signal("SIGKILL")
				continue
			}
			wl.signal("SIGTERM")
			t := time.NewTimer(grace)
			defer t.Stop()
			graceOut = t.C
		case <-kill:
			stopped, kill, stop, graceOut = true, nil, nil, nil
			wl.signal("SIGKILL")
		case <-graceOut:
			graceOut = nil
			wl.signal("SIGKILL")
		case res := <-wl.waitC:
			if res.Error != nil && res.Error.Message != "" {
				return runtime.Exit{Err: fmt.Errorf("waiting for the container: %s", res.Error.Message), Stopped: stopped}
			}
			return runtime.Exit{Code: int(res.StatusCode), Stopped: stopped}
		case err := <-wl.errC:
			return runtime.Exit{Err: fmt.Errorf("lost the container: %w", err), Stopped: stopped}
		}
	}
}

// signal sends sig to the container. One that has exited already is fine.
func (wl *workload) signal(sig string) {
	ctx, cancel := context.WithTimeout(wl.ctx, engineTimeout)
	defer cancel()
	err := wl.r.cli.ContainerKill(ctx, wl.containerID, sig)
	if err != nil && !cerrdefs.IsNotFound(err) && !cerrdefs.IsConflict(err) && !strings.Contains(err.Error(), "is not running") {
		wl.r.opt.Logger.Warn("docker runtime: cannot signal a workload", "lease", wl.leaseID, "signal", sig, "err", err)
	}
}

// finish records when the container finished, tells of an out-of-memory
// kill, removes the container and the scratch volume, and keeps the
// checkpoint unless the workload succeeded.
func (r *Runtime) finish(wl *workload, exit *runtime.Exit) {
	ctx, cancel := context.WithTimeout(context.Background(), engineTimeout)
	defer cancel()
	exit.At = r.finishedAt(ctx, wl)
	if note := wl.diskNoted(); note != "" {
		wl.note(note)
	} else if note := killNote(r.oomKilled(ctx, wl, exit), *exit, wl.memoryBytes>>20); note != "" {
		wl.note(note)
	}
	if wl.adopted && wl.verifiable && exit.Err == nil && exit.Code == 0 {
		r.keepDigest(ctx, wl) // from its log, before the container goes
	}
	r.remove(wl)
	defer r.prunePeriodically(ctx)
	switch {
	case wl.checkpoint == "":
	case exit.Err == nil && exit.Code == 0:
		r.removeVolume(wl.checkpoint) // the job is done here: nothing to resume
	default:
		exit.CheckpointRef = CheckpointRefPrefix + wl.checkpoint
	}
}

// finishedAt is when the engine says the workload's container finished
// (State.FinishedAt): for one that ended while no agent followed it, long
// before Adopt found it. Zero when the engine cannot say.
func (r *Runtime) finishedAt(ctx context.Context, wl *workload) time.Time {
	info, err := r.cli.ContainerInspect(ctx, wl.containerID)
	if err != nil || info.State == nil {
		return time.Time{}
	}
	at, err := time.Parse(time.RFC3339Nano, info.State.FinishedAt)
	if err != nil || at.IsZero() { // "0001-01-01T00:00:00Z" before it finished
		return time.Time{}
	}
	return at.UTC()
}

// How long finish looks again for an out-of-memory kill that Docker has
// not recorded yet: up to 10 s, since on a machine as busy as CI's the
// kernel's event has come more than a second after the exit, and once
// more than 5 s. Only a SIGKILL the agent did not send waits this long.
const (
	oomRecheckEvery = 50 * time.Millisecond
	oomRechecks     = 200
)

// killNote is what the workload's log is told of a kill the agent did
// not ask for. Docker can miss an out-of-memory kill altogether: the
// runtime's event is lost when the container's cgroup goes first
// (containerd issue 8180), so a SIGKILL (137) that neither the agent nor
// Docker explains names memory as the likely cause, and the limit.
func killNote(oomRecorded bool, exit runtime.Exit, limitMB int64) string {
	switch {
	case oomRecorded:
		return fmt.Sprintf("the workload ran out of memory: its limit is %d MB", limitMB)
	case exit.Err == nil && exit.Code == 137 && !exit.Stopped:
		return fmt.Sprintf("the workload was killed (SIGKILL, exit 137) and the agent did not stop it; "+
			"Docker did not say why, and the likely cause is memory: its limit is %d MB", limitMB)
	}
	return ""
}

// oomKilled reports whether the kernel killed the workload for its
// memory. Docker marks the container OOMKilled when the kernel's event
// reaches it, which on a busy machine can be after the exit it caused
// (seen with cgroup v1), so a SIGKILL exit (137) that the agent did not
// ask for is looked at again for up to oomRechecks × oomRecheckEvery.
func (r *Runtime) oomKilled(ctx context.Context, wl *workload, exit *runtime.Exit) bool {
	for attempt := 0; ; attempt++ {
		info, err := r.cli.ContainerInspect(ctx, wl.containerID)
		if err != nil || info.State == nil {
			return false
		}
		if info.State.OOMKilled {
			return true
		}
		if exit.Code != 137 || exit.Stopped || attempt == oomRechecks {
			return false
		}
		t := time.NewTimer(oomRecheckEvery)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return false
		}
	}
}

// stream sends the notes, then the container's output, until the output
// ends (the container exited) or ctx does. It keeps in readTo where the
// output was read to, for a hand-over (handover.go).
func (wl *workload) stream(ctx context.Context) {
	for _, n := range wl.notes {
		wl.note(n)
	}
	// The engine's timestamps come at the start of each message, and a
	// long line comes in messages of 16 KiB: demux takes them off before
	// the lines are put back together, and the lines are stamped as they
	// are read.
	opts := container.LogsOptions{ShowStdout: true, ShowStderr: true, Follow: true, Tail: "all", Timestamps: true}
	switch {
	case wl.adopted && !wl.readTo.IsZero():
		opts.Since = wl.readTo.Format(time.RFC3339Nano) // handed over: from where the last runtime stopped reading
	case wl.adopted && !wl.handedOver: // after a crash: from now on, and a later hand-over goes on from here
		opts.Tail = "0"
		wl.readTo = time.Now()
	}
	rc, err := wl.r.cli.ContainerLogs(ctx, wl.containerID, opts)
	if err != nil {
		if ctx.Err() == nil {
			wl.note("cannot follow the workload's output: " + err.Error())
		}
		return
	}
	defer rc.Close()
	stdout, stderr := &lineWriter{wl: wl, stream: "stdout"}, &lineWriter{wl: wl, stream: "stderr"}
	// The engine's since takes messages at that time and later: the next
	// runtime reads from just after the last one read.
	read := func(at time.Time) { wl.readTo = at.Add(time.Nanosecond) }
	if err := demux(stdout, stderr, rc, read); err != nil && ctx.Err() == nil {
		wl.note("the workload's output broke off: " + err.Error())
	}
	stdout.flush()
	stderr.flush()
}

// note sends a line of the runtime's own on stderr.
func (wl *workload) note(text string) {
	wl.send(runtime.Event{Log: &idlegrid.LogLine{At: wl.r.opt.Clock.Now(), Stream: "stderr", Text: "[idlegrid] " + text}})
}

func (wl *workload) send(ev runtime.Event) {
	ev.LeaseID = wl.leaseID
	wl.events <- ev
}

// lineWriter turns one stream of output into events, a line at a time; a
// line over maxLineBytes goes in pieces of that size, so that the pieces
// are the same however the output was read. stdcopy writes to both of a
// workload's writers from one goroutine, so the events keep the output's
// order.
type lineWriter struct {
	wl     *workload
	stream string
	buf    []byte
	// sum, when set, takes the standard output lines that would go as Log
	// events, each with a newline, as the agent hashes them, and nothing
	// is sent (digest.go).
	sum io.Writer
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		switch {
		case i >= 0 && i <= maxLineBytes:
			w.emit(w.buf[:i])
			w.buf = w.buf[i+1:]
		case len(w.buf) > maxLineBytes:
			w.emit(w.buf[:maxLineBytes])
			w.buf = w.buf[maxLineBytes:]
		default:
			return len(p), nil
		}
	}
}

func (w *lineWriter) flush() {
	if len(w.buf) > 0 {
		w.emit(w.buf)
		w.buf = w.buf[:0]
	}
}

// emit sends one line, stamped now.
func (w *lineWriter) emit(line []byte) {
	text := strings.TrimSuffix(string(line), "\r")
	if w.sum != nil {
		if _, isProgress := progress(w.stream, text); w.stream == "stdout" && !isProgress && strings.TrimSpace(text) != checkpointLine {
			io.WriteString(w.sum, text+"\n")
		}
		return
	}
	at := w.wl.r.opt.Clock.Now()
	if p, ok := progress(w.stream, text); ok {
		w.wl.send(runtime.Event{Progress: &p})
		return
	}
	if w.stream == "stdout" && strings.TrimSpace(text) == checkpointLine {
		w.wl.send(runtime.Event{Checkpoint: &at})
		return
	}
	w.wl.send(runtime.Event{Log: &idlegrid.LogLine{At: at, Stream: w.stream, Text: text}})
}

// progress parses a progress report, "idlegrid:progress=0.42" on stdout.
func progress(stream, text string) (float64, bool) {
	v, ok := strings.CutPrefix(text, progressPrefix)
	if !ok || stream != "stdout" {
		return 0, false
	}
	p, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil || math.IsNaN(p) {
		return 0, false
	}
	return min(max(p, 0), 1), true
}

var errClosed = errors.New("docker runtime: closed")
