package idlegrid

import (
	"fmt"
	"slices"
	"time"
	"unicode/utf8"
)

// LeaseState is where a lease is in its life.
type LeaseState string

const (
	LeaseAssigned  LeaseState = "assigned"  // placed; the agent has not started it yet
	LeaseRunning   LeaseState = "running"   // the agent reported it started
	LeaseSucceeded LeaseState = "succeeded" // the workload exited 0
	LeaseFailed    LeaseState = "failed"    // the workload or the node failed; Fault says whose
	LeaseCancelled LeaseState = "cancelled" // stopped at the renter's request
	LeaseLost      LeaseState = "lost"      // the node went silent or never started it
	LeasePreempted LeaseState = "preempted" // stopped, after its notice, for higher-tier work (bronze); with the rest of a gang whose node failed; or taken back unstarted past its start-by
)

// LeaseStates lists every lease state, in the order of a lease's life.
var LeaseStates = []LeaseState{LeaseAssigned, LeaseRunning, LeaseSucceeded, LeaseFailed, LeaseCancelled, LeaseLost, LeasePreempted}

// Valid reports whether s is a known lease state.
func (s LeaseState) Valid() bool { return slices.Contains(LeaseStates, s) }

// Terminal reports whether the lease can change no more.
func (s LeaseState) Terminal() bool {
	return s == LeaseSucceeded || s == LeaseFailed || s == LeaseCancelled || s == LeaseLost || s == LeasePreempted
}

// Fault says who caused a lease to end badly. It decides who pays.
type Fault string

const (
	FaultNone     Fault = ""
	FaultWorkload Fault = "workload" // the renter's code failed: the renter pays for what ran
	FaultProvider Fault = "provider" // the node failed: the renter pays nothing, the node's record suffers
)

// Lease is one node's share of a job: which GPUs, at what locked price,
// and what became of it. Every state change is recorded with a reason.
type Lease struct {
	ID         string   `json:"id"`
	JobID      string   `json:"job_id"`
	RenterID   string   `json:"renter_id"`
	NodeID     string   `json:"node_id"`
	ProviderID string   `json:"provider_id"`
	Attempt    int      `json:"attempt"` // the job's placement number this lease belongs to
	GPUUUIDs   []string `json:"gpu_uuids"`
	Tier       Tier     `json:"tier"`

	// PriceMicrosPerGPUHour is locked at placement and never changes.
	PriceMicrosPerGPUHour Micros `json:"price_micros_per_gpu_hour"`
	// PriceNote says how the price was set, for the renter and the provider.
	PriceNote    string `json:"price_note"`
	LimitSeconds int64  `json:"limit_seconds"` // the run time the hold covers
	HoldMicros   Micros `json:"hold_micros"`   // escrowed at placement
	// ChargedMicros is what the renter paid when the lease ended.
	ChargedMicros Micros `json:"charged_micros"`

	State         LeaseState `json:"state"`
	Reason        string     `json:"reason"`
	Fault         Fault      `json:"fault,omitempty"`
	StopRequested string     `json:"stop_requested,omitempty"` // why the server asked the agent to stop; NoticeStopPrefix for a notice
	ExitCode      *int       `json:"exit_code,omitempty"`
	Progress      float64    `json:"progress"` // 0..1, as last reported by the agent

	// NoticeSeconds is the notice a bronze lease is guaranteed before it is
	// stopped; NoticeAt is when that notice was given.
	NoticeSeconds int64      `json:"notice_seconds,omitempty"`
	NoticeAt      *time.Time `json:"notice_at,omitempty"`
	// CheckpointRef is the checkpoint the workload last reported.
	CheckpointRef string `json:"checkpoint_ref,omitempty"`
	// CheckpointAt is when the running workload last saved a checkpoint,
	// as its agent reported: a preemption loses only the work since.
	CheckpointAt *time.Time `json:"checkpoint_at,omitempty"`

	CreatedAt time.Time  `json:"created_at"`
	StartedAt *time.Time `json:"started_at,omitempty"`
	EndedAt   *time.Time `json:"ended_at,omitempty"`
	// StartBy, when set, is the latest start at which the lease still
	// ends before what follows on its node, the close of the node's
	// window or another job's reservation of the node whose GPUs it took,
	// and before its job's deadline (docs/market.md, "Start-by"). Not
	// started by then while that still holds, it is taken back
	// (preempted, no one's fault) and its job requeued.
	StartBy *time.Time `json:"start_by,omitempty"`

	// Pull is, while its node is still starting the lease, how far the
	// node's last heartbeat said the pull of the job's image had come. It
	// is not stored: the coordinator adds it to the leases it answers
	// with, from its memory.
	Pull *LeasePull `json:"pull,omitempty"`
}

