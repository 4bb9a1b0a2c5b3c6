package idlegrid

import (
	"context"
	"time"
)

// This file holds verification of work: for a verifiable job (one whose
// standard output is deterministic), the market re-runs a sample of its
// leases on another provider's node and compares the output digests. A
// mismatch is settled by a third run on a third provider; whoever
// disagrees with the other two is convicted of a mismatched result.
// docs/trust.md tells the rules.

// VerificationState is where a verification is.
type VerificationState string

const (
	VerificationRerunning    VerificationState = "rerunning"    // the re-run is queued or running
	VerificationTiebreaking  VerificationState = "tiebreaking"  // the digests differed; a third run decides
	VerificationMatched      VerificationState = "matched"      // the re-run agreed
	VerificationConvicted    VerificationState = "convicted"    // a provider's output was the odd one out
	VerificationInconclusive VerificationState = "inconclusive" // a run did not succeed, or all three differ
)

// Terminal reports whether the verification is decided.
func (s VerificationState) Terminal() bool {
	return s == VerificationMatched || s == VerificationConvicted || s == VerificationInconclusive
}

// Run is one run of a verifiable job's work: the lease, its provider and
// the digest of its output. A run not yet ended has no digest.
type Run struct {
	JobID      string `json:"job_id,omitempty"` // none shown to providers while the run is underway
	LeaseID    string `json:"lease_id,omitempty"`
	ProviderID string `json:"provider_id,omitempty"`
	NodeID     string `json:"node_id,omitempty"`
	Digest     string `json:"digest,omitempty"`
}

// Verification checks one lease's output against re-runs elsewhere.
type Verification struct {
	ID       string            `json:"id"`
	RenterID string            `json:"renter_id"`
	State    VerificationState `json:"state"`
	Original Run               `json:"original"`
	Rerun    Run               `json:"rerun"`
	Tiebreak *Run              `json:"tiebreak,omitempty"`
	// Outcome says, in words, what was found; DisputeID names the dispute
	// a conviction opened.
	Outcome   string    `json:"outcome,omitempty"`
	DisputeID string    `json:"dispute_id,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// VerificationFilter selects verifications; empty fields match all.
type VerificationFilter struct {
	ProviderID string // the provider of any of its runs
	RenterID   string
	States     []VerificationState
	Limit      int
	// Before, a verification ID, lists only the verifications listed
	// after it, newest first: the next page after a page that ended with
	// it. EINVALID when it is not one of the renter's or provider's.
	Before string
}

// VerificationStore keeps verifications.
type VerificationStore interface {
	// CreateVerification stores v and, when run is not nil, the job that
	// re-runs the work, in one transaction: a crash leaves both or neither
	// (a re-run with no verification would be charged to its renter and
	// read by nobody).
	CreateVerification(ctx context.Context, v *Verification, run *Job) error
	// FindVerificationByJob returns the verification whose re-run or
	// tie-break is job jobID; ENOTFOUND when there is none.
	FindVerificationByJob(ctx context.Context, jobID string) (*Verification, error)
	// UpdateVerification stores v if it is still in state from, and run
	// (a tie-break), when not nil, in the same transaction; ECONFLICT
	// when another update came first.
	UpdateVerification(ctx context.Context, v *Verification, from VerificationState, run *Job) error
	// ListVerifications returns the verifications f selects, newest first
	// (by creation, then ID).
	ListVerifications(ctx context.Context, f VerificationFilter) ([]*Verification, error)
}
