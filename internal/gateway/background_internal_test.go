package gateway

import (
	"context"
	"testing"
	"time"
)

// TestBackgroundRuns: each run's context ends when it is cancelled (the
// renter's cancel), at its deadline, or when the runs close, with the
// cause; close waits for every run, and no run starts after.
func TestBackgroundRuns(t *testing.T) {
	var b backgroundRuns
	causes := make(chan error, 3)
	run := func(ctx context.Context) {
		<-ctx.Done()
		causes <- context.Cause(ctx)
	}
	for _, id := range []string{"a", "b", "c"} {
		deadline := time.Hour
		if id == "c" {
			deadline = time.Millisecond
		}
		if !b.start(id, deadline, run) {
			t.Fatalf("start %s: refused", id)
		}
	}
	if got := <-causes; got != context.DeadlineExceeded {
		t.Errorf("the run past its deadline ended for %v", got)
	}
	if !b.cancel("a", time.Minute) || <-causes != errCancelled || b.runs("a") {
		t.Error("cancel a: want it cancelled by the renter, and gone")
	}
	if b.cancel("nope", time.Minute) {
		t.Error("cancel of a run that is not here: true")
	}
	b.close()
	if got := <-causes; got != errGatewayClosed || b.runs("b") {
		t.Errorf("close: b ended for %v; want the server stopping, and b gone", got)
	}
	if b.start("d", time.Hour, run) {
		t.Error("a run started after close")
	}
}
