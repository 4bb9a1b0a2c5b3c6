package agent

import (
	"fmt"
	"testing"

	"github.com/idlegrid/idlegrid"
	"github.com/idlegrid/idlegrid/internal/runtime"
)

// TestLease_linesDropped: a lease keeps at most maxBufferedLines unsent
// lines; later ones are dropped, and the log says how many where it
// resumes: before the next line there is room for, or, when the workload
// has exited, at the end. Lines are numbered as sent, the note among them.
func TestLease_linesDropped(t *testing.T) {
	l := newLease(runtime.Workload{LeaseID: "lease_a"}, idlegrid.SystemClock{})
	say := func(n int, what string) {
		for i := range n {
			l.take(runtime.Event{Log: &idlegrid.LogLine{Text: fmt.Sprintf("%s %d", what, i)}})
		}
	}
	say(maxBufferedLines+5, "flood") // the server cannot take them
	if got := l.batch(2 * maxBufferedLines); len(got) != maxBufferedLines || got[len(got)-1].Seq != maxBufferedLines {
		t.Fatalf("the first batch: %d lines, want the %d kept", len(got), maxBufferedLines)
	}
	say(1, "after")
	got := l.batch(10)
	want := []string{"[idlegrid agent: 5 lines dropped while the server could not take them]", "after 0"}
	if len(got) != 2 || got[0].Text != want[0] || got[1].Text != want[1] || got[0].Seq != maxBufferedLines+1 || got[1].Seq != maxBufferedLines+2 {
		t.Fatalf("the lines once there was room: %+v, want %q numbered on", got, want)
	}
	if got[0].Stream != "stderr" {
		t.Errorf("the note is on %s, want stderr", got[0].Stream)
	}

	say(maxBufferedLines+3, "again")
	l.take(runtime.Event{Exit: &runtime.Exit{Code: 0}})
	if got := l.batch(2 * maxBufferedLines); len(got) != maxBufferedLines {
		t.Fatalf("the second flood's batch: %d lines, want %d", len(got), maxBufferedLines)
	}
	got = l.batch(10)
	if len(got) != 1 || got[0].Text != "[idlegrid agent: 3 lines dropped while the server could not take them]" {
		t.Fatalf("after the exit, with nothing left to send: %+v, want the note of the 3 dropped", got)
	}
	if again := l.batch(10); len(again) != 0 {
		t.Errorf("a batch after the note: %+v, want none", again)
	}
}
