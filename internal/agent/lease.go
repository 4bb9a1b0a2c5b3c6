package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/runtime"
)

// maxBufferedLines caps the output a lease keeps while the server cannot
// take it; later lines are dropped, and the drop is noted in the log.
const maxBufferedLines = 10_000

// stopCause is why a lease was asked to stop. It decides the report.
type stopCause int

const (
	notStopped     stopCause = iota
	stopByServer             // the server asked: reported cancelled
	stopByShutdown           // the agent is shutting down: the node's failure
	stopByPolicy             // the node withdrew a GPU (owner back, too hot): the node's failure, after notice
	stopByEnd                // the server had already ended it: stopped at once; the report is moot
	stopByLimit              // it ran its time limit and LimitSlack more (the server could not ask): reported cancelled
)

// lease is one workload this agent runs. Two goroutines serve it: runLease
// takes the runtime's events (never blocking on the network, so the
// workload never waits for the server), and ship sends output and reports
// (never blocking the runtime).
type lease struct {
	id     string
	order  uint64 // when it was added among the agent's leases (addLease)
	w      runtime.Workload
	tier   idlegrid.Tier
	notice time.Duration // the notice it is owed when the node's policy stops it
	clock  idlegrid.Clock
	events chan runtime.Event
	wake   chan struct{} // a batch of lines is ready, or the workload exited

	mu          sync.Mutex
	started     bool                 // the runtime accepted it
	startAhead  bool                 // its Start is in flight, or about to be (Agent.start)
	leftStart   bool                 // its Start was given up for the next agent (handover.go)
	detached    bool                 // its workload was left running for the next agent (handover.go)
	cancelStart context.CancelFunc   // ends a Start in flight (a pull): a stop need not wait for it
	pull        runtime.PullProgress // of the job's image, while Start pulls it
	stopCause   stopCause
	stopReason  string
	stopSent    bool // runtime.Stop was called
	adopted     bool // taken back from a previous agent (adopt)
	// runningAt is when the server took the running report of a lease
	// this agent started, on the agent's clock: the server counts the
	// lease's time limit from about then (overLimit).
	runningAt  time.Time
	reported   bool // the final report was delivered, or refused for good
	progress   float64
	checkpoint *time.Time         // when the workload last saved a checkpoint
	lines      []idlegrid.LogLine // not yet sent
	seq        int64              // of the last line numbered
	dropped    int                // lines dropped since the last note
	lastErr    string             // the last stderr line, for the failure message
	exit       *runtime.Exit
	// output hashes standard output as it comes, dropped lines too, for
	// a verifiable job's OutputDigest.
	output hash.Hash
	// adoptedDigest is, for a workload taken back from a previous agent,
	// the digest of its whole standard output as its runtime gave it
	// (adoptedOutput); "" when it gave none.
	adoptedDigest string

	meter meter // its usage receipts (receipts.go)
}

func newLease(w runtime.Workload, clock idlegrid.Clock) *lease {
	l := &lease{id: w.LeaseID, w: w, clock: clock, events: make(chan runtime.Event, 64), wake: make(chan struct{}, 1)}
	l.w.OnPull = l.notePull
	if w.Job.Verifiable {
		l.output = sha256.New()
	}
	return l
}

// runLease starts the lease's workload, takes its events until it exits,
// and waits until ship has reported it.
func (a *Agent) runLease(ctx, workCtx context.Context, l *lease) {
	defer a.retire(l)
	startCtx := l.startContext(ctx)
	err := a.takeBack(startCtx, workCtx)
	if err == nil {
		err = a.waitForGPUs(startCtx, l)
	}
	if err == nil {
		err = a.rt.Start(startCtx, l.w, l.events)
	}
	l.startOver()
	if err != nil && l.stoppedBeforeStart() {
		a.log.Info("lease stopped before its workload started", "lease", l.id, "err", err)
		a.report(workCtx, l.id, l.final())
		return
	} else if _, left := l.startLeft(); err != nil && left {
		a.log.Info("left the lease's start to the next agent", "lease", l.id)
		return
	} else if err != nil {
		l.startFailed(err)
		fault, msg := idlegrid.FaultProvider, "the node could not start the workload: "+err.Error()
		switch {
		case ctx.Err() != nil:
			msg = "the node agent shut down before the workload started"
		case idlegrid.ErrorCode(err) == idlegrid.EFORBIDDEN: // the registry refused the renter's image (runtime.Runtime)
			fault, msg = idlegrid.FaultWorkload, "the job's image could not be pulled: "+err.Error()
		case idlegrid.ErrorCode(err) == idlegrid.EINVALID: // the job cannot run as it is (runtime.Runtime)
			fault, msg = idlegrid.FaultWorkload, "the job cannot start: "+idlegrid.ErrorMessage(err)
		}
		a.log.Warn("lease failed to start", "lease", l.id, "err", err)
		a.report(workCtx, l.id, idlegrid.LeaseReport{State: idlegrid.LeaseFailed, Fault: fault, Message: msg})
		return
	}
	a.beginMeter(l)
	a.log.Info("lease started", "lease", l.id, "image", l.w.Job.Image, "gpus", len(l.w.GPUs))
	if l.markStarted() {
		if err := a.rt.Stop(l.id, l.grace()); err != nil && idlegrid.ErrorCode(err) != idlegrid.ENOTFOUND {
			a.log.Error("runtime could not stop lease", "lease", l.id, "err", err)
		}
	}
	a.follow(workCtx, l)
}

