package idlegrid

import (
	"fmt"
	"slices"
	"time"
)

// The agent protocol: what an agent and the server say to each other under
// /v1/agent. Every request is signed with the node's ed25519 key (see
// internal/nodekey); the agent opens every connection, so a node behind NAT
// needs no inbound port.

// ProtocolVersion is the agent protocol version. The server refuses agents
// that speak a version it does not know, with a message saying to upgrade.
const ProtocolVersion = 1

// JoinRequest asks to join a provider's fleet as a new node.
type JoinRequest struct {
	Token        string `json:"token"`
	PublicKey    string `json:"public_key"` // base64 ed25519; the request is signed with its private half
	Offer        Offer  `json:"offer"`
	AgentVersion string `json:"agent_version"`
}

// JoinResponse tells a new node who it is.
type JoinResponse struct {
	NodeID           string `json:"node_id"`
	ProviderID       string `json:"provider_id"`
	HeartbeatSeconds int    `json:"heartbeat_seconds"`
}

// OfferRequest replaces what a node offers.
type OfferRequest struct {
	Offer        Offer  `json:"offer"`
	AgentVersion string `json:"agent_version"`
}

// HeartbeatRequest says the node is alive, with progress of its leases
// and the queues at its model servers.
type HeartbeatRequest struct {
	Leases []LeaseProgress `json:"leases,omitempty"`
	// Starting lists the leases whose workloads the node is still starting,
	// most often pulling the job's image, which takes minutes for a large
	// one on a slow link. A lease the node names here is not declared lost
	// for being slow to start until the server has not heard it named for
	// its start timeout, or it has been starting for the server's longest
	// start (server.Config.MaxStart).
	Starting []LeaseStarting `json:"starting,omitempty"`
	// ModelQueues are the requests waiting at the node's model servers, by
	// model, as the agent last read the servers' metrics. A model whose
	// queue the agent does not know is left out. The inference gateway
	// routes by them between answers (ModelQueueHeader says the same on
	// each answer).
	ModelQueues []ModelQueue `json:"model_queues,omitempty"`
}

// ModelQueue is the requests waiting at the server of one model a node
// serves.
type ModelQueue struct {
	Model  string `json:"model"`
	Queued int64  `json:"queued"`
}

// LeaseStarting is a lease whose workload a node is still starting, with
// how far the pull of its job's image has come: PulledBytes of
// ImageBytes, the layers the node fetches (both 0 while it pulls none, or
// cannot tell).
type LeaseStarting struct {
	LeaseID     string `json:"lease_id"`
	PulledBytes int64  `json:"pulled_bytes,omitempty"`
	ImageBytes  int64  `json:"image_bytes,omitempty"`
}

// maxLeaseIDLen bounds a lease ID an agent names.
const maxLeaseIDLen = 100

// maxImageBytes bounds the size of an image a node reports pulling: 1 PiB.
const maxImageBytes = 1 << 50

// ValidateStarting checks the leases starting: at most MaxGPUsPerNode (a
// lease holds a GPU at least), each named once, each pull's bytes within
// its image's size.
func (r *HeartbeatRequest) ValidateStarting() error {
	if len(r.Starting) > MaxGPUsPerNode {
		return Invalid("starting", "at most %d leases, one a GPU, got %d", MaxGPUsPerNode, len(r.Starting))
	}
	for i, l := range r.Starting {
		field := fmt.Sprintf("starting[%d]", i)
		switch {
		case l.LeaseID == "" || len(l.LeaseID) > maxLeaseIDLen:
			return Invalid(field+".lease_id", "must be a lease ID of 1 to %d characters", maxLeaseIDLen)
		case slices.ContainsFunc(r.Starting[:i], func(o LeaseStarting) bool { return o.LeaseID == l.LeaseID }):
			return Invalid(field+".lease_id", "lease %q listed twice", l.LeaseID)
		case l.ImageBytes < 0 || l.ImageBytes > maxImageBytes:
			return Invalid(field+".image_bytes", "must be between 0 and %d, got %d", int64(maxImageBytes), l.ImageBytes)
		case l.PulledBytes < 0 || l.PulledBytes > l.ImageBytes:
			return Invalid(field+".pulled_bytes", "must be between 0 and image_bytes (%d), got %d", l.ImageBytes, l.PulledBytes)
		}
	}
	return nil
}

// Validate checks the model queues: at most MaxModelsPerNode, each named
// once, none negative. (The leases' progress is checked lease by lease,
// and the leases starting by ValidateStarting.)
func (r *HeartbeatRequest) Validate() error {
	if len(r.ModelQueues) > MaxModelsPerNode {
		return Invalid("model_queues", "at most %d models, got %d", MaxModelsPerNode, len(r.ModelQueues))
	}
	for i, q := range r.ModelQueues {
		field := fmt.Sprintf("model_queues[%d]", i)
		switch {
		case q.Model == "":
			return Invalid(field+".model", "is required")
		case q.Queued < 0:
			return Invalid(field+".queued", "must not be negative, got %d", q.Queued)
		case slices.ContainsFunc(r.ModelQueues[:i], func(p ModelQueue) bool { return p.Model == q.Model }):
			return Invalid(field+".model", "model %q listed twice", q.Model)
		}
	}
	return nil
}

