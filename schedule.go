package idlegrid

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// ScheduleMode says how a node decides when it is offered.
type ScheduleMode string

const (
	// ScheduleAlways offers the node around the clock.
	ScheduleAlways ScheduleMode = "always"
	// ScheduleWindows offers the node only inside its weekly and one-off windows.
	ScheduleWindows ScheduleMode = "windows"
)

// Schedule is when a node is offered: weekly recurring windows in the node's
// time zone, plus one-off windows.
type Schedule struct {
	Mode     ScheduleMode   `json:"mode"`
	TimeZone string         `json:"time_zone,omitempty"` // IANA name; empty means UTC
	Weekly   []WeeklyWindow `json:"weekly,omitempty"`
	OneOff   []OneOffWindow `json:"one_off,omitempty"`
}

// WeeklyWindow recurs on the given days from Start to End, local time
// ("HH:MM"). An End at or before Start runs past midnight into the next day;
// "00:00"-"00:00" is the whole day.
type WeeklyWindow struct {
	Days  []string `json:"days"` // "mon".."sun"
	Start string   `json:"start"`
	End   string   `json:"end"`
}

// OneOffWindow is a single span of availability.
type OneOffWindow struct {
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
}

// MaxScheduleWindows bounds each list of windows: a schedule's weekly
// and one-off windows, an ask's time-of-day windows. The market reads
// every node's windows as it places jobs; a year of daily one-off
// windows fits.
const MaxScheduleWindows = 512

// WindowHorizon caps how far ahead availability is computed. A node offered
// always is treated as available for this long from now.
const WindowHorizon = 30 * 24 * time.Hour

var weekdays = map[string]time.Weekday{
	"sun": time.Sunday, "mon": time.Monday, "tue": time.Tuesday, "wed": time.Wednesday,
	"thu": time.Thursday, "fri": time.Friday, "sat": time.Saturday,
}

// Validate checks a schedule, naming fields under prefix; it reports
// every field at fault (Faults).
func (s *Schedule) Validate(prefix string) error {
	var f Faults
	if s.Mode != ScheduleAlways && s.Mode != ScheduleWindows {
		f.Add(prefix+".mode", "must be always or windows, got %q", s.Mode)
	}
	if _, err := s.location(); err != nil {
		f.Add(prefix+".time_zone", "unknown time zone %q", s.TimeZone)
	}
	f.Check(len(s.Weekly) <= MaxScheduleWindows, prefix+".weekly", "at most %d windows, got %d", MaxScheduleWindows, len(s.Weekly))
	f.Check(len(s.OneOff) <= MaxScheduleWindows, prefix+".one_off", "at most %d windows, got %d", MaxScheduleWindows, len(s.OneOff))
	for i, w := range s.Weekly {
		f.Also(w.validate(fmt.Sprintf("%s.weekly[%d]", prefix, i), true))
	}
	for i, w := range s.OneOff {
		f.Check(w.End.After(w.Start), fmt.Sprintf("%s.one_off[%d].end", prefix, i), "must be after start")
	}
	f.Check(s.Mode != ScheduleWindows || len(s.Weekly) > 0 || len(s.OneOff) > 0, prefix+".weekly", "mode windows needs at least one weekly or one-off window")
	return f.Err()
}

// validate checks a weekly window, naming fields under at. Days may be
// empty (meaning every day) only when needDays is false.
func (w WeeklyWindow) validate(at string, needDays bool) error {
	var f Faults
	f.Check(!needDays || len(w.Days) > 0, at+".days", "name at least one day, e.g. [sat, sun]")
	for _, d := range w.Days {
		if _, ok := weekdays[strings.ToLower(d)]; !ok {
			f.Add(at+".days", "unknown day %q; use mon, tue, wed, thu, fri, sat, sun", d)
			break
		}
	}
	if _, err := parseClock(w.Start); err != nil {
		f.Add(at+".start", "%v", err)
	}
	if _, err := parseClock(w.End); err != nil {
		f.Add(at+".end", "%v", err)
	}
	return f.Err()
}

func (s *Schedule) location() (*time.Location, error) {
	if s.TimeZone == "" {
		return time.UTC, nil
	}
	if loc, ok := locations.Load(s.TimeZone); ok {
		return loc.(*time.Location), nil
	}
	loc, err := time.LoadLocation(s.TimeZone)
	if err != nil {
		return nil, err
	}
	locations.Store(s.TimeZone, loc)
	return loc, nil
}

// locations caches the time zones schedules have named: time.LoadLocation
// reads the zone database on every call, and a window boundary asks for
// the zones of thousands of nodes at once. Only zones that loaded are kept,
// so a bad name in a request cannot grow it.
var locations sync.Map // zone name → *time.Location

