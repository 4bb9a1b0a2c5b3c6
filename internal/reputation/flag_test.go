package reputation

import (
	"strings"
	"testing"
	"time"
)

// TestParams_Flag: one accident never flags a newcomer, however dear; two
// do when they outweigh its good evidence; a long record absorbs them.
func TestParams_Flag(t *testing.T) {
	p := DefaultParams()
	at := t0.Add(time.Hour)
	for _, tc := range []struct {
		name  string
		facts []Fact
		want  bool
		score float64
	}{
		{name: "newcomer", want: false, score: 0.9},
		// A failed lease that broke its notice: (9) / (9 + 1 + 1 + 3) = 0.643,
		// below the line, but a single incident.
		{name: "one accident that broke a notice", facts: []Fact{{Kind: FactLeaseFailed, At: at}, {Kind: FactNoticeBroken, At: at}},
			want: false, score: 9.0 / 14},
		// 9 / (9 + 2 + 1) = 0.75 with two incidents in two leases: 0.25%
		// at a 5% accident rate.
		{name: "two failed leases of two", facts: []Fact{{Kind: FactLeaseFailed, At: at}, {Kind: FactLeaseFailed, At: at}},
			want: true, score: 0.75},
		// Two accidents in eight leases, one on a bronze lease:
		// (9 + 6) / (15 + 2 + 3 + 1) = 0.714, but 6% likely by accident.
		{name: "two accidents in eight leases", facts: append(repeat(Fact{Kind: FactLeaseCompleted, At: at}, 6),
			Fact{Kind: FactLeaseFailed, At: at}, Fact{Kind: FactLeaseFailed, At: at}, Fact{Kind: FactNoticeBroken, At: at}),
			want: false, score: 15.0 / 21},
		// A failed lease and two hours offline: not only failed leases.
		// 9 / (9 + 1 + 2×0.25 + 1) = 0.783.
		{name: "a failed lease and two hours offline", facts: []Fact{{Kind: FactLeaseFailed, At: at},
			{Kind: FactWindow, At: at, PromisedSeconds: 7200}}, want: true, score: 9.0 / 11.5},
		// (9 + 0.2) / (9.2 + 20 + 1) = 0.305, two receipts billing unheard time.
		{name: "two inconsistent receipts", facts: []Fact{{Kind: FactReceiptInconsistent, At: at}, {Kind: FactReceiptInconsistent, At: at},
			{Kind: FactReceiptConsistent, At: at}, {Kind: FactReceiptConsistent, At: at}}, want: true, score: 9.2 / 30.2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := mustAdd(t, p, Evidence{}, tc.facts...)
			got := p.Flag(e, at)
			if got.Flagged != tc.want || !near(got.Score, tc.score) {
				t.Errorf("Flag = %+v, want flagged %v at score %.4f", got, tc.want, tc.score)
			}
		})
	}
	t.Run("a record absorbs two accidents", func(t *testing.T) {
		e := FromRecord(20, 2, at) // (9 + 20) / (10 + 22) = 0.906
		if got := p.Flag(e, at); got.Flagged || got.Incidents != 2 {
			t.Errorf("Flag = %+v, want two incidents, not flagged", got)
		}
	})
}

func TestHeard(t *testing.T) {
	online := []Span{{Start: t0, End: t0.Add(10 * time.Second)}, {Start: t0.Add(20 * time.Second), End: t0.Add(30 * time.Second)}}
	for _, tc := range []struct {
		from, to time.Duration
		want     time.Duration
	}{
		{0, 60 * time.Second, 20 * time.Second},
		{5 * time.Second, 25 * time.Second, 10 * time.Second},
		{10 * time.Second, 20 * time.Second, 0},
	} {
		if got := Heard(t0.Add(tc.from), t0.Add(tc.to), online); got != tc.want {
			t.Errorf("Heard(%s, %s) = %s, want %s", tc.from, tc.to, got, tc.want)
		}
	}
}

func repeat(f Fact, n int) []Fact {
	out := make([]Fact, n)
	for i := range out {
		out[i] = f
	}
	return out
}

// TestAccidental checks the binomial tail against hand-worked values at a
// 5% accident rate.
func TestAccidental(t *testing.T) {
	for _, tc := range []struct {
		failed, leases float64
		want           bool
	}{
		{0, 10, true}, {1, 1, true}, // one is always an accident
		{2, 2, false},  // 0.25%
		{2, 8, true},   // 1 − 0.95⁸ − 8·0.05·0.95⁷ = 5.7%
		{3, 6, false},  // 0.22%
		{3, 11, true},  // 1.5%
		{5, 20, false}, // 0.26%
	} {
		if got := Accidental(tc.failed, tc.leases); got != tc.want {
			t.Errorf("Accidental(%g of %g) = %v, want %v", tc.failed, tc.leases, got, tc.want)
		}
	}
}

func TestFlag_WithOffences(t *testing.T) {
	f := Flag{Score: 0.95, Below: 0.8}
	if g := f.WithOffences(nil); g.Flagged || strings.Contains(g.String(), "proven offence") {
		t.Errorf("no offences: %+v %q, want not flagged, and none named", g, g.String())
	}
	g := f.WithOffences([]string{"dispute d1 upheld (mismatched_result, 2026-12-05)"})
	if !g.Flagged || !strings.Contains(g.String(), "flagged; and, whatever the score, every proven offence and quarantine is a flag: dispute d1 upheld") {
		t.Errorf("an offence: %+v %q, want flagged at a score of 0.95, naming it", g, g.String())
	}
}
