package market

import (
	"testing"
	"time"
)

// The index's whole-second times must keep every date a clock may give,
// from the unix epoch on: a time that rounds to 0 reads as "none", and a
// bronze lease so read could never be preempted.
func TestIndexSeconds(t *testing.T) {
	for _, at := range []time.Time{
		time.Unix(0, 0),
		time.Date(2000, 1, 1, 0, 0, 5, 0, time.UTC), // the server tests' fake clock
		time.Date(2026, 11, 30, 12, 0, 0, 500, time.UTC),
		time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC),
	} {
		ns := at.UnixNano()
		up, down := secUp(ns), secDown(ns)
		if up == 0 || down == 0 {
			t.Errorf("%s: secUp %d, secDown %d; want both above 0", at, up, down)
		}
		if secNanos(down) > ns || secNanos(up) < ns {
			t.Errorf("%s: [%d, %d] does not bound it", at, secNanos(down), secNanos(up))
		}
	}
}
