// Package market decides which node runs a job and at what price. It does
// no I/O, starts no goroutines and reads no clock: time is always passed in.
//
// There are two matchers. FirstMatcher is the naive baseline: a pure
// function over a Snapshot that checks every node and pays each winner its
// ask. Engine is the market itself: an index of the online nodes and their
// live leases, owned by one goroutine (the coordinator's scheduler), that
// runs a reliability-weighted reverse auction with second-score prices, SLA
// tiers with preemption and notice, windows with EASY backfill reservations,
// gangs, and data locality. docs/market.md states every rule with a worked
// example.
//
// The coordinator drives an Engine with events:
//
//	at start           NewEngine(cfg); Advance(now); UpsertNode for every online node;
//	                   AddLease for every live (assigned or running) lease; NoteQueued for queued jobs
//	                   (a rebuild of a running engine: then TakeMarket(old), for its price history;
//	                   the first engine: RecordPrice for the newest stored leases, oldest first)
//	node online/offer  UpsertNode(n)        (offline or lost: RemoveNode(id))
//	new reputation     UpsertNode(n)        (the same offer: the node moves in place, restand.go)
//	lease stored       AddLease(l)          (also when it starts running or is given notice)
//	lease ended        RemoveLease(id)      (succeeded, failed, cancelled, lost, preempted)
//	checkpoint report  Checkpoint(leaseID, at)
//	job queued         NoteQueued(job)      (cancelled or failed while queued: ForgetJob(id))
//	each pass          Advance(now) first: give the Notices it returns; then for each queued job,
//	                   highest tier first: d := Place(job, now); store what d says; Commit(job, d, now),
//	                   every decision, a waiting one too (it ends a reservation that no longer fits)
//	                   (then AddLease for each lease a placement stored; a placement not stored, say
//	                   for want of funds: ForgetJob(id), then NoteQueued(job))
//	between passes     sleep until a job, lease or node event, or NextEvent()
//	job explain        Explain(job, now)
//	market view        MarketView(now)
//
// Place does not change the engine; Commit records what the coordinator
// stored. A Decision either places the job now (Picks), or asks for bronze
// leases to be given notice so the job can start when they stop
// (Preemptions, with a Reservation of their GPUs), or reserves the GPUs
// that free up soonest (Reservation), or says why the job waits (Reason).
package market

import (
	"time"

	"github.com/idlegrid/idlegrid"
)

// NodeView is one node as the engine sees it at a moment.
type NodeView struct {
	Node     *idlegrid.Node
	FreeGPUs []idlegrid.GPU // GPUs no live lease holds
	// AvailableUntil is the end of the node's current window; the zero time
	// when the node is not offered now.
	AvailableUntil time.Time
}

// Snapshot is a read-only view of the market at Now.
type Snapshot struct {
	Now   time.Time
	Nodes []*NodeView
}

// Reason is why a node cannot take a job.
type Reason string

const (
	ReasonGPUModel    Reason = "gpu model"
	ReasonVRAM        Reason = "vram"
	ReasonRegion      Reason = "region"
	ReasonResidency   Reason = "residency"
	ReasonWindow      Reason = "window too short"
	ReasonPrice       Reason = "cap below ask"
	ReasonTier        Reason = "tier not offered"
	ReasonKind        Reason = "workload kind not allowed"
	ReasonMaxDuration Reason = "longer than node allows"
	ReasonCPU         Reason = "cpu"
	ReasonRAM         Reason = "ram"
	ReasonCapacity    Reason = "no free capacity"
	// ReasonReliability: a gold job runs only on nodes whose reliability
	// meets Config.GoldMinReliability and whose trust level meets
	// Config.GoldMinLevel.
	ReasonReliability Reason = "reliability bar"
	// ReasonGPUs: the node has fewer GPUs that pass the model and VRAM
	// checks than the job asks for on one node, busy or not: it can never
	// run the job.
	ReasonGPUs Reason = "too few GPUs"
	// ReasonAvoided: the job avoids the node's provider (JobSpec.AvoidProviders),
	// as a verification re-run avoids the provider it checks.
	ReasonAvoided Reason = "provider avoided"
	// ReasonTrustLevel: the node's trust level (idlegrid.Node.Level) is
	// below the job's JobSpec.MinTrustLevel.
	ReasonTrustLevel Reason = "trust level"
)

