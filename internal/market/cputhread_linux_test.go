package market_test

import (
	"syscall"
	"time"
	"unsafe"
)

// threadCPUTime is the CPU time the calling thread has used, and whether
// it is known. Lock the goroutine to its thread to read its own.
func threadCPUTime() (time.Duration, bool) {
	const clockThreadCPUTime = 3 // CLOCK_THREAD_CPUTIME_ID
	var ts syscall.Timespec
	if _, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTime, uintptr(unsafe.Pointer(&ts)), 0); errno != 0 {
		return 0, false
	}
	return time.Duration(ts.Nano()), true
}
