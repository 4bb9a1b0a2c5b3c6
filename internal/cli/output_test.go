package cli

import (
	"bytes"
	"testing"
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
