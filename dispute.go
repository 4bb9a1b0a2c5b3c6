package idlegrid

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// This file holds disputes: a proven or alleged breach of the market's
// rules by a provider, with its evidence, and the penalty that moved from
// the provider's bond to the harmed renter (or the platform) when it was
// upheld. The trust policy (internal/trustpolicy) sets what each offence
// costs; docs/trust.md tells the rules.

// DisputeState is where a dispute is in its life.
type DisputeState string

const (
	DisputeOpen      DisputeState = "open"      // alleged; an operator decides
	DisputeUpheld    DisputeState = "upheld"    // proven: the penalty was taken
	DisputeDismissed DisputeState = "dismissed" // not proven: nothing moved
)

// DisputeStates are the dispute states, the open one first.
var DisputeStates = []DisputeState{DisputeOpen, DisputeUpheld, DisputeDismissed}

// Valid reports whether s is one of DisputeStates.
func (s DisputeState) Valid() bool { return slices.Contains(DisputeStates, s) }

// Dispute is one offence a provider is charged with.
type Dispute struct {
	ID string `json:"id"`
	// Offence names the rule broken, as the trust policy's slashing
	// section does: forged_receipt, fake_hardware, mismatched_result or
	// broken_notice.
	Offence    string       `json:"offence"`
	State      DisputeState `json:"state"`
	ProviderID string       `json:"provider_id"`
	NodeID     string       `json:"node_id,omitempty"`
	LeaseID    string       `json:"lease_id,omitempty"`
	// RenterID is the harmed renter, who receives the penalty when the
	// policy says so; empty when no renter was harmed.
	RenterID string `json:"renter_id,omitempty"`
	// Evidence says, in words a person can check, what was found; Detail
	// carries the raw facts (a receipt, lease times, digests), a JSON
	// object of the market's own, for a program to read.
	Evidence string          `json:"evidence"`
	Detail   json.RawMessage `json:"detail,omitempty"`
	// HarmMicros is what the offence cost the renter, as far as the market
	// can measure it; the policy's penalty may scale with it.
	HarmMicros Micros `json:"harm_micros"`
	// PenaltyMicros is what was taken from the bond (upheld), and
	// TransferID the ledger transfer that took it.
	PenaltyMicros Micros `json:"penalty_micros"`
	PenaltyTo     string `json:"penalty_to,omitempty"` // "renter" or "platform"
	// RefundMicros is what of the harm the bond did not pay came back to
	// the renter from the provider's earnings from the lease, still
	// pending in the payout hold, in the same transfer (upheld);
	// FeeRefundMicros what came back of the platform's fee on the lease,
	// where those earnings did not pay it all.
	RefundMicros    Micros     `json:"refund_micros,omitempty"`
	FeeRefundMicros Micros     `json:"fee_refund_micros,omitempty"`
	TransferID      string     `json:"transfer_id,omitempty"`
	Resolution      string     `json:"resolution,omitempty"` // why it was upheld or dismissed
	ResolvedBy      string     `json:"resolved_by,omitempty"`
	PolicySHA256    string     `json:"policy_sha256,omitempty"` // the trust policy that priced it
	CreatedAt       time.Time  `json:"created_at"`
	ResolvedAt      *time.Time `json:"resolved_at,omitempty"`
	// IdempotencyKey is the operator's key of the opening (the
	// Idempotency-Key header), if it had one, and RequestSHA256 the digest
	// of what was asked under it: the same request sent again with the key
	// finds this dispute instead of opening another, and another request
	// with it is refused. They are the operator's, so the API does not
	// show them.
	IdempotencyKey string `json:"-"`
	RequestSHA256  string `json:"-"`
}

// Limits on what an operator writes in a dispute. A dispute is logged
// whole in the audit log, whose entries hold at most 64 KiB, each time it
// is opened and resolved: one too big to log could never be closed, and
// the provider's bond would stay locked. Within these limits a dispute,
// with the market's own proof added when it upholds one, always fits.
const (
	MaxDisputeEvidenceBytes   = 8 << 10
	MaxDisputeResolutionBytes = 1000
)

