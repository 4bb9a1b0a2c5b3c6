package cputime_test

import (
	"runtime"
	"testing"

	"github.com/idlegrid/idlegrid/internal/cputime"
)

func TestProcess(t *testing.T) {
	before, ok := cputime.Process()
	if !ok {
		if runtime.GOOS != "windows" && runtime.GOOS != "plan9" && runtime.GOOS != "js" && runtime.GOOS != "wasip1" {
			t.Fatalf("Process() not known on %s", runtime.GOOS)
		}
		t.Skipf("no CPU time on %s", runtime.GOOS)
	}
	x := 0
	for i := range 50_000_000 { // enough work to move the clock past its tick
		x ^= i * i
	}
	after, _ := cputime.Process()
	if after <= before {
		t.Fatalf("Process() went from %v to %v across a busy loop (%d)", before, after, x)
	}
}
