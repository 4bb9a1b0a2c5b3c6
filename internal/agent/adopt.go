package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/backoff"
	"github.com/idlegrid/idlegrid/internal/runtime"
)

// leaseGPUs is implemented by a runtime that can say which GPUs an adopted
// lease holds (the docker runtime reads them from its container), so that
// the policy counts them as the agent's and their work gets notice.
type leaseGPUs interface {
	LeaseGPUs(leaseID string) []string
}

// leaseTier is implemented by a runtime that can say an adopted lease's
// SLA tier (docker reads it from a label), so that a bronze lease the
// node's policy stops still gets its notice as grace.
type leaseTier interface {
	LeaseTier(leaseID string) idlegrid.Tier
}

// leaseNotice is implemented by a runtime that can say the notice an
// adopted lease is owed (runtime.Workload.Notice, which docker keeps in a
// label), so that the node's policy gives it that notice rather than
// DefaultNotice. A stop command's lease also tells it (Agent.stop).
type leaseNotice interface {
	LeaseNotice(leaseID string) time.Duration
}

// adoptedOutput is implemented by a runtime that can give the digest of a
// taken-back workload's whole standard output, which a verifiable lease's
// success must carry. The agent hashes a workload it started as its output
// comes (lease.output), but of one it took back it saw only what came after
// the adoption: the digest must come from what the runtime still holds (the
// docker runtime: the container's log, read once the container exited).
//
// AdoptedOutputDigest is "sha256:" and the hex SHA-256 of every stdout line
// the runtime sent, or would have sent, as a Log event since the workload
// started, each followed by a newline, exactly as lease.output sums them.
// ok is false when the lease's job is not verifiable, or when the runtime
// no longer holds all of that output: the lease then succeeds without a
// digest, which the server fails by the node's fault, rather than with one
// made of part of the output. The agent asks once, when the workload's Exit
// has come and before it reports the lease; the runtime may forget it then.
type adoptedOutput interface {
	AdoptedOutputDigest(leaseID string) (digest string, ok bool)
}

// adopt takes back, when the runtime is a runtime.Adopter, the workloads a
// previous agent on this node left running (it crashed, or was upgraded),
// and tracks them as leases of its own: their output, progress and exit are
// reported like any other lease's, a stop command reaches them, and
// shutdown stops them. The server decides whether it still wants them: it
// refuses the running report of a lease it has ended, and the agent then
// stops the workload (see ship). adopt runs through takeBack, before the
// loops start and again while the runtime could not say which workloads
// it holds; it returns Adopt's error (nil for a runtime that is no Adopter).
// The goroutines it starts are counted in leaseWG.
func (a *Agent) adopt(ctx, workCtx context.Context) error {
	ad, ok := a.rt.(runtime.Adopter)
	if !ok {
		return nil
	}
	// Adopt may send events before it returns, and sends block: the router
	// takes them from the start and holds those of leases not known yet.
	events := make(chan runtime.Event, 64)
	known := make(chan map[string]*lease, 1)
	a.leaseWG.Go(func() { a.route(events, known) })
	ids, err := ad.Adopt(ctx, events)
	if err != nil {
		a.log.Warn("could not take back every workload a previous agent left", "adopted", len(ids), "err", err)
	}
	leases := make(map[string]*lease, len(ids))
	var ended []*lease // reported ended meanwhile (stop)
	a.mu.Lock()
	for _, id := range ids {
		if a.leases[id] != nil || leases[id] != nil {
			continue
		}
		w := runtime.Workload{LeaseID: id}
		if lg, ok := a.rt.(leaseGPUs); ok {
			w.GPUs = lg.LeaseGPUs(id)
		}
		if lt, ok := a.rt.(leaseTier); ok {
			w.Job.Tier = lt.LeaseTier(id)
		}
		l := newLease(w, a.clock)
		l.tier = w.Job.Tier
		l.notice = DefaultNotice // unless the runtime kept its lease's own
		if ln, ok := a.rt.(leaseNotice); ok {
			if d := ln.LeaseNotice(id); d > 0 {
				l.notice = d
			}
		}
		l.adopted = true
		l.markStarted()
		a.resumeMeter(l)
		if _, done := a.finished[id]; done {
			ended = append(ended, l)
		}
		a.addLease(l)
		l.order = 0 // older than any lease started here, whose start waits for its GPUs (gpuHolder)
		leases[id] = l
		a.leaseWG.Go(func() {
			defer a.retire(l)
			a.follow(workCtx, l)
		})
	}
	a.mu.Unlock()
	for id, l := range leases {
		a.log.Info("took back a workload a previous agent left", "lease", id, "gpus", len(l.w.GPUs))
	}
	known <- leases
	for _, l := range ended {
		// Taken back late: the server asked for its stop before, and was
		// told it had ended (stop).
		a.stopLease(l, stopByEnd, "the server stopped the lease before the workload was taken back")
	}
	return err
}

// takeBack runs adopt until it has worked once, one call at a time, and
// then goes on with the receipts of the leases whose workloads are gone
// (recoverMeters); after that it returns nil at once. serve calls it
// first, adoptAgain while it fails, and each lease's start before its
// workload starts: until the runtime has said which workloads a previous
// agent left, a new one could start beside one of them on its GPU.
func (a *Agent) takeBack(ctx, workCtx context.Context) error {
	a.takeBackMu.Lock()
	defer a.takeBackMu.Unlock()
	if !a.untaken {
		return nil
	}
	a.takeBackTries++
	if err := a.adopt(ctx, workCtx); err != nil {
		return fmt.Errorf("the runtime cannot say yet which workloads a previous agent left on this node: %w", err)
	}
	a.untaken = false
	if a.takeBackTries > 1 {
		a.log.Info("took back what a previous agent left", "attempts", a.takeBackTries)
	}
	a.recoverMeters(workCtx, true)
	return nil
}

