package ratelimit

import (
	"fmt"
	"testing"
	"time"
)

// The buckets of keys that went quiet are dropped once the map has
// grown, and a key still over its limit keeps its empty bucket.
func TestBuckets_forgetIdle(t *testing.T) {
	l := New(1, 2)
	t0 := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	for range 2 {
		l.Take("busy", t0)
	}
	if _, ok := l.Take("busy", t0); ok {
		t.Fatal("a third request in a burst of 2 was allowed")
	}
	for i := range minSweep - 1 {
		l.Take(fmt.Sprint("quiet", i), t0)
	}
	if len(l.m) != minSweep {
		t.Fatalf("%d buckets, want %d", len(l.m), minSweep)
	}
	// A second on: the quiet accounts' buckets are full again, busy's holds
	// one token of two.
	l.Take("newcomer", t0.Add(time.Second))
	if len(l.m) != 2 {
		t.Errorf("%d buckets after the sweep, want busy's and the newcomer's", len(l.m))
	}
	if _, ok := l.Take("busy", t0.Add(time.Second)); !ok {
		t.Error("busy's refilled token was refused")
	}
	if wait, ok := l.Take("busy", t0.Add(time.Second)); ok || wait != time.Second {
		t.Errorf("busy over its limit again: allowed %v, wait %s; want refused for 1s", ok, wait)
	}
	if l.sweep != minSweep {
		t.Errorf("next sweep at %d buckets, want %d", l.sweep, minSweep)
	}
}

// No rate, no limit.
func TestBuckets_none(t *testing.T) {
	l := New(0, 0)
	for range 1000 {
		if _, ok := l.Take("a", time.Time{}); !ok {
			t.Fatal("refused without a limit")
		}
	}
	if len(l.m) != 0 {
		t.Errorf("%d buckets kept without a limit", len(l.m))
	}
}
