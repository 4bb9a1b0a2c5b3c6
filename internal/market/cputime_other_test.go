//go:build !unix

package market_test

import "time"

// cpuTime is not known here; see cputime_unix_test.go.
func cpuTime() (time.Duration, bool) { return 0, false }
