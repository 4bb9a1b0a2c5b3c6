package idlegrid

import (
	"context"
	"time"
)

// Reputation is what the market has measured about one node or provider,
// as the store keeps it: the evidence per kind of fact, decayed to a time,
// and the score and level the trust policy made of it when it was last
// saved. internal/reputation holds the formula; docs/trust.md explains it.
type Reputation struct {
	Subject    ReputationSubject `json:"subject"`
	SubjectID  string            `json:"subject_id"`
	ProviderID string            `json:"provider_id"` // the node's provider; for a provider, itself
	// Counts is the evidence per dimension ("leases", "uptime", "notices",
	// "receipts", "challenges"), in the dimension's unit, decayed to CountsAt.
	Counts   map[string]ReputationTally `json:"counts"`
	CountsAt time.Time                  `json:"counts_at"`
	Score    float64                    `json:"score"` // in (0,1]; what the engine ranks a node by
	Level    int                        `json:"level"`
	// LevelName is the level in words ("newcomer", "trusted").
	LevelName        string `json:"level_name"`
	GPUSecondsServed int64  `json:"gpu_seconds_served"` // all time, for the levels' GPU-hours
	// UptimeThrough is the end of the promised time already measured for
	// uptime facts (nodes only); the zero time when none was.
	UptimeThrough time.Time `json:"uptime_through,omitzero"`
	// HardwareNote says why the node's challenges left its hardware
	// unverified under the trust policy when this standing was saved, or ""
	// (nodes only; docs/trust.md, "Verified hardware").
	HardwareNote string `json:"hardware_note,omitempty"`
	// Version bumps on every save; a save names the version it read.
	Version   int64     `json:"version"`
	UpdatedAt time.Time `json:"updated_at"`
}

// ReputationSubject is what a reputation is about.
type ReputationSubject string

const (
	SubjectNode     ReputationSubject = "node"
	SubjectProvider ReputationSubject = "provider"
)

// Valid reports whether s is a known subject.
func (s ReputationSubject) Valid() bool { return s == SubjectNode || s == SubjectProvider }

// ReputationTally is the decayed good and bad evidence of one dimension.
type ReputationTally struct {
	Good float64 `json:"good"`
	Bad  float64 `json:"bad"`
}

// ReputationFact is one measured fact about a node, stored once under its
// key so that no fact counts twice (internal/reputation.Fact, stored).
// Count folds identical facts of one source, e.g. the consistent receipts
// of one lease, into one row.
type ReputationFact struct {
	Key             string    `json:"key"` // e.g. "lease:lea_1", "window:nod_1:1748779200"
	NodeID          string    `json:"node_id"`
	Kind            string    `json:"kind"` // internal/reputation.FactKind
	At              time.Time `json:"at"`
	Count           int64     `json:"count"`
	PromisedSeconds int64     `json:"promised_seconds,omitempty"` // window facts only
	OnlineSeconds   int64     `json:"online_seconds,omitempty"`
	// Source says where the fact came from, e.g. a lease ID; shown to the
	// node's owner.
	Source string `json:"source,omitempty"`
}

// LevelChange is a promotion or demotion of a node or provider, recorded
// with the reasons that decided it.
type LevelChange struct {
	ID        string            `json:"id"`
	Subject   ReputationSubject `json:"subject"`
	SubjectID string            `json:"subject_id"`
	From      int               `json:"from"`
	To        int               `json:"to"`
	FromName  string            `json:"from_name"`
	ToName    string            `json:"to_name"`
	Reasons   []string          `json:"reasons"`
	At        time.Time         `json:"at"`
}

// ReputationUpdate is one save: a subject's new standing, the facts that
// moved it and the level change it caused, all or nothing.
type ReputationUpdate struct {
	// Reputation is the new standing. Its Version is the version it was
	// computed from (0: the subject had none); the save stores Version+1
	// and sets it there.
	Reputation *Reputation
	Facts      []ReputationFact // new facts; every key must be new
	Change     *LevelChange     // nil when the level stayed
	// Completes, when set, is the ID of the follow-up (FollowUp) this save
	// is the last step of: it is removed in the same transaction, so that
	// what the save adds that no key guards (a lease's GPU-seconds served)
	// is added once; ENOTFOUND, and nothing saved, when it is gone already.
	Completes string
}

// ReputationFilter selects reputations. Empty fields match all.
type ReputationFilter struct {
	Subject    ReputationSubject
	ProviderID string
	// HardwareDoubted keeps only standings with a HardwareNote.
	HardwareDoubted bool
	Limit           int // 0: all
}

