package idlegrid

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// Store is everything the coordinator keeps. Each method is one transaction:
// it happens entirely or not at all. internal/sqlstore implements it on
// SQLite and PostgreSQL; one contract test suite holds both to it.
//
// Errors are *Error: ENOTFOUND for a missing object, ECONFLICT for a state
// that does not allow the change, EPAYMENT for a transfer that would take an
// account below zero.
type Store interface {
	ReputationStore   // reputation.go
	AuditStore        // audit.go
	DisputeStore      // dispute.go
	VerificationStore // verification.go

	AttestationStore  // attest.go
	HeartbeatStore    // heartbeat.go
	KeyRoutingStore   // routing.go
	InferenceStore    // inference.go
	ResponseStore     // keptresponse.go
	ConversationStore // conversation.go

	RegistryLoginStore // registry.go

	// Ping checks that the database answers: EUNAVAILABLE when it does not.
	Ping(ctx context.Context) error

	// CreateAccount stores a new account. ECONFLICT when its ID is taken,
	// naming name when an account of its role has its name, or naming
	// idempotency_key when its idempotency key made another account.
	CreateAccount(ctx context.Context, a *Account) error
	// CreateAccountWithKey is CreateAccount that stores k, the account's
	// first API key, in the same transaction: no account is left without
	// a key for its owner.
	CreateAccountWithKey(ctx context.Context, a *Account, k *APIKey) error
	FindAccount(ctx context.Context, id string) (*Account, error)
	// FindAccountByIdempotencyKey returns the account created with key
	// (Account.IdempotencyKey); ENOTFOUND when none was.
	FindAccountByIdempotencyKey(ctx context.Context, key string) (*Account, error)
	// ListAccounts returns the accounts f selects, oldest first (then by
	// ID); none after an f.After that is not an account.
	ListAccounts(ctx context.Context, f AccountFilter) ([]*Account, error)

	// CreateAPIKey stores k; ECONFLICT naming idempotency_key when its
	// account made another key with its idempotency key.
	CreateAPIKey(ctx context.Context, k *APIKey) error
	// FindAPIKeyByIdempotencyKey returns the account's key created with
	// key, revoked or not; ENOTFOUND when none was.
	FindAPIKeyByIdempotencyKey(ctx context.Context, accountID, key string) (*APIKey, error)
	// ResecretAPIKey gives the account's unrevoked key keyID a new secret,
	// whose prefix and hash these are: the old one stops working.
	// ENOTFOUND when the account has no such key, ECONFLICT when revoked.
	ResecretAPIKey(ctx context.Context, accountID, keyID, prefix, hash string) error
	// FindAPIKey returns the unrevoked key whose secret hashes to hash, and its account.
	FindAPIKey(ctx context.Context, hash string) (*APIKey, *Account, error)
	ListAPIKeys(ctx context.Context, accountID string) ([]*APIKey, error)
	RevokeAPIKey(ctx context.Context, accountID, keyID string, at time.Time) error

	// CreateJoinToken stores t; ECONFLICT naming idempotency_key as
	// CreateAPIKey.
	CreateJoinToken(ctx context.Context, t *JoinToken) error
	// FindJoinTokenByIdempotencyKey and ResecretJoinToken are the API
	// keys' methods for a provider's join tokens; a token may be given a
	// new secret while it is not revoked (used up and expired ones too:
	// the new secret is as unusable as the old).
	FindJoinTokenByIdempotencyKey(ctx context.Context, providerID, key string) (*JoinToken, error)
	ResecretJoinToken(ctx context.Context, providerID, tokenID, prefix, hash string) error
	ListJoinTokens(ctx context.Context, providerID string) ([]*JoinToken, error)
	RevokeJoinToken(ctx context.Context, providerID, tokenID string, at time.Time) error
	// FindJoinToken returns the join token whose secret hashes to hash,
	// used up, expired or revoked as it may be; ENOTFOUND when none does.
	FindJoinToken(ctx context.Context, hash string) (*JoinToken, error)
	// JoinNode uses up one use of the join token whose secret hashes to
	// tokenHash and creates n under the token's provider. n.ProviderID is set.
	JoinNode(ctx context.Context, tokenHash string, n *Node) error

	FindNode(ctx context.Context, id string) (*Node, error)
	ListNodes(ctx context.Context, f NodeFilter) ([]*Node, error)
	// OnlineHeartbeats returns the last heartbeat of every online node, by
	// node ID, without reading the nodes' offers: what the reaper reads on
	// each pass.
	OnlineHeartbeats(ctx context.Context) (map[string]time.Time, error)
	// LeavingHeartbeats returns the last heartbeat of every offline node
	// that holds a live lease, by node ID: a node whose agent said goodbye
	// and has not yet reported each lease it ran.
	LeavingHeartbeats(ctx context.Context) (map[string]time.Time, error)
	// UpdateOffer replaces what the node offers and marks it online.
	UpdateOffer(ctx context.Context, nodeID string, o Offer, agentVersion string, at time.Time) error
	// Heartbeat marks the node online at at, and returns its standing.
	Heartbeat(ctx context.Context, nodeID string, at time.Time) (NodeStanding, error)
	// SetNodeState records the node's state. For an online node, at is
	// its last heartbeat; for a lost one, the last heartbeat the caller
	// saw: a node that has beaten since is not lost (ECONFLICT).
	SetNodeState(ctx context.Context, nodeID string, s NodeState, at time.Time) error
	// FindNodeSchedule returns a node's schedule in force, its owner's and
	// its agent's. SetNodeSchedule keeps the owner's (nil removes it) and
	// applies EffectiveSchedule to the node's offer at once; UpdateOffer
	// applies it to every later offer.
	FindNodeSchedule(ctx context.Context, nodeID string) (*NodeSchedule, error)
	SetNodeSchedule(ctx context.Context, nodeID string, owner *Schedule, at time.Time) (*NodeSchedule, error)
	// SetNodeDraining starts draining the node at since, or ends it (nil),
	// and returns the node. Draining again keeps the first start.
	SetNodeDraining(ctx context.Context, nodeID string, since *time.Time) (*Node, error)

	CreateJob(ctx context.Context, j *Job) error
	FindJob(ctx context.Context, id string) (*Job, error)
	// FindJobByIdempotencyKey returns the renter's job submitted with key.
	FindJobByIdempotencyKey(ctx context.Context, renterID, key string) (*Job, error)
	// ForgetJobIdempotencyKey frees the renter's key when its job ended
	// before before: the job no longer shows it, and a submission may use
	// it again. ForgetJobIdempotencyKeys frees at most limit such keys,
	// those that ended first first, and says how many (expiry: see
	// internal/server/expiry.go). A transfer's or payout's key never expires.
	ForgetJobIdempotencyKey(ctx context.Context, renterID, key string, before time.Time) error
	ForgetJobIdempotencyKeys(ctx context.Context, before time.Time, limit int) (int, error)
	ListJobs(ctx context.Context, f JobFilter) ([]*Job, error)
	// SetJobReason records why a queued job waits. It is a no-op for jobs
	// that are no longer queued.
	SetJobReason(ctx context.Context, jobID, reason string, at time.Time) error
	// CancelQueuedJob cancels a job that has no live leases; ECONFLICT otherwise.
	CancelQueuedJob(ctx context.Context, jobID, reason string, at time.Time) error
	// CancelJob records the renter's cancel of a job and stops it, in one
	// transaction: a queued job ends cancelled at once; a running one
	// keeps the cancel (Job.CancelRequestedAt), which NextJobState holds
	// to however its leases end, and its live leases are asked to stop for
	// reason, as RequestLeaseStop asks. It returns those leases; ECONFLICT
	// once the job has ended.
	CancelJob(ctx context.Context, jobID, reason string, at time.Time) ([]*Lease, error)

	// PlaceJob stores a placement: the leases, their GPU claims and their
	// holds, and moves the job to running. ECONFLICT if the job moved on
	// (it is no longer queued at the placement's attempt: the error's Field
	// is "placement.attempt", see JobMovedOn) or a GPU is already claimed;
	// EPAYMENT if a hold exceeds the balance.
	PlaceJob(ctx context.Context, p *Placement) error
	// PlaceJobs stores many placements in one transaction, each as PlaceJob
	// would and behind a savepoint of its own, so that one that fails does
	// not undo the others. errs[i] is placement i's error (nil: stored);
	// a failure of the whole transaction is reported at every index.
	PlaceJobs(ctx context.Context, ps []*Placement) (errs []error)
	FindLease(ctx context.Context, id string) (*Lease, error)
	ListLeases(ctx context.Context, f LeaseFilter) ([]*Lease, error)
	// LeasesToReap returns the live leases that meet any of q's
	// conditions, newest first: a superset of those the reaper acts on,
	// read without the others.
	LeasesToReap(ctx context.Context, q ReapQuery) ([]*Lease, error)
	// RenterStakes returns the stake of every renter with live leases, by
	// renter ID; the leases themselves are not read.
	RenterStakes(ctx context.Context) ([]*RenterStake, error)
	ListLeaseEvents(ctx context.Context, leaseID string) ([]*LeaseEvent, error)
	// RequestLeaseStop asks the agent to stop a live lease, with a reason.
	// The first stop stands, but for a notice (NoticeStopPrefix), which a
	// later stop that is not one replaces, keeping the notice's time.
	RequestLeaseStop(ctx context.Context, leaseID, reason string, at time.Time) error
	// SetLeaseProgress records the agent's progress report for a running
	// lease, received at at, and reports whether it moved the lease's
	// last checkpoint on.
	SetLeaseProgress(ctx context.Context, p LeaseProgress, at time.Time) (checkpointed bool, err error)
	// TransitionLease applies t and its transfers atomically, frees the GPUs
	// of a lease that ends, updates the node's record and moves the job on
	// by NextJobState.
	TransitionLease(ctx context.Context, t *LeaseTransition, transfers []*Transfer) error

	// AddFollowUp stores f on its own; ECONFLICT when its ID is pending.
	// TransitionLease stores a lease's with its end (LeaseTransition.FollowUp).
	AddFollowUp(ctx context.Context, f *FollowUp) error
	// DueFollowUps returns at most limit follow-ups due at at, those due
	// first first (then by ID).
	DueFollowUps(ctx context.Context, at time.Time, limit int) ([]*FollowUp, error)
	// DeferFollowUp counts a failed try of follow-up id and makes it due
	// again at due. DoneFollowUp removes it. Neither minds one that is gone.
	DeferFollowUp(ctx context.Context, id string, due time.Time) error
	DoneFollowUp(ctx context.Context, id string) error

	AppendLogs(ctx context.Context, leaseID string, lines []LogLine) error
	// ListLogs returns the lines f selects, in order.
	ListLogs(ctx context.Context, f LogFilter) ([]LogLine, error)

	// AppendReceipts stores a lease's next usage receipts, in order, as
	// they are: the caller has checked them (signature, chain, limits). The
	// first must follow the last stored (Seq and PrevHash) and the lease
	// must not have ended; ECONFLICT otherwise, and nothing is stored.
	AppendReceipts(ctx context.Context, leaseID string, rs []Receipt) error
	// ListReceipts returns every receipt of a lease, in Seq order.
	ListReceipts(ctx context.Context, leaseID string) ([]Receipt, error)
	// ReceiptUsage returns the sum of a lease's receipts' GPU-seconds and
	// its last receipt; last is nil when it has none.
	ReceiptUsage(ctx context.Context, leaseID string) (gpuSeconds int64, last *Receipt, err error)
	// LastReceipts returns the last receipt of each of the leases that has
	// one, by lease ID, in one snapshot: what the reaper checks every
	// running lease against on each pass.
	LastReceipts(ctx context.Context, leaseIDs []string) (map[string]*Receipt, error)

	// PostTransfer applies a transfer. A transfer whose idempotency key was
	// seen before is not applied again; the stored one is returned in its place.
	PostTransfer(ctx context.Context, t *Transfer) (*Transfer, error)
	// ReleaseBond posts t, a release of providerID's bond, as PostTransfer
	// does, unless a dispute against the provider is open, or a
	// verification of its runs is still deciding: ECONFLICT naming it. It holds the provider's account while it looks, as OpenDispute
	// does, so that a dispute opened meanwhile waits for it or stops it.
	ReleaseBond(ctx context.Context, t *Transfer, providerID string) (*Transfer, error)
	ListTransfers(ctx context.Context, f TransferFilter) ([]*Transfer, error)
	Balance(ctx context.Context, accountID string) (*Balance, error)
	// LedgerSum returns the sum of every account's balance. It is always zero.
	LedgerSum(ctx context.Context) (Micros, error)

	// Summary counts the market at a glance.
	Summary(ctx context.Context) (*Summary, error)

	// Money beyond the lease (docs/billing.md): maturing earnings, payouts,
	// spend limits, notices and statements.

	// ListMaturing returns up to limit postings made at or before before
	// that credited a provider's pending account (lease settlements and
	// inference charges) and have not matured yet (no transfer
	// "mature:<posting's key>"), oldest first; a settlement all of whose
	// earnings disputes refunded is not listed.
	ListMaturing(ctx context.Context, before time.Time, limit int) ([]*Transfer, error)
	// LeaseEarnings returns what the lease's settlement credited its
	// provider, what upheld disputes refunded of it, and whether the rest
	// matured; all zero for a lease not settled (or not found).
	LeaseEarnings(ctx context.Context, leaseID string) (*LeaseEarnings, error)
	// CreatePayout stores a requested payout and posts t, which moves its
	// amount from payable to in flight, in one transaction. A request whose
	// (provider, idempotency key) was seen before changes nothing and
	// returns the stored payout; ECONFLICT if its amount differs. EPAYMENT
	// when the payable balance is short.
	CreatePayout(ctx context.Context, p *Payout, t *Transfer) (*Payout, error)
	// ResolvePayout settles or rejects a requested payout and posts t in one
	// transaction. A retry with the resolution's idempotency key returns the
	// payout unchanged; any other change to a resolved payout is ECONFLICT.
	ResolvePayout(ctx context.Context, r *PayoutResolution, t *Transfer) (*Payout, error)
	FindPayout(ctx context.Context, id string) (*Payout, error)
	ListPayouts(ctx context.Context, f PayoutFilter) ([]*Payout, error)
	// SetSpendLimit sets or replaces the limit of an account or one of its
	// keys; RemoveSpendLimit lifts it. PlaceJob refuses (EPAYMENT) a
	// placement whose holds would take a scope over its limit this month.
	SetSpendLimit(ctx context.Context, l *SpendLimit) error
	RemoveSpendLimit(ctx context.Context, scope SpendScope, accountID, keyID string) error
	// ListSpendLimits returns the account's limit and its keys' limits.
	ListSpendLimits(ctx context.Context, accountID string) ([]*SpendLimit, error)
	// MonthSpend returns what a scope used of the month f names.
	MonthSpend(ctx context.Context, f SpendFilter) (*Spend, error)
	// AddNotice stores n unless a notice with its key exists; it reports
	// whether n was stored.
	AddNotice(ctx context.Context, n *Notice) (bool, error)
	// ListNotices returns an account's notices, newest first; EINVALID
	// when f.Before is not one of them.
	ListNotices(ctx context.Context, f NoticeFilter) ([]*Notice, error)
	// ListSettlements returns the settlements f selects, oldest first.
	ListSettlements(ctx context.Context, f SettlementFilter) ([]*Settlement, error)

	Close() error
}

