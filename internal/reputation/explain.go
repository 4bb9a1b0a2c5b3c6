package reputation

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"
)

// ExplainInput is what Explain advises on.
type ExplainInput struct {
	Evidence Evidence
	Now      time.Time
	// Target is the score the next level needs, and TargetName that level in
	// words ("level 2 (trusted)"); a Target of 0 asks for no such advice.
	Target     float64
	TargetName string
	// WindowHours is the length of the node's usual promised window, so that
	// uptime advice can speak of windows; 0 speaks of hours.
	WindowHours float64
	// Offences are its proven offences and quarantines in words, each a
	// flag whatever the score (Flag.WithOffences).
	Offences []string
	// Provider is a node's provider's flag, with its offences; nil for a
	// provider. While the node's own evidence is thin, a flagged provider
	// bounds its score and flags it (NodeScore, Flag.OnProvider).
	Provider *Flag
}

// Advice is one thing a provider can do about their score, in words.
type Advice struct {
	Dimension Dimension `json:"dimension,omitempty"`
	Text      string    `json:"text"`
	// Effect is the change in score the advice is about: what following it
	// gains when positive, what one more such failure costs when negative.
	Effect float64 `json:"effect"`
}

// Explain tells a provider what would raise their score and what each kind
// of failure costs, at the score they have now. First comes the way to the
// target, if any; then the costs, the dearest first; then how decay moves
// the score with no new evidence; for a thin node, how its flagged
// provider bounds its score (NodeScore); last, the flag (Flag) and its
// rule. Amounts count no decay of the evidence already held, so they are
// close, not exact.
func (p Params) Explain(in ExplainInput) []Advice {
	e := p.DecayedTo(in.Evidence, in.Now)
	good, bad := p.Totals(e)
	g, b := good+p.PriorGood, bad+p.PriorBad
	s := ratio(g, b)

	out := p.towards(in, g, b)
	var costs []Advice
	for _, d := range Dimensions {
		if w := p.Weights[d].Bad; w > 0 {
			costs = append(costs, Advice{Dimension: d, Effect: ratio(g, b+w) - s, Text: costText(d, s-ratio(g, b+w), in.WindowHours, s-ratio(g, b+w*in.WindowHours))})
		}
	}
	slices.SortStableFunc(costs, func(x, y Advice) int { return cmp.Compare(x.Effect, y.Effect) })
	out = append(out, costs...)
	if a, ok := p.drift(e, in.Now, s); ok {
		out = append(out, a)
	}
	f := p.Flag(e, in.Now).WithOffences(in.Offences)
	if in.Provider != nil && p.Thin(e, in.Now) {
		if a, ok := p.boundText(e, in.Now, *in.Provider); ok {
			out = append(out, a)
		}
		f = f.OnProvider(*in.Provider)
	}
	if p.FlagBelow > 0 || len(f.Offences) > 0 {
		out = append(out, Advice{Text: f.String()})
	}
	return out
}

// towards says how much good evidence reaches the target: x more units of
// weighted good evidence, where (g + x) / (g + b + x) = target.
func (p Params) towards(in ExplainInput, g, b float64) []Advice {
	s, t := ratio(g, b), in.Target
	if t <= 0 || s >= t {
		return nil
	}
	name := in.TargetName
	if name == "" {
		name = "the next level"
	}
	if t >= 1 {
		return []Advice{{Text: fmt.Sprintf("a score of %.3f for %s cannot be reached: the prior's %g bad never fades", t, name, p.PriorBad)}}
	}
	x := t*b/(1-t) - g
	var out []Advice
	if w := p.Weights[DimLeases].Good; w > 0 {
		n := math.Ceil(x/w - 1e-9)
		out = append(out, Advice{Dimension: DimLeases, Effect: t - s,
			Text: fmt.Sprintf("complete %s without a failure your node causes to reach %.3f for %s (now %.3f)", count(n, "more lease"), t, name, s)})
	}
	if w := p.Weights[DimUptime].Good; w > 0 {
		text := fmt.Sprintf("or stay online for %s inside your promised windows", count(math.Ceil(x/w-1e-9), "more hour"))
		if in.WindowHours > 0 {
			text = fmt.Sprintf("or keep %s of %s hours fully available", count(math.Ceil(x/(w*in.WindowHours)-1e-9), "more promised window"), trim(in.WindowHours))
		}
		out = append(out, Advice{Dimension: DimUptime, Effect: t - s, Text: text})
	}
	return out
}

func costText(d Dimension, cost, windowHours, windowCost float64) string {
	switch d {
	case DimLeases:
		return fmt.Sprintf("avoid failures your node causes (a lease lost or failed by the node): each costs about %.3f", cost)
	case DimUptime:
		if windowHours > 0 {
			return fmt.Sprintf("stay online through your promised windows: each hour offline costs about %.3f, a whole missed window of %s hours about %.3f",
				cost, trim(windowHours), windowCost)
		}
		return fmt.Sprintf("stay online through your promised windows: each hour offline costs about %.3f", cost)
	case DimNotices:
		return fmt.Sprintf("honour every notice of an interruptible lease: each broken one costs about %.3f", cost)
	case DimReceipts:
		return fmt.Sprintf("report usage as it ran: each receipt that disagrees with the node's telemetry costs about %.3f", cost)
	case DimChallenges:
		return fmt.Sprintf("keep the hardware you declared: each failed hardware challenge costs about %.3f", cost)
	}
	return fmt.Sprintf("each bad %s costs about %.3f", d, cost)
}

// drift says where decay alone takes the score in one half-life.
func (p Params) drift(e Evidence, now time.Time, s float64) (Advice, bool) {
	if p.HalfLife <= 0 {
		return Advice{}, false
	}
	later := p.Score(e, now.Add(p.HalfLife))
	if math.Abs(later-s) < 0.0005 {
		return Advice{}, false
	}
	days := trim(p.HalfLife.Hours() / 24)
	return Advice{Effect: later - s, Text: fmt.Sprintf(
		"evidence fades by half every %s days: with no new facts your score would be %.3f in %s days, drifting toward the newcomer prior %.3f",
		days, later, days, p.Prior())}, true
}

// count says "1 more lease" or "3 more leases".
func count(n float64, what string) string {
	n = max(n, 1)
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", int64(n), what)
}

// Formula shows how e's score at now is made, in numbers:
// "score 0.935 = (good 20.0 + prior 9) / (good 20.0 + prior 9 + bad 1.0 + prior 1)".
func (p Params) Formula(e Evidence, now time.Time) string {
	good, bad := p.Totals(p.DecayedTo(e, now))
	return fmt.Sprintf("score %.3f = (good %.1f + prior %g) / (good %.1f + prior %g + bad %.1f + prior %g)",
		ratio(good+p.PriorGood, bad+p.PriorBad), good, p.PriorGood, good, p.PriorGood, bad, p.PriorBad)
}
