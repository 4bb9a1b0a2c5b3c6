package market

import (
	"testing"
	"time"
	"unsafe"
)

// The index's whole-second times must keep every date a clock may give,
// from the unix epoch on: a time that rounds to 0 reads as "none", and a
// bronze lease so read could never be preempted.
func TestIndexSeconds(t *testing.T) {
	for _, at := range []time.Time{
		time.Unix(0, 0),
		time.Date(2000, 1, 1, 0, 0, 5, 0, time.UTC), // the server tests' fake clock
		time.Date(2026, 11, 30, 12, 0, 0, 500, time.UTC),
		time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC),
	} {
		ns := at.UnixNano()
		up, down := secUp(ns), secDown(ns)
		if up == 0 || down == 0 {
			t.Errorf("%s: secUp %d, secDown %d; want both above 0", at, up, down)
		}
		if secNanos(down) > ns || secNanos(up) < ns {
			t.Errorf("%s: [%d, %d] does not bound it", at, secNanos(down), secNanos(up))
		}
	}
}

// Bounding a shelf for a search should read two cache lines: the fields
// before lbs, and the head of one lbs entry (gen, n, done, from, val[0]).
// That holds while the shelf starts a line, as Go's size classes above
// 1 KiB (all multiples of 64 bytes) place a class or a sub-shelf.
func TestShelfLayout(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("the layout is planned for 64-bit pointers")
	}
	var s shelf
	var l lbEntry
	if got := unsafe.Offsetof(s.lbs); got != 64 {
		t.Errorf("lbs at byte %d, want 64", got)
	}
	if got := unsafe.Offsetof(l.val) + unsafe.Sizeof(l.val[0]); got > 32 {
		t.Errorf("an lbs entry's head ends at byte %d, want at most 32", got)
	}
	if got := unsafe.Sizeof(l); got%32 != 0 {
		t.Errorf("an lbs entry is %d bytes, want a multiple of 32", got)
	}
}
