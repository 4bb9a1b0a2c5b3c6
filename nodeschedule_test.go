package idlegrid_test

import (
	"testing"
	"time"

	"github.com/idlegrid/idlegrid"
)

func TestEffectiveSchedule(t *testing.T) {
	now := mustParse(t, "2025-03-10T10:00:00Z")
	always := idlegrid.Schedule{Mode: idlegrid.ScheduleAlways}
	evenings := weekly("", window("18:00", "23:00", "mon", "tue"))
	closed := idlegrid.Schedule{Mode: idlegrid.ScheduleWindows, OneOff: []idlegrid.OneOffWindow{
		{Start: time.Unix(0, 0).UTC(), End: time.Unix(1, 0).UTC()},
	}}
	tests := []struct {
		name      string
		published idlegrid.Schedule
		owner     *idlegrid.Schedule
		want      idlegrid.Schedule
	}{
		{"no owner schedule: the agent's", always, nil, always},
		{"the owner's wins", always, &evenings, evenings},
		{"the owner's wins over a schedule that opens later", evenings, &always, always},
		{"a withdrawn node stays closed", closed, &always, closed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := idlegrid.EffectiveSchedule(tt.published, tt.owner, now)
			if got.Mode != tt.want.Mode || len(got.Weekly) != len(tt.want.Weekly) || len(got.OneOff) != len(tt.want.OneOff) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestSchedule_Closed(t *testing.T) {
	now := mustParse(t, "2025-03-10T10:00:00Z")
	tests := []struct {
		name     string
		schedule idlegrid.Schedule
		want     bool
	}{
		{"always", idlegrid.Schedule{Mode: idlegrid.ScheduleAlways}, false},
		{"open now", weekly("", window("09:00", "17:00", "mon")), false},
		{"opens later", weekly("", window("18:00", "19:00", "fri")), false},
		{"a window in the past only", idlegrid.Schedule{Mode: idlegrid.ScheduleWindows, OneOff: []idlegrid.OneOffWindow{
			{Start: mustParse(t, "2025-01-01T00:00:00Z"), End: mustParse(t, "2025-01-02T00:00:00Z")},
		}}, true},
		{"a window beyond the horizon", idlegrid.Schedule{Mode: idlegrid.ScheduleWindows, OneOff: []idlegrid.OneOffWindow{
			{Start: now.Add(idlegrid.WindowHorizon + time.Hour), End: now.Add(idlegrid.WindowHorizon + 2*time.Hour)},
		}}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.schedule.Closed(now); got != tt.want {
				t.Errorf("Closed = %v, want %v", got, tt.want)
			}
		})
	}
}
