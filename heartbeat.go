package idlegrid

import (
	"context"
	"time"
)

// HeartbeatSpan is a stretch of time in which a node's heartbeats reached
// the coordinator with no gap: each heartbeat shows the node heard from
// for one heartbeat interval after it, and a heartbeat that arrives within
// the jitter allowance after the span's end extends it. A node that
// misses a heartbeat leaves a gap between two spans. Receipts and uptime
// are judged against these spans (docs/trust.md, "Heartbeat spans").
type HeartbeatSpan struct {
	NodeID     string    `json:"node_id"`
	Start      time.Time `json:"start"`      // the first heartbeat of the span
	End        time.Time `json:"end"`        // the last heartbeat plus one interval
	Heartbeats int64     `json:"heartbeats"` // how many arrived in it
}

// HeartbeatStore keeps each node's heartbeat spans, merged as heartbeats
// arrive, so that storage grows with the gaps, not the heartbeats.
type HeartbeatStore interface {
	// NoteHeartbeat records a heartbeat of nodeID at at, covering
	// [at, at+interval). It extends the node's latest span when at is no
	// later than that span's end plus jitter, and starts a new span
	// otherwise. Spans of the node that ended before pruneBefore are
	// dropped in the same transaction.
	NoteHeartbeat(ctx context.Context, nodeID string, at time.Time, interval, jitter time.Duration, pruneBefore time.Time) error
	// ListHeartbeatSpans returns the node's spans that overlap [from, to),
	// oldest first.
	ListHeartbeatSpans(ctx context.Context, nodeID string, from, to time.Time) ([]HeartbeatSpan, error)
}
