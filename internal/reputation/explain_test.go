package reputation

import (
	"slices"
	"testing"
)

func texts(as []Advice) []string {
	var out []string
	for _, a := range as {
		out = append(out, a.Text)
	}
	return out
}

// TestParams_Explain_Newcomer is the worked example of docs/trust.md: a
// newcomer at the prior, 0.900, aiming for level 2's 0.920.
//
// To reach 0.92 from 9 good and 1 bad it needs x more good, where
// (9 + x) / (10 + x) = 0.92: x = 2.5, so 3 leases, or 2.5 / 0.05 = 50
// promised hours online, 6.25 → 7 windows of 8 hours.
func TestParams_Explain_Newcomer(t *testing.T) {
	p := DefaultParams()
	got := p.Explain(ExplainInput{Now: t0, Target: 0.92, TargetName: "level 2 (trusted)", WindowHours: 8})
	want := []string{
		"complete 3 more leases without a failure your node causes to reach 0.920 for level 2 (trusted) (now 0.900)",
		"or keep 7 more promised windows of 8 hours fully available",
		// 9/30 = 0.300, down 0.600
		"keep the hardware you declared: each failed hardware challenge costs about 0.600",
		// 9/20 = 0.450
		"report usage as it ran: each receipt that disagrees with the node's telemetry costs about 0.450",
		// 9/13 = 0.692
		"honour every notice of an interruptible lease: each broken one costs about 0.208",
		// 9/11 = 0.818
		"avoid failures your node causes (a lease lost or failed by the node): each costs about 0.082",
		// 9/10.25 = 0.878; 9/12 = 0.750
		"stay online through your promised windows: each hour offline costs about 0.022, a whole missed window of 8 hours about 0.150",
		"the market flags a score below 0.80 with at least 2 incidents against it (failed leases, inconsistent receipts, " +
			"failed challenges, hours offline), unless they are only failed leases as an honest provider's accidents " +
			"(5% of leases) would plausibly make: now 0.900 with 0.0, not flagged",
	}
	if !slices.Equal(texts(got), want) {
		t.Errorf("got\n%q\nwant\n%q", texts(got), want)
	}
	if got[0].Dimension != DimLeases || !near(got[0].Effect, 0.02) || got[2].Dimension != DimChallenges || !near(got[2].Effect, 0.3-0.9) {
		t.Errorf("got %+v", got[:3])
	}
}

// TestParams_Explain_Record: 40 leases, 3 failed, all now; level 2 is out
// of reach of nothing but leases and hours, and old evidence will fade.
//
// G = 37, B = 3: score 46 / 50 = 0.920. Target 0.95: x = 0.95 × 4 / 0.05 − 46 = 30.
func TestParams_Explain_Record(t *testing.T) {
	p := DefaultParams()
	e := FromRecord(37, 3, t0)
	got := texts(p.Explain(ExplainInput{Evidence: e, Now: t0, Target: 0.95}))
	for _, want := range []string{
		"complete 30 more leases without a failure your node causes to reach 0.950 for the next level (now 0.920)",
		"or stay online for 600 more hours inside your promised windows",
		// 46 / 51 = 0.90196
		"avoid failures your node causes (a lease lost or failed by the node): each costs about 0.018",
		// in 60 days: (18.5 + 9) / (18.5 + 9 + 1.5 + 1) = 27.5 / 30
		"evidence fades by half every 60 days: with no new facts your score would be 0.917 in 60 days, drifting toward the newcomer prior 0.900",
	} {
		if !slices.Contains(got, want) {
			t.Errorf("missing %q in\n%q", want, got)
		}
	}
}

func TestParams_Explain_Targets(t *testing.T) {
	p := DefaultParams()
	if got := p.Explain(ExplainInput{Now: t0, Target: 0.85}); len(got) != 6 {
		t.Errorf("a target already met: got %q, want only the five costs and the flag", texts(got))
	}
	got := p.Explain(ExplainInput{Now: t0, Target: 1, TargetName: "perfection"})
	if got[0].Text != "a score of 1.000 for perfection cannot be reached: the prior's 1 bad never fades" {
		t.Errorf("got %q", got[0].Text)
	}
}
