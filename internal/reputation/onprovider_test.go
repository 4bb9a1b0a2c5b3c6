package reputation

import (
	"strings"
	"testing"
	"time"
)

// TestParams_Thin: evidence is thin while it weighs less than the prior's
// 10 lease-equivalents, decayed as the score's counts are.
func TestParams_Thin(t *testing.T) {
	p := DefaultParams()
	for _, tc := range []struct {
		name string
		e    Evidence
		at   time.Time
		want bool
	}{
		{name: "newcomer", e: Evidence{}, at: t0, want: true},
		{name: "9 leases", e: FromRecord(8, 1, t0), at: t0, want: true},
		{name: "10 leases", e: FromRecord(9, 1, t0), at: t0, want: false},
		// Half of 12 leases is left after one half-life: 6 of 10.
		{name: "12 leases, a half-life on", e: FromRecord(12, 0, t0), at: t0.Add(p.HalfLife), want: true},
		// 200 promised hours online, at 0.05 each.
		{name: "200 hours online", e: Evidence{At: t0, Uptime: Tally{Good: 200}}, at: t0, want: false},
	} {
		if got := p.Thin(tc.e, tc.at); got != tc.want {
			t.Errorf("%s: Thin = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestParams_NodeScore: while its own evidence is thin, a node of a
// flagged provider ranks at most at its provider's score; an unflagged
// provider, however low its score, bounds nothing, and a node with a
// record of its own ranks by it.
func TestParams_NodeScore(t *testing.T) {
	p := DefaultParams()
	convicted := Flag{Score: 10.0 / 12}.WithOffences([]string{"dispute d1 upheld (mismatched_result, 2025-06-02)"})
	byScore := Flag{Score: 0.75, Incidents: 2, Flagged: true}
	honest := Flag{Score: 11.0 / 13, Incidents: 1} // one accident in three leases: below the prior, not flagged
	for _, tc := range []struct {
		name     string
		e        Evidence
		provider Flag
		want     float64
	}{
		{name: "new node of a convicted provider", e: Evidence{}, provider: convicted, want: 10.0 / 12},
		{name: "new node of a provider flagged by its score", e: Evidence{}, provider: byScore, want: 0.75},
		{name: "new node of an honest provider with an accident", e: Evidence{}, provider: honest, want: 0.9},
		{name: "new node of a convicted provider above the prior", e: Evidence{}, provider: Flag{Score: 0.97, Flagged: true}, want: 0.9},
		// Its own is lower still: the bound never raises a score.
		{name: "thin node below its provider", e: FromRecord(0, 3, t0), provider: byScore, want: 9.0 / 13},
		// 12 leases of its own: (9 + 11) / (10 + 12) = 0.909.
		{name: "node with a record of its own", e: FromRecord(11, 1, t0), provider: convicted, want: 20.0 / 22},
	} {
		if got := p.NodeScore(tc.e, t0, tc.provider); !near(got, tc.want) {
			t.Errorf("%s: NodeScore = %.4f, want %.4f", tc.name, got, tc.want)
		}
	}
}

// TestFlag_OnProvider: a flagged provider flags its thin node with its
// offences, each named once, or its score; an unflagged one does not.
func TestFlag_OnProvider(t *testing.T) {
	own := "dispute d1 upheld (mismatched_result, 2025-06-02)"
	other := "dispute d2 upheld (forged_receipt, 2025-06-03)"
	node := Flag{Score: 0.9, Below: 0.8}.WithOffences([]string{own})
	got := node.OnProvider(Flag{Score: 0.8, Flagged: true, Offences: []string{own, other}})
	if !got.Flagged || strings.Join(got.Offences, "; ") != own+"; its provider's "+other {
		t.Errorf("OnProvider(convicted) = %+v, want flagged by %q and the provider's %q", got, own, other)
	}
	if len(node.Offences) != 1 {
		t.Errorf("OnProvider changed its receiver's offences: %q", node.Offences)
	}
	clean := Flag{Score: 0.9, Below: 0.8}
	if got := clean.OnProvider(Flag{Score: 0.75, Incidents: 2, Flagged: true}); !got.Flagged ||
		!strings.Contains(got.String(), "its provider is flagged at a score of 0.750 with 2.0 incidents") {
		t.Errorf("OnProvider(flagged by its score) = %q, want flagged, naming the provider's score", got.String())
	}
	if got := clean.OnProvider(Flag{Score: 0.85, Incidents: 1}); got.Flagged || len(got.Offences) != 0 {
		t.Errorf("OnProvider(unflagged) = %+v, want the node's own flag", got)
	}
}

// TestParams_Explain_OnProvider: a thin node's advice says why it ranks
// at its provider's score, and its flag names the provider's offence.
func TestParams_Explain_OnProvider(t *testing.T) {
	p := DefaultParams()
	provider := Flag{Score: 10.0 / 12}.WithOffences([]string{"dispute d1 upheld (mismatched_result, 2025-06-02)"})
	got := texts(p.Explain(ExplainInput{Now: t0, Provider: &provider}))
	if len(got) < 2 {
		t.Fatalf("advice %q, want the bound and the flag", got)
	}
	bound, flag := got[len(got)-2], got[len(got)-1]
	if want := "the node ranks at its flagged provider's score 0.833, not its own 0.900, while its own evidence (0.0 lease-equivalents) weighs less than the newcomer prior's 10"; !strings.HasPrefix(bound, want) {
		t.Errorf("advice %q, want it to begin %q", bound, want)
	}
	if !strings.HasSuffix(flag, "flagged; and, whatever the score, every proven offence and quarantine is a flag: its provider's dispute d1 upheld (mismatched_result, 2025-06-02)") {
		t.Errorf("flag %q, want it flagged by its provider's dispute", flag)
	}
	// With a record of its own, the node is judged by it.
	got = texts(p.Explain(ExplainInput{Evidence: FromRecord(20, 0, t0), Now: t0, Provider: &provider}))
	if last := got[len(got)-1]; strings.Contains(strings.Join(got, "\n"), "flagged provider") || !strings.HasSuffix(last, "not flagged") {
		t.Errorf("advice of a node with 20 leases of its own %q, want no bound and not flagged", got)
	}
}
