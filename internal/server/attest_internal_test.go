package server

import (
	"strings"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
)

// TestValidAnswer: a challenge answer the coordinator cannot judge is
// refused as invalid, naming the field, rather than judged wrong (which
// would quarantine the node for an agent's mistake).
func TestValidAnswer(t *testing.T) {
	digest := strings.Repeat("ab", 32)
	ok := idlegrid.ChallengeAnswer{Digest: digest, ElapsedNanos: 1, VRAMMB: 1024, RowHashes: make([]byte, 64)}
	for _, tt := range []struct {
		name  string
		edit  func(a *idlegrid.ChallengeAnswer)
		field string // "" for valid
	}{
		{"whole", func(*idlegrid.ChallengeAnswer) {}, ""},
		{"unsupported, with a reason", func(a *idlegrid.ChallengeAnswer) { *a = idlegrid.ChallengeAnswer{Unsupported: "no CUDA"} }, ""},
		{"unsupported, at length", func(a *idlegrid.ChallengeAnswer) {
			*a = idlegrid.ChallengeAnswer{Unsupported: strings.Repeat("x", 501)}
		}, "answer.unsupported"},
		{"no digest", func(a *idlegrid.ChallengeAnswer) { a.Digest = "" }, "answer.digest"},
		{"a digest in capitals", func(a *idlegrid.ChallengeAnswer) { a.Digest = strings.ToUpper(digest) }, "answer.digest"},
		{"a digest not hex", func(a *idlegrid.ChallengeAnswer) { a.Digest = strings.Repeat("zz", 32) }, "answer.digest"},
		{"no time", func(a *idlegrid.ChallengeAnswer) { a.ElapsedNanos = 0 }, "answer.elapsed_nanos"},
		{"negative memory", func(a *idlegrid.ChallengeAnswer) { a.VRAMMB = -1 }, "answer.vram_mb"},
		{"a row hash cut short", func(a *idlegrid.ChallengeAnswer) { a.RowHashes = make([]byte, 33) }, "answer.row_hashes"},
		{"too many rows", func(a *idlegrid.ChallengeAnswer) { a.RowHashes = make([]byte, 32*(maxChallengeSize+1)) }, "answer.row_hashes"},
	} {
		a := ok
		tt.edit(&a)
		err := validAnswer(&a)
		switch {
		case tt.field == "" && err != nil:
			t.Errorf("%s: %v, want valid", tt.name, err)
		case tt.field != "" && (idlegrid.ErrorCode(err) != idlegrid.EINVALID || !strings.Contains(err.Error(), tt.field)):
			t.Errorf("%s: %v, want invalid naming %s", tt.name, err, tt.field)
		}
	}
}

func TestDays(t *testing.T) {
	for d, want := range map[time.Duration]string{
		time.Hour: "1 hour", 36 * time.Hour: "36 hours", 90 * time.Minute: "1.5 hours",
		48 * time.Hour: "2 days", 30 * 24 * time.Hour: "30 days", 50 * time.Hour: "2 days",
	} {
		if got := days(d); got != want {
			t.Errorf("days(%s) = %q, want %q", d, got, want)
		}
	}
}
