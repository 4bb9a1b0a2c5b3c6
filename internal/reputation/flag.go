package reputation

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/idlegrid/idlegrid"
)

// MinFlagIncidents is how many incidents the flag asks for before a score
// below the flag line counts: one incident may be an honest accident,
// and a newcomer's prior is too thin to outweigh it (docs/trust.md,
// "The flag"). It counts decayed, so "two" allows for a little decay.
const MinFlagIncidents = 1.5

// DefaultFlagBelow is the default flag line: a provider whose score falls
// below it, with more than one incident against it, is flagged. A
// newcomer starts at the prior, 0.9, and an honest provider rises from
// there.
const DefaultFlagBelow = 0.8

// Flag is whether a node or provider is flagged as likely cheating or
// unreliable, and why.
type Flag struct {
	Flagged bool    `json:"flagged"`
	Score   float64 `json:"score"`
	Below   float64 `json:"flag_below"`
	// Incidents counts the bad facts behind the score, decayed (Incidents).
	Incidents float64 `json:"incidents"`
	// Offences are the proven offences (upheld disputes) and quarantines
	// that flag their subject whatever its score, in words; set by the
	// caller, who keeps them (ExplainInput.Offences).
	Offences []string `json:"offences,omitempty"`
}

// Incidents counts the separate bad facts in e: leases failed by the
// provider, receipts inconsistent with telemetry, failed challenges and
// hours offline inside promised windows. A broken notice is not counted
// apart: it comes with the failed lease that broke it.
func Incidents(e Evidence) float64 {
	return e.Leases.Bad + e.Receipts.Bad + e.Challenges.Bad + e.Uptime.Bad
}

// AccidentRate and AccidentDoubt are the flag's test of failed leases:
// failures count against a provider only when an honest provider whose
// leases fail by accident at AccidentRate (hardware dies, a host reboots)
// would have that many or more, in that many leases, with a chance below
// AccidentDoubt. Two failures in eight leases happen to such a provider
// 6% of the time; three in six, 0.2%.
const (
	AccidentRate  = 0.05
	AccidentDoubt = 0.01
)

// Flag says whether e is flagged at now: its score is below FlagBelow,
// at least MinFlagIncidents incidents stand behind it, and they are not
// explained by accident: at least one is not a failed lease (an
// inconsistent receipt, a failed challenge, an hour offline), or the
// failed leases are implausible at AccidentRate (Accidental). A single
// accident never flags a newcomer, however dear it is (a failed lease
// that also broke a notice costs four lease-equivalents, 0.9 → 0.64);
// two in its first few leases do not either.
func (p Params) Flag(e Evidence, now time.Time) Flag {
	e = p.DecayedTo(e, now)
	f := Flag{Score: p.Score(e, now), Below: p.FlagBelow, Incidents: Incidents(e)}
	other := f.Incidents - e.Leases.Bad
	f.Flagged = f.Score < f.Below && f.Incidents >= MinFlagIncidents &&
		(other >= 0.5 || !Accidental(e.Leases.Bad, e.Leases.Good+e.Leases.Bad))
	return f
}

// Accidental reports whether failed leases out of leases (decayed counts,
// rounded) are plausible as accidents: an honest provider whose leases
// fail at AccidentRate has that many or more with a chance of at least
// AccidentDoubt (a one-sided binomial test).
func Accidental(failed, leases float64) bool {
	k, n := int(math.Round(failed)), int(math.Round(leases))
	if k <= 0 {
		return true
	}
	n = max(n, k)
	// P(X ≥ k) = 1 − Σ_{i<k} C(n,i) p^i (1−p)^(n−i)
	below, term := 0.0, math.Pow(1-AccidentRate, float64(n))
	for i := 0; i < k; i++ {
		below += term
		term *= float64(n-i) / float64(i+1) * AccidentRate / (1 - AccidentRate)
	}
	return 1-below >= AccidentDoubt
}

// String says the flag in words, with its rule.
func (f Flag) String() string {
	state := "not flagged"
	if f.Flagged {
		state = "flagged"
	}
	s := fmt.Sprintf("the market flags a score below %.2f with at least 2 incidents against it (failed leases, "+
		"inconsistent receipts, failed challenges, hours offline), unless they are only failed leases as an honest "+
		"provider's accidents (%g%% of leases) would plausibly make: now %.3f with %.1f, %s",
		f.Below, AccidentRate*100, f.Score, f.Incidents, state)
	if len(f.Offences) > 0 {
		s += "; and, whatever the score, every proven offence and quarantine is a flag: " + strings.Join(f.Offences, "; ")
	}
	return s
}

// WithOffences is f flagged by offences, when there are any (Offences).
func (f Flag) WithOffences(offences []string) Flag {
	if len(offences) > 0 {
		f.Offences, f.Flagged = offences, true
	}
	return f
}

func validFlagBelow(v float64) error {
	if !(v >= 0 && v <= 1) {
		return idlegrid.Invalid("reputation.flag_below", "must be between 0 and 1, got %g", v)
	}
	return nil
}
