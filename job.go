package idlegrid

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Tier is a job's service level.
type Tier string

const (
	TierGold   Tier = "gold"   // guaranteed, never preempted
	TierSilver Tier = "silver" // on demand
	TierBronze Tier = "bronze" // interruptible with notice, cheapest
)

// Tiers lists the tiers from highest to lowest priority.
var Tiers = []Tier{TierGold, TierSilver, TierBronze}

// Valid reports whether t is a known tier.
func (t Tier) Valid() bool { return t == TierGold || t == TierSilver || t == TierBronze }

// Rank orders tiers for placement: gold 0, silver 1, bronze 2.
func (t Tier) Rank() int {
	switch t {
	case TierGold:
		return 0
	case TierSilver:
		return 1
	}
	return 2
}

// JobState is where a job is in its life.
type JobState string

const (
	JobQueued    JobState = "queued"    // waiting for a placement; Reason says why
	JobRunning   JobState = "running"   // has live leases
	JobSucceeded JobState = "succeeded" // every lease exited 0
	JobFailed    JobState = "failed"    // the workload failed
	JobCancelled JobState = "cancelled" // by its renter, or by the market (a deadline it can no longer meet, money that ran out); Reason says which
)

// RenterCancelReason is why a job its renter cancelled ended, and why its
// leases were asked to stop.
const RenterCancelReason = "cancelled by the renter"

// MatcherPendingReason is why a job waits until the matcher has first
// looked at it and said why.
const MatcherPendingReason = "waiting for the matcher"

// JobStates lists every job state, in the order of a job's life.
var JobStates = []JobState{JobQueued, JobRunning, JobSucceeded, JobFailed, JobCancelled}

// Valid reports whether s is a known job state.
func (s JobState) Valid() bool { return slices.Contains(JobStates, s) }

// Terminal reports whether the job can change no more.
func (s JobState) Terminal() bool {
	return s == JobSucceeded || s == JobFailed || s == JobCancelled
}

// JobSpec is what a renter asks for.
type JobSpec struct {
	Name    string            `json:"name,omitempty"`
	Kind    WorkloadKind      `json:"kind"`
	Image   string            `json:"image"`
	Command []string          `json:"command,omitempty"`
	Env     map[string]string `json:"env,omitempty"`

	GPUs      int      `json:"gpus"`                 // GPUs on each node
	Nodes     int      `json:"nodes"`                // nodes, all placed at once
	GPUModels []string `json:"gpu_models,omitempty"` // empty: any model
	MinVRAMMB int      `json:"min_vram_mb,omitempty"`
	CPUCores  int      `json:"cpu_cores,omitempty"`
	RAMMB     int      `json:"ram_mb,omitempty"`

	Tier                     Tier   `json:"tier"`
	MaxPriceMicrosPerGPUHour Micros `json:"max_price_micros_per_gpu_hour"`
	Interruptible            bool   `json:"interruptible"`

	Region          string `json:"region,omitempty"`
	RegionPreferred bool   `json:"region_preferred,omitempty"` // Region is a preference, not a requirement
	Residency       string `json:"residency,omitempty"`        // required data jurisdiction, e.g. "EU"

	// DurationSeconds is the expected run time. It must fit the node's
	// window, and it is the lease's time limit: the escrow hold covers it.
	DurationSeconds int64 `json:"duration_seconds"`
	// Deadline, when set, is when the job must have finished. The job
	// starts only while its whole duration fits before it (LatestStart);
	// a job still queued after that is cancelled, since it could no
	// longer finish in time.
	Deadline *time.Time `json:"deadline,omitempty"`

	// ReliabilityWeight says how much the job cares about reliability: the
	// engine ranks by price ÷ reliability^weight. 0 means the default, 1.
	ReliabilityWeight float64 `json:"reliability_weight,omitempty"`
	// Datasets the job reads; nodes that cache them rank better.
	Datasets []Dataset `json:"datasets,omitempty"`
	// CheckpointRef is where the job resumes from. A preempted job is
	// requeued with the reference its last lease reported.
	CheckpointRef string `json:"checkpoint_ref,omitempty"`
	// CheckpointEverySeconds is how often the workload saves a checkpoint
	// it can resume from. 0 says it cannot resume: a stop loses the whole
	// run, so a bronze job starts only where its window covers its whole
	// duration. A bronze job that checkpoints may start in a shorter
	// fragment, one that leaves it a checkpoint's worth of run before its
	// notice (docs/market.md, "Windows").
	CheckpointEverySeconds int64 `json:"checkpoint_every_seconds,omitempty"`

	// Verifiable says the job's output is deterministic: the same inputs
	// print the same standard output. The market may then re-run a sample
	// of its leases on another provider's node and compare the output
	// digests (docs/trust.md, "Verification of work").
	Verifiable bool `json:"verifiable,omitempty"`
	// AvoidProviders are providers whose nodes must not run the job.
	AvoidProviders []string `json:"avoid_providers,omitempty"`
	// MinTrustLevel is the least trust level (Node.Level) a node needs to
	// run the job, in any tier; 0 takes any. Gold needs the trust policy's
	// gold level as well. A provider held for a proven offence has its
	// nodes at the lowest level, whatever their record (docs/trust.md), so
	// a job asking level 1 or more keeps off them.
	MinTrustLevel int `json:"min_trust_level,omitempty"`
	// VerifiesLeaseID marks a re-run the market made to check that lease's
	// output; only the market sets it.
	VerifiesLeaseID string `json:"verifies_lease_id,omitempty"`
}