// gpuFreeWait bounds how long a lease's start waits for the workloads of
// older leases on its GPUs to exit (waitForGPUs): long enough for the
// heartbeat that tells the agent those leases ended, and their stop.
const gpuFreeWait = 2 * time.Minute

// gpuFreePoll is how often a start waiting for its GPUs looks again.
const gpuFreePoll = 250 * time.Millisecond

// waitForGPUs waits until no workload of an older lease of this agent
// holds one of l's GPUs. The server gives a lease GPUs once the lease
// before it on them has ended in its books, and it may end one without
// its node: a node lost in an outage, a stop never confirmed, a lease
// taken back. The agent hears of that end at its next heartbeat and stops
// the workload then, with StopGrace, while the start of the lease that
// took its GPUs may have come first: starting it at once would put two
// workloads on one GPU, and the newer one could fail for want of the
// GPU's memory, its renter paying for the node's mix-up. It returns ctx's
// error when ctx ends first (a stop, a shutdown), and one naming the GPU
// and its holder after gpuFreeWait.
func (a *Agent) waitForGPUs(ctx context.Context, l *lease) error {
	gpu, holder := a.gpuHolder(l)
	if holder == "" {
		return nil
	}
	a.log.Info("waiting for a GPU to start the lease: an earlier lease's workload still holds it", "lease", l.id, "gpu", gpu, "held_by", holder)
	deadline := time.NewTimer(gpuFreeWait)
	defer deadline.Stop()
	poll := time.NewTicker(gpuFreePoll)
	defer poll.Stop()
	for holder != "" {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			return fmt.Errorf("GPU %s is still held by the workload of lease %s after %s", gpu, holder, gpuFreeWait)
		case <-poll.C:
			gpu, holder = a.gpuHolder(l)
		}
	}
	return nil
}

// gpuHolder returns one of l's GPUs that the workload of an older lease of
// this agent holds, or is to hold once started (it has not exited, nor
// failed to start: exited), and that lease's ID; "" when none does.
func (a *Agent) gpuHolder(l *lease) (gpu, leaseID string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for id, o := range a.leases {
		if o.order >= l.order || o.exited() {
			continue
		}
		for _, u := range l.w.GPUs {
			if slices.Contains(o.w.GPUs, u) {
				return u, id
			}
		}
	}
	return "", ""
}

// follow takes the events of a lease whose workload runs until it exits,
// or the runtime leaves it running (runtime.Detacher), and waits until
// ship has reported it, or sent what it holds.
func (a *Agent) follow(workCtx context.Context, l *lease) {
	var ship sync.WaitGroup
	ship.Go(func() { a.ship(workCtx, l) })
	for ev := range l.events { // the runtime never closes it; the Exit, or Detached, ends the loop
		if l.take(ev) {
			break
		}
	}
	ship.Wait()
}

