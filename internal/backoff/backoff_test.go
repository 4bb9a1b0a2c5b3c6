package backoff

import (
	"context"
	"testing"
	"time"
)

func TestBackoff_Next(t *testing.T) {
	b := Backoff{Base: 100 * time.Millisecond, Max: time.Second}
	for i, ceiling := range []time.Duration{100, 200, 400, 800, 1000, 1000} {
		ceiling *= time.Millisecond
		if d := b.Next(); d < ceiling/2 || d > ceiling {
			t.Errorf("delay %d = %v, want within [%v, %v]", i, d, ceiling/2, ceiling)
		}
	}
	if b.Attempts() != 6 {
		t.Errorf("Attempts = %d after six delays", b.Attempts())
	}
	b.Reset()
	if d := b.Next(); d < 50*time.Millisecond || d > 100*time.Millisecond || b.Attempts() != 1 {
		t.Errorf("after Reset: delay %v, %d attempts; want within [50ms, 100ms], 1", d, b.Attempts())
	}
	var zero Backoff
	if d := zero.Next(); d < DefaultBase/2 || d > DefaultBase {
		t.Errorf("the zero Backoff's first delay = %v, want within [%v, %v]", d, DefaultBase/2, DefaultBase)
	}
	for range 20 {
		zero.Next()
	}
	if d := zero.Next(); d < DefaultMax/2 || d > DefaultMax {
		t.Errorf("the zero Backoff's delay after many = %v, want within [%v, %v]", d, DefaultMax/2, DefaultMax)
	}
}

func TestSleep(t *testing.T) {
	if !Sleep(context.Background(), time.Millisecond) {
		t.Error("Sleep with a live context reported it was cut short")
	}
	if !Sleep(context.Background(), 0) {
		t.Error("Sleep(0) with a live context reported it was cut short")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if Sleep(ctx, time.Hour) {
		t.Error("Sleep with a cancelled context reported it waited an hour")
	}
	if Sleep(ctx, 0) {
		t.Error("Sleep(0) with a cancelled context reported the context live")
	}
}