// MaxAvoidProviders bounds JobSpec.AvoidProviders.
const MaxAvoidProviders = 32

// MaxTrustLevel bounds JobSpec.MinTrustLevel; the server refuses a level
// above its trust policy's highest.
const MaxTrustLevel = 16

// Dataset is input data a job reads.
type Dataset struct {
	Name   string `json:"name"`
	SizeGB int64  `json:"size_gb"`
}

// Limits on a job spec.
const (
	MaxGPUsPerNode  = 16
	MaxNodesPerJob  = 64
	MaxJobSeconds   = 30 * 24 * 3600
	MaxEnvEntries   = 128
	MaxCommandWords = 256
	// MaxGPUModelBytes bounds a GPU model's name, in a job's gpu_models
	// and in a node's offer alike.
	MaxGPUModelBytes = 64
	// MaxCheckpointRefBytes bounds a checkpoint reference, a job's own or
	// one its lease reports.
	MaxCheckpointRefBytes = 1000
)

var (
	// imageRE bounds an image reference's length and characters; the
	// reference parser (checkImage) judges the rest, and says what is
	// wrong: a repository must be lowercase, a tag may not be.
	imageRE  = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._/:@-]{0,254}$`)
	envKeyRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	// residencyRE is a job's residency: written as a region is, at most
	// 40 letters, digits and '-', but in either case, since it matches a
	// node's residency whatever the case (EU, US, SG).
	residencyRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9-]{0,39}$`)
)

// Normalize fills defaults: one node, silver, any kind "other",
// bronze jobs interruptible; and writes the deadline as every time is
// kept, in UTC to the microsecond.
func (s *JobSpec) Normalize() {
	if s.Deadline != nil {
		d := s.Deadline.UTC().Truncate(time.Microsecond)
		s.Deadline = &d
	}
	if s.Nodes == 0 {
		s.Nodes = 1
	}
	if s.Tier == "" {
		s.Tier = TierSilver
	}
	if s.Kind == "" {
		s.Kind = KindOther
	}
	if s.Tier == TierBronze {
		s.Interruptible = true
	}
}

// Validate checks a normalized spec against now. It reports every field
// at fault at once, each with its reason (Problems), so that a renter mends
// a spec in one go.
func (s *JobSpec) Validate(now time.Time) error {
	var p Faults
	s.checkWorkload(&p)
	s.checkSize(&p)
	s.checkTerms(&p, now)
	s.checkLists(&p)
	return p.Err()
}