// ship reports the lease running, then sends its output every
// LogFlushInterval or LogBatchLines, and once it has exited and its output
// is sent, reports how it ended; once its workload is left running for
// the next agent, it sends its output and receipts, and ends.
func (a *Agent) ship(ctx context.Context, l *lease) {
	running := idlegrid.LeaseReport{State: idlegrid.LeaseRunning}
	if err := a.report(ctx, l.id, running); err == nil {
		l.noteRunning(a.clock.Now())
	} else if definite(err) {
		// The server will not have it run (it ended the lease meanwhile):
		// stop the work at once, as stopEnded does, since its GPUs may
		// already be another lease's; the final report will be moot.
		a.stopLease(l, stopByEnd, "the server refused it: "+idlegrid.ErrorMessage(err))
	}
	tick := time.NewTicker(LogFlushInterval)
	defer tick.Stop()
	for {
		select {
		case <-l.wake:
		case <-tick.C:
		case <-ctx.Done():
			return
		}
		exited, left := l.exited(), l.leftRunning() // before flushing: every line before the exit is buffered by now
		if !a.flush(ctx, l) || !a.sendReceipts(ctx, l) || left {
			return
		}
		if exited {
			err := a.report(ctx, l.id, l.final())
			l.noteReported(err == nil || definite(err))
			return
		}
	}
}

// flush sends the buffered lines in batches. It returns false when ctx ends.
func (a *Agent) flush(ctx context.Context, l *lease) bool {
	for {
		batch := l.batch(LogBatchLines)
		if len(batch) == 0 {
			return true
		}
		err := a.deliver(ctx, "send logs", func(ctx context.Context) error {
			return a.srv.AppendLogs(ctx, l.id, idlegrid.LogBatch{Lines: batch})
		})
		if ctx.Err() != nil {
			return false
		} else if err != nil {
			a.log.Warn("server refused log lines; dropping them", "lease", l.id, "lines", len(batch), "err", err)
		}
	}
}

// setAdoptedDigest records the digest of a taken-back workload's whole
// standard output, from its runtime.
func (l *lease) setAdoptedDigest(d string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.adoptedDigest = d
}

// take records one runtime event and reports whether it was the last:
// the Exit, or Detached.
func (l *lease) take(ev runtime.Event) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case ev.Log != nil:
		l.addLine(*ev.Log)
	case ev.Progress != nil:
		l.progress = min(max(*ev.Progress, 0), 1)
	case ev.Checkpoint != nil:
		at := *ev.Checkpoint
		l.checkpoint = &at
	case ev.Detached:
		l.detached = true
		l.signal()
		return true
	case ev.Exit != nil:
		e := *ev.Exit
		l.exit = &e
		// Metered up to when it ended, which for a workload that ended
		// while no agent ran is long before its Exit reaches this one.
		l.meter.stopAt(e.At, l.clock.Now())
		l.signal()
		return true
	}
	return false
}

// addLine numbers and buffers a line of output. l.mu is held.
func (l *lease) addLine(line idlegrid.LogLine) {
	if l.output != nil && line.Stream != "stderr" {
		io.WriteString(l.output, line.Text+"\n")
	}
	if len(l.lines) >= maxBufferedLines {
		l.dropped++
		return
	}
	l.noteDropped()
	// The server keeps no more of a line; buffered whole, a batch of long
	// lines would be over its size limit, and refused.
	line.Text = idlegrid.ClipLogLine(line.Text)
	if line.At.IsZero() {
		line.At = l.clock.Now()
	}
	if line.Stream != "stderr" {
		line.Stream = "stdout"
	} else {
		l.lastErr = line.Text
	}
	l.seq++
	line.Seq = l.seq
	l.lines = append(l.lines, line)
	if len(l.lines) >= LogBatchLines {
		l.signal()
	}
}

// noteDropped adds a line saying how many lines were dropped. l.mu is held.
func (l *lease) noteDropped() {
	if l.dropped == 0 {
		return
	}
	l.seq++
	l.lines = append(l.lines, idlegrid.LogLine{
		Seq: l.seq, At: l.clock.Now(), Stream: "stderr",
		Text: fmt.Sprintf("[idlegrid agent: %d lines dropped while the server could not take them]", l.dropped),
	})
	l.dropped = 0
}

func (l *lease) signal() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// batch takes up to n buffered lines.
func (l *lease) batch(n int) []idlegrid.LogLine {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.lines) == 0 && l.exit != nil {
		l.noteDropped()
	}
	n = min(n, len(l.lines))
	out := append([]idlegrid.LogLine(nil), l.lines[:n]...)
	l.lines = l.lines[n:]
	return out
}

// startContext gives the lease's Start a context of its own, under ctx,
// that a stop ends; startOver says the Start is over.
func (l *lease) startContext(ctx context.Context) context.Context {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.endStartLocked()
	ctx, l.cancelStart = context.WithCancel(ctx)
	if l.stopCause != notStopped || l.leftStart {
		l.cancelStart()
	}
	return ctx
}