// CheckEvidence refuses a dispute's evidence that an operator could not
// have meant: more than MaxDisputeEvidenceBytes, or control characters.
func CheckEvidence(evidence string) error {
	return checkDisputeText("dispute.evidence", evidence, MaxDisputeEvidenceBytes)
}

// CheckResolution refuses an operator's resolution of a dispute that is
// empty, more than MaxDisputeResolutionBytes, or holds control
// characters; to names the state it moves to.
func CheckResolution(resolution string, to DisputeState) error {
	if resolution == "" {
		return Invalid("resolution", "required: say why the dispute is %s", to)
	}
	return checkDisputeText("resolution", resolution, MaxDisputeResolutionBytes)
}

// checkDisputeText checks text written for people: at most max bytes of
// UTF-8, with no control characters but tab and newline, each of which
// the audit log's JSON would write as six bytes.
func checkDisputeText(field, text string, max int) error {
	if len(text) > max {
		return Invalid(field, "at most %d bytes, got %d", max, len(text))
	}
	bad := func(r rune) bool { return unicode.IsControl(r) && r != '\t' && r != '\n' && r != '\r' }
	if !utf8.ValidString(text) || strings.IndexFunc(text, bad) >= 0 {
		return Invalid(field, "must be UTF-8 text without control characters (tab and newline are fine)")
	}
	return nil
}

// DisputeFilter selects disputes; empty fields match all.
type DisputeFilter struct {
	ProviderID string
	RenterID   string
	LeaseID    string // the disputes of one lease
	States     []DisputeState
	// Before, a dispute ID, lists only the disputes listed after it,
	// newest first: the next page after a page that ended with it.
	Before string
	// UpheldAfter, when set, lists only the disputes decided (resolved, or
	// upheld as they opened) after it: with States upheld, those upheld
	// since, as an offence hold reads them.
	UpheldAfter time.Time
	Limit       int
}

// DisputeResolution upholds or dismisses an open dispute. An upheld one
// carries the penalty's transfer, applied in the same transaction.
type DisputeResolution struct {
	DisputeID  string
	To         DisputeState // DisputeUpheld or DisputeDismissed
	Resolution string
	By         string // the admin's account ID, or "market" when the proof was automatic
	Penalty    *Transfer
	PenaltyTo  string
	// HarmMicros, when above the dispute's, is the harm its penalty was
	// priced on (the market measured more than the operator said), and
	// replaces it.
	HarmMicros Micros
	At         time.Time
	// FollowUp, when not nil, is stored in the resolution's transaction:
	// the work that must follow an upholding (the offence hold's restand
	// of the provider's nodes), done even if the coordinator stops right
	// after the commit (see FollowUp).
	FollowUp *FollowUp
}

// DisputeStore keeps disputes. OpenDispute with an upheld dispute and its
// penalty applies both at once: a dispute is never upheld without its
// money moving, nor money moved without its dispute.
type DisputeStore interface {
	// OpenDispute stores d. When d.State is upheld, penalty (which may be
	// nil when the bond was empty) is applied, and follow-up f (nil: none)
	// stored, in the same transaction. ECONFLICT when d's lease has a
	// dispute of its offence, or naming idempotency_key when d's
	// idempotency key opened another.
	OpenDispute(ctx context.Context, d *Dispute, penalty *Transfer, f *FollowUp) error
	FindDispute(ctx context.Context, id string) (*Dispute, error)
	// FindDisputeByIdempotencyKey returns the dispute opened with key
	// (Dispute.IdempotencyKey); ENOTFOUND when none was.
	FindDisputeByIdempotencyKey(ctx context.Context, key string) (*Dispute, error)
	ListDisputes(ctx context.Context, f DisputeFilter) ([]*Dispute, error)
	// ResolveDispute moves an open dispute to upheld or dismissed;
	// ECONFLICT when it is no longer open.
	ResolveDispute(ctx context.Context, r DisputeResolution) (*Dispute, error)
}
