package idlegrid

import (
	"fmt"
	"slices"
	"time"
)

// This file holds the money nouns beyond the ledger itself: payouts,
// spend limits, notices to renters, settlements and monthly statements.
// docs/billing.md tells the rules they follow.

// PayoutState is where a payout is in its life.
type PayoutState string

const (
	PayoutRequested PayoutState = "requested" // the provider asked; the money is in flight
	PayoutSettled   PayoutState = "settled"   // an operator sent the money; it left the market
	PayoutRejected  PayoutState = "rejected"  // an operator refused; the money is payable again
)

// PayoutStates are the payout states, in the order a payout passes them.
var PayoutStates = []PayoutState{PayoutRequested, PayoutSettled, PayoutRejected}

// Valid reports whether s is one of PayoutStates.
func (s PayoutState) Valid() bool { return slices.Contains(PayoutStates, s) }

// Payout is a provider's request to be paid some of its payable earnings.
type Payout struct {
	ID           string      `json:"id"`
	ProviderID   string      `json:"provider_id"`
	AmountMicros Micros      `json:"amount_micros"`
	State        PayoutState `json:"state"`
	// Reason is the operator's note: why it was rejected, or the payment's
	// reference when settled.
	Reason string `json:"reason,omitempty"`
	// IdempotencyKey is the provider's: a retried request with the same
	// key returns this payout instead of making another.
	IdempotencyKey string `json:"idempotency_key"`
	// ResolutionKey is the operator's idempotency key for the settle or
	// reject; a retry with the same key is a no-op.
	ResolutionKey string     `json:"resolution_key,omitempty"`
	ResolvedBy    string     `json:"resolved_by,omitempty"` // the admin account
	CreatedAt     time.Time  `json:"created_at"`
	ResolvedAt    *time.Time `json:"resolved_at,omitempty"`
}

// PayoutFilter selects payouts. ProviderID empty means every provider.
type PayoutFilter struct {
	ProviderID string
	States     []PayoutState
	// OldestFirst lists the oldest payouts first, as an operator settles
	// them; otherwise the newest come first.
	OldestFirst bool
	// Before, a payout ID, lists only the payouts listed after it, newest
	// first: the next page after a page that ended with it. Not with
	// OldestFirst.
	Before string
	// After, a payout ID, lists only the payouts listed after it, oldest
	// first. Only with OldestFirst.
	After string
	Limit int
}

// PayoutResolution is an operator settling or rejecting a requested payout.
type PayoutResolution struct {
	PayoutID       string
	To             PayoutState // PayoutSettled or PayoutRejected
	Reason         string
	IdempotencyKey string
	By             string // the admin's account ID
	At             time.Time
}

// SpendScope says what a spend limit applies to.
type SpendScope string

const (
	SpendAccount SpendScope = "account" // every job of the account; set by an admin
	SpendKey     SpendScope = "key"     // the jobs one API key submitted; set by the account's owner
)

// SpendLimit caps what an account, or one of its API keys, may spend in a
// calendar month (UTC). Spend counts the charges of leases that ended in
// the month and of metered inference requests made in it, and the holds
// of leases still live.
type SpendLimit struct {
	Scope       SpendScope `json:"scope"`
	AccountID   string     `json:"account_id"`
	KeyID       string     `json:"key_id,omitempty"` // for SpendKey
	LimitMicros Micros     `json:"limit_micros"`     // per calendar month
	SetBy       string     `json:"set_by"`
	UpdatedAt   time.Time  `json:"updated_at"`
}

// Validate checks a limit before it is stored.
func (l *SpendLimit) Validate() error {
	switch {
	case l.Scope != SpendAccount && l.Scope != SpendKey:
		return Invalid("spend_limit.scope", "must be account or key, got %q", l.Scope)
	case l.AccountID == "":
		return Invalid("spend_limit.account_id", "required")
	case l.Scope == SpendKey && l.KeyID == "":
		return Invalid("spend_limit.key_id", "required for a key's limit")
	case l.Scope == SpendAccount && l.KeyID != "":
		return Invalid("spend_limit.key_id", "must be empty for an account's limit")
	case l.LimitMicros < 0 || l.LimitMicros > 1_000_000_000*MicrosPerUnit:
		return Invalid("spend_limit.limit_micros", "must be between 0 and 1,000,000,000 units")
	}
	return nil
}