// Pick is one node chosen for a job, with the GPUs and the locked price.
type Pick struct {
	Node                  *idlegrid.Node
	GPUs                  []idlegrid.GPU  // read only: it may share the engine's record of the node
	PriceMicrosPerGPUHour idlegrid.Micros // the clearing price, locked in the lease; PriceNote says how it was set
	Score                 float64         // the ranking score in micros per useful GPU-hour; lower wins

	// How the Engine's auction set the price; FirstMatcher leaves these zero.
	AskMicrosPerGPUHour    idlegrid.Micros // the node's ask for the tier now: floor × time-of-day multiplier
	CreditMicrosPerGPUHour idlegrid.Micros // the locality credit taken off the weighted ask in the score
	// RunnerUpNodeID is the node whose score set the price: the runner-up,
	// or for a gang the best node left out, or with neither the shadow
	// runner-up (ShadowRunnerUp). Empty when the renter's cap, the reserve
	// price, set it.
	RunnerUpNodeID string
	RunnerUpScore  float64
	// ShadowRunnerUp says RunnerUpNodeID is a shadow runner-up: no free
	// node was left out, so the price was set against the best busy
	// competitor scoring at least the winners (see docs/market.md).
	ShadowRunnerUp bool

	// StartBy, when set, is the latest start at which the job still ends
	// in time for what follows on the node: the close of its window, or
	// another job's reservation of it (startBy). A node slow to start the
	// job (a long image pull) would otherwise run it past the window, or
	// put the reserved job off; the coordinator takes it back past
	// StartBy (EndBy).
	StartBy time.Time

	basis priceBasis // the rest of what PriceNote is written from
}

// Decision is the engine's answer for one job. Exactly one of these holds:
//
//   - Picks (exactly job.Nodes of them): the job is placed now;
//   - Preemptions: bronze leases must be given notice, and Reservation holds
//     the GPUs they free for the job, which starts when they have stopped;
//   - Reservation alone: the job cannot start now, and the GPUs that free up
//     soonest are reserved for it (EASY backfill: other jobs may use them
//     only if they finish before Reservation.Start);
//   - none of these: Reason says why the job waits.
//
// FirstMatcher fills Rejections with per-reason counts; the Engine leaves
// them to Explain, which counts every node.
type Decision struct {
	Picks       []Pick
	Preemptions []Preemption
	Reservation *Reservation
	Rejections  map[Reason]int
	Reason      string
}

// Preemption is a bronze lease to stop, after notice, so that a gold or
// silver job can run: a victim, or another running lease of a victim's
// gang, which stops with it.
type Preemption struct {
	LeaseID       string `json:"lease_id"`
	JobID         string `json:"job_id"`
	NodeID        string `json:"node_id"`
	GPUs          int    `json:"gpus"`
	NoticeSeconds int64  `json:"notice_seconds"`
	// LostGPUSeconds is the work the stop throws away: GPUs × seconds since
	// the lease started or last checkpointed (a gang's: started). Victims
	// are chosen to lose the least of it, their gangs' included.
	LostGPUSeconds int64 `json:"lost_gpu_seconds"`
}

// Reservation is GPUs held for a job that cannot start now, from Start on.
// Other jobs may use reserved GPUs only if they finish by Start, or if
// enough GPUs remain for the reservation at Start.
type Reservation struct {
	JobID string         `json:"job_id"`
	Start time.Time      `json:"start"` // the earliest start: when the last reserved GPU should be free
	Nodes []ReservedNode `json:"nodes"`
	// Preempting is set when the GPUs free up because bronze leases on them
	// were given notice.
	Preempting bool `json:"preempting,omitempty"`
}

// ReservedNode is one node's share of a Reservation.
type ReservedNode struct {
	NodeID string `json:"node_id"`
	GPUs   int    `json:"gpus"`
}

// Placed reports whether the decision places the job.
func (d *Decision) Placed() bool { return len(d.Picks) > 0 }

// Matcher places one job against a snapshot.
type Matcher interface {
	Place(job *idlegrid.Job, s *Snapshot) Decision
}
