// Package backoff paces retries: jittered exponential delays, and a sleep
// that ends early when its context does. The agent and the agent's client
// use it to reach the server again; the inference simulator sleeps with it.
package backoff

import (
	"context"
	"math/rand/v2"
	"time"
)

// Defaults of Backoff.
const (
	DefaultBase = time.Second
	DefaultMax  = 30 * time.Second
)

// Backoff is jittered exponential backoff: the nth delay is drawn from the
// upper half of Base·2ⁿ, capped at Max, so that many clients cut off
// together do not come back in step. Zero fields take the defaults; the
// zero Backoff is ready to use.
type Backoff struct {
	Base, Max time.Duration
	attempt   int
}

// Next is the delay before the next attempt.
func (b *Backoff) Next() time.Duration {
	base, ceiling := b.Base, b.Max
	if base <= 0 {
		base = DefaultBase
	}
	if ceiling <= 0 {
		ceiling = DefaultMax
	}
	d := min(base<<min(b.attempt, 10), ceiling)
	b.attempt++
	return d/2 + rand.N(d/2+1)
}

// Attempts is how many delays Next has given since the last Reset.
func (b *Backoff) Attempts() int { return b.attempt }

// Reset starts again from Base, after an attempt that worked.
func (b *Backoff) Reset() { b.attempt = 0 }

// Sleep waits d, or until ctx is done, and reports whether d passed: false
// when ctx ended first. With d of zero or less it reports whether ctx is
// still live.
func Sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