// Spend is what a scope has used of a month: the charges of its leases
// that ended in it and of its inference requests made in it, less what
// upheld disputes refunded of those charges, and the holds of its leases
// live now.
type Spend struct {
	ChargedMicros Micros `json:"charged_micros"` // net of RefundedMicros
	// RefundedMicros is what upheld disputes gave back of the month's
	// charges (since 5 December 2026; before, refunds still used the limit up).
	RefundedMicros Micros `json:"refunded_micros"`
	HeldMicros     Micros `json:"held_micros"`
}

// Used is charged plus held.
func (s Spend) Used() Micros { return s.ChargedMicros + s.HeldMicros }

// SpendLimitStatus is a limit with what its scope used of the month.
type SpendLimitStatus struct {
	SpendLimit
	Month string `json:"month"` // e.g. "2026-11"
	Spend Spend  `json:"spend"`
}

// SpendFilter names a scope and a month: the account's jobs, or only
// those KeyID submitted.
type SpendFilter struct {
	AccountID string
	KeyID     string
	From, To  time.Time // [From, To): a calendar month
}

// NoticeKind says what a notice to an account holder is about.
type NoticeKind string

const (
	NoticeRunout     NoticeKind = "runout"      // the renter's money would run out: leases stopped
	NoticeSpendLimit NoticeKind = "spend_limit" // a spend limit was reached: leases stopped
	// NoticeDispute: a renter complained about a provider's lease (to the
	// provider), or an admin decided a dispute (to its provider and renter).
	NoticeDispute NoticeKind = "dispute"
)

// Notice tells an account holder something the market did on its behalf,
// such as stopping its leases before its money ran out.
type Notice struct {
	ID        string     `json:"id"`
	AccountID string     `json:"account_id"`
	Kind      NoticeKind `json:"kind"`
	// Key makes a notice about one event appear once however often the
	// coordinator notices it, e.g. "runout:lease_x".
	Key       string    `json:"key"`
	LeaseID   string    `json:"lease_id,omitempty"`
	JobID     string    `json:"job_id,omitempty"`
	Message   string    `json:"message"`
	CreatedAt time.Time `json:"created_at"`
}

// NoticeFilter selects an account's notices, newest first.
type NoticeFilter struct {
	AccountID string
	// Before, a notice ID, lists only the notices listed after it: the
	// next page after a page that ended with it.
	Before string
	Limit  int
}

// Settlement is one settled lease as statements see it: what was billed,
// at what price, and where the money went.
type Settlement struct {
	TransferID            string    `json:"transfer_id"`
	LeaseID               string    `json:"lease_id"`
	JobID                 string    `json:"job_id"`
	JobName               string    `json:"job_name,omitempty"`
	RenterID              string    `json:"renter_id"`
	ProviderID            string    `json:"provider_id"`
	NodeID                string    `json:"node_id"`
	NodeName              string    `json:"node_name,omitempty"`
	PriceMicrosPerGPUHour Micros    `json:"price_micros_per_gpu_hour"`
	GPUSeconds            int64     `json:"gpu_seconds"`
	ChargedMicros         Micros    `json:"charged_micros"`  // what the renter paid
	EarningsMicros        Micros    `json:"earnings_micros"` // what the provider was credited
	FeesMicros            Micros    `json:"fees_micros"`     // what the platform took
	At                    time.Time `json:"at"`
}

// SettlementFilter selects settlements made in [From, To), for a renter or
// a provider.
type SettlementFilter struct {
	RenterID   string
	ProviderID string
	From, To   time.Time
}

// Statement is a month of an account's money, line by line: for a renter
// one line per job and price, for a provider one line per node; and its
// metered inference requests, for a renter by model, for a provider by
// node and model. Total adds up both.
type Statement struct {
	AccountID string           `json:"account_id"`
	Role      Role             `json:"role"`
	Month     string           `json:"month"` // e.g. "2026-11"
	From      time.Time        `json:"from"`
	To        time.Time        `json:"to"`
	Lines     []StatementLine  `json:"lines"`
	Inference []InferenceTotal `json:"inference"`
	Total     StatementLine    `json:"total"`
	// Penalties are the disputes upheld in the month: a provider's, each
	// taken from its bond and its refund from the lease's earnings; a
	// renter's, each paid to it for the harm. They move the bond or the
	// balance, not the sales, so Total leaves them out.
	Penalties []StatementPenalty `json:"penalties"`
	// RefundedMicros is what the penalties refunded of leases' charges, and
	// NetMicros the month's sales less that: a provider's earnings, a
	// renter's charges (since 5 December 2026).
	RefundedMicros Micros `json:"refunded_micros"`
	NetMicros      Micros `json:"net_micros"`
}

