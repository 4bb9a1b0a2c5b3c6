package reputation

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
)

var t0 = time.Date(2025, 6, 2, 0, 0, 0, 0, time.UTC) // a Monday

const day = 24 * time.Hour

func near(got, want float64) bool { return math.Abs(got-want) < 1e-9 }

func TestParams_Score_Newcomer(t *testing.T) {
	p := DefaultParams()
	if got := p.Score(Evidence{}, t0); got != 0.9 {
		t.Errorf("got %v, want 0.9", got)
	}
	if got := p.Prior(); got != 0.9 {
		t.Errorf("prior: got %v, want 0.9", got)
	}
}

// TestParams_Score_ReliabilityOf checks that the default formula, fed only
// the lease counters every node has today, gives exactly what
// idlegrid.ReliabilityOf gives.
func TestParams_Score_ReliabilityOf(t *testing.T) {
	p := DefaultParams()
	for c := int64(0); c <= 60; c++ {
		for f := int64(0); f <= 60; f++ {
			if got, want := p.Score(FromRecord(c, f, t0), t0), idlegrid.ReliabilityOf(c, f); got != want {
				t.Fatalf("%d completed, %d failed: got %v, want %v", c, f, got, want)
			}
		}
	}
}

// TestParams_Score_WorkedExample is the example of docs/trust.md: a month
// of a node, every fact counted as of now.
func TestParams_Score_WorkedExample(t *testing.T) {
	p := DefaultParams()
	p.HalfLife = 0 // no decay, as in the first half of the example
	var facts []Fact
	for range 20 {
		facts = append(facts, Fact{Kind: FactLeaseCompleted, At: t0})
	}
	facts = append(facts, Fact{Kind: FactLeaseFailed, At: t0})
	// 20 windows of 8 hours; the node missed 4 hours of one of them.
	for i := range 20 {
		online := int64(8 * 3600)
		if i == 7 {
			online = 4 * 3600
		}
		facts = append(facts, Fact{Kind: FactWindow, At: t0, PromisedSeconds: 8 * 3600, OnlineSeconds: online})
	}
	facts = append(facts, Fact{Kind: FactNoticeHonoured, At: t0}, Fact{Kind: FactNoticeHonoured, At: t0})
	for range 100 {
		facts = append(facts, Fact{Kind: FactReceiptConsistent, At: t0})
	}
	facts = append(facts, Fact{Kind: FactChallengePassed, At: t0}, Fact{Kind: FactChallengePassed, At: t0})
	e := mustAdd(t, p, Evidence{}, facts...)

	good, bad := p.Totals(e)
	// G = 20×1 + 156h×0.05 + 2×0.5 + 100×0.1 + 2×1 = 40.8; B = 1×1 + 4h×0.25 = 2
	if !near(good, 40.8) || !near(bad, 2) {
		t.Fatalf("totals: got G %v B %v, want 40.8 and 2", good, bad)
	}
	// (40.8 + 9) / (40.8 + 9 + 2 + 1) = 49.8 / 52.8
	if got := p.Score(e, t0); !near(got, 49.8/52.8) {
		t.Errorf("score: got %v, want %v (0.943)", got, 49.8/52.8)
	}

	// The same month, seen 60 days (one default half-life) later: every
	// count is worth half. (20.4 + 9) / (20.4 + 9 + 1 + 1) = 29.4 / 31.4
	p.HalfLife = 60 * day
	if got := p.Score(e, t0.Add(60*day)); !near(got, 29.4/31.4) {
		t.Errorf("score a half-life later: got %v, want %v (0.936)", got, 29.4/31.4)
	}
	want := "score 0.936 = (good 20.4 + prior 9) / (good 20.4 + prior 9 + bad 1.0 + prior 1)"
	if got := p.Formula(e, t0.Add(60*day)); got != want {
		t.Errorf("formula: got %q, want %q", got, want)
	}
}

