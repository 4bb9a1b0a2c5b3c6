//go:build unix

package market_test

import (
	"syscall"
	"time"
)

// cpuTime is the CPU time (user and system) the process has used so far,
// and whether it is known. On a machine shared with other work, CPU time
// per placement varies far less than wall time.
func cpuTime() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
