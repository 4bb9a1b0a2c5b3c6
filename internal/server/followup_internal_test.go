package server

import (
	"testing"
	"time"
)

// TestFollowUpWait: a failing follow-up waits twice as long after each
// failed try, from followUpDelay, and never more than maxFollowUpWait.
func TestFollowUpWait(t *testing.T) {
	for tries, want := range []time.Duration{2 * time.Minute, 4 * time.Minute, 8 * time.Minute, 16 * time.Minute,
		32 * time.Minute, time.Hour, time.Hour} {
		if got := followUpWait(tries); got != want {
			t.Errorf("followUpWait(%d) = %s, want %s", tries, got, want)
		}
	}
	if got := followUpWait(1000); got != maxFollowUpWait {
		t.Errorf("followUpWait(1000) = %s, want %s", got, maxFollowUpWait)
	}
}
