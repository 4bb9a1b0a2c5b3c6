// Package market is the engine that decides which node runs a job and at
// what price. It is pure: it reads a Snapshot of the market and returns a
// Decision; it does no I/O and keeps no state between calls.
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
)

// Pick is one node chosen for a job, with the GPUs and the locked price.
type Pick struct {
	Node                  *idlegrid.Node
	GPUs                  []idlegrid.GPU
	PriceMicrosPerGPUHour idlegrid.Micros
	PriceNote             string  // how the price was set, in words
	Score                 float64 // the ranking score; lower wins
}

// Decision is the engine's answer for one job: Picks when it places the job
// (exactly job.Nodes of them), or a Reason and per-reason rejection counts
// when it does not.
type Decision struct {
	Picks      []Pick
	Rejections map[Reason]int
	Reason     string
}

// Placed reports whether the decision places the job.
func (d *Decision) Placed() bool { return len(d.Picks) > 0 }

// Matcher places one job against a snapshot.
type Matcher interface {
	Place(job *idlegrid.Job, s *Snapshot) Decision
}
