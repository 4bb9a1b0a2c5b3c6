// Package reputation scores how reliable a node or a provider is, from
// measured facts only: leases completed against failures the provider
// caused, uptime inside the windows the node promised, notice periods
// honoured, receipts consistent with telemetry, and hardware challenges.
//
// The score is one Beta-style estimate over weighted evidence:
//
//	score = (G + prior_good) / (G + prior_good + B + prior_bad)
//	G     = Σ over kinds of fact: weight_good × good count
//	B     = Σ over kinds of fact: weight_bad × bad count
//
// Every count decays exponentially with the fact's age (a configurable
// half-life), so old failures fade and old successes stop vouching. With no
// evidence the score is the prior: 9 good in 10, 0.9, as
// idlegrid.ReliabilityOf has always given a newcomer; with lease facts only
// and no decay it equals ReliabilityOf exactly.
//
// Levels (levels.go) grade a node or provider by score, GPU-hours served and
// verified hardware; Explain (explain.go) tells a provider, in words, what
// would raise their score; Flag (flag.go) says whether the evidence marks
// it as likely cheating or unreliable, never on one accident. Everything here is pure and deterministic: time
// is passed in, nothing is read or written. docs/trust.md has the formula
// with a worked example.
package reputation

import (
	"fmt"
	"math"
	"time"

	"github.com/idlegrid/idlegrid"
)

// Dimension is one kind of measured fact.
type Dimension string

const (
	DimLeases     Dimension = "leases"     // completed / failed through the provider's fault
	DimUptime     Dimension = "uptime"     // hours online / offline inside promised windows
	DimNotices    Dimension = "notices"    // notice periods honoured / broken
	DimReceipts   Dimension = "receipts"   // receipts consistent / inconsistent with telemetry
	DimChallenges Dimension = "challenges" // hardware challenges passed / failed
)

// Dimensions lists every dimension, in display order.
var Dimensions = []Dimension{DimLeases, DimUptime, DimNotices, DimReceipts, DimChallenges}

// Tally is the decayed evidence of one dimension, in the dimension's own
// unit (leases, hours, notices, receipts, challenges).
type Tally struct {
	Good float64 `json:"good"`
	Bad  float64 `json:"bad"`
}

// Evidence is everything measured about one node (or, pooled, one
// provider), decayed to At. Its zero value is a newcomer.
type Evidence struct {
	At         time.Time `json:"at"`
	Leases     Tally     `json:"leases"`
	Uptime     Tally     `json:"uptime"`
	Notices    Tally     `json:"notices"`
	Receipts   Tally     `json:"receipts"`
	Challenges Tally     `json:"challenges"`
}

// Tally returns the tally of dimension d.
func (e *Evidence) Tally(d Dimension) Tally {
	if t := e.tally(d); t != nil {
		return *t
	}
	return Tally{}
}

func (e *Evidence) tally(d Dimension) *Tally {
	switch d {
	case DimLeases:
		return &e.Leases
	case DimUptime:
		return &e.Uptime
	case DimNotices:
		return &e.Notices
	case DimReceipts:
		return &e.Receipts
	case DimChallenges:
		return &e.Challenges
	}
	return nil
}

// Weight is how much one unit of a dimension's evidence counts, good and bad,
// in lease-equivalents: a weight of 1 counts like one lease.
type Weight struct {
	Good float64 `json:"good"`
	Bad  float64 `json:"bad"`
}

// Params is the score's formula: the prior, the half-life and the weights.
// The trust policy file sets them (internal/trustpolicy).
type Params struct {
	// PriorGood and PriorBad are the evidence a newcomer starts with: the
	// score with no evidence is PriorGood / (PriorGood + PriorBad).
	PriorGood float64 `json:"prior_good"`
	PriorBad  float64 `json:"prior_bad"`
	// HalfLife is how long until a fact counts half as much; 0 means facts
	// never fade.
	HalfLife time.Duration        `json:"half_life"`
	Weights  map[Dimension]Weight `json:"weights"`
	// FlagBelow is the flag line: see Flag.
	FlagBelow float64 `json:"flag_below"`
}

// DefaultParams is the formula of the default trust policy: the prior of
// idlegrid.ReliabilityOf (9 good in 10), a half-life of 60 days, and these
// weights, in lease-equivalents per unit:
//
//	leases      1 per completed lease, 1 per lease failed by the provider
//	uptime      0.05 per promised hour online, 0.25 per promised hour offline
//	            (a week of 40 promised hours counts like 2 leases; 4 hours
//	            missed like one failed lease)
//	notices     0.5 per notice honoured, 3 per notice broken
//	receipts    0.1 per receipt consistent with telemetry, 10 per one that is not
//	challenges  1 per challenge passed, 20 per challenge failed
func DefaultParams() Params {
	return Params{
		PriorGood: 9, PriorBad: 1,
		HalfLife: 60 * 24 * time.Hour,
		Weights: map[Dimension]Weight{
			DimLeases:     {Good: 1, Bad: 1},
			DimUptime:     {Good: 0.05, Bad: 0.25},
			DimNotices:    {Good: 0.5, Bad: 3},
			DimReceipts:   {Good: 0.1, Bad: 10},
			DimChallenges: {Good: 1, Bad: 20},
		},
		FlagBelow: DefaultFlagBelow,
	}
}

// maxWeight bounds every weight and prior, so that no policy can overflow a
// score.
const maxWeight = 1e6

