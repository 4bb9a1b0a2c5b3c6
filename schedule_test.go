package idlegrid_test

import (
	"testing"
	"time"
	_ "time/tzdata" // the zones below, whatever the machine has installed

	"github.com/idlegrid/idlegrid"
)

// mustParse parses an RFC 3339 time.
func mustParse(tb testing.TB, v string) time.Time {
	tb.Helper()
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		tb.Fatal(err)
	}
	return t
}

func weekly(tz string, windows ...idlegrid.WeeklyWindow) idlegrid.Schedule {
	return idlegrid.Schedule{Mode: idlegrid.ScheduleWindows, TimeZone: tz, Weekly: windows}
}

func window(start, end string, days ...string) idlegrid.WeeklyWindow {
	return idlegrid.WeeklyWindow{Days: days, Start: start, End: end}
}

// In March 2025, the 10th is a Monday. Europe/Berlin springs forward on
// Sunday 30 March 02:00 and falls back on Sunday 26 October 03:00;
// America/New_York springs forward on Sunday 9 March.

func TestSchedule_AvailableUntil(t *testing.T) {
	mon9to5 := weekly("", window("09:00", "17:00", "mon"))
	fri22to2 := weekly("", window("22:00", "02:00", "fri"))
	tests := []struct {
		name     string
		schedule idlegrid.Schedule
		now      string
		want     string // "" means not available
	}{
		{"always: the horizon", idlegrid.Schedule{Mode: idlegrid.ScheduleAlways}, "2025-03-10T10:00:00Z", "2025-04-09T10:00:00Z"},
		{"inside a window", mon9to5, "2025-03-10T10:00:00Z", "2025-03-10T17:00:00Z"},
		{"at the start", mon9to5, "2025-03-10T09:00:00Z", "2025-03-10T17:00:00Z"},
		{"a minute before", mon9to5, "2025-03-10T08:59:00Z", ""},
		{"at the end", mon9to5, "2025-03-10T17:00:00Z", ""},
		{"other day", mon9to5, "2025-03-11T10:00:00Z", ""},
		{"day names ignore case", weekly("", window("09:00", "17:00", "MON")), "2025-03-10T10:00:00Z", "2025-03-10T17:00:00Z"},
		{"before midnight", fri22to2, "2025-03-14T23:00:00Z", "2025-03-15T02:00:00Z"},
		{"after midnight", fri22to2, "2025-03-15T01:00:00Z", "2025-03-15T02:00:00Z"},
		{"after it ended", fri22to2, "2025-03-15T02:00:00Z", ""},
		{"sunday night into monday", weekly("", window("22:00", "06:00", "sun")), "2025-03-10T03:00:00Z", "2025-03-10T06:00:00Z"},
		{"whole day", weekly("", window("00:00", "00:00", "mon")), "2025-03-10T12:00:00Z", "2025-03-11T00:00:00Z"},
		{
			"adjacent days merge",
			weekly("", window("00:00", "00:00", "mon"), window("00:00", "12:00", "tue")),
			"2025-03-10T10:00:00Z", "2025-03-11T12:00:00Z",
		},
		{
			"overlapping windows merge",
			weekly("", window("08:00", "12:00", "mon"), window("11:00", "18:00", "mon")),
			"2025-03-10T09:00:00Z", "2025-03-10T18:00:00Z",
		},
		{
			"later window starting inside merges",
			weekly("", window("11:00", "18:00", "mon"), window("08:00", "12:00", "mon")),
			"2025-03-10T11:30:00Z", "2025-03-10T18:00:00Z",
		},
		{
			"a minute's gap does not merge",
			weekly("", window("08:00", "12:00", "mon"), window("12:01", "18:00", "mon")),
			"2025-03-10T09:00:00Z", "2025-03-10T12:00:00Z",
		},
		{
			"a window inside another does not shorten it",
			weekly("", window("08:00", "18:00", "mon"), window("10:00", "11:00", "mon")),
			"2025-03-10T10:30:00Z", "2025-03-10T18:00:00Z",
		},
		{
			"every day, all day: the horizon",
			weekly("", window("00:00", "00:00", "mon", "tue", "wed", "thu", "fri", "sat", "sun")),
			"2025-03-10T10:00:00Z", "2025-04-09T10:00:00Z",
		},
		{
			"weekly then a touching one-off",
			idlegrid.Schedule{
				Mode:   idlegrid.ScheduleWindows,
				Weekly: []idlegrid.WeeklyWindow{window("08:00", "12:00", "mon")},
				OneOff: []idlegrid.OneOffWindow{{Start: mustParse(t, "2025-03-10T12:00:00Z"), End: mustParse(t, "2025-03-10T15:00:00Z")}},
			},
			"2025-03-10T09:00:00Z", "2025-03-10T15:00:00Z",
		},
		{"berlin office hours", weekly("Europe/Berlin", window("09:00", "17:00", "mon")), "2025-03-10T08:30:00Z", "2025-03-10T16:00:00Z"},
		{"new york after its DST change", weekly("America/New_York", window("09:00", "17:00", "mon")), "2025-03-10T14:00:00Z", "2025-03-10T21:00:00Z"},
		{"new york before its DST change", weekly("America/New_York", window("09:00", "17:00", "mon")), "2025-03-03T15:00:00Z", "2025-03-03T22:00:00Z"},
		{"new york, before the window in local time", weekly("America/New_York", window("09:00", "17:00", "mon")), "2025-03-10T12:30:00Z", ""},
		{
			"berlin night across spring forward: 7 real hours",
			weekly("Europe/Berlin", window("22:00", "06:00", "sat")),
			"2025-03-29T21:30:00Z", "2025-03-30T04:00:00Z",
		},
		{
			"berlin window on the spring-forward day",
			weekly("Europe/Berlin", window("01:00", "05:00", "sun")),
			"2025-03-30T00:30:00Z", "2025-03-30T03:00:00Z",
		},
		{
			"berlin whole day on fall back: 25 hours",
			weekly("Europe/Berlin", window("00:00", "00:00", "sun")),
			"2025-10-25T22:00:00Z", "2025-10-26T23:00:00Z",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.schedule.Validate("schedule"); err != nil {
				t.Fatalf("invalid schedule: %v", err)
			}
			got := tt.schedule.AvailableUntil(mustParse(t, tt.now))
			if tt.want == "" {
				if !got.IsZero() {
					t.Errorf("AvailableUntil = %v, want not available", got)
				}
			} else if want := mustParse(t, tt.want); !got.Equal(want) {
				t.Errorf("AvailableUntil = %v, want %v", got.UTC(), want)
			}
		})
	}
}

