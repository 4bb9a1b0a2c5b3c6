package reputation

import (
	"fmt"
	"slices"
	"time"
)

// A node stands on its provider's record while its own is thin. Without
// this, a provider the market caught could shed its record by joining a
// new node, which would start at the newcomer prior and rank like any
// honest newcomer (docs/trust.md, "A new node stands on its provider").
// The provider's pooled evidence is left as it is (its nodes' evidence,
// pooled with one prior): the provider's standing bounds the node's score,
// it is not copied into the node's evidence, so nothing counts twice.

// Thin reports whether e, decayed to now, weighs less than the prior
// (PriorGood + PriorBad lease-equivalents, 10 under the default policy):
// the score is then more the newcomer prior than anything measured.
func (p Params) Thin(e Evidence, now time.Time) bool {
	good, bad := p.Totals(p.DecayedTo(e, now))
	return good+bad < p.PriorGood+p.PriorBad
}

// NodeScore is the score a node ranks by: its own (Score), but while its
// own evidence is thin, no more than its provider's score when its
// provider is flagged (provider: the provider's Flag with its offences).
// An unflagged provider bounds nothing, so an honest provider's new node,
// even one of a provider with a few accidents below the prior, starts at
// the prior as before.
func (p Params) NodeScore(e Evidence, now time.Time, provider Flag) float64 {
	own := p.Score(e, now)
	if provider.Flagged && p.Thin(e, now) {
		return min(own, provider.Score)
	}
	return own
}

// OnProvider is f, a thin node's flag, standing on its provider's flag: a
// flagged provider flags the node too, whatever the node's own score, with
// the provider's offences (those not already the node's own), or its score
// when the provider is flagged by its score alone.
func (f Flag) OnProvider(provider Flag) Flag {
	if !provider.Flagged {
		return f
	}
	var reasons []string
	for _, o := range provider.Offences {
		if !slices.Contains(f.Offences, o) {
			reasons = append(reasons, "its provider's "+o)
		}
	}
	if len(provider.Offences) == 0 {
		reasons = append(reasons, fmt.Sprintf("its provider is flagged at a score of %.3f with %.1f incidents", provider.Score, provider.Incidents))
	}
	f.Offences, f.Flagged = append(slices.Clone(f.Offences), reasons...), true
	return f
}

// boundText says why a thin node ranks at its provider's score, for
// Explain; ok is false when the provider bounds nothing.
func (p Params) boundText(e Evidence, now time.Time, provider Flag) (Advice, bool) {
	own, bound := p.Score(e, now), p.NodeScore(e, now, provider)
	if bound >= own {
		return Advice{}, false
	}
	good, bad := p.Totals(p.DecayedTo(e, now))
	return Advice{Effect: bound - own, Text: fmt.Sprintf(
		"the node ranks at its flagged provider's score %.3f, not its own %.3f, while its own evidence (%.1f lease-equivalents) "+
			"weighs less than the newcomer prior's %g: a new node does not shed its provider's record",
		bound, own, good+bad, p.PriorGood+p.PriorBad)}, true
}