// Validate checks the formula, naming fields as the policy file does.
func (p Params) Validate() error {
	switch {
	case !(p.PriorGood > 0 && p.PriorGood <= maxWeight):
		return idlegrid.Invalid("reputation.prior.good", "must be above 0 and at most %g, got %g", float64(maxWeight), p.PriorGood)
	case !(p.PriorBad >= 0 && p.PriorBad <= maxWeight):
		return idlegrid.Invalid("reputation.prior.bad", "must be between 0 and %g, got %g", float64(maxWeight), p.PriorBad)
	case p.HalfLife < 0:
		return idlegrid.Invalid("reputation.half_life", "must not be negative")
	case p.HalfLife > 0 && p.HalfLife < time.Hour:
		return idlegrid.Invalid("reputation.half_life", "must be 0 (no decay) or at least an hour, got %s", p.HalfLife)
	}
	if err := validFlagBelow(p.FlagBelow); err != nil {
		return err
	}
	for d, w := range p.Weights {
		if (&Evidence{}).tally(d) == nil {
			return idlegrid.Invalid("reputation.weights", "unknown dimension %q", d)
		}
		for _, v := range []float64{w.Good, w.Bad} {
			if !(v >= 0 && v <= maxWeight) {
				return idlegrid.Invalid("reputation.weights."+string(d), "weights must be between 0 and %g, got %g", float64(maxWeight), v)
			}
		}
	}
	return nil
}

// Prior is the score of a newcomer.
func (p Params) Prior() float64 { return p.PriorGood / (p.PriorGood + p.PriorBad) }

// decay is how much a fact of age d still counts: 2^(-d/half-life).
func (p Params) decay(d time.Duration) float64 {
	if p.HalfLife <= 0 || d <= 0 {
		return 1
	}
	return math.Exp2(-float64(d) / float64(p.HalfLife))
}

// DecayedTo returns e as it stands at t: every count scaled by its decay
// from e.At to t. A t before e.At changes nothing: evidence never grows by
// going back in time.
func (p Params) DecayedTo(e Evidence, t time.Time) Evidence {
	if e.At.IsZero() {
		e.At = t
		return e
	}
	if !t.After(e.At) {
		return e
	}
	f := p.decay(t.Sub(e.At))
	for _, d := range Dimensions {
		tl := e.tally(d)
		tl.Good *= f
		tl.Bad *= f
	}
	e.At = t
	return e
}

// Totals returns the weighted good and bad evidence, G and B of the formula.
func (p Params) Totals(e Evidence) (good, bad float64) {
	for _, d := range Dimensions {
		w, t := p.Weights[d], e.Tally(d)
		good += w.Good * t.Good
		bad += w.Bad * t.Bad
	}
	return good, bad
}

// Score is the reliability of e at now, in (0,1]:
// (G + PriorGood) / (G + PriorGood + B + PriorBad), counts decayed to now.
func (p Params) Score(e Evidence, now time.Time) float64 {
	good, bad := p.Totals(p.DecayedTo(e, now))
	return ratio(good+p.PriorGood, bad+p.PriorBad)
}

func ratio(good, bad float64) float64 { return good / (good + bad) }

// Pool sums the evidence of several nodes into their provider's, decayed to
// the latest of their times. The provider's score has one prior, not one per
// node, so a provider with many nodes is judged on more evidence.
func (p Params) Pool(nodes ...Evidence) Evidence {
	var at time.Time
	for _, e := range nodes {
		if e.At.After(at) {
			at = e.At
		}
	}
	out := Evidence{At: at}
	for _, e := range nodes {
		e = p.DecayedTo(e, at)
		for _, d := range Dimensions {
			t, o := out.tally(d), e.tally(d)
			t.Good += o.Good
			t.Bad += o.Bad
		}
	}
	return out
}

// FromRecord is the evidence of a node known only by its lease counters
// (idlegrid.Node's LeasesCompleted and LeasesFailed), taken as measured at
// at. Its score at at is idlegrid.ReliabilityOf(completed, failed) under
// the default prior: the way to carry today's records over.
func FromRecord(completed, failed int64, at time.Time) Evidence {
	return Evidence{At: at, Leases: Tally{Good: float64(completed), Bad: float64(failed)}}
}

// String summarises e for logs and the CLI.
func (e Evidence) String() string {
	return fmt.Sprintf("leases %.1f/%.1f, uptime %.1fh/%.1fh, notices %.1f/%.1f, receipts %.1f/%.1f, challenges %.1f/%.1f (good/bad, as of %s)",
		e.Leases.Good, e.Leases.Bad, e.Uptime.Good, e.Uptime.Bad, e.Notices.Good, e.Notices.Bad,
		e.Receipts.Good, e.Receipts.Bad, e.Challenges.Good, e.Challenges.Bad, e.At.UTC().Format(time.RFC3339))
}

// EvidenceOf is a stored standing's evidence, as Add and Flag take it.
func EvidenceOf(r *idlegrid.Reputation) Evidence {
	t := func(d Dimension) Tally {
		c := r.Counts[string(d)]
		return Tally{Good: c.Good, Bad: c.Bad}
	}
	return Evidence{At: r.CountsAt, Leases: t(DimLeases), Uptime: t(DimUptime),
		Notices: t(DimNotices), Receipts: t(DimReceipts), Challenges: t(DimChallenges)}
}