// checkWorkload checks what runs: name, kind, image, command, environment.
func (s *JobSpec) checkWorkload(p *Faults) {
	p.Check(len(s.Name) <= 100, "job.name", "at most 100 characters")
	// A name is shown in tables and logs: a control character (an escape,
	// a line break) would colour the reader's terminal or split a row.
	p.Check(printable(s.Name), "job.name", "must be printable text: no control characters such as escapes, tabs or line breaks")
	if !s.Kind.Valid() { // not p.Check: kindList is built only when needed
		p.Add("job.kind", "unknown workload kind %q; use one of %s", s.Kind, kindList())
	}
	p.Check(imageRE.MatchString(s.Image), "job.image", "must be an image reference such as ghcr.io/org/trainer:1.2")
	if err := checkImage(s.Image); err != nil { // after the pattern: a fault it finds is named first
		p.Add("job.image", "%v", err)
	}
	p.Check(!IsPrivateMark(s.Image), "job.image", "the repository %s is the nodes' own, for their marks of private images", PrivateImageRepository)
	p.Check(len(s.Command) <= MaxCommandWords, "job.command", "at most %d words", MaxCommandWords)
	p.Check(len(s.Env) <= MaxEnvEntries, "job.env", "at most %d variables", MaxEnvEntries)
	for _, k := range slices.Sorted(maps.Keys(s.Env)) {
		if !envKeyRE.MatchString(k) {
			p.Add("job.env", "bad variable name %q", k)
			break
		} else if reservedEnv(k) {
			p.Add("job.env", "%s is reserved: NVIDIA_* and IDLEGRID_* are set by the node, not the job", k)
			break
		}
	}
	p.Check(len(s.CheckpointRef) <= MaxCheckpointRefBytes, "job.checkpoint_ref", "at most %d characters", MaxCheckpointRefBytes)
}

// checkSize checks the hardware asked for.
func (s *JobSpec) checkSize(p *Faults) {
	p.Check(s.GPUs >= 1 && s.GPUs <= MaxGPUsPerNode, "job.gpus", "must be between 1 and %d", MaxGPUsPerNode)
	p.Check(s.Nodes >= 1 && s.Nodes <= MaxNodesPerJob, "job.nodes", "must be between 1 and %d", MaxNodesPerJob)
	p.Check(s.MinVRAMMB >= 0, "job.min_vram_mb", "must not be negative")
	p.Check(s.CPUCores >= 0, "job.cpu_cores", "must not be negative")
	p.Check(s.RAMMB >= 0, "job.ram_mb", "must not be negative")
	for _, m := range s.GPUModels {
		if m == "" || len(m) > MaxGPUModelBytes {
			p.Add("job.gpu_models", "model names must be 1-%d characters", MaxGPUModelBytes)
			break
		}
	}
}

// checkTerms checks the market's terms: tier, price, place and time.
func (s *JobSpec) checkTerms(p *Faults, now time.Time) {
	if !s.Tier.Valid() {
		p.Add("job.tier", "must be gold, silver or bronze, got %q", s.Tier)
	}
	p.Check(s.MaxPriceMicrosPerGPUHour > 0 && s.MaxPriceMicrosPerGPUHour <= 1000*MicrosPerUnit,
		"job.max_price_micros_per_gpu_hour", "must be between 1 micro and 1000 per GPU-hour")
	s.checkInterruptible(p)
	s.checkPlace(p)
	p.Check(s.DurationSeconds >= 1 && s.DurationSeconds <= MaxJobSeconds, "job.duration_seconds", "must be between 1 and %d (30 days)", MaxJobSeconds)
	p.Check(s.CheckpointEverySeconds >= 0 && s.CheckpointEverySeconds <= MaxJobSeconds,
		"job.checkpoint_every_seconds", "must be between 0 (never) and %d (30 days)", MaxJobSeconds)
	s.checkDeadline(p, now)
	p.Check(s.ReliabilityWeight >= 0 && s.ReliabilityWeight <= 4, "job.reliability_weight", "must be between 0 and 4")
}