// LeaseProgress is a running lease's progress as the agent sees it.
type LeaseProgress struct {
	LeaseID  string  `json:"lease_id"`
	Progress float64 `json:"progress"`
	// CheckpointAt is when the workload last saved a checkpoint it can
	// resume from, if it has; a preemption then loses only what ran since.
	// It is in the node's clock. CheckpointAgeSeconds, how long before the
	// report that was, by the node's clock too, needs no agreement between
	// the clocks: when it is set the server takes the checkpoint's time as
	// its own now less the age, and CheckpointAt is only shown.
	CheckpointAt         *time.Time `json:"checkpoint_at,omitempty"`
	CheckpointAgeSeconds *float64   `json:"checkpoint_age_seconds,omitempty"`
}

// maxCheckpointAge bounds a reported checkpoint age: a year.
const maxCheckpointAge = 365 * 24 * 3600

// CheckpointIn returns when the reported checkpoint was saved by the
// clock whose time is now: now less CheckpointAgeSeconds when that is set,
// else CheckpointAt; nil when none is reported. A bad age is an error
// naming the field.
func (p *LeaseProgress) CheckpointIn(now time.Time) (*time.Time, error) {
	if p.CheckpointAgeSeconds == nil {
		return p.CheckpointAt, nil
	}
	age := *p.CheckpointAgeSeconds
	if !(age >= 0 && age <= maxCheckpointAge) { // NaN fails both
		return nil, Invalid("lease.checkpoint_age_seconds", "must be between 0 and %d seconds, got %v", maxCheckpointAge, age)
	}
	t := now.Add(-time.Duration(age * float64(time.Second)))
	return &t, nil
}

// HeartbeatResponse tells the agent how often to heartbeat, and whether
// the market holds its node out of new leases.
type HeartbeatResponse struct {
	HeartbeatSeconds int          `json:"heartbeat_seconds"`
	Standing         NodeStanding `json:"standing"`
	// Ended lists the leases the heartbeat reported running that the
	// server has ended (say it declared the node lost while the network was
	// down): the agent stops their workloads at once, unpaid, and reports
	// nothing more of them.
	Ended []EndedLease `json:"ended,omitempty"`
}

// EndedLease is a lease the server has ended, and how.
type EndedLease struct {
	LeaseID string     `json:"lease_id"`
	State   LeaseState `json:"state"`
	Reason  string     `json:"reason"`
}

// NodeStanding is what holds a node out of new leases whatever its agent
// publishes: a drain its owner or an admin began (Node.DrainingSince),
// and a quarantine only an admin lifts (Node.Quarantined). The zero value
// is a node in the market.
type NodeStanding struct {
	DrainingSince *time.Time `json:"draining_since,omitempty"`
	Quarantined   bool       `json:"quarantined,omitempty"`
}

// CommandKind is what the server asks an agent to do.
type CommandKind string

const (
	CommandStart CommandKind = "start" // run the lease
	CommandStop  CommandKind = "stop"  // stop the lease; Reason says why
)

// Command is one instruction to an agent. Commands are derived from lease
// state, so they repeat until the agent's reports make them moot: an agent
// must treat them idempotently.
type Command struct {
	Kind   CommandKind `json:"kind"`
	Lease  *Lease      `json:"lease"`
	Job    *JobSpec    `json:"job,omitempty"` // for start
	Reason string      `json:"reason,omitempty"`
	// RegistryAuth, on a start, is the renter's login to the registry of
	// the job's image, when it keeps one (RegistryLogin).
	RegistryAuth *RegistryAuth `json:"registry_auth,omitempty"`
}

// CommandsResponse is the answer to a long poll for commands.
type CommandsResponse struct {
	Commands []Command `json:"commands"`
}

// LeaseReport is the agent's account of a lease.
type LeaseReport struct {
	State    LeaseState `json:"state"` // running, succeeded, failed or cancelled
	Progress float64    `json:"progress"`
	ExitCode *int       `json:"exit_code,omitempty"`
	Message  string     `json:"message,omitempty"`
	// Fault is provider when the node, not the workload, failed (e.g. the
	// image could not be started).
	Fault Fault `json:"fault,omitempty"`
	// CheckpointRef is where the workload left its checkpoint, so that a
	// requeued job resumes from it.
	CheckpointRef string `json:"checkpoint_ref,omitempty"`
	// OutputDigest is "sha256:" and the hex SHA-256 of everything a
	// verifiable job's workload wrote to standard output, each line
	// followed by a newline; set when a verifiable lease succeeds.
	OutputDigest string `json:"output_digest,omitempty"`
}

// LogBatch carries lines of a lease's output.
type LogBatch struct {
	Lines []LogLine `json:"lines"`
}
