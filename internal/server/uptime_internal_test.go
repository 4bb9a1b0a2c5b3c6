package server

import (
	"slices"
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
)

func TestNextLook(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	window := func(start, end time.Duration) idlegrid.Schedule {
		return idlegrid.Schedule{Mode: idlegrid.ScheduleWindows, OneOff: []idlegrid.OneOffWindow{{Start: now.Add(start), End: now.Add(end)}}}
	}
	always := idlegrid.Schedule{Mode: idlegrid.ScheduleAlways}
	const id = "node_1"
	capped := now.Add(lookEvery/2 + spread(id, lookEvery/2)) // the look for decay
	for _, tc := range []struct {
		name string
		sc   idlegrid.Schedule
		from time.Time
		want time.Time
	}{
		{"a window ends before the look for decay", window(time.Minute, 3*time.Minute), now, now.Add(3 * time.Minute)},
		{"a window open now", window(-time.Hour, 2*time.Minute), now.Add(-time.Hour), now.Add(2 * time.Minute)},
		{"a window ending now: the next pass", window(-20*time.Minute, 0), now.Add(-20 * time.Minute), now},
		{"a window after the look for decay", window(2*time.Hour, 3*time.Hour), now, capped},
		{"no window", idlegrid.Schedule{Mode: idlegrid.ScheduleWindows}, now, capped},
		{"always, a day measured soon", always, now.Add(-24*time.Hour + 2*time.Minute), now.Add(2 * time.Minute)},
		{"always, measured lately", always, now.Add(-time.Hour), capped},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := nextLook(&tc.sc, tc.from, now, id); !got.Equal(tc.want) {
				t.Errorf("nextLook = %s, want %s", got.Format(time.TimeOnly), tc.want.Format(time.TimeOnly))
			}
		})
	}
	if capped.Before(now.Add(lookEvery/2)) || !capped.Before(now.Add(lookEvery)) {
		t.Errorf("the look for decay is %s after now, want within [%s, %s)", capped.Sub(now), lookEvery/2, lookEvery)
	}
}

func TestUptimeDue(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	s := &Server{trust: trust{uptime: map[string]*uptimeTrack{}}}
	online := map[string]time.Time{"a": now, "b": now, "c": now}
	s.uptimeDue(online, now)
	for id, tr := range s.trust.uptime {
		if !tr.since.Equal(now) || tr.due.Before(now) || !tr.due.Before(now.Add(lookEvery/2)) {
			t.Errorf("%s: since %s, first look %s after now; want since now, a first look within %s", id, tr.since, tr.due.Sub(now), lookEvery/2)
		}
	}
	s.trust.uptime["a"].due = now.Add(-time.Second)
	s.trust.uptime["b"].due = now.Add(time.Hour)
	s.trust.uptime["c"].due = now.Add(time.Hour)
	delete(online, "c") // lost, or said goodbye
	if got, want := s.uptimeDue(online, now), []string{"a", "c"}; !slices.Equal(got, want) {
		t.Errorf("due = %v, want %v: a's look is due, c left the online nodes", got, want)
	}
	if tr := s.trust.uptime["c"]; !tr.away || !tr.since.Equal(now) {
		t.Errorf("c = %+v, want away and still watched since it came", tr)
	}
	online["c"] = now.Add(time.Minute) // back before its look
	s.trust.uptime["c"].due = now.Add(time.Hour)
	if got := s.uptimeDue(online, now.Add(time.Minute)); !slices.Equal(got, []string{"a"}) {
		t.Errorf("due = %v, want [a]", got)
	}
	if s.trust.uptime["c"].away {
		t.Error("c is back online but still away")
	}
}
