package market

import (
	"strings"
	"time"

	"github.com/idlegrid/idlegrid"
)

// multiplierAt returns the time-of-day multiplier, in percent, that an ask's
// price windows set at t in loc, and the next moment after t at which it may
// change (the zero time when it never does). The first window containing t
// applies; a window's days are the days it starts on; without windows the
// multiplier is 100.
func multiplierAt(ws []idlegrid.PriceWindow, loc *time.Location, t time.Time) (int64, time.Time) {
	if len(ws) == 0 {
		return 100, time.Time{}
	}
	lt := t.In(loc)
	y, m, d := lt.Date()
	pct, found := int64(100), false
	var next time.Time
	for _, w := range ws {
		start, ok1 := clockMinutes(w.Start)
		end, ok2 := clockMinutes(w.End)
		if !ok1 || !ok2 {
			continue
		}
		if end <= start {
			end += 24 * 60
		}
		// A week and a day ahead covers every window whatever its days.
		for off := -1; off <= 8; off++ {
			if !onDay(w.Days, time.Date(y, m, d+off, 12, 0, 0, 0, loc).Weekday()) {
				continue
			}
			s := time.Date(y, m, d+off, 0, start, 0, 0, loc)
			e := time.Date(y, m, d+off, 0, end, 0, 0, loc)
			if !found && !s.After(t) && t.Before(e) {
				pct, found = w.MultiplierPercent, true
			}
			for _, b := range [2]time.Time{s, e} {
				if b.After(t) && (next.IsZero() || b.Before(next)) {
					next = b
				}
			}
		}
	}
	return pct, next
}

// clockMinutes parses "HH:MM" into minutes after midnight.
func clockMinutes(v string) (int, bool) {
	if len(v) != 5 || v[2] != ':' {
		return 0, false
	}
	for _, i := range []int{0, 1, 3, 4} {
		if v[i] < '0' || v[i] > '9' {
			return 0, false
		}
	}
	h, m := int(v[0]-'0')*10+int(v[1]-'0'), int(v[3]-'0')*10+int(v[4]-'0')
	return h*60 + m, h <= 23 && m <= 59
}

var dayNames = map[string]time.Weekday{
	"sun": time.Sunday, "mon": time.Monday, "tue": time.Tuesday, "wed": time.Wednesday,
	"thu": time.Thursday, "fri": time.Friday, "sat": time.Saturday,
}

// onDay reports whether a window on days applies on wd; no days means every day.
func onDay(days []string, wd time.Weekday) bool {
	if len(days) == 0 {
		return true
	}
	for _, name := range days {
		if d, ok := dayNames[strings.ToLower(name)]; ok && d == wd {
			return true
		}
	}
	return false
}

// askAt is nd's ask for tier ti at t (unix nanos), as its time-of-day
// price windows scale its floor then; without windows, its ask now.
func (nd *node) askAt(ti int, t int64) idlegrid.Micros {
	if len(nd.n.Ask.TimeOfDay) == 0 {
		return nd.asks[ti]
	}
	pct, _ := multiplierAt(nd.n.Ask.TimeOfDay, nd.loc, timeOf(t))
	return nd.floors[ti] * idlegrid.Micros(pct) / 100
}
