package challenge_test

import (
	"strings"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/challenge"
)

// h100Challenge is a challenge to a GPU that claims to be an H100.
func h100Challenge(size int) *idlegrid.Challenge {
	spec, _ := challenge.LookupSpec("H100-80GB")
	lo, hi := spec.Band(size)
	return &idlegrid.Challenge{ID: "chl_1", Model: "H100-80GB", VRAMMB: 81920, Seed: testSeed, Size: size,
		MinNanos: int64(lo), MaxNanos: int64(hi)}
}

func TestJudge(t *testing.T) {
	const size = 64
	task := mustTask(t, size)
	hashes := mustRun(t, task)
	h100, _ := challenge.LookupSpec("H100-80GB")
	t4, _ := challenge.LookupSpec("T4")
	honest := func() *idlegrid.ChallengeAnswer {
		return &idlegrid.ChallengeAnswer{RowHashes: append([]byte(nil), hashes...), Digest: challenge.Digest(hashes),
			ElapsedNanos: int64(h100.Expected(size) * 12 / 10), VRAMMB: 79000}
	}
	allRows := make([]int, size)
	for i := range allRows {
		allRows[i] = i
	}
	tests := []struct {
		name    string
		claim   func(c *idlegrid.Challenge)
		answer  func(a *idlegrid.ChallengeAnswer)
		pass    bool
		finding string // in the findings
	}{
		{"Honest", nil, nil, true, "64 of 64 rows recomputed match"},
		{"SlowLikeAT4", nil, func(a *idlegrid.ChallengeAnswer) { a.ElapsedNanos = int64(t4.Expected(size)) }, false, "slower than the claimed GPU (performs like a T4)"},
		{"TooFast", nil, func(a *idlegrid.ChallengeAnswer) { a.ElapsedNanos = 1 }, false, "faster than the claimed GPU"},
		{"LessMemory", nil, func(a *idlegrid.ChallengeAnswer) { a.VRAMMB = 15000 }, false, "allocated 15000 MB of the 81920 MB claimed"},
		{"WrongRow", nil, func(a *idlegrid.ChallengeAnswer) {
			a.RowHashes[32*5] ^= 1
			a.Digest = challenge.Digest(a.RowHashes)
		}, false, "row 5 of the product is wrong"},
		{"DigestMismatch", nil, func(a *idlegrid.ChallengeAnswer) { a.Digest = strings.Repeat("0", 64) }, false, "does not match the row hashes"},
		{"Truncated", nil, func(a *idlegrid.ChallengeAnswer) { a.RowHashes = a.RowHashes[:32] }, false, "bytes of row hashes"},
		{"ClaimUnderSpec", func(c *idlegrid.Challenge) { c.VRAMMB = 24000 }, func(a *idlegrid.ChallengeAnswer) { a.VRAMMB = 23000 }, false, "a H100-80GB has 76294 MB"},
		{"NoSpecNoBand", func(c *idlegrid.Challenge) { c.Model, c.MinNanos, c.MaxNanos = "L40S", 0, 0 }, func(a *idlegrid.ChallengeAnswer) { a.ElapsedNanos = int64(time.Hour) }, true, "not judged: no spec for L40S"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, a := h100Challenge(size), honest()
			if tt.claim != nil {
				tt.claim(c)
			}
			if tt.answer != nil {
				tt.answer(a)
			}
			v := challenge.Judge(c, a, allRows)
			if v.Passed != tt.pass || !strings.Contains(strings.Join(v.Findings, "\n"), tt.finding) {
				t.Fatalf("Judge = %v, findings:\n%s\nwant %v and a finding with %q", v.Passed, strings.Join(v.Findings, "\n"), tt.pass, tt.finding)
			}
			if got := len(v.Failures) == 0; got != v.Passed {
				t.Fatalf("failures %q disagree with passed = %v", v.Failures, v.Passed)
			}
		})
	}
}

func TestSpec_Band(t *testing.T) {
	h100, _ := challenge.LookupSpec("H100-80GB")
	// 2·512³ = 268,435,456 flops at 66.91 TFLOPS: 4.012 µs.
	if got, want := h100.Expected(512), 4011*time.Nanosecond; got != want {
		t.Fatalf("Expected(512) = %v, want %v", got, want)
	}
	lo, hi := h100.Band(512)
	if lo != 2005*time.Nanosecond || hi != 8022*time.Nanosecond {
		t.Fatalf("Band(512) = %v–%v, want 2.005µs–8.022µs", lo, hi)
	}
}
