package market

import (
	"math"
	"strconv"

	"github.com/idlegrid/idlegrid"
)

// The price notes are built with strconv rather than fmt: one is written
// for every lease.

// appendMoney appends m as Micros.String writes it, e.g. "$1.250000".
func appendMoney(b []byte, m idlegrid.Micros) []byte {
	u := uint64(m)
	if m < 0 {
		b = append(b, '-')
		u = -u
	}
	b = append(b, '$')
	if whole := u / 1_000_000; whole < 10 {
		b = append(b, byte('0'+whole))
	} else {
		b = strconv.AppendUint(b, whole, 10)
	}
	f := u % 1_000_000
	return append(b, '.', byte('0'+f/100_000), byte('0'+f/10_000%10), byte('0'+f/1_000%10),
		byte('0'+f/100%10), byte('0'+f/10%10), byte('0'+f%10))
}

// appendScore appends a score, which is in micros per useful GPU-hour, as
// money rounded to the micro. One beyond what int64 micros hold (a flaky
// runner-up under a heavy weight) is written from the float.
func appendScore(b []byte, s float64) []byte {
	if math.Abs(s) >= 1<<62 {
		if s < 0 {
			b = append(b, '-')
		}
		b = append(b, '$')
		return strconv.AppendFloat(b, math.Abs(s)/1e6, 'f', 6, 64)
	}
	return appendMoney(b, idlegrid.Micros(s+copysignHalf(s)))
}

func copysignHalf(s float64) float64 {
	if s < 0 {
		return -0.5
	}
	return 0.5
}

// priceBasis is what a Pick's price note is written from, besides the
// Pick's own numbers. The engine records the numbers when it prices a
// pick, and the words are written when asked (Pick.PriceNote): by the
// coordinator as it makes the lease, off the engine's placement path.
type priceBasis struct {
	how    priceHow
	gang   int             // the job's node count
	rel    float64         // the winner's reliability, as the engine ranked it
	weight float64         // the job's reliability weight
	cap    idlegrid.Micros // the renter's cap
}

// priceHow is which rule set a pick's price.
type priceHow uint8

const (
	pricedSecondScore priceHow = iota // against the runner-up (or shadow runner-up)
	pricedReserve                     // the cap, with no competitor
	pricedFirst                       // FirstMatcher: the ask
)

// PriceNote says how the price was set, in words, for the lease, the
// renter and the provider.
func (p Pick) PriceNote() string {
	b := make([]byte, 0, 320)
	switch p.basis.how {
	case pricedFirst:
		b = append(b, "ask "...)
		b = appendMoney(b, p.PriceMicrosPerGPUHour)
		b = append(b, "/GPU-h (first matcher pays the ask; cap "...)
		b = appendMoney(b, p.basis.cap)
		b = append(b, ')')
	case pricedReserve:
		b = p.appendReserveNote(b)
	default:
		b = p.appendSecondScoreNote(b)
	}
	return string(b)
}

// appendScoreOf appends how the pick's score is made:
// "ask $2.000000 ÷ 0.95^1", or with a credit
// "ask $2.000000 ÷ 0.95^1 − locality credit $0.250000".
func (p *Pick) appendScoreOf(b []byte) []byte {
	b = append(b, "ask "...)
	b = appendMoney(b, p.AskMicrosPerGPUHour)
	b = append(b, " ÷ "...)
	b = appendPow(b, p.basis.rel, p.basis.weight)
	if p.CreditMicrosPerGPUHour > 0 {
		b = append(b, " − locality credit "...)
		b = appendMoney(b, p.CreditMicrosPerGPUHour)
	}
	return b
}

// appendPow appends "rel^w", e.g. "0.95^1": the reliability to the
// thousandth, as the record shows it, and the weight to the hundredth.
func appendPow(b []byte, rel, w float64) []byte {
	b = appendFixed(b, rel, 3)
	b = append(b, '^')
	return appendFixed(b, w, 2)
}

// appendFixed appends a non-negative x rounded to at most decimals places,
// without trailing zeros: 0.95, 1, 0.5.
func appendFixed(b []byte, x float64, decimals int) []byte {
	scale := uint64(1)
	for range decimals {
		scale *= 10
	}
	u := uint64(math.Round(max(x, 0) * float64(scale)))
	b = strconv.AppendUint(b, u/scale, 10)
	frac := u % scale
	if frac == 0 {
		return b
	}
	b = append(b, '.')
	for scale /= 10; frac > 0; scale /= 10 {
		b = append(b, byte('0'+frac/scale))
		frac %= scale
	}
	return b
}

// secondPrice is the price at which a winner of reliability rel under
// weight w, with credit taken off its weighted ask, ties a runner-up
// scoring ru: price ÷ rel^w − credit = ru (before the ask and the cap
// bound it).
func secondPrice(ru, rel, w float64, credit idlegrid.Micros) float64 {
	return (ru + float64(credit)) * relPow(rel, w)
}

// appendSecondScoreNote says how a second-score price was set. A shadow
// runner-up's note names that basis.
func (p *Pick) appendSecondScoreNote(b []byte) []byte {
	q, busy := &p.basis, p.ShadowRunnerUp
	if q.gang > 1 {
		b = append(b, "uniform clearing for "...)
		b = strconv.AppendInt(b, int64(q.gang), 10)
		b = append(b, " nodes"...)
	} else {
		b = append(b, "second score"...)
	}
	if busy {
		b = append(b, " against a shadow runner-up"...)
	}
	b = append(b, ": this node scores "...)
	b = appendScore(b, p.Score)
	b = append(b, " ("...)
	b = p.appendScoreOf(b)
	switch {
	case busy && q.gang > 1:
		b = append(b, "); no node left out could have taken a place in the gang, and the best busy node of another provider scoring at least the worst winner, "...)
	case busy:
		b = append(b, "); no other node could take the job now, and the best busy node of another provider scoring at least this one, "...)
	case q.gang > 1:
		b = append(b, "); the best node left out, "...)
	default:
		b = append(b, "); the runner-up, "...)
	}
	b = append(b, p.RunnerUpNodeID...)
	b = append(b, ", scores "...)
	b = appendScore(b, p.RunnerUpScore)
	b = append(b, "; tying it takes "...)
	if p.CreditMicrosPerGPUHour > 0 {
		b = append(b, '(')
		b = appendScore(b, p.RunnerUpScore)
		b = append(b, " + "...)
		b = appendMoney(b, p.CreditMicrosPerGPUHour)
		b = append(b, ')')
	} else {
		b = appendScore(b, p.RunnerUpScore)
	}
	b = append(b, " × "...)
	b = appendPow(b, q.rel, q.weight)
	b = append(b, " = "...)
	raw := secondPrice(p.RunnerUpScore, q.rel, q.weight, p.CreditMicrosPerGPUHour)
	b = appendScore(b, raw)
	rounded := math.Round(raw) // compared as a float: raw may be beyond int64 micros
	switch {
	case rounded < float64(p.AskMicrosPerGPUHour):
		b = append(b, ", raised to the ask: "...)
	case rounded > float64(q.cap):
		b = append(b, ", held to the renter's cap: "...)
	default:
		b = append(b, ", between the ask "...)
		b = appendMoney(b, p.AskMicrosPerGPUHour)
		b = append(b, " and the cap "...)
		b = appendMoney(b, q.cap)
		b = append(b, ": "...)
	}
	b = appendMoney(b, p.PriceMicrosPerGPUHour)
	return append(b, "/GPU-h"...)
}

// appendReserveNote says that no competitor, free or busy, set the price,
// so the cap did.
func (p *Pick) appendReserveNote(b []byte) []byte {
	if p.basis.gang > 1 {
		b = append(b, "no node left out could have taken a place in the gang, and no busy node of another provider scores as much as the worst winner within the cap"...)
	} else {
		b = append(b, "no other node could take the job, and no busy node of another provider scores as much as this one within the cap"...)
	}
	b = append(b, ", so the renter's cap is the reserve price: "...)
	b = appendMoney(b, p.basis.cap)
	b = append(b, "/GPU-h (ask "...)
	b = appendMoney(b, p.AskMicrosPerGPUHour)
	b = append(b, ", score "...)
	b = appendScore(b, p.Score)
	return append(b, ')')
}