// starting returns the lease as a heartbeat names it while its Start is
// in flight, with how far its image's pull has come; false once it has
// started, or a stop has come for it.
func (l *lease) starting() (idlegrid.LeaseStarting, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	st := idlegrid.LeaseStarting{LeaseID: l.id, PulledBytes: l.pull.DoneBytes, ImageBytes: l.pull.TotalBytes}
	return st, l.cancelStart != nil && !l.started && l.stopCause == notStopped
}

// notePull takes the runtime's word on how far the pull has come
// (runtime.Workload.OnPull).
func (l *lease) notePull(p runtime.PullProgress) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.pull = runtime.PullProgress{DoneBytes: min(max(p.DoneBytes, 0), p.TotalBytes), TotalBytes: max(p.TotalBytes, 0)}
}

// stoppedBeforeStart reports whether a stop came before the workload
// started, which then never runs: its Exit is a stop without a code.
func (l *lease) stoppedBeforeStart() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopCause == notStopped {
		return false
	}
	l.exit = &runtime.Exit{Stopped: true}
	return true
}

// startFailed records that the runtime did not start the workload, as an
// exit that ran nothing: the lease stays the agent's until its failure is
// reported, holding no GPU (gpuHolder).
func (l *lease) startFailed(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.exit = &runtime.Exit{Err: err}
}

// endedByServer reports whether the server had already ended the lease
// when the agent stopped it (stopByEnd): it takes nothing more from it.
func (l *lease) endedByServer() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.stopCause == stopByEnd
}

// startOver says the lease's Start is over: a stop no longer cancels it.
func (l *lease) startOver() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.startAhead = false
	l.endStartLocked()
}

// leaveStart gives up the lease's Start, in flight or about to be, for
// the next agent, unless a stop came first.
func (l *lease) leaveStart() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.startAhead || l.stopCause != notStopped {
		return
	}
	l.leftStart = true
	if l.cancelStart != nil {
		l.cancelStart()
	}
}

// startLeft reports whether leaveStart gave up the lease's Start, and
// the lease as a heartbeat names it starting, with its pull as far as it
// came.
func (l *lease) startLeft() (idlegrid.LeaseStarting, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return idlegrid.LeaseStarting{LeaseID: l.id, PulledBytes: l.pull.DoneBytes, ImageBytes: l.pull.TotalBytes}, l.leftStart
}

// leftRunning reports whether the runtime left the workload running for
// the next agent (runtime.Detacher).
func (l *lease) leftRunning() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.detached
}

// unsettled reports whether the lease is not ready to be handed over:
// its Start is in flight or about to be, or its workload is being
// stopped.
func (l *lease) unsettled() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.startAhead || (l.stopCause != notStopped && l.started && l.exit == nil)
}

// endStartLocked ends the context of a Start in flight, if any; l.mu is
// held.
func (l *lease) endStartLocked() {
	if l.cancelStart != nil {
		l.cancelStart()
		l.cancelStart = nil
	}
}

// markStarted records that the runtime runs the workload, and reports
// whether a stop came meanwhile that must now be passed on.
func (l *lease) markStarted() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.started = true
	if l.stopCause != notStopped && !l.stopSent {
		l.stopSent = true
		return true
	}
	return false
}

// requestStop records the first cause to stop l. It reports whether this
// was the first, and whether the runtime must be told now (the workload
// has started and has not been told).
func (l *lease) requestStop(cause stopCause, reason string) (first, now bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopCause == notStopped {
		l.stopCause, l.stopReason, first = cause, reason, true
	}
	if l.cancelStart != nil {
		l.cancelStart() // a Start still pulling the image gives up
	}
	if l.started && !l.stopSent && l.exit == nil {
		l.stopSent, now = true, true
	}
	return first, now
}

// running returns the progress, and last checkpoint with its age at now,
// of a lease whose workload runs.
func (l *lease) running(now time.Time) (idlegrid.LeaseProgress, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	p := idlegrid.LeaseProgress{LeaseID: l.id, Progress: l.progress, CheckpointAt: l.checkpoint}
	if l.checkpoint != nil {
		age := max(now.Sub(*l.checkpoint), 0).Seconds()
		p.CheckpointAgeSeconds = &age
	}
	return p, l.started && l.exit == nil
}

// noteRunning records that the server took the running report at now;
// only the first such report of a lease this agent started counts.
func (l *lease) noteRunning(now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.adopted && l.runningAt.IsZero() {
		l.runningAt = now
	}
}

// noteReported records whether the final report reached the server (or
// was refused for good, which no later try changes).
func (l *lease) noteReported(ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.reported = ok
}

