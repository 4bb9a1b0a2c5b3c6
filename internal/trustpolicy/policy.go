// Package trustpolicy is the market's versioned trust policy: the
// reputation formula, the levels and what gold jobs need, how often nodes
// are challenged and work is re-run, and what each proven offence takes
// from a provider's bond and who receives it.
//
// The policy is a strict YAML file with a version (see default.yaml, which
// is embedded and is the policy when none is given). Parse and Load name
// the field at fault in every error. The functions over a policy are pure,
// and penalties are integer micros.
package trustpolicy

import (
	"math"
	"math/bits"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/reputation"
)

// Version is the newest policy file version this build reads; it reads
// every version from 1. Version 2 added challenges.allow_simulated_runners
// and challenges.unverified_after_unsupported, version 3
// levels.offence_hold, version 4 challenges.max_owed; an older file may
// not name a newer key, and gets its default.
const Version = 4

// Policy is a parsed, valid trust policy.
type Policy struct {
	Version      int
	Reputation   reputation.Params
	Levels       reputation.Levels
	Gold         Gold
	Challenges   Challenges
	Verification Verification
	Slashing     map[Offence]SlashRule
	// SHA256 is the hex SHA-256 of the file the policy was read from, so
	// that the policy in force can be named (and logged) exactly.
	SHA256 string
}

// Gold is what gold jobs need of a node.
type Gold struct {
	MinLevel int
}

// Allows reports whether a node of level may run gold jobs.
func (g Gold) Allows(level int) bool { return level >= g.MinLevel }

// Challenges says when nodes run the hardware challenge workload, and what
// their answers prove.
type Challenges struct {
	AtJoin              bool
	OnFingerprintChange bool
	PerNodePerDay       float64 // mean random challenges a day, a Poisson rate
	// AllowSimulatedRunners lets a challenge passed at the size for
	// simulated GPUs (computed on the CPU) count as verified hardware.
	// Which runner a node has is its own word, so a node with a real GPU
	// could claim the simulated one to get small challenges; only a
	// development market should allow it.
	AllowSimulatedRunners bool
	// UnverifiedAfterUnsupported: after this many challenges of one GPU in
	// a row answered unsupported, the node's hardware counts as unverified
	// until a challenge of that GPU passes again; 0 never.
	UnverifiedAfterUnsupported int
	// MaxOwed: a node drawn for a random challenge while every GPU it
	// offers runs a lease owes the challenge until one is idle; once it
	// has owed it this long, it takes no new leases until the challenge
	// is issued and has run, so that the next GPU to free up is
	// challenged rather than rented again (a provider renting its own
	// node to itself cannot put the challenge off for ever). 0: it takes
	// leases while it owes.
	MaxOwed time.Duration
}

// Chance is the probability that a node is due a random challenge in an
// interval of length d: 1 − e^(−rate × d). The engine draws against it on
// each pass, so challenges come at random times no node can predict.
func (c Challenges) Chance(d time.Duration) float64 {
	if d <= 0 || c.PerNodePerDay <= 0 {
		return 0
	}
	return -math.Expm1(-c.PerNodePerDay * d.Hours() / 24)
}

// Verification says how much verifiable work is re-run on an independent
// node to compare output digests.
type Verification struct {
	SampleFraction         float64
	NewcomerSampleFraction float64 // for leases on level-0 nodes
	// FirstChecks: every verifiable lease of a node is re-run until this
	// many re-runs of its leases matched. A node that never ran its work
	// and made its output up is found on its first verifiable lease, not
	// after a sampled share of them; an honest node pays for this many
	// re-runs once.
	FirstChecks int
}

// Fraction is the share of verifiable leases on a node of level to re-run,
// when matched re-runs of its leases have already confirmed its output.
func (v Verification) Fraction(level, matched int) float64 {
	if matched < v.FirstChecks {
		return 1
	}
	if level <= 0 {
		return v.NewcomerSampleFraction
	}
	return v.SampleFraction
}

// Offence is a proven breach of the market's rules that slashes a bond.
type Offence string

const (
	OffenceForgedReceipt    Offence = "forged_receipt"    // a receipt the node's key did not sign, or that telemetry disproves
	OffenceFakeHardware     Offence = "fake_hardware"     // a challenge shows the GPU is not what was claimed
	OffenceMismatchedResult Offence = "mismatched_result" // a re-run's output digest differs, and the node is the faulty side
	OffenceBrokenNotice     Offence = "broken_notice"     // a lease guaranteed notice was stopped without it
)

// Offences lists every offence, in the policy file's order.
var Offences = []Offence{OffenceForgedReceipt, OffenceFakeHardware, OffenceMismatchedResult, OffenceBrokenNotice}

// Recipient is who receives a penalty.
type Recipient string

const (
	// ToRenter compensates the harmed renter: bond → market:penalties →
	// the renter's available balance.
	ToRenter Recipient = "renter"
	// ToPlatform keeps the penalty in market:penalties.
	ToPlatform Recipient = "platform"
)

// SlashRule is what one offence takes from a bond:
// fixed + bond × BondBPS/10000 + harm × HarmBPS/10000, rounded down to the
// micro, capped at MaxMicros when it is above 0, and never more than the
// bond.
type SlashRule struct {
	FixedMicros idlegrid.Micros
	BondBPS     int64 // basis points of the bond: 2500 is 25%
	HarmBPS     int64 // basis points of the renter's harm
	MaxMicros   idlegrid.Micros
	To          Recipient
}

// Amount is the penalty the rule takes from bond for harm. A negative bond
// or harm counts as zero.
func (r SlashRule) Amount(bond, harm idlegrid.Micros) idlegrid.Micros {
	bond, harm = max(bond, 0), max(harm, 0)
	total := addSat(max(r.FixedMicros, 0), share(bond, r.BondBPS))
	total = addSat(total, share(harm, r.HarmBPS))
	if r.MaxMicros > 0 {
		total = min(total, r.MaxMicros)
	}
	return min(total, bond)
}

// Penalty is what offence o takes from a bond for a renter's harm, and who
// receives it. An offence the policy does not know takes nothing.
func (p *Policy) Penalty(o Offence, bond, harm idlegrid.Micros) (idlegrid.Micros, Recipient) {
	r, ok := p.Slashing[o]
	if !ok {
		return 0, ""
	}
	return r.Amount(bond, harm), r.To
}

// share is floor(m × bps / 10000) in 128-bit arithmetic, saturating at the
// largest Micros.
func share(m idlegrid.Micros, bps int64) idlegrid.Micros {
	if m <= 0 || bps <= 0 {
		return 0
	}
	hi, lo := bits.Mul64(uint64(m), uint64(bps))
	if hi >= 10000 {
		return math.MaxInt64
	}
	q, _ := bits.Div64(hi, lo, 10000)
	if q > math.MaxInt64 {
		return math.MaxInt64
	}
	return idlegrid.Micros(q)
}

func addSat(a, b idlegrid.Micros) idlegrid.Micros {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}