// StatementPenalty is the penalty of a dispute upheld in a statement's
// month.
type StatementPenalty struct {
	DisputeID     string `json:"dispute_id"`
	Offence       string `json:"offence"`
	NodeID        string `json:"node_id,omitempty"`
	LeaseID       string `json:"lease_id,omitempty"`
	PenaltyMicros Micros `json:"penalty_micros"`
	PenaltyTo     string `json:"penalty_to"` // "renter" or "platform"
	// RefundMicros is what the dispute refunded to the renter of the
	// lease's charge: in a provider's statement, of its earnings still
	// pending then (Dispute.RefundMicros); in a renter's, that and the
	// platform's fee (Dispute.FeeRefundMicros) together.
	RefundMicros Micros    `json:"refund_micros,omitempty"`
	UpheldAt     time.Time `json:"upheld_at"`
}

// InferenceTotal is a month of metered inference requests added up: a
// renter's of one model, or a provider's of one model on one node.
type InferenceTotal struct {
	NodeID         string `json:"node_id,omitempty"` // providers'
	NodeName       string `json:"node_name,omitempty"`
	Model          string `json:"model"`
	Requests       int64  `json:"requests"`
	InputTokens    int64  `json:"input_tokens"`
	OutputTokens   int64  `json:"output_tokens"`
	ChargedMicros  Micros `json:"charged_micros"` // renter: the total; provider: gross sales
	FeesMicros     Micros `json:"fees_micros,omitempty"`
	EarningsMicros Micros `json:"earnings_micros,omitempty"`
}

// StatementLine is one job (renters) or one node (providers) of a statement.
type StatementLine struct {
	JobID    string `json:"job_id,omitempty"`
	JobName  string `json:"job_name,omitempty"`
	NodeID   string `json:"node_id,omitempty"`
	NodeName string `json:"node_name,omitempty"`
	Leases   int    `json:"leases"`
	// Requests is the total's count of metered inference requests.
	Requests int64 `json:"requests,omitempty"`
	// GPUSeconds billed; GPUHours is the same as a decimal, e.g. "1.500000".
	GPUSeconds int64  `json:"gpu_seconds"`
	GPUHours   string `json:"gpu_hours"`
	// PriceMicrosPerGPUHour is the locked price of a renter's line.
	PriceMicrosPerGPUHour Micros `json:"price_micros_per_gpu_hour,omitempty"`
	ChargedMicros         Micros `json:"charged_micros"` // renter: the total; provider: gross sales
	FeesMicros            Micros `json:"fees_micros,omitempty"`
	EarningsMicros        Micros `json:"earnings_micros,omitempty"`
}

// GPUHours formats GPU-seconds as hours with six decimals, exactly.
func GPUHours(gpuSeconds int64) string {
	whole, rest := gpuSeconds/3600, gpuSeconds%3600
	// rest/3600 in millionths: rest*1e6/3600 = rest*2500/9, rounded down.
	return fmt.Sprintf("%d.%06d", whole, rest*2500/9)
}

// ParseMonth parses "2026-11" into the calendar month [from, to) in UTC.
func ParseMonth(s string) (from, to time.Time, err error) {
	t, err := time.Parse("2006-01", s)
	if err != nil {
		return time.Time{}, time.Time{}, Invalid("month", "must be a month such as 2026-11, got %q", s)
	} else if t.Year() < 1970 || t.Year() > 9998 {
		return time.Time{}, time.Time{}, Invalid("month", "must be in the years 1970 to 9998, got %q", s)
	}
	return t, t.AddDate(0, 1, 0), nil
}

// MonthOf returns the calendar month (UTC) that holds t, as [from, to).
func MonthOf(t time.Time) (from, to time.Time) {
	t = t.UTC()
	from = time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
	return from, from.AddDate(0, 1, 0)
}