func (l *lease) wasReported() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.reported
}

// overLimit reports whether l's workload runs, has not been asked to
// stop, and has run its lease's time limit and slack more by now: from
// when it began, or from when the server took its running report when
// that was later, since the server counts the limit from then (and asks
// for the stop at that point, whose cancel it takes as the renter's).
// The limit is the meter's, which an adopted lease resumes from disk; a
// lease whose limit is unknown is not stopped by it.
func (l *lease) overLimit(now time.Time, slack time.Duration) (time.Duration, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.started || l.exit != nil || l.stopCause != notStopped {
		return 0, false
	}
	from, limit, ok := l.meter.limitFrom()
	if !ok {
		return 0, false
	}
	if l.runningAt.After(from) {
		from = l.runningAt
	}
	return limit, !now.Before(from.Add(limit + slack))
}

// orphanReport is the final report of a lease whose workload is gone and
// whose meter was kept from a previous agent (recoverMeters): the report
// that agent kept, or, when it kept none (it crashed, and the workload is
// gone with it), a cancel where the server asked for the stop, else the
// node's failure.
func (l *lease) orphanReport() idlegrid.LeaseReport {
	if r := l.meter.savedReport(); r != nil {
		return *r
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopCause == stopByServer {
		return idlegrid.LeaseReport{State: idlegrid.LeaseCancelled, Message: "stopped: " + l.stopReason}
	}
	return idlegrid.LeaseReport{State: idlegrid.LeaseFailed, Fault: idlegrid.FaultProvider,
		Message: "the node agent restarted and lost the workload"}
}

// setNotice records the notice the lease is owed, learnt late: a stop
// command's lease carries it, which an adopted lease may not have known.
func (l *lease) setNotice(d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.notice = d
}

// grace is how long the workload has to end once asked to stop: its
// notice when the node's policy stopped it or the server gave a bronze
// lease notice, else StopGrace.
func (l *lease) grace() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopCause == stopByPolicy || (l.stopCause == stopByServer && l.w.Job.Tier == idlegrid.TierBronze) {
		return max(l.notice, StopGrace)
	}
	return StopGrace
}

func (l *lease) exited() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.exit != nil
}

// final is the report of how the lease ended. Only a stop the server asked
// for is a cancellation; the server decides what anyone pays.
func (l *lease) final() idlegrid.LeaseReport {
	l.mu.Lock()
	defer l.mu.Unlock()
	e, code := l.exit, l.exit.Code
	r := idlegrid.LeaseReport{Progress: l.progress, ExitCode: &code, CheckpointRef: e.CheckpointRef}
	if !l.started {
		r.ExitCode = nil // it never ran
	}
	switch {
	case e.Err != nil:
		r.State, r.Fault, r.ExitCode = idlegrid.LeaseFailed, idlegrid.FaultProvider, nil
		r.Message = "the runtime lost the workload: " + e.Err.Error()
	case e.Stopped && (l.stopCause == stopByServer || l.stopCause == stopByEnd || l.stopCause == stopByLimit):
		r.State, r.Message = idlegrid.LeaseCancelled, "stopped: "+l.stopReason
	case e.Stopped && l.stopCause == stopByShutdown:
		r.State, r.Fault, r.Message = idlegrid.LeaseFailed, idlegrid.FaultProvider, "the node agent shut down"
	case e.Stopped && l.stopCause == stopByPolicy:
		r.State, r.Fault = idlegrid.LeaseFailed, idlegrid.FaultProvider
		r.Message = fmt.Sprintf("the node withdrew its GPU after %v notice: %s", l.notice, l.stopReason)
	case e.Stopped:
		r.State, r.Fault, r.Message = idlegrid.LeaseFailed, idlegrid.FaultProvider, "the runtime stopped the workload"
	case code == 0:
		r.State, r.Progress = idlegrid.LeaseSucceeded, 1
		if l.output != nil {
			r.OutputDigest = "sha256:" + hex.EncodeToString(l.output.Sum(nil))
		} else {
			r.OutputDigest = l.adoptedDigest
		}
	default:
		r.State, r.Fault = idlegrid.LeaseFailed, idlegrid.FaultWorkload
		r.Message = fmt.Sprintf("exited with code %d", code)
		if l.lastErr != "" {
			r.Message += ": " + truncate(l.lastErr, 200)
		}
	}
	return r
}

// truncate shortens s to at most n runes.
func truncate(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}
