package market

import (
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
)

// TestMultiplierAt_days: a price window applies on the days it starts
// on, named in any case, an overnight one past midnight into the next
// day; the first window that holds t sets the multiplier; the next change
// is the soonest bound of any window.
func TestMultiplierAt_days(t *testing.T) {
	ws := []idlegrid.PriceWindow{
		{Days: []string{"fri"}, Start: "22:00", End: "06:00", MultiplierPercent: 150},
		{Days: []string{"Sat", "SUN"}, Start: "10:00", End: "18:00", MultiplierPercent: 80},
		{Start: "09:00", End: "17:00", MultiplierPercent: 120}, // every day
	}
	at := func(day, hour int) time.Time { return time.Date(2025, 3, day, hour, 0, 0, 0, time.UTC) } // 10 March 2025 is a Monday
	for _, tt := range []struct {
		name string
		t    time.Time
		pct  int64
		next time.Time
	}{
		{"a weekday's daytime", at(10, 10), 120, at(10, 17)},
		{"a Thursday night", at(13, 23), 100, at(14, 9)},
		{"a Friday night", at(14, 23), 150, at(15, 6)},
		{"past midnight into Saturday", at(15, 3), 150, at(15, 6)},
		{"a Saturday morning", at(15, 8), 100, at(15, 9)},
		{"a Saturday's daytime: the first window that holds it", at(15, 12), 80, at(15, 17)},
		{"a Sunday evening", at(16, 17), 80, at(16, 18)},
	} {
		pct, next := multiplierAt(ws, time.UTC, tt.t)
		if pct != tt.pct || !next.Equal(tt.next) {
			t.Errorf("%s (%s): %d%%, next change %s; want %d%%, next %s", tt.name, tt.t.Format("Mon 15:04"), pct, next.Format("Mon 15:04"), tt.pct, tt.next.Format("Mon 15:04"))
		}
	}
}