// ReputationStore keeps reputations, their facts and level history.
type ReputationStore interface {
	// SaveReputation stores the updates in one transaction, all of them or
	// none (a node's standing and its provider's, which pools it, so that
	// no crash leaves one counting facts the other lacks). Each stores the
	// standing (ECONFLICT when its version moved on since it was read, so
	// that the caller recomputes), the facts (ECONFLICT when a key was
	// stored before) and the level change. A node's record takes the score
	// as its reliability and the level as its level in the same
	// transaction, so the engine ranks by what was saved; from then on the
	// node's lease record no longer sets its reliability. Each saved
	// standing's Version moves on by one.
	SaveReputation(ctx context.Context, us ...*ReputationUpdate) error
	// FindReputation returns a subject's standing; ENOTFOUND when none was saved.
	FindReputation(ctx context.Context, s ReputationSubject, id string) (*Reputation, error)
	// ListReputations returns the standings f selects, by subject ID.
	ListReputations(ctx context.Context, f ReputationFilter) ([]*Reputation, error)
	// ListReputationFacts returns up to limit of a node's facts, newest first.
	ListReputationFacts(ctx context.Context, nodeID string, limit int) ([]*ReputationFact, error)
	// ListLevelChanges returns up to limit of a subject's level changes, newest first.
	ListLevelChanges(ctx context.Context, s ReputationSubject, id string, limit int) ([]*LevelChange, error)
}

// ReputationView is a node's or provider's reputation as the API shows it
// (GET /v1/nodes/{id}/reputation, GET /v1/providers/{id}/reputation).
// Anyone signed in sees the standing: score, level and badges, as renters
// see a node's reliability in the market view. Detail, the evidence behind
// it, is shown only to the owner and admins.
type ReputationView struct {
	Subject    ReputationSubject `json:"subject"`
	SubjectID  string            `json:"subject_id"`
	ProviderID string            `json:"provider_id"`
	// Score is the score as of AsOf, decayed from the last fact; the
	// engine ranks by the score last saved, refreshed on each reaper pass.
	Score     float64   `json:"score"`
	Level     int       `json:"level"`
	LevelName string    `json:"level_name"`
	Badges    []string  `json:"badges"`
	AsOf      time.Time `json:"as_of"`
	// PolicyVersion and PolicySHA256 name the trust policy in force.
	PolicyVersion int               `json:"policy_version"`
	PolicySHA256  string            `json:"policy_sha256"`
	Detail        *ReputationDetail `json:"detail,omitempty"`
}

// ReputationDetail is the evidence behind a score, for its owner.
type ReputationDetail struct {
	// Formula shows the score's numbers, e.g. "score 0.936 = (good 20.4 +
	// prior 9) / (good 20.4 + prior 9 + bad 1.0 + prior 1)".
	Formula          string             `json:"formula"`
	Dimensions       []ReputationCount  `json:"dimensions"`
	GPUHoursServed   float64            `json:"gpu_hours_served"`
	HardwareVerified bool               `json:"hardware_verified"`
	LevelReasons     []string           `json:"level_reasons"`
	Advice           []ReputationAdvice `json:"advice"`
	Facts            []*ReputationFact  `json:"facts,omitempty"` // a node's latest facts, newest first
	LevelChanges     []*LevelChange     `json:"level_changes"`   // newest first
}

// ReputationCount is one dimension of the evidence, decayed to the view's
// time, with the weights that turn it into lease-equivalents.
type ReputationCount struct {
	Dimension  string  `json:"dimension"`
	Good       float64 `json:"good"`
	Bad        float64 `json:"bad"`
	WeightGood float64 `json:"weight_good"`
	WeightBad  float64 `json:"weight_bad"`
}

// ReputationAdvice is one thing the owner can do about a score, in words;
// Effect is what following it gains (positive) or one more such failure
// costs (negative).
type ReputationAdvice struct {
	Dimension string  `json:"dimension,omitempty"`
	Text      string  `json:"text"`
	Effect    float64 `json:"effect"`
}

// TrustPolicyView is the trust policy in force (GET /v1/trust-policy).
type TrustPolicyView struct {
	Version        int               `json:"version"`
	SHA256         string            `json:"sha256"`
	GoldMinLevel   int               `json:"gold_min_level"`
	PriorGood      float64           `json:"prior_good"`
	PriorBad       float64           `json:"prior_bad"`
	HalfLifeHours  float64           `json:"half_life_hours"` // 0: facts never fade
	Weights        []ReputationCount `json:"weights"`         // Good and Bad unset: the weights per dimension
	DemotionMargin float64           `json:"demotion_margin"`
	// OffenceHoldHours is how long a provider's nodes hold level 0 after
	// one of its offences is upheld; 0: no hold.
	OffenceHoldHours float64          `json:"offence_hold_hours"`
	Levels           []TrustLevelRule `json:"levels"`
	// ComplaintWindowHours is how long after a lease's end its renter may
	// complain of it: the server's --complaint-window, not a policy key.
	ComplaintWindowHours float64 `json:"complaint_window_hours"`
}

// TrustLevelRule is what one level needs.
type TrustLevelRule struct {
	Level            int     `json:"level"`
	Name             string  `json:"name"`
	MinScore         float64 `json:"min_score"`
	MinGPUHours      float64 `json:"min_gpu_hours"`
	VerifiedHardware bool    `json:"verified_hardware"`
}
