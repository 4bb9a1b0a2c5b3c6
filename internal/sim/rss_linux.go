package sim

import "syscall"

// peakRSS is the process's peak resident set, from getrusage.
func peakRSS() uint64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil || ru.Maxrss < 0 {
		return 0
	}
	return uint64(ru.Maxrss) * 1024 // Linux reports kilobytes
}
