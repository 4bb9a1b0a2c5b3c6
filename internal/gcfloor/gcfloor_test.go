package gcfloor

import (
	"os"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"
)

func TestPercent(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		live, floor uint64
		want        int
	}{
		{live: 4 * mib, floor: 256 * mib, want: 6301}, // goal 4 MiB × 64.01 ≥ 256 MiB
		{live: 128 * mib, floor: 256 * mib, want: 101},
		{live: 200 * mib, floor: 256 * mib, want: 100}, // the default already reaches the floor
		{live: 2048 * mib, floor: 256 * mib, want: 100},
		{live: 0, floor: 64 * mib, want: 6301}, // nothing measured yet: a megabyte assumed
	} {
		got := Percent(tc.live, tc.floor, 100)
		if got != tc.want {
			t.Errorf("Percent(%d MiB live, %d MiB floor) = %d, want %d", tc.live/mib, tc.floor/mib, got, tc.want)
		}
		if goal := tc.live + tc.live*uint64(got)/100; tc.live >= mib && goal < tc.floor {
			t.Errorf("Percent(%d MiB live, %d MiB floor) = %d: a goal of %d MiB, under the floor", tc.live/mib, tc.floor/mib, got, goal/mib)
		}
	}
}

// gogc reads the collector's percent as the runtime has it.
func gogc() uint64 {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

func TestRun(t *testing.T) {
	if _, ok := os.LookupEnv("GOGC"); ok {
		t.Skip("GOGC is set in the environment, so Run leaves the collector alone")
	}
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	stop := Start(t.Context(), 1<<40, 5*time.Millisecond) // a floor far above any live heap here
	for deadline := time.Now().Add(10 * time.Second); gogc() <= 100; {
		if time.Now().After(deadline) {
			t.Fatalf("GOGC still %d after Run started; want it raised for a 1 TiB floor", gogc())
		}
		time.Sleep(time.Millisecond)
	}
	stop()
	if got := gogc(); got != 100 {
		t.Fatalf("GOGC %d after Run stopped, want it back at 100", got)
	}
}

func TestRun_respectsGOGC(t *testing.T) {
	t.Setenv("GOGC", "100")
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	done := make(chan struct{})
	go func() {
		defer close(done)
		Run(t.Context(), 1<<40, time.Millisecond)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return at once with GOGC set")
	}
	if got := gogc(); got != 100 {
		t.Fatalf("GOGC %d, want Run to have left it at 100", got)
	}
}