func TestSchedule_AvailableUntil_oneOff(t *testing.T) {
	now := mustParse(t, "2025-03-10T12:00:00Z")
	oneOff := func(start, end time.Time) idlegrid.Schedule {
		return idlegrid.Schedule{Mode: idlegrid.ScheduleWindows, OneOff: []idlegrid.OneOffWindow{{Start: start, End: end}}}
	}
	tests := []struct {
		name     string
		schedule idlegrid.Schedule
		want     time.Time
	}{
		{"not yet", oneOff(now.Add(time.Hour), now.Add(2*time.Hour)), time.Time{}},
		{"starts now", oneOff(now, now.Add(2*time.Hour)), now.Add(2 * time.Hour)},
		{"ends now", oneOff(now.Add(-time.Hour), now), time.Time{}},
		{"started days ago", oneOff(now.Add(-100*time.Hour), now.Add(time.Hour)), now.Add(time.Hour)},
		{"longer than the horizon", oneOff(now.Add(-time.Hour), now.Add(60*24*time.Hour)), now.Add(idlegrid.WindowHorizon)},
		{
			"two touching one-offs given out of order",
			idlegrid.Schedule{Mode: idlegrid.ScheduleWindows, OneOff: []idlegrid.OneOffWindow{
				{Start: now.Add(time.Hour), End: now.Add(3 * time.Hour)},
				{Start: now.Add(-time.Hour), End: now.Add(time.Hour)},
			}},
			now.Add(3 * time.Hour),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.schedule.AvailableUntil(now); !got.Equal(tt.want) {
				t.Errorf("AvailableUntil = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestSchedule_NextOpening(t *testing.T) {
	mon9to5 := weekly("", window("09:00", "17:00", "mon"))
	tests := []struct {
		name     string
		schedule idlegrid.Schedule
		now      string
		want     string // "" means none within the horizon
	}{
		{"always: now", idlegrid.Schedule{Mode: idlegrid.ScheduleAlways}, "2025-03-10T10:00:00Z", "2025-03-10T10:00:00Z"},
		{"later today", mon9to5, "2025-03-10T08:00:00Z", "2025-03-10T09:00:00Z"},
		{"inside: next week", mon9to5, "2025-03-10T10:00:00Z", "2025-03-17T09:00:00Z"},
		{"at the start: next week", mon9to5, "2025-03-10T09:00:00Z", "2025-03-17T09:00:00Z"},
		{"across midnight", weekly("", window("22:00", "02:00", "fri")), "2025-03-15T01:00:00Z", "2025-03-21T22:00:00Z"},
		{"new york in EST", weekly("America/New_York", window("09:00", "17:00", "mon")), "2025-03-01T12:00:00Z", "2025-03-03T14:00:00Z"},
		{"new york over its DST change", weekly("America/New_York", window("09:00", "17:00", "mon")), "2025-03-09T01:00:00Z", "2025-03-10T13:00:00Z"},
		{"berlin", weekly("Europe/Berlin", window("22:00", "06:00", "sat")), "2025-03-29T12:00:00Z", "2025-03-29T21:00:00Z"},
		{"berlin after spring forward", weekly("Europe/Berlin", window("22:00", "06:00", "sat")), "2025-03-30T12:00:00Z", "2025-04-05T20:00:00Z"},
		{
			"one-off ahead",
			idlegrid.Schedule{Mode: idlegrid.ScheduleWindows, OneOff: []idlegrid.OneOffWindow{{Start: mustParse(t, "2025-03-12T00:00:00Z"), End: mustParse(t, "2025-03-13T00:00:00Z")}}},
			"2025-03-10T10:00:00Z", "2025-03-12T00:00:00Z",
		},
		{
			"one-off past",
			idlegrid.Schedule{Mode: idlegrid.ScheduleWindows, OneOff: []idlegrid.OneOffWindow{{Start: mustParse(t, "2025-03-08T00:00:00Z"), End: mustParse(t, "2025-03-09T00:00:00Z")}}},
			"2025-03-10T10:00:00Z", "",
		},
		{
			"one-off beyond the horizon",
			idlegrid.Schedule{Mode: idlegrid.ScheduleWindows, OneOff: []idlegrid.OneOffWindow{{Start: mustParse(t, "2025-04-20T00:00:00Z"), End: mustParse(t, "2025-04-21T00:00:00Z")}}},
			"2025-03-10T10:00:00Z", "",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.schedule.NextOpening(mustParse(t, tt.now))
			if tt.want == "" {
				if !got.IsZero() {
					t.Errorf("NextOpening = %v, want none", got)
				}
			} else if want := mustParse(t, tt.want); !got.Equal(want) {
				t.Errorf("NextOpening = %v, want %v", got.UTC(), want)
			}
		})
	}
}

// TestSchedule_midnightDST covers zones whose clocks spring forward at
// midnight, so that local midnight does not exist on that day.
func TestSchedule_midnightDST(t *testing.T) {
	s := weekly("America/Santiago", window("10:00", "12:00", "sat", "sun"))
	done := make(chan time.Time, 1)
	go func() { done <- s.AvailableUntil(mustParse(t, "2024-09-07T14:30:00Z")) }()
	select {
	case got := <-done:
		if want := mustParse(t, "2024-09-07T16:00:00Z"); !got.Equal(want) { // 10:00-12:00 at UTC-4
			t.Errorf("AvailableUntil = %v, want %v", got.UTC(), want)
		}
	case <-time.After(10 * time.Second): // a watchdog, not a wait: the call takes microseconds
		t.Fatal("AvailableUntil did not return")
	}
	if got, want := s.NextOpening(mustParse(t, "2024-09-07T17:00:00Z")), mustParse(t, "2024-09-08T13:00:00Z"); !got.Equal(want) {
		t.Errorf("NextOpening = %v, want %v", got.UTC(), want) // Sunday 10:00 at UTC-3
	}
}

func TestSchedule_Validate(t *testing.T) {
	day := mustParse(t, "2025-03-10T00:00:00Z")
	valid := []struct {
		name string
		s    idlegrid.Schedule
	}{
		{"always", idlegrid.Schedule{Mode: idlegrid.ScheduleAlways}},
		{"weekly in a zone", weekly("Europe/Berlin", window("22:00", "06:00", "Sat", "SUN"))},
		{"whole day", weekly("", window("00:00", "00:00", "mon"))},
		{"last minute", weekly("UTC", window("23:59", "00:00", "mon"))},
		{"one-off only", idlegrid.Schedule{Mode: idlegrid.ScheduleWindows, OneOff: []idlegrid.OneOffWindow{{Start: day, End: day.Add(time.Second)}}}},
	}
	for _, tt := range valid {
		if err := tt.s.Validate("offer.schedule"); err != nil {
			t.Errorf("%s: %v", tt.name, err)
		}
	}

	invalid := []struct {
		name  string
		s     idlegrid.Schedule
		field string
	}{
		{"no mode", idlegrid.Schedule{}, "offer.schedule.mode"},
		{"unknown mode", idlegrid.Schedule{Mode: "sometimes"}, "offer.schedule.mode"},
		{"unknown zone", idlegrid.Schedule{Mode: idlegrid.ScheduleAlways, TimeZone: "Mars/Olympus_Mons"}, "offer.schedule.time_zone"},
		{"no windows", idlegrid.Schedule{Mode: idlegrid.ScheduleWindows}, "offer.schedule.weekly"},
		{"no days", weekly("", window("09:00", "17:00")), "offer.schedule.weekly[0].days"},
		{"unknown day", weekly("", window("09:00", "17:00", "mon"), window("09:00", "17:00", "funday")), "offer.schedule.weekly[1].days"},
		{"full day name", weekly("", window("09:00", "17:00", "monday")), "offer.schedule.weekly[0].days"},
		{"one-digit hour", weekly("", window("9:00", "17:00", "mon")), "offer.schedule.weekly[0].start"},
		{"hour 24", weekly("", window("24:00", "17:00", "mon")), "offer.schedule.weekly[0].start"},
		{"seconds", weekly("", window("09:00:00", "17:00", "mon")), "offer.schedule.weekly[0].start"},
		{"letters", weekly("", window("ab:cd", "17:00", "mon")), "offer.schedule.weekly[0].start"},
		{"no separator", weekly("", window("09.00", "17:00", "mon")), "offer.schedule.weekly[0].start"},
		{"empty start", weekly("", window("", "17:00", "mon")), "offer.schedule.weekly[0].start"},
		{"minute 60", weekly("", window("09:00", "12:60", "mon")), "offer.schedule.weekly[0].end"},
		{"one-off ends at start", idlegrid.Schedule{Mode: idlegrid.ScheduleWindows, OneOff: []idlegrid.OneOffWindow{{Start: day, End: day}}}, "offer.schedule.one_off[0].end"},
		{
			"one-off ends before start",
			idlegrid.Schedule{Mode: idlegrid.ScheduleWindows, OneOff: []idlegrid.OneOffWindow{{Start: day, End: day.Add(time.Hour)}, {Start: day, End: day.Add(-time.Hour)}}},
			"offer.schedule.one_off[1].end",
		},
	}
	for _, tt := range invalid {
		t.Run(tt.name, func(t *testing.T) {
			wantField(t, tt.s.Validate("offer.schedule"), tt.field)
		})
	}

	t.Run("windows up to the limit", func(t *testing.T) {
		most := idlegrid.Schedule{Mode: idlegrid.ScheduleWindows}
		for i := range idlegrid.MaxScheduleWindows {
			start := day.Add(time.Duration(i) * 24 * time.Hour)
			most.Weekly = append(most.Weekly, window("09:00", "17:00", "mon"))
			most.OneOff = append(most.OneOff, idlegrid.OneOffWindow{Start: start, End: start.Add(time.Hour)})
		}
		if err := most.Validate("s"); err != nil {
			t.Fatalf("%d windows of each kind: %v", idlegrid.MaxScheduleWindows, err)
		}
		weekly := most
		weekly.Weekly = append(weekly.Weekly, window("09:00", "17:00", "mon"))
		wantField(t, weekly.Validate("s"), "s.weekly")
		oneOff := most
		oneOff.OneOff = append(oneOff.OneOff, most.OneOff[0])
		wantField(t, oneOff.Validate("s"), "s.one_off")
	})

	t.Run("signed clock fields", func(t *testing.T) {
		for _, v := range []string{"-1:00", "00:-1", "+1:00", " 1:00", "1 :00"} {
			s := weekly("", window(v, "17:00", "mon"))
			wantField(t, s.Validate("s"), "s.weekly[0].start")
		}
	})
}

var fuzzZones = []string{"", "UTC", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "Asia/Kolkata", "America/Santiago", "Bad/Zone"}

// FuzzSchedule checks that Validate, AvailableUntil and NextOpening never
// panic, and that a valid schedule's answers lie within the horizon.
func FuzzSchedule(f *testing.F) {
	f.Add(true, uint8(2), "sat", "22:00", "06:00", int64(0), int64(3600), int64(1743276600))
	f.Add(false, uint8(0), "mon", "00:00", "00:00", int64(-7200), int64(86400), int64(1741600800))
	f.Add(true, uint8(3), "SUN", "9:00", "24:00", int64(100), int64(-5), int64(0))
	f.Fuzz(func(t *testing.T, windows bool, zone uint8, day, start, end string, oneOffOffset, oneOffSeconds, nowUnix int64) {
		s := idlegrid.Schedule{
			Mode:     idlegrid.ScheduleAlways,
			TimeZone: fuzzZones[int(zone)%len(fuzzZones)],
			Weekly:   []idlegrid.WeeklyWindow{{Days: []string{day}, Start: start, End: end}},
		}
		if windows {
			s.Mode = idlegrid.ScheduleWindows
		}
		// Keep now within a few centuries, where calendars mean something.
		now := time.Unix(nowUnix%(200*365*86400), 0).UTC()
		oneOffStart := now.Add(time.Duration(oneOffOffset%(90*86400)) * time.Second)
		s.OneOff = []idlegrid.OneOffWindow{{Start: oneOffStart, End: oneOffStart.Add(time.Duration(oneOffSeconds%(90*86400)) * time.Second)}}

		err := s.Validate("schedule")
		until := s.AvailableUntil(now)
		next := s.NextOpening(now)
		if err != nil {
			return
		}
		limit := now.Add(idlegrid.WindowHorizon)
		if !until.IsZero() && (!until.After(now) || until.After(limit)) {
			t.Fatalf("AvailableUntil(%v) = %v, outside (now, now+horizon]", now, until)
		}
		if !next.IsZero() && (next.Before(now) || next.After(limit)) {
			t.Fatalf("NextOpening(%v) = %v, outside [now, now+horizon]", now, next)
		}
		if s.Mode == idlegrid.ScheduleAlways && !until.Equal(limit) {
			t.Fatalf("always: AvailableUntil = %v, want %v", until, limit)
		}
	})
}
