package market

import (
	"slices"
	"time"

	"github.com/idlegrid/idlegrid"
)

// Commit records that the coordinator stored d, the engine's decision for
// job at now:
//
//   - placed: the picked GPUs are claimed for the job until AddLease brings
//     its leases; its reservation ends; the clearing prices enter the
//     market view; it leaves the queue;
//   - preemptions: the victims are recorded as given notice at now, and
//     the reservation holds their GPUs for the job;
//   - a reservation alone: it is recorded, replacing any the job held;
//   - waiting (only a reason): any reservation the job held ends. Place
//     returns the reservation while it holds, so this one no longer fits
//     (a re-offer made a node unfit, say), and it must not keep other
//     jobs off its GPUs.
func (e *Engine) Commit(job *idlegrid.Job, d Decision, now time.Time) {
	at := now.UnixNano()
	switch {
	case d.Placed():
		e.dropReservation(job.ID)
		delete(e.queued, job.ID)
		for i, p := range d.Picks {
			e.record(job, p, e.claim(job, i, p, at), now)
		}
		e.linkClaims(job, d.Picks)
	case d.Reservation != nil:
		e.dropReservation(job.ID)
		notice := e.cfg.NoticeSeconds * int64(time.Second)
		for _, p := range d.Preemptions {
			if h := e.leases[p.LeaseID]; h != nil && !h.noticed && h.bronze {
				e.giveNotice(h, at, at+notice)
			}
		}
		e.reserve(job, d.Reservation)
	default:
		e.dropReservation(job.ID)
	}
}

// linkClaims makes the claims of a gang's picks one gang, which their
// leases join (AddLease).
func (e *Engine) linkClaims(job *idlegrid.Job, picks []Pick) {
	if len(picks) < 2 {
		return
	}
	var holds []*hold
	for _, p := range picks {
		if p.Node == nil {
			continue
		}
		if h := e.claims[claimKey{job.ID, p.Node.ID}]; h != nil {
			holds = append(holds, h)
		}
	}
	link(holds)
}

// claim holds a pick's GPUs for its job until the lease arrives, and
// returns the node (nil: not online). The i-th pick of the decision Place
// made last is most often on the node it remembers.
func (e *Engine) claim(job *idlegrid.Job, i int, p Pick, at int64) *node {
	if p.Node == nil {
		return nil
	}
	var nd *node
	if i < len(e.placed) && e.placed[i].n == p.Node && e.placed[i].cls != nil { // still online
		nd = e.placed[i]
	} else if nd = e.nodes[p.Node.ID]; nd == nil {
		return nil
	}
	key := claimKey{job.ID, nd.id}
	if old := e.claims[key]; old != nil {
		e.detach(old)
		delete(e.claims, key)
		e.releaseHold(old)
	}
	h := e.newHold()
	h.jobID, h.nodeID, h.nd, h.bronze, h.start = job.ID, nd.id, nd, job.Tier == idlegrid.TierBronze, at
	h.end = at + max(job.DurationSeconds, 1)*int64(time.Second)
	h.due = h.end
	for _, g := range p.GPUs {
		if s := nd.slot(g.UUID); s >= 0 && nd.held[s] == nil {
			nd.held[s] = h
			h.gpus++
		}
	}
	if h.gpus == 0 {
		e.releaseHold(h)
		return nd
	}
	e.claims[key] = h
	nd.addHold(h)
	e.touch(nd)
	return nd
}

// reserve records a job's reservation on its nodes: on all of them, or,
// when one has gone offline since the decision, on none (a gang's
// reservation on some of its nodes would keep GPUs from backfill for a
// start that cannot come); the job plans anew at its next Place.
func (e *Engine) reserve(job *idlegrid.Job, r *Reservation) {
	for _, rn := range r.Nodes {
		if e.nodes[rn.NodeID] == nil {
			return
		}
	}
	res := &reservation{
		jobID: job.ID, start: r.Start.UnixNano(), preempting: r.Preempting,
		models: slices.Clone(job.GPUModels), vram: job.MinVRAMMB, eligibleGen: e.eligibleGen,
	}
	res.end = res.start + max(job.DurationSeconds, 1)*int64(time.Second)
	for _, rn := range r.Nodes {
		nd := e.nodes[rn.NodeID]
		if nd.res != nil && nd.res.jobID != job.ID {
			e.dropReservation(nd.res.jobID)
		}
		nd.setRes(res, rn.GPUs)
		e.touch(nd)
		res.nodes = append(res.nodes, nd)
		res.gpus = append(res.gpus, rn.GPUs)
	}
	if len(res.nodes) > 0 {
		e.reservations[job.ID] = res
	}
}

// dropReservation ends a job's reservation, if it holds one.
func (e *Engine) dropReservation(jobID string) {
	r := e.reservations[jobID]
	if r == nil {
		return
	}
	for _, nd := range r.nodes {
		if nd.res == r {
			nd.setRes(nil, 0)
			e.touch(nd)
		}
	}
	delete(e.reservations, jobID)
}