// checkInterruptible checks that only bronze jobs, and every one of them,
// are interruptible: gold and silver are never stopped with a notice, so
// interruptible on them would promise what the market does not do.
func (s *JobSpec) checkInterruptible(p *Faults) {
	if !s.Tier.Valid() {
		return // job.tier says what is wrong
	}
	p.Check(s.Tier == TierBronze || !s.Interruptible, "job.interruptible",
		"only bronze jobs are interruptible, and this one is %s: leave interruptible out, or ask for tier bronze", s.Tier)
	p.Check(s.Tier != TierBronze || s.Interruptible, "job.interruptible", "bronze jobs are always interruptible")
}

// checkPlace checks where the job may run: its region and the residency
// of its data.
func (s *JobSpec) checkPlace(p *Faults) {
	p.Check(s.Region == "" || regionRE.MatchString(s.Region), "job.region", "must be lower-case letters, digits and '-', e.g. eu-west")
	p.Check(!s.RegionPreferred || s.Region != "", "job.region_preferred", "needs job.region")
	p.Check(s.Residency == "" || residencyRE.MatchString(s.Residency), "job.residency",
		"must be at most 40 letters, digits and '-', a jurisdiction as nodes name theirs, e.g. EU or US")
}

// checkDeadline checks that the job could still finish by its deadline
// if it started now.
func (s *JobSpec) checkDeadline(p *Faults, now time.Time) {
	if s.Deadline == nil {
		return
	}
	if !s.Deadline.After(now) {
		p.Add("job.deadline", "must be in the future")
	} else if latest, _ := s.LatestStart(); latest.Before(now) && s.DurationSeconds > 0 {
		p.Add("job.deadline", "leaves less than the job's duration (%s): a job started now would end at %s at the latest; set a later deadline or a shorter duration",
			time.Duration(s.DurationSeconds)*time.Second, now.Add(time.Duration(s.DurationSeconds)*time.Second).UTC().Format(time.RFC3339))
	}
}

// LatestStart is the last moment the job can start and still finish by its
// deadline, running for its whole duration; ok is false without a
// deadline.
func (s *JobSpec) LatestStart() (latest time.Time, ok bool) {
	if s.Deadline == nil {
		return time.Time{}, false
	}
	return s.Deadline.Add(-time.Duration(s.DurationSeconds) * time.Second), true
}

// Submitted is the spec as its renter would submit it again: without what
// the market sets on a job (the checkpoint a requeue resumes from, the
// lease a verification re-run checks). s is not changed.
func (s JobSpec) Submitted() JobSpec {
	s.CheckpointRef, s.VerifiesLeaseID = "", ""
	return s
}

// ForNode is the spec a node is given to run: without what would tell a
// verification's re-run from the work it checks (the lease it re-runs,
// the providers it avoids), so that a node cannot answer a check
// differently from the work itself, nor tell a partner which lease to
// answer as the original did. s is not changed.
func (s JobSpec) ForNode() JobSpec {
	s.VerifiesLeaseID, s.AvoidProviders = "", nil
	return s
}

// checkLists checks the datasets, the providers to avoid and the trust
// level asked.
func (s *JobSpec) checkLists(p *Faults) {
	for i, d := range s.Datasets {
		if d.Name == "" || len(d.Name) > 200 {
			p.Add(fmt.Sprintf("job.datasets[%d].name", i), "must be 1-200 characters")
		} else if d.SizeGB < 0 || d.SizeGB > 1_000_000 {
			p.Add(fmt.Sprintf("job.datasets[%d].size_gb", i), "must be between 0 and 1000000")
		}
	}
	p.Check(len(s.AvoidProviders) <= MaxAvoidProviders, "job.avoid_providers", "at most %d providers", MaxAvoidProviders)
	p.Check(s.MinTrustLevel >= 0 && s.MinTrustLevel <= MaxTrustLevel, "job.min_trust_level", "must be between 0 and %d", MaxTrustLevel)
	for _, id := range s.AvoidProviders {
		if id == "" || len(id) > 64 {
			p.Add("job.avoid_providers", "provider IDs must be 1-64 characters")
			break
		}
	}
}

// reservedEnv reports whether a variable belongs to the node. A job that set
// NVIDIA_VISIBLE_DEVICES=all would see every GPU on the node.
func reservedEnv(k string) bool {
	u := strings.ToUpper(k)
	return strings.HasPrefix(u, "NVIDIA_") || strings.HasPrefix(u, "IDLEGRID_")
}