// TakenBack reports whether the lease was preempted before it ever ran:
// not started by its start-by, stopped with its gang, or a bronze lease
// given notice while its node was still starting it. Its State stays
// LeasePreempted, which the requeue rules key on; people are told "taken
// back" (StateWord), since a gold job is never preempted while it runs.
func (l *Lease) TakenBack() bool { return l.State == LeasePreempted && l.StartedAt == nil }

// StateWord is the lease's state as people read it: "taken back" for one
// TakenBack, its State otherwise.
func (l *Lease) StateWord() string {
	if l.TakenBack() {
		return "taken back"
	}
	return string(l.State)
}

// LeasePull is how far a node has pulled a lease's image; At is when its
// heartbeat last said the pull had moved.
type LeasePull struct {
	PulledBytes int64     `json:"pulled_bytes"`
	ImageBytes  int64     `json:"image_bytes"`
	At          time.Time `json:"at"`
}

// GPUSeconds is the number of GPU-seconds the lease ran up to end, capped at
// its limit.
func (l *Lease) GPUSeconds(end time.Time) int64 {
	if l.StartedAt == nil || !end.After(*l.StartedAt) {
		return 0
	}
	secs := int64(end.Sub(*l.StartedAt) / time.Second)
	if secs > l.LimitSeconds {
		secs = l.LimitSeconds
	}
	return secs * int64(len(l.GPUUUIDs))
}

// LeaseTransition moves a lease from one of From to To. The store applies it
// together with its ledger transfers in one transaction, or not at all; a
// lease not in From is an ECONFLICT.
type LeaseTransition struct {
	LeaseID       string
	From          []LeaseState
	To            LeaseState
	Reason        string
	Fault         Fault
	ExitCode      *int
	ChargedMicros Micros
	// CheckpointRef is the checkpoint the workload left, if any; a job
	// requeued by this transition resumes from it.
	CheckpointRef string
	At            time.Time
	// FollowUp, when not nil, is stored in the transition's transaction:
	// the work that must follow the lease's end, done exactly once even if
	// the coordinator stops right after the commit (see FollowUp).
	FollowUp *FollowUp
}

// FollowUp is work that must follow a commit: written in the commit's own
// transaction (an outbox), removed once the work is done, and done again
// by the reaper from the stored row when it is still there at DueAt, say
// after a crash. The work must therefore be safe to do twice.
type FollowUp struct {
	// ID names what it follows up, one follow-up each: "lease:" and the
	// lease's ID for a lease's end.
	ID   string
	Kind string
	// Body is what the work needs that the store does not keep, as JSON.
	Body string
	// Tries counts the reaper's tries that failed; DueAt is when it may
	// try next (the first time, once the live path has had its chance).
	Tries     int
	DueAt     time.Time
	CreatedAt time.Time
}

// LeaseEvent records one state change of a lease.
type LeaseEvent struct {
	LeaseID string     `json:"lease_id"`
	From    LeaseState `json:"from"`
	To      LeaseState `json:"to"`
	Reason  string     `json:"reason"`
	At      time.Time  `json:"at"`
}

// LeaseFilter selects leases.
type LeaseFilter struct {
	JobID      string
	NodeID     string
	ProviderID string
	RenterID   string
	States     []LeaseState
	Limit      int
	// Before, a lease ID, lists only the leases listed after it, newest
	// first: the next page after a page that ended with it.
	Before string
}

// MaxLogLineBytes is the most of a line of a lease's output that is kept;
// the rest is cut off (ClipLogLine).
const MaxLogLineBytes = 4096

