package idlegrid

import "time"

// Clock tells the time. Everything that stamps or compares times takes one,
// so tests can control it.
type Clock interface {
	Now() time.Time
}

// SystemClock is the wall clock.
type SystemClock struct{}

// Now returns time.Now() in UTC, truncated to the microsecond so that it
// round-trips through every database unchanged.
func (SystemClock) Now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }
