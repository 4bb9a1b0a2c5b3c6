package market

import (
	"math"
	"strconv"

	"github.com/idlegrid/idlegrid"
)

// The price notes are built with strconv rather than fmt: one is written
// for every pick, on the placement path.

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
// money rounded to the micro.
func appendScore(b []byte, s float64) []byte {
	return appendMoney(b, idlegrid.Micros(s+copysignHalf(s)))
}

func copysignHalf(s float64) float64 {
	if s < 0 {
		return -0.5
	}
	return 0.5
}

// appendScoreOf appends how a node's score is made:
// "ask $2.000000 ÷ 0.950^1" or "(ask $2.000000 − credit $0.250000) ÷ 0.950^1".
func appendScoreOf(b []byte, q *query, c *cand) []byte {
	if c.credit > 0 {
		b = append(b, "(ask "...)
		b = appendMoney(b, c.ask)
		b = append(b, " − locality credit "...)
		b = appendMoney(b, c.credit)
		b = append(b, ')')
	} else {
		b = append(b, "ask "...)
		b = appendMoney(b, c.ask)
	}
	b = append(b, " ÷ "...)
	return appendPow(b, c.nd.rel, q.w)
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

// secondScoreNote says how a second-score price was set.
// A busy runner-up is a shadow runner-up: the note names that basis.
func secondScoreNote(q *query, w, ru *cand, raw float64, price idlegrid.Micros, busy bool) string {
	b := q.e.note[:0]
	defer func() { q.e.note = b }()
	if q.n > 1 {
		b = append(b, "uniform clearing for "...)
		b = strconv.AppendInt(b, int64(q.n), 10)
		b = append(b, " nodes"...)
	} else {
		b = append(b, "second score"...)
	}
	if busy {
		b = append(b, " against a shadow runner-up"...)
	}
	b = append(b, ": this node scores "...)
	b = appendScore(b, w.score)
	b = append(b, " ("...)
	b = appendScoreOf(b, q, w)
	switch {
	case busy && q.n > 1:
		b = append(b, "); no node left out could have taken a place in the gang, and the best busy node of another provider scoring at least the worst winner, "...)
	case busy:
		b = append(b, "); no other node could take the job now, and the best busy node of another provider scoring at least this one, "...)
	case q.n > 1:
		b = append(b, "); the best node left out, "...)
	default:
		b = append(b, "); the runner-up, "...)
	}
	b = append(b, ru.nd.id...)
	b = append(b, ", scores "...)
	b = appendScore(b, ru.score)
	b = append(b, "; tying it takes "...)
	b = appendScore(b, ru.score)
	b = append(b, " × "...)
	b = appendPow(b, w.nd.rel, q.w)
	if w.credit > 0 {
		b = append(b, " + "...)
		b = appendMoney(b, w.credit)
	}
	b = append(b, " = "...)
	b = appendScore(b, raw)
	rounded := idlegrid.Micros(math.Round(raw))
	switch {
	case rounded < w.ask:
		b = append(b, ", raised to the ask: "...)
	case rounded > q.cap:
		b = append(b, ", held to the renter's cap: "...)
	default:
		b = append(b, ", between the ask "...)
		b = appendMoney(b, w.ask)
		b = append(b, " and the cap "...)
		b = appendMoney(b, q.cap)
		b = append(b, ": "...)
	}
	b = appendMoney(b, price)
	b = append(b, "/GPU-h"...)
	return string(b)
}

// reserveNote says that no competitor, free or busy, set the price, so the
// cap did.
func reserveNote(q *query, w *cand) string {
	b := q.e.note[:0]
	defer func() { q.e.note = b }()
	if q.n > 1 {
		b = append(b, "no node left out could have taken a place in the gang, and no busy node of another provider scores as much as the worst winner within the cap"...)
	} else {
		b = append(b, "no other node could take the job, and no busy node of another provider scores as much as this one within the cap"...)
	}
	b = append(b, ", so the renter's cap is the reserve price: "...)
	b = appendMoney(b, q.cap)
	b = append(b, "/GPU-h (ask "...)
	b = appendMoney(b, w.ask)
	b = append(b, ", score "...)
	b = appendScore(b, w.score)
	b = append(b, ')')
	return string(b)
}
