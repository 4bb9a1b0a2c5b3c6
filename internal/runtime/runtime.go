// Package runtime is the contract between the agent and whatever runs a
// lease's workload: containers (docker, later) or a simulation (fake). It is
// modelled on Nomad's task driver plugins, cut down to what a lease needs:
// start, stream output and progress, report the exit, stop with a grace
// period.
//
// The contract:
//
//   - Start returns once the workload runs, or with an error when it could
//     not be started (bad image, no such GPU, the runtime is closed). An
//     error from Start is the node's failure, not the workload's, but for
//     one whose code is EFORBIDDEN (the job's registry refused its image
//     to the renter's login, or to a job without one) or EINVALID (the job
//     cannot run as it is: its command is not in its image or cannot be
//     run, its image has none, or names a user it does not list), which
//     are the renter's to mend. After an error no event is ever sent for
//     that lease.
//   - After Start returns nil, the runtime sends the lease's events on the
//     channel given to Start, in order, from goroutines it owns, and ends
//     with exactly one event whose Exit is set. Nothing follows the Exit.
//   - Sends block: the caller must keep receiving from the channel until the
//     Exit arrives. A runtime never closes the channel.
//   - Stop asks a workload to end (SIGTERM) and kills it after grace. It
//     returns at once; the Exit follows, with Stopped set when the stop
//     ended the workload. Stopping a workload twice is not an error; the
//     first grace stands. Stopping an unknown lease is ENOTFOUND.
//   - Close kills every workload still running and returns once their Exits
//     are sent, so the caller keeps receiving while Close runs. After Close,
//     Start fails.
//   - Runtimes do not enforce a lease's time limit; the server asks the agent
//     to stop a lease that reaches it, and the agent stops one that runs
//     well past it by itself (agent.LimitSlack).
//   - A runtime that keeps a workload's checkpoint past its exit says where
//     in Exit.CheckpointRef; a later Workload whose Job.CheckpointRef names
//     it resumes from it.
//   - A Detacher's Detach ends each workload's events with an event whose
//     Detached is set, in place of its Exit: the workload runs on, for the
//     next agent to take back (Adopter). Nothing follows it.
package runtime

import (
	"context"
	"time"

	"github.com/idlegrid/idlegrid"
)

// Workload is one lease's work, as a runtime needs it.
type Workload struct {
	LeaseID      string
	JobID        string // the lease's job: its checkpoint outlives the lease, keyed by the job
	Job          idlegrid.JobSpec
	GPUs         []string // UUIDs of the GPUs the lease holds; the workload sees only these
	LimitSeconds int64    // the run time the renter's hold covers, for the runtime's information
	// NodeGPUs is how many GPUs the node has. A runtime that limits memory
	// gives a workload at most its GPUs' share of what workloads may use,
	// so that the node's leases together never ask for more than there
	// is; 0 sets no share.
	NodeGPUs int

	// NoNetwork runs the workload with no network at all, when the node's
	// policy says so. The zero value gives it the runtime's usual network.
	NoNetwork bool
	// Capabilities are the Linux capabilities (e.g. "SYS_PTRACE") the
	// node's policy grants this workload. Every other one is dropped. A
	// runtime that sandboxes (docker) refuses to start a workload granted
	// one its own allow-list lacks.
	Capabilities []string
	// RegistryAuth is the login to pull Job.Image with, when its registry
	// is private to the job's renter; nil pulls without one.
	RegistryAuth *idlegrid.RegistryAuth
	// Notice is the notice the lease is owed before the node's policy
	// stops it (its lease's NoticeSeconds, or the agent's default); 0 when
	// unknown. An Adopter keeps it with the workload, so that an agent
	// that takes the workload back still gives it (the docker runtime's
	// LeaseNotice).
	Notice time.Duration
	// OnPull, when set, is told how far the pull of the job's image has
	// come, as Start pulls it; a runtime that pulls nothing never calls
	// it. It must not block.
	OnPull func(PullProgress)
}

// PullProgress is how much of a job's image a runtime has pulled: the
// bytes of the layers it fetches, as the registry gave their sizes so far
// (layers the node has already are not counted; a layer's size is known
// once its download begins, so TotalBytes grows early in a pull).
type PullProgress struct {
	DoneBytes, TotalBytes int64
}

// Event is one thing that happened to a running workload. Exactly one of
// Log, Progress, Checkpoint, Exit and Detached is set.
type Event struct {
	LeaseID  string
	Log      *idlegrid.LogLine // At, Stream and Text set; the agent numbers lines (Seq)
	Progress *float64          // 0..1, as the workload reports it
	// Checkpoint is when the workload said it saved a checkpoint it can
	// resume from.
	Checkpoint *time.Time
	Exit       *Exit
	// Detached is the last event of a workload left running by Detach,
	// sent in place of its Exit.
	Detached bool
}

// Exit is how a workload ended.
type Exit struct {
	Code    int   // the workload's exit code; 143 after SIGTERM, 137 after a kill
	Err     error // the runtime lost the workload (not the workload's fault); Code is then meaningless
	Stopped bool  // the workload ended because Stop (or Close) asked it to
	// CheckpointRef names the checkpoint the runtime kept for the job, e.g.
	// "docker-volume:idlegrid-ckpt-job_x"; empty when it kept none. The
	// agent reports it so that a requeued job carries it.
	CheckpointRef string
	// At is when the workload ended, as the runtime knows it (the docker
	// runtime: the container's FinishedAt); zero when it cannot say, and
	// the agent then takes the time the Exit reached it. For a workload
	// that ended while no agent followed it (Adopter), it is when it
	// really ended, not when the Exit is sent: the lease's usage is
	// metered up to At, so no one pays for the time in between.
	At time.Time
}

// Runtime runs workloads. See the package comment for the contract.
type Runtime interface {
	Start(ctx context.Context, w Workload, events chan<- Event) error
	Stop(leaseID string, grace time.Duration) error
	Close() error
}

// Adopter is a Runtime that can take back the workloads a previous instance
// of it left behind, e.g. when the agent crashed or was killed. Adopt finds
// them and returns their lease IDs. For each it then sends events on
// events, as if Start had returned nil: output from the adoption on (from
// where the runtime that left it stopped, after a Detach that could record
// it), and exactly one Exit (at once for a workload that ended meanwhile,
// with Exit.At when it ended, where the runtime can tell). Stop and Close
// work on adopted workloads as on started ones. Adopt may be called again
// after it returned an error (the agent retries until it works): a workload
// the runtime already follows, started or taken back, is not returned
// again, nor are its events sent on the new channel.
type Adopter interface {
	Adopt(ctx context.Context, events chan<- Event) ([]string, error)
}

// Detacher is an Adopter that can leave its workloads running for the
// next agent to take back, so that an agent is upgraded in place without
// stopping the work (the agent's hand-over).
//
// Detach stops following every workload and leaves it running as it is.
// Each workload that has not sent its Exit ends its events with one whose
// Detached is set; a Start in flight fails, and removes what it made, as
// after Close. Detach returns once those events are sent, so the caller
// keeps receiving while it runs. After it, Start fails, and Close kills
// nothing Detach left. The workloads must outlive the agent's process for
// a new agent to take them back: the docker runtime's do; the fake
// runtime's live in its process, and only an agent in that process (a
// test's) can take them back.
type Detacher interface {
	Adopter
	Detach() error
}