func TestParams_Score_Decay(t *testing.T) {
	p := DefaultParams()
	e := mustAdd(t, p, Evidence{}, Fact{Kind: FactLeaseFailed, At: t0})
	for _, tt := range []struct {
		after time.Duration
		want  float64
	}{
		{0, 9.0 / 11},
		{60 * day, 9 / 10.5},    // half a failure left
		{120 * day, 9 / 10.25},  // a quarter
		{6000 * day, 9.0 / 10},  // all but gone: back to the prior
		{-10 * day, 9.0 / 11.0}, // going back in time adds nothing
	} {
		if got := p.Score(e, t0.Add(tt.after)); math.Abs(got-tt.want) > 1e-6 {
			t.Errorf("after %s: got %v, want %v", tt.after, got, tt.want)
		}
	}
}

// TestParams_Add_OrderFree checks that facts arriving late or out of order
// count as if they had arrived in order.
func TestParams_Add_OrderFree(t *testing.T) {
	p := DefaultParams()
	r := rand.New(rand.NewPCG(1, 2))
	kinds := []FactKind{FactLeaseCompleted, FactLeaseFailed, FactNoticeHonoured, FactNoticeBroken,
		FactReceiptConsistent, FactReceiptInconsistent, FactChallengePassed, FactChallengeFailed}
	var facts []Fact
	for range 200 {
		f := Fact{Kind: kinds[r.IntN(len(kinds))], At: t0.Add(time.Duration(r.IntN(90*24)) * time.Hour)}
		if r.IntN(4) == 0 {
			f = Fact{Kind: FactWindow, At: f.At, PromisedSeconds: 3600, OnlineSeconds: int64(r.IntN(3601))}
		}
		facts = append(facts, f)
	}
	inOrder := append([]Fact(nil), facts...)
	sortFacts(inOrder)
	want := p.Score(mustAdd(t, p, Evidence{}, inOrder...), t0.Add(100*day))
	for range 5 {
		r.Shuffle(len(facts), func(i, j int) { facts[i], facts[j] = facts[j], facts[i] })
		if got := p.Score(mustAdd(t, p, Evidence{}, facts...), t0.Add(100*day)); math.Abs(got-want) > 1e-9 {
			t.Fatalf("shuffled: got %v, want %v", got, want)
		}
	}
}

// A disproved lease takes its completion back and counts failed, as if
// it had failed at its end, whenever the proof arrives; a completion that
// was never counted is not taken below nothing.
func TestParams_Add_Disproved(t *testing.T) {
	p := DefaultParams()
	end := t0.Add(10 * day)
	honest := []Fact{{Kind: FactLeaseCompleted, At: t0}, {Kind: FactLeaseCompleted, At: t0.Add(day)}}
	counted := mustAdd(t, p, Evidence{}, append(honest, Fact{Kind: FactLeaseCompleted, At: end})...)
	later := mustAdd(t, p, counted, Fact{Kind: FactLeaseDisproved, At: end})
	later = mustAdd(t, p, later, Fact{Kind: FactChallengePassed, At: end.Add(20 * day)}) // the proof came later
	failed := mustAdd(t, p, Evidence{}, append(honest, Fact{Kind: FactLeaseFailed, At: end},
		Fact{Kind: FactChallengePassed, At: end.Add(20 * day)})...)
	at := end.Add(30 * day)
	a, b := p.DecayedTo(later, at), p.DecayedTo(failed, at)
	if got, want := a.Tally(DimLeases), b.Tally(DimLeases); math.Abs(got.Good-want.Good) > 1e-9 || math.Abs(got.Bad-want.Bad) > 1e-9 {
		t.Errorf("disproved: leases %+v, want %+v, as if the lease had failed", got, want)
	}
	if got, want := p.Score(later, at), p.Score(failed, at); math.Abs(got-want) > 1e-9 {
		t.Errorf("disproved: score %v, want %v", got, want)
	}
	never := mustAdd(t, p, Evidence{}, Fact{Kind: FactLeaseDisproved, At: end})
	if l := never.Tally(DimLeases); l.Good != 0 || l.Bad != 1 {
		t.Errorf("disproved without its completion: leases %+v, want good 0, bad 1", l)
	}
}

