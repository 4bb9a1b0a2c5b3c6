package idlegrid

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
	_ "time/tzdata" // the zones below, whatever the machine has installed
)

// TestSchedule_nearDaysExact holds AvailableUntil and NextOpening, which
// read a few days before the whole horizon, to the same questions asked
// of the whole horizon at once, on random schedules across DST changes.
func TestSchedule_nearDaysExact(t *testing.T) {
	zones := []string{"", "America/Santiago", "Europe/Berlin", "Australia/Lord_Howe", "Asia/Kolkata"}
	rng := rand.New(rand.NewPCG(7, 11))
	base := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 3000 {
		s := randomSchedule(rng, zones[rng.IntN(len(zones))], base)
		now := base.Add(time.Duration(rng.IntN(366*24*60)) * time.Minute)
		limit := now.Add(WindowHorizon)
		wantUntil := s.spanEnd(now, limit)
		if !wantUntil.Before(limit) {
			wantUntil = limit
		}
		if got := s.AvailableUntil(now); !got.Equal(wantUntil) {
			t.Fatalf("case %d: %+v at %v: AvailableUntil = %v, want %v", i, s, now, got, wantUntil)
		}
		if got, want := s.NextOpening(now), s.firstOpening(now, limit); !got.Equal(want) {
			t.Fatalf("case %d: %+v at %v: NextOpening = %v, want %v", i, s, now, got, want)
		}
	}
}

func randomSchedule(rng *rand.Rand, zone string, base time.Time) Schedule {
	names := []string{"sun", "mon", "tue", "wed", "thu", "fri", "sat"}
	clock := func() string { q := rng.IntN(96); return fmt.Sprintf("%02d:%02d", q/4, q%4*15) }
	s := Schedule{Mode: ScheduleWindows, TimeZone: zone}
	for range rng.IntN(4) {
		w := WeeklyWindow{Start: clock(), End: clock()}
		if rng.IntN(6) == 0 {
			w.Start, w.End = "00:00", "00:00" // the whole day
		}
		for _, d := range names {
			if rng.IntN(3) > 0 {
				w.Days = append(w.Days, d)
			}
		}
		s.Weekly = append(s.Weekly, w)
	}
	for range rng.IntN(3) {
		start := base.Add(time.Duration(rng.IntN(370*24)) * time.Hour)
		s.OneOff = append(s.OneOff, OneOffWindow{Start: start, End: start.Add(time.Duration(1+rng.IntN(24*40)) * time.Hour)})
	}
	return s
}
