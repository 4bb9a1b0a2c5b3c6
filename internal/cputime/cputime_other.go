//go:build !unix

package cputime

import "time"

// Process is not known here; see cputime_unix.go.
func Process() (time.Duration, bool) { return 0, false }