// ClipLogLine cuts text to at most MaxLogLineBytes, on a character's edge.
func ClipLogLine(text string) string {
	if len(text) <= MaxLogLineBytes {
		return text
	}
	cut := MaxLogLineBytes
	for cut > 0 && !utf8.RuneStart(text[cut]) {
		cut--
	}
	return text[:cut]
}

// LogLine is one line of a lease's output.
type LogLine struct {
	Seq    int64     `json:"seq"`
	At     time.Time `json:"at"`
	Stream string    `json:"stream"` // stdout or stderr
	Text   string    `json:"text"`
}

// NoticeStopPrefix begins the reason of a stop that is a notice (a bronze
// lease preempted, its window ending, its node drained): the lease ends
// preempted and its job is requeued. A later stop that is not a notice (its
// renter's cancel) replaces it, so that the job ends as the renter asked.
const NoticeStopPrefix = "notice: "

// LogFilter selects lines of a lease's output, in order: those after line
// After, at most Limit of them (0: the store's default), the first ones or,
// with Tail, the last ones.
type LogFilter struct {
	LeaseID string
	After   int64
	Limit   int
	Tail    bool
}

// Placement is the engine's decision to run a job, ready to be stored: the
// leases and the escrow holds. The store applies it only if the job is still
// queued at Attempt and every GPU is still free.
type Placement struct {
	JobID     string
	Attempt   int // the job's Attempts value this placement was computed from
	Leases    []*Lease
	Transfers []*Transfer
	At        time.Time
}

// NextJobState decides what a job becomes once its current leases change:
// running while any lease is live. Once none is, a job its renter
// cancelled (cancelRequested, Job.CancelRequested) is cancelled, however
// its leases ended: a lost node or a provider's failure does not requeue
// it. Otherwise a lease failed by its workload fails the job, and so does
// one stopped at its time limit (LimitStop); a lease cancelled by any
// other stop (for money) cancels it; a lost lease, one failed by its
// provider, or a preempted one requeues it; and when every lease
// succeeded, it succeeded. Within each, the lease that ended first gives
// the reason: in a gang, the others end because it did. It is pure so that
// every store applies the same rule inside its transaction.
func NextJobState(leases []*Lease, cancelRequested bool) (JobState, string) {
	var failed, overran, cancelled, lost, preempted *Lease
	for _, l := range leases {
		switch {
		case !l.State.Terminal():
			return JobRunning, ""
		case l.State == LeaseCancelled && l.StopRequested == LimitStop(l):
			overran = firstEnded(overran, l)
		case l.State == LeaseCancelled:
			cancelled = firstEnded(cancelled, l)
		case l.State == LeasePreempted:
			preempted = firstEnded(preempted, l)
		case l.State == LeaseLost || (l.State == LeaseFailed && l.Fault == FaultProvider):
			lost = firstEnded(lost, l)
		case l.State == LeaseFailed:
			failed = firstEnded(failed, l)
		}
	}
	switch {
	case cancelRequested:
		return JobCancelled, RenterCancelReason
	case failed != nil:
		return JobFailed, failed.Reason
	case overran != nil:
		return JobFailed, fmt.Sprintf("ran past its time limit of %ds (its duration_seconds) and was stopped", overran.LimitSeconds)
	case cancelled != nil:
		return JobCancelled, cancelled.Reason
	case lost != nil:
		return JobQueued, "requeued: " + lost.Reason
	case preempted != nil:
		return JobQueued, "requeued after preemption: " + preempted.Reason
	}
	return JobSucceeded, "all leases completed"
}

// LimitStop is the reason of the stop the server asks for when l runs past
// its time limit, the job's duration. The lease ends cancelled, paid for up
// to its limit, and its job fails (NextJobState): its workload did not
// finish in the run it asked for.
func LimitStop(l *Lease) string {
	return fmt.Sprintf("time limit of %ds reached", l.LimitSeconds)
}

// firstEnded is whichever of a and l ended first; l when a is nil, and a
// when neither end is known.
func firstEnded(a, l *Lease) *Lease {
	if a == nil || l.EndedAt != nil && (a.EndedAt == nil || l.EndedAt.Before(*a.EndedAt)) {
		return l
	}
	return a
}