func kindList() string {
	var names []string
	for _, k := range WorkloadKinds {
		names = append(names, string(k))
	}
	return strings.Join(names, ", ")
}

// Job is a renter's request for GPUs and what became of it.
type Job struct {
	ID       string `json:"id"`
	RenterID string `json:"renter_id"`
	// SubmittedByKey is the API key that submitted the job; its spend limit
	// applies to the job's leases.
	SubmittedByKey string `json:"submitted_by_key,omitempty"`
	// IdempotencyKey is the renter's key of the submission (the
	// Idempotency-Key header), if it had one: the same key submitted again
	// with the same spec answers with this job instead of making another.
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	JobSpec
	State JobState `json:"state"`
	// Reason says why the job is in its state: why it waits, why it failed.
	Reason    string     `json:"reason"`
	Attempts  int        `json:"attempts"` // placements so far, including requeues
	CreatedAt time.Time  `json:"created_at"`
	UpdatedAt time.Time  `json:"updated_at"`
	StartedAt *time.Time `json:"started_at,omitempty"`
	EndedAt   *time.Time `json:"ended_at,omitempty"`
	// ChargedMicros is the total charged across all leases so far.
	ChargedMicros Micros `json:"charged_micros"`
	// ResumeSeconds is the run a requeued job's checkpoint already holds:
	// how long its leases ran up to the checkpoint it resumes from
	// (CheckpointRef). It needs DurationSeconds less this to finish.
	ResumeSeconds int64 `json:"resume_seconds,omitempty"`
	// CheckpointNodeID is the node that keeps that checkpoint, when the
	// runtime kept it on the node that ran the job (a Docker volume): the
	// job resumes only there, so the market prefers that node; placed on
	// another, it starts over, and ResumeSeconds go back to 0
	// (docs/market.md, "Checkpoints"). Gangs keep none.
	CheckpointNodeID string `json:"checkpoint_node_id,omitempty"`
	// CancelRequestedAt is when the renter cancelled the job while it ran:
	// it ends cancelled once its leases have ended, however they end, and
	// is never requeued (NextJobState). Nil when it was not cancelled.
	CancelRequestedAt *time.Time `json:"cancel_requested_at,omitempty"`
}

// CancelRequested reports whether the renter cancelled the job.
func (j *Job) CancelRequested() bool { return j.CancelRequestedAt != nil }

// LatestStart is the last moment the job can start and still finish by
// its deadline: the deadline less the run it has left, its duration less
// what its checkpoint holds. ok is false without a deadline.
func (j *Job) LatestStart() (latest time.Time, ok bool) {
	if j.Deadline == nil {
		return time.Time{}, false
	}
	left := max(j.DurationSeconds-j.ResumeSeconds, 1)
	return j.Deadline.Add(-time.Duration(left) * time.Second), true
}

// JobView is a job and its leases at one moment: what a watch of the job
// shows.
type JobView struct {
	Job    *Job     `json:"job"`
	Leases []*Lease `json:"leases"`
}

// JobFilter selects jobs. RenterID empty means every renter (admins only).
type JobFilter struct {
	RenterID string
	States   []JobState
	Limit    int
	// OldestFirst lists the oldest jobs first, as a queue is served;
	// otherwise the newest come first, as a person reads them.
	OldestFirst bool
	// Before, a job ID, lists only the jobs listed after it, newest first:
	// the next page after a page that ended with it. Not with OldestFirst.
	Before string
	// NamePrefix keeps the jobs whose name begins with it, e.g. a sweep's
	// ("lr-search-").
	NamePrefix string
	// Tiers keeps the jobs of these SLA tiers; empty keeps every tier.
	Tiers []Tier
	// After, a job ID, lists only the jobs listed after it, oldest first:
	// the next page after one that ended with it. Only with OldestFirst.
	After string
}

// String is a short description for logs, e.g. "job_x (silver 2xGPU)".
func (j *Job) String() string {
	return fmt.Sprintf("%s (%s %dx%dGPU)", j.ID, j.Tier, j.Nodes, j.GPUs)
}
