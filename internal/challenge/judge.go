package challenge

import (
	"bytes"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/idlegrid/idlegrid"
)

// VRAMShare is the share of its claimed memory a GPU must let the
// workload allocate: the driver and the context keep a little.
const VRAMShare = 0.9

// SpotRows is how many rows of the product the coordinator recomputes. A
// node that computed a share f of the rows right passes with probability
// f^SpotRows: 0.4% for half the rows.
const SpotRows = 8

// Verdict is the judge's word on an answer.
type Verdict struct {
	Passed   bool
	Findings []string // one per check, in words
	Failures []string // the findings of the checks that failed
}

// Judge checks an answer to c: the shape and digest of the row hashes,
// the rows picked (after the answer arrived, by the caller), the time
// against c's band and the memory against c's claim.
func Judge(c *idlegrid.Challenge, a *idlegrid.ChallengeAnswer, rows []int) Verdict {
	v := Verdict{Passed: true}
	note := func(pass bool, format string, args ...any) {
		f := fmt.Sprintf(format, args...)
		v.Findings = append(v.Findings, f)
		if !pass {
			v.Passed = false
			v.Failures = append(v.Failures, f)
		}
	}
	t, err := TaskOf(c)
	if err != nil {
		note(false, "task: %v", err)
		return v
	}
	note(checkResult(t, a, rows))
	if c.MaxNanos > 0 {
		d := time.Duration(a.ElapsedNanos)
		lo, hi := time.Duration(c.MinNanos), time.Duration(c.MaxNanos)
		switch {
		case d < lo:
			note(false, "time: %s is under %s–%s expected of a %s at N=%d: faster than the claimed GPU (%s)", d, lo, hi, c.Model, c.Size, resembles(c.Size, d))
		case d > hi:
			note(false, "time: %s is over %s–%s expected of a %s at N=%d: slower than the claimed GPU (%s)", d, lo, hi, c.Model, c.Size, resembles(c.Size, d))
		default:
			note(true, "time: %s within %s–%s expected of a %s at N=%d", d, lo, hi, c.Model, c.Size)
		}
	} else {
		note(true, "time: %s, not judged: no spec for %s", time.Duration(a.ElapsedNanos), c.Model)
	}
	need := int(math.Ceil(VRAMShare * float64(c.VRAMMB)))
	if a.VRAMMB < need {
		note(false, "memory: allocated %d MB of the %d MB claimed, under the %d MB (%.0f%%) required", a.VRAMMB, c.VRAMMB, need, VRAMShare*100)
	} else {
		note(true, "memory: allocated %d MB of the %d MB claimed", a.VRAMMB, c.VRAMMB)
	}
	if s, found := LookupSpec(c.Model); found && s.VRAMMB > 0 && float64(c.VRAMMB) < VRAMShare*float64(s.VRAMMB) {
		note(false, "claim: a %s has %d MB, the node claims %d MB", c.Model, s.VRAMMB, c.VRAMMB)
	}
	return v
}

func checkResult(t Task, a *idlegrid.ChallengeAnswer, rows []int) (bool, string) {
	if len(a.RowHashes) != 32*t.Size {
		return false, fmt.Sprintf("result: %d bytes of row hashes, want %d (%v)", len(a.RowHashes), 32*t.Size, ErrRowHashes)
	}
	if got := Digest(a.RowHashes); got != a.Digest {
		return false, fmt.Sprintf("result: digest %s does not match the row hashes (%s)", a.Digest, got)
	}
	for _, i := range rows {
		want := t.RowHash(i, t.Row(i))
		if !bytes.Equal(a.RowHashes[32*i:32*i+32], want[:]) {
			return false, fmt.Sprintf("result: row %d of the product is wrong (digest %s)", i, a.Digest)
		}
	}
	return true, fmt.Sprintf("result: %d of %d rows recomputed match (digest %s)", len(rows), len(rows), a.Digest)
}

// resembles names the known model whose peak time for size n is nearest
// to d, as a hint in the evidence.
func resembles(n int, d time.Duration) string {
	type cand struct {
		model string
		ratio float64
	}
	var cs []cand
	for _, s := range specs {
		if e := s.Expected(n); e > 0 && d > 0 {
			cs = append(cs, cand{s.Model, math.Abs(math.Log(float64(d) / float64(e)))})
		}
	}
	if len(cs) == 0 {
		return "no model fits"
	}
	sort.Slice(cs, func(i, j int) bool {
		if cs[i].ratio != cs[j].ratio {
			return cs[i].ratio < cs[j].ratio
		}
		return cs[i].model < cs[j].model
	})
	return "performs like a " + cs[0].model
}