// ReapQuery picks the live leases the reaper looks at in a pass
// (Store.LeasesToReap): those that meet any of its conditions. Each is a
// time in the server's clock; the zero time matches nothing.
type ReapQuery struct {
	// AssignedBefore: assigned leases, never started, placed before it.
	AssignedBefore time.Time
	// LimitBefore: running leases whose time limit ended before it.
	LimitBefore time.Time
	// NoticeBefore: live leases asked to stop whose notice ended before it.
	NoticeBefore time.Time
	// ReceiptsBefore: running leases with no stop asked whose last receipt
	// ended before it.
	ReceiptsBefore time.Time
}

// NodeFilter selects nodes. ProviderID empty means every provider.
type NodeFilter struct {
	ProviderID string
	States     []NodeState
	// ServesModels keeps only the nodes whose offer lists models they
	// serve for inference.
	ServesModels bool
	// Offered keeps only the market's offers: online nodes neither in
	// quarantine nor draining.
	Offered bool
	// Regions keeps only nodes in one of these regions, and GPUModels
	// those with a GPU of one of these models (empty: any).
	Regions, GPUModels []string
	// MinGPUs keeps only nodes with at least this many GPUs, and MinVRAMMB
	// those with a GPU of at least this much memory (0: any).
	MinGPUs, MinVRAMMB int
	// MinLevel keeps only nodes at this trust level or above (0: any), as
	// a job's MinTrustLevel takes them.
	MinLevel int
	// Tier keeps only nodes that sell it (empty: any), and MaxFloor, when
	// set, those whose floor for it is at most this per GPU-hour: the ask
	// before any time-of-day multiplier. Sorting by price reads Tier's
	// floor too.
	Tier     Tier
	MaxFloor Micros
	// MinFreeGPUs keeps only nodes with at least this many GPUs a job
	// could take now (0: any). The market engine knows which those are,
	// not the Store, which ignores it: the server turns it into IDs.
	MinFreeGPUs int
	// IDs, when not nil, keeps only these nodes; empty, none.
	IDs []string
	// Name keeps only the nodes of this name, as their offers say (empty:
	// any). Names are their owners' words: several nodes may share one.
	Name string
	// Sort orders the nodes (and so says which a Limit keeps).
	Sort NodeSort
	// After, when set, lists the nodes that come after this one in Sort's
	// order: the last node of a page asks for the next page.
	After string
	// Limit returns at most this many, in Sort's order (0: all).
	Limit int
}

