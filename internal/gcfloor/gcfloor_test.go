package gcfloor

import (
	"math"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"
)

func TestLimit(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		m     Memory
		floor uint64
		want  uint64
	}{
		{Memory{Live: 4 * mib, Other: 10 * mib}, 256 * mib, 266 * mib},   // the floor, and what lies outside the heap
		{Memory{Live: 127 * mib, Other: 10 * mib}, 256 * mib, 266 * mib}, // GOGC's default would give 254 MiB
		{Memory{Live: 128 * mib, Other: 10 * mib}, 256 * mib, 0},         // it reaches the floor: no limit
		{Memory{Live: 2048 * mib}, 256 * mib, 0},
		{Memory{}, 64 * mib, 64 * mib}, // nothing measured yet
	} {
		if got := Limit(tc.m, tc.floor); got != tc.want {
			t.Errorf("Limit(%+v, %d MiB floor) = %d MiB, want %d MiB", tc.m, tc.floor/mib, got/mib, tc.want/mib)
		}
	}
}

// settings reads GOGC and the memory limit as the runtime has them.
func settings() (gogc, limit uint64) {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}, {Name: "/gc/gomemlimit:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64(), s[1].Value.Uint64()
}

const gogcOff = math.MaxUint64 // how the runtime reports GOGC=off

func TestRun(t *testing.T) {
	for _, env := range []string{"GOGC", "GOMEMLIMIT"} {
		if _, ok := os.LookupEnv(env); ok {
			t.Skipf("%s is set in the environment, so Run leaves the collector alone", env)
		}
	}
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(math.MaxInt64))
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	const floor = 1 << 40 // far above any live heap here
	stop := Start(t.Context(), floor, 5*time.Millisecond)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		gogc, limit := settings()
		if gogc == gogcOff && limit >= floor && limit < floor+floor/16 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("GOGC %d, memory limit %d after Run started; want GOGC off and a limit just above the 1 TiB floor", gogc, limit)
		}
	}
	stop()
	if gogc, limit := settings(); gogc != 100 || limit != math.MaxInt64 {
		t.Fatalf("GOGC %d, memory limit %d after Run stopped; want 100 and none", gogc, limit)
	}
}

func TestRun_respectsEnvironment(t *testing.T) {
	for _, env := range []string{"GOGC", "GOMEMLIMIT"} {
		t.Run(env, func(t *testing.T) {
			t.Setenv(env, map[string]string{"GOGC": "100", "GOMEMLIMIT": "off"}[env])
			defer debug.SetMemoryLimit(debug.SetMemoryLimit(math.MaxInt64))
			defer debug.SetGCPercent(debug.SetGCPercent(100))
			done := make(chan struct{})
			go func() {
				defer close(done)
				Run(t.Context(), 1<<40, time.Millisecond)
			}()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatalf("Run did not return at once with %s set", env)
			}
			if gogc, limit := settings(); gogc != 100 || limit != math.MaxInt64 {
				t.Fatalf("GOGC %d, memory limit %d; want Run to have left them at 100 and none", gogc, limit)
			}
		})
	}
}
