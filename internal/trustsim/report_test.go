package trustsim

import (
	"testing"
	"time"
)

// An honest provider flagged after its watched leases is still a false
// positive: the target bounds the honest providers flagged at all.
func TestReport_honestFlaggedAnyTime(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	w := &world{cfg: Config{Leases: 20}, clock: NewClock(start), start: start}
	for i, at := range []int{-1, -1, 3, 25} { // never, never, within 20 leases, after
		w.provs = append(w.provs, &provider{index: i, behaviour: Honest, flaggedAt: at, seen: 30})
	}
	r := w.report()
	row := r.Rows[0]
	if row.Flagged != 1 || row.FlaggedLater != 1 || r.HonestFlagged != 0.5 {
		t.Errorf("flagged %d, later %d, honest flagged %v; want 1, 1 and 0.5: two of four", row.Flagged, row.FlaggedLater, r.HonestFlagged)
	}
}
