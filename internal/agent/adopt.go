package agent

import (
	"context"
	"time"

	"github.com/idlegrid/idlegrid"

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
// stops the workload (see ship). adopt runs once, before the loops start;
// the goroutines it starts are counted in leaseWG.
func (a *Agent) adopt(ctx, workCtx context.Context) {
	ad, ok := a.rt.(runtime.Adopter)
	if !ok {
		return
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
		l.markStarted()
		a.resumeMeter(l)
		a.leases[id] = l
		leases[id] = l
		a.leaseWG.Go(func() {
			defer a.retire(id)
			a.follow(workCtx, l)
		})
	}
	a.mu.Unlock()
	for id, l := range leases {
		a.log.Info("took back a workload a previous agent left", "lease", id, "gpus", len(l.w.GPUs))
	}
	known <- leases
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
		if ev.Exit != nil {
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