// adoptAgain tries takeBack again, backing off, until it works (here, or
// at a lease's start) or ctx is done. It runs with the agent's loops.
func (a *Agent) adoptAgain(ctx, workCtx context.Context) {
	var b backoff.Backoff
	for backoff.Sleep(ctx, b.Next()) {
		if a.takeBack(ctx, workCtx) == nil {
			return
		}
	}
}

// orphanPatience bounds how long the agent tries to send the receipts
// and final report of a lease a previous agent kept (recoverMeters): the
// server takes receipts only until the lease has ended, which it does
// itself, by the node's fault, soon after the node goes quiet.
const orphanPatience = 30 * time.Minute

// recoverMeters goes on with the receipt state a previous agent kept for
// leases whose workloads no runtime holds: it shut down before the server
// had their ends (retire), or crashed and their workloads are gone. For
// each it sends the receipts the server does not have, the last one cut
// first where the workload's end is known, and then the final report (the
// one kept, or the workload lost), and then forgets it. Until then the
// lease is one of the agent's, so that the server's stop command for it
// waits for its receipts rather than end it at once (stop); it holds no
// GPU of the offer. all says the runtime has said which workloads it
// holds (adopt): else only the states with a kept report, whose workloads
// have surely exited, are taken. The goroutines it starts are counted in
// leaseWG and end with workCtx, or after orphanPatience.
func (a *Agent) recoverMeters(workCtx context.Context, all bool) {
	dir := filepath.Join(a.cfg.DataDir, "receipts")
	entries, err := os.ReadDir(dir)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			a.log.Warn("cannot read the receipt states a previous agent kept", "dir", dir, "err", err)
		}
		return
	}
	now := a.clock.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, e := range entries {
		id, ok := strings.CutSuffix(e.Name(), ".json")
		path := meterPath(a.cfg.DataDir, id)
		if !ok || e.IsDir() || path == "" || a.leases[id] != nil {
			continue
		}
		l := newLease(runtime.Workload{LeaseID: id}, a.clock) // no GPUs: the policy counts it holding none
		if err := l.meter.resume(path, nil); err != nil {
			a.log.Warn("cannot go on with a kept receipt state; forgetting it", "lease", id, "err", err)
			a.forgetMeter(id)
			continue
		}
		if !all && l.meter.savedReport() == nil {
			continue
		}
		l.meter.endAtCut(now) // ended as it was kept; one that vanished ran as far as its receipts were cut
		a.addLease(l)
		a.log.Info("sending the usage receipts and end of a lease a previous agent ran", "lease", id, "unsent_receipts", l.meter.unsentCount())
		a.leaseWG.Go(func() { a.settleOrphan(workCtx, l) })
	}
}

// settleOrphan sends the receipts and final report of a lease that
// recoverMeters took, and forgets it. A shutdown (workCtx) before the
// server had them keeps its state for the next agent; after
// orphanPatience without an answer from the server, it is given up.
func (a *Agent) settleOrphan(workCtx context.Context, l *lease) {
	ctx, cancel := context.WithTimeout(workCtx, orphanPatience)
	defer cancel()
	done := false
	if a.sendReceipts(ctx, l) {
		err := a.report(ctx, l.id, l.orphanReport())
		done = err == nil || definite(err)
	}
	gaveUp := !done && workCtx.Err() == nil
	if gaveUp {
		a.log.Error("gave up sending the usage receipts and end of a lease a previous agent ran",
			"lease", l.id, "after", orphanPatience, "unsent_receipts", l.meter.unsentCount())
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.leases, l.id)
	a.finished[l.id] = a.clock.Now()
	if done || gaveUp {
		a.forgetMeter(l.id)
	}
}

// route passes the events of adopted workloads to their leases until every
// one has exited. Events that come before Adopt has named the leases wait.
func (a *Agent) route(events <-chan runtime.Event, known <-chan map[string]*lease) {
	var leases map[string]*lease // nil until Adopt returned
	early := map[string][]runtime.Event{}
	live := 0
	pass := func(ev runtime.Event) {
		l := leases[ev.LeaseID]
		if l == nil {
			a.log.Warn("dropping an event of a workload that was not adopted", "lease", ev.LeaseID)
			return
		}
		if ev.Detached {
			live--
		} else if ev.Exit != nil {
			live--
			if ao, ok := a.rt.(adoptedOutput); ok {
				if d, ok := ao.AdoptedOutputDigest(l.id); ok {
					l.setAdoptedDigest(d) // before the Exit: the final report reads it
				}
			}
		}
		l.events <- ev // its follow loop takes events until the Exit
	}
	for leases == nil || live > 0 {
		select {
		case leases = <-known:
			known, live = nil, len(leases)
			for id, evs := range early {
				for _, ev := range evs {
					pass(ev)
				}
				delete(early, id)
			}
		case ev := <-events:
			if leases == nil {
				early[ev.LeaseID] = append(early[ev.LeaseID], ev)
			} else {
				pass(ev)
			}
		}
	}
}