func sortFacts(fs []Fact) {
	for i := 1; i < len(fs); i++ {
		for j := i; j > 0 && fs[j].At.Before(fs[j-1].At); j-- {
			fs[j], fs[j-1] = fs[j-1], fs[j]
		}
	}
}

func TestParams_Pool(t *testing.T) {
	p := DefaultParams()
	a := mustAdd(t, p, Evidence{}, Fact{Kind: FactLeaseCompleted, At: t0}, Fact{Kind: FactLeaseCompleted, At: t0})
	b := mustAdd(t, p, Evidence{}, Fact{Kind: FactLeaseFailed, At: t0.Add(60 * day)})
	pool := p.Pool(a, b)
	// a's two leases are a half-life old at b's time: 1 good, 1 bad.
	if !pool.At.Equal(t0.Add(60*day)) || !near(pool.Leases.Good, 1) || !near(pool.Leases.Bad, 1) {
		t.Errorf("got %v, want 1 good and 1 bad lease at %s", pool, t0.Add(60*day))
	}
	if got := p.Score(pool, pool.At); !near(got, 10.0/12) {
		t.Errorf("provider score: got %v, want %v", got, 10.0/12)
	}
	if got := p.Pool(); !got.At.IsZero() || p.Score(got, t0) != 0.9 {
		t.Errorf("no nodes: got %v", got)
	}
}

func TestParams_Validate(t *testing.T) {
	if err := DefaultParams().Validate(); err != nil {
		t.Fatalf("default: %v", err)
	}
	for _, tt := range []struct {
		field  string
		change func(p *Params)
	}{
		{"reputation.prior.good", func(p *Params) { p.PriorGood = 0 }},
		{"reputation.prior.good", func(p *Params) { p.PriorGood = math.NaN() }},
		{"reputation.prior.bad", func(p *Params) { p.PriorBad = -1 }},
		{"reputation.half_life", func(p *Params) { p.HalfLife = -day }},
		{"reputation.half_life", func(p *Params) { p.HalfLife = time.Minute }},
		{"reputation.weights", func(p *Params) { p.Weights["karma"] = Weight{} }},
		{"reputation.weights.leases", func(p *Params) { p.Weights[DimLeases] = Weight{Good: -1} }},
		{"reputation.weights.uptime", func(p *Params) { p.Weights[DimUptime] = Weight{Bad: math.Inf(1)} }},
	} {
		p := DefaultParams()
		tt.change(&p)
		var e *idlegrid.Error
		if err := p.Validate(); !errors.As(err, &e) || e.Field != tt.field {
			t.Errorf("got %v, want an error on %s", err, tt.field)
		}
	}
}

func TestFact_Validate(t *testing.T) {
	p := DefaultParams()
	for _, f := range []Fact{
		{Kind: FactLeaseCompleted},
		{Kind: "karma", At: t0},
		{Kind: FactWindow, At: t0, PromisedSeconds: 0},
		{Kind: FactWindow, At: t0, PromisedSeconds: 10, OnlineSeconds: 11},
		{Kind: FactLeaseFailed, At: t0, OnlineSeconds: 5},
	} {
		if _, err := p.Add(Evidence{}, f); idlegrid.ErrorCode(err) != idlegrid.EINVALID {
			t.Errorf("%+v: got %v, want EINVALID", f, err)
		}
	}
}

func mustAdd(tb testing.TB, p Params, e Evidence, facts ...Fact) Evidence {
	tb.Helper()
	e, err := p.Add(e, facts...)
	if err != nil {
		tb.Fatal(err)
	}
	return e
}
