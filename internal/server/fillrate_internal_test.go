package server

import (
	"slices"
	"testing"
	"time"
)

func TestAddByDay(t *testing.T) {
	from := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name       string
		start, end time.Time
		want       []int64
	}{
		{"within a day", from.Add(time.Hour), from.Add(2 * time.Hour), []int64{2 * 3600, 0, 0}},
		{"across midnight", from.Add(23 * time.Hour), from.Add(26 * time.Hour), []int64{2 * 3600, 2 * 7200, 0}},
		{"begun before the first day", from.Add(-5 * time.Hour), from.Add(time.Hour), []int64{2 * 3600, 0, 0}},
		{"past the last day", from.Add(71 * time.Hour), from.Add(80 * time.Hour), []int64{0, 0, 2 * 3600}},
		{"empty", from.Add(time.Hour), from.Add(time.Hour), []int64{0, 0, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := make([]int64, 3)
			addByDay(got, from, tt.start, tt.end, 2)
			if !slices.Equal(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}