// parseClock parses "HH:MM" into minutes after midnight.
func parseClock(v string) (int, error) {
	if len(v) != 5 || v[2] != ':' {
		return 0, fmt.Errorf("must be HH:MM, got %q", v)
	}
	for _, i := range []int{0, 1, 3, 4} {
		if v[i] < '0' || v[i] > '9' {
			return 0, fmt.Errorf("must be HH:MM between 00:00 and 23:59, got %q", v)
		}
	}
	h, m := int(v[0]-'0')*10+int(v[1]-'0'), int(v[3]-'0')*10+int(v[4]-'0')
	if h > 23 || m > 59 {
		return 0, fmt.Errorf("must be HH:MM between 00:00 and 23:59, got %q", v)
	}
	return h*60 + m, nil
}

// AvailableUntil returns the end of the span of availability that contains
// now, merging windows that touch or overlap, capped at now+WindowHorizon.
// It returns the zero time when the node is not available at now.
//
// It reads a few days first and the whole horizon only when the span runs
// past them: a span that ends before the days read is exact, since every
// window that could extend it starts before its end and so was read.
func (s *Schedule) AvailableUntil(now time.Time) time.Time {
	limit := now.Add(WindowHorizon)
	if s.Mode == ScheduleAlways {
		return limit
	}
	if near := now.Add(nearDays); near.Before(limit) {
		if end := s.spanEnd(now, near); end.Before(near) {
			return end
		}
	}
	if end := s.spanEnd(now, limit); end.Before(limit) {
		return end
	}
	return limit
}

// nearDays is how far AvailableUntil and NextOpening read before the
// whole horizon: most windows end or open within it.
const nearDays = 3 * 24 * time.Hour

// spanEnd is the end of the merged span containing now among the windows
// that intersect [now-48h, to), or the zero time when none contains now.
func (s *Schedule) spanEnd(now, to time.Time) time.Time {
	end := time.Time{}
	for _, sp := range s.spans(now.Add(-48*time.Hour), to) { // sorted by start; extend while contiguous
		if end.IsZero() {
			if !sp.Start.After(now) && sp.End.After(now) {
				end = sp.End
			}
		} else if !sp.Start.After(end) && sp.End.After(end) {
			end = sp.End
		}
	}
	return end
}

// NextOpening returns the start of the next window after now, or the zero
// time when none opens within the horizon. Like AvailableUntil it reads a
// few days first: every window opening in them was read, so the first
// found there is the first.
func (s *Schedule) NextOpening(now time.Time) time.Time {
	if s.Mode == ScheduleAlways {
		return now
	}
	if o := s.firstOpening(now, now.Add(nearDays)); !o.IsZero() {
		return o
	}
	return s.firstOpening(now, now.Add(WindowHorizon))
}

func (s *Schedule) firstOpening(now, to time.Time) time.Time {
	for _, sp := range s.spans(now, to) {
		if sp.Start.After(now) {
			return sp.Start
		}
	}
	return time.Time{}
}

// spans lists every window span that intersects [from, to), sorted by start.
func (s *Schedule) spans(from, to time.Time) []OneOffWindow {
	loc, err := s.location()
	if err != nil {
		loc = time.UTC
	}
	weekly := s.compiledWeekly()
	days := int(to.Sub(from)/(24*time.Hour)) + 3
	out := make([]OneOffWindow, 0, len(s.OneOff)+days*len(weekly))
	for _, w := range s.OneOff {
		if w.End.After(from) && w.Start.Before(to) {
			out = append(out, w)
		}
	}
	// Step by calendar date, not from one midnight to the next: where DST
	// starts at midnight (America/Santiago), that midnight does not exist
	// and time.Date normalizes it back into the day before.
	y, mo, d := from.In(loc).Date()
	for i := -1; time.Date(y, mo, d+i, 0, 0, 0, 0, loc).Before(to); i++ {
		weekday := time.Date(y, mo, d+i, 12, 0, 0, 0, loc).Weekday() // noon always exists
		for _, w := range weekly {
			if w.days&(1<<weekday) == 0 {
				continue
			}
			sp := OneOffWindow{
				Start: time.Date(y, mo, d+i, 0, w.start, 0, 0, loc),
				End:   time.Date(y, mo, d+i, 0, w.end, 0, 0, loc),
			}
			if sp.End.After(from) && sp.Start.Before(to) {
				out = append(out, sp)
			}
		}
	}
	slices.SortFunc(out, func(a, b OneOffWindow) int { return a.Start.Compare(b.Start) })
	return out
}

// weeklyWindow is a WeeklyWindow read once: a bit per weekday and its
// minutes after midnight, the end past the start.
type weeklyWindow struct {
	days       uint8
	start, end int
}

func (s *Schedule) compiledWeekly() []weeklyWindow {
	out := make([]weeklyWindow, 0, len(s.Weekly))
	for _, w := range s.Weekly {
		c := weeklyWindow{}
		for d := time.Sunday; d <= time.Saturday; d++ {
			if w.on(d) {
				c.days |= 1 << d
			}
		}
		c.start, _ = parseClock(w.Start)
		c.end, _ = parseClock(w.End)
		if c.end <= c.start {
			c.end += 24 * 60
		}
		out = append(out, c)
	}
	return out
}

func (w WeeklyWindow) on(d time.Weekday) bool {
	for _, name := range w.Days {
		if weekdays[strings.ToLower(name)] == d {
			return true
		}
	}
	return false
}
