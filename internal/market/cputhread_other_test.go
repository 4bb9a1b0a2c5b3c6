//go:build !linux

package market_test

import "time"

// threadCPUTime is not known here; see cputhread_linux_test.go.
func threadCPUTime() (time.Duration, bool) { return 0, false }
