package cli

import (
	"bytes"
	"testing"

	"github.com/idlegrid/idlegrid"
)

// TestTable_controlCharacters: a cell's control characters are written
// as escapes, so that what others wrote (a job's name from an older
// server) neither breaks the rows nor colours the terminal.
func TestTable_controlCharacters(t *testing.T) {
	var b bytes.Buffer
	tb := newTable(&b, "ID", "NAME", "STATE")
	tb.row("job_1", "x\x1b[31mRED\nnewline", "queued")
	tb.row("job_2", "tab\there\r\x00\u0085", "running")
	tb.row("job_3", "müller-ü", "failed")
	if err := tb.flush(); err != nil {
		t.Fatal(err)
	}
	want := "ID     NAME                   STATE\n" +
		`job_1  x\x1b[31mRED\nnewline  queued` + "\n" +
		`job_2  tab\there\r\x00\u0085  running` + "\n" +
		"job_3  müller-ü               failed\n"
	if got := b.String(); got != want {
		t.Errorf("table:\n%s\nwant:\n%s", got, want)
	}
}

// TestPerMTokens_largeMonth: a statement's price per million tokens is
// exact for a month whose charges times a million are beyond int64: a
// renter charged $15,000,000 for 1e12 tokens paid $15 per million, not
// a wrapped negative amount.
func TestPerMTokens_largeMonth(t *testing.T) {
	for _, tt := range []struct {
		charged idlegrid.Micros
		tokens  int64
		want    string
	}{
		{15_000_000_000_000, 1_000_000_000_000, "$15.000000/M tokens"},
		{1_500_000, 1_000_000, "$1.500000/M tokens"},
		{1, 3, "$0.333333/M tokens"}, // rounded down
		{5, 0, "-"},
	} {
		if got := perMTokens(tt.charged, tt.tokens); got != tt.want {
			t.Errorf("perMTokens(%d, %d) = %q, want %q", tt.charged, tt.tokens, got, tt.want)
		}
	}
}