// IsText reports whether every Store keeps s as it is: UTF-8 without the
// NUL character, which PostgreSQL refuses in text (SQLite keeps both).
// Input that reaches a store is checked with it, by field.
func IsText(s string) bool { return utf8.ValidString(s) && strings.IndexByte(s, 0) < 0 }

// ClipText is s cut to at most most bytes, on a character's edge, ending
// with how long it was; s itself when it fits. What a node or an operator
// wrote is kept this way where a record must fit, rather than refused.
func ClipText(s string, most int) string {
	if len(s) <= most {
		return s
	}
	mark := fmt.Sprintf(" … [cut: %d bytes in all]", len(s))
	cut := max(most-len(mark), 0)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}

// NodeSort is an order of a list of nodes.
type NodeSort string

const (
	NodesOldestFirst NodeSort = "oldest"      // by when they joined; also the zero value's order
	NodesCheapest    NodeSort = "price"       // by the filter's tier's floor, cheapest first
	NodesReliable    NodeSort = "reliability" // most reliable first
)

// NodeSorts are the orders a node list may take.
var NodeSorts = []NodeSort{NodesOldestFirst, NodesCheapest, NodesReliable}

// RenterStake is what a renter's live leases would cost at most, and the
// money and limits behind them: what the runout check reads of every renter
// with live leases each reaper pass.
type RenterStake struct {
	RenterID string
	// AtMost is what its live leases would cost if each ran to its time
	// limit at its locked price (CostOf of its GPU-seconds).
	AtMost Micros
	Funds  Micros // its balance: available plus held
	// Limited reports whether the renter or one of its keys has a spend
	// limit.
	Limited bool
}

// Summary is the market at a glance.
type Summary struct {
	JobsByState  map[JobState]int  `json:"jobs_by_state"`
	NodesByState map[NodeState]int `json:"nodes_by_state"`
	GPUsTotal    int               `json:"gpus_total"`    // on online nodes
	GPUsBusy     int               `json:"gpus_busy"`     // claimed by live leases
	SpentMicros  Micros            `json:"spent_micros"`  // charged to renters, all time: leases and inference
	EarnedMicros Micros            `json:"earned_micros"` // credited to providers, all time, less what disputes refunded of it
	FeesMicros   Micros            `json:"fees_micros"`   // kept by the platform, all time, less what disputes refunded of it
	// RefundedMicros is what upheld disputes gave back to renters of
	// providers' earnings and the platform's fees, all time: spent is
	// earned, fees and refunded. Penalties from bonds are not in it.
	RefundedMicros Micros `json:"refunded_micros"`
	HeldMicros     Micros `json:"held_micros"` // in escrow now
}
